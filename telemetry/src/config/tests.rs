//! Resolution of the `[telemetry]` table and the environment: what turns export on,
//! which source wins, and a clear error for every bad value.

use super::*;

fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |k: &str| map.get(k).cloned()
}

fn on(file: &TelemetryConfig, env: &[(&str, &str)]) -> Settings {
    match resolve(file, &env_of(env), "9.9.9").unwrap() {
        Resolved::On(s) => *s,
        Resolved::Off(o) => panic!("off: {o:?}"),
    }
}

fn bad(file: &TelemetryConfig, env: &[(&str, &str)]) -> ConfigError {
    resolve(file, &env_of(env), "1").unwrap_err()
}

#[test]
fn export_is_off_by_default() {
    let r = resolve(&TelemetryConfig::default(), &env_of(&[]), "1").unwrap();
    assert_eq!(r, Resolved::Off(Off::NoEndpoint));
    // logContent alone does not turn anything on.
    let file = TelemetryConfig {
        log_content: Some(true),
        ..Default::default()
    };
    assert_eq!(
        resolve(&file, &env_of(&[]), "1").unwrap(),
        Resolved::Off(Off::NoEndpoint)
    );
}

#[test]
fn an_endpoint_turns_export_on_with_the_signal_paths() {
    let s = on(
        &TelemetryConfig::default(),
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318/")],
    );
    assert_eq!(s.traces_endpoint, "http://127.0.0.1:4318/v1/traces");
    assert_eq!(s.metrics_endpoint, "http://127.0.0.1:4318/v1/metrics");
    assert_eq!(s.protocol, Protocol::HttpProtobuf);
    assert_eq!(s.service_name, "keel");
    assert_eq!(s.service_version, "9.9.9");
    assert!(!s.log_content);
    assert_eq!(s.export_timeout, DEFAULT_EXPORT_TIMEOUT);

    let file = TelemetryConfig {
        endpoint: Some("https://otel.example.com".into()),
        ..Default::default()
    };
    let s = on(&file, &[]);
    assert_eq!(s.traces_endpoint, "https://otel.example.com/v1/traces");
}

#[test]
fn the_environment_wins_over_the_file() {
    let file = TelemetryConfig {
        endpoint: Some("http://file:4318".into()),
        service_name: Some("from-file".into()),
        export_timeout_ms: Some(100),
        headers: Some(BTreeMap::from([
            ("X-Team".to_owned(), "file".to_owned()),
            ("x-only-file".to_owned(), "1".to_owned()),
        ])),
        log_content: Some(true),
        sample_ratio: Some(0.5),
        ..Default::default()
    };
    let s = on(
        &file,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://env:4318"),
            ("OTEL_SERVICE_NAME", "from-env"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "250"),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "x-team=env%20value, authorization=Bearer%20k",
            ),
            (
                "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
                "http://metrics:9/custom",
            ),
        ],
    );
    assert_eq!(s.traces_endpoint, "http://env:4318/v1/traces");
    assert_eq!(s.metrics_endpoint, "http://metrics:9/custom");
    assert_eq!(s.service_name, "from-env");
    assert_eq!(s.export_timeout, Duration::from_millis(250));
    assert_eq!(s.headers["x-team"], "env value");
    assert_eq!(s.headers["authorization"], "Bearer k");
    assert_eq!(s.headers["x-only-file"], "1");
    assert!(s.log_content);
    assert_eq!(s.sample_ratio, 0.5);
}

#[test]
fn empty_variables_count_as_unset() {
    let r = resolve(
        &TelemetryConfig::default(),
        &env_of(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", " "),
            ("OTEL_SDK_DISABLED", ""),
        ]),
        "1",
    )
    .unwrap();
    assert_eq!(r, Resolved::Off(Off::NoEndpoint));
}

#[test]
fn switches_that_turn_export_off_win() {
    let file = TelemetryConfig {
        endpoint: Some("http://x:1".into()),
        enabled: Some(false),
        ..Default::default()
    };
    assert_eq!(
        resolve(&file, &env_of(&[]), "1").unwrap(),
        Resolved::Off(Off::DisabledInConfig)
    );
    let file = TelemetryConfig {
        endpoint: Some("http://x:1".into()),
        ..Default::default()
    };
    assert_eq!(
        resolve(&file, &env_of(&[("OTEL_SDK_DISABLED", "TRUE")]), "1").unwrap(),
        Resolved::Off(Off::SdkDisabled)
    );
    // Any other value of OTEL_SDK_DISABLED leaves it on.
    on(&file, &[("OTEL_SDK_DISABLED", "false")]);
}

#[test]
fn enabled_without_an_endpoint_uses_the_opentelemetry_default() {
    let file = TelemetryConfig {
        enabled: Some(true),
        ..Default::default()
    };
    assert_eq!(
        on(&file, &[]).traces_endpoint,
        "http://localhost:4318/v1/traces"
    );
    let s = on(&file, &[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]);
    assert_eq!(s.protocol, Protocol::Grpc);
    // gRPC endpoints carry no path.
    assert_eq!(s.traces_endpoint, "http://localhost:4317");
    assert_eq!(s.metrics_endpoint, "http://localhost:4317");
}

#[test]
fn a_per_signal_endpoint_alone_turns_export_on() {
    let s = on(
        &TelemetryConfig::default(),
        &[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:1/x")],
    );
    assert_eq!(s.traces_endpoint, "http://t:1/x");
    assert_eq!(s.metrics_endpoint, "http://localhost:4318/v1/metrics");
}

#[test]
fn bad_values_name_their_key() {
    let with = |f: fn(&mut TelemetryConfig)| {
        let mut c = TelemetryConfig {
            endpoint: Some("http://ok:1".into()),
            ..Default::default()
        };
        f(&mut c);
        c
    };
    // The table, the environment, the key named, words of the message.
    type Case<'a> = (TelemetryConfig, Vec<(&'a str, &'a str)>, &'a str, &'a str);
    let cases: Vec<Case<'_>> = vec![
        (
            with(|c| c.endpoint = Some("ftp://x".into())),
            vec![],
            "telemetry.endpoint",
            "http://",
        ),
        (
            with(|c| c.endpoint = Some("not a url".into())),
            vec![],
            "telemetry.endpoint",
            "not a URL",
        ),
        (
            with(|c| c.endpoint = Some("/v1/traces".into())),
            vec![],
            "telemetry.endpoint",
            "http://",
        ),
        (
            with(|c| c.protocol = Some("http/json".into())),
            vec![],
            "telemetry.protocol",
            "not supported",
        ),
        (
            with(|c| c.protocol = Some("carrier-pigeon".into())),
            vec![],
            "telemetry.protocol",
            "unknown protocol",
        ),
        (
            with(|c| c.sample_ratio = Some(1.5)),
            vec![],
            "telemetry.sampleRatio",
            "0 to 1",
        ),
        (
            with(|c| c.sample_ratio = Some(f64::NAN)),
            vec![],
            "telemetry.sampleRatio",
            "0 to 1",
        ),
        (
            with(|c| c.export_timeout_ms = Some(0)),
            vec![],
            "telemetry.exportTimeoutMs",
            "at least 1",
        ),
        (
            with(|c| c.metrics_interval_secs = Some(0)),
            vec![],
            "telemetry.metricsIntervalSecs",
            "at least 1",
        ),
        (
            with(|c| c.headers = Some(BTreeMap::from([("bad name".to_owned(), "v".to_owned())]))),
            vec![],
            "telemetry.headers",
            "header name",
        ),
        (
            with(|c| {
                c.headers = Some(BTreeMap::from([("x".to_owned(), "line\nbreak".to_owned())]))
            }),
            vec![],
            "telemetry.headers",
            "not valid",
        ),
        (
            with(|_| {}),
            vec![("OTEL_EXPORTER_OTLP_PROTOCOL", "udp")],
            "OTEL_EXPORTER_OTLP_PROTOCOL",
            "unknown protocol",
        ),
        (
            with(|_| {}),
            vec![("OTEL_EXPORTER_OTLP_ENDPOINT", "localhost:4318")],
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "",
        ),
        (
            with(|_| {}),
            vec![("OTEL_EXPORTER_OTLP_HEADERS", "novalue")],
            "OTEL_EXPORTER_OTLP_HEADERS",
            "name=value",
        ),
        (
            with(|_| {}),
            vec![("OTEL_EXPORTER_OTLP_HEADERS", "k=%zz")],
            "OTEL_EXPORTER_OTLP_HEADERS",
            "percent",
        ),
        (
            with(|_| {}),
            vec![("OTEL_EXPORTER_OTLP_HEADERS", "=v")],
            "OTEL_EXPORTER_OTLP_HEADERS",
            "no name",
        ),
        (
            with(|_| {}),
            vec![("OTEL_EXPORTER_OTLP_TIMEOUT", "-5")],
            "OTEL_EXPORTER_OTLP_TIMEOUT",
            "positive",
        ),
        (
            with(|_| {}),
            vec![("OTEL_EXPORTER_OTLP_TIMEOUT", "0")],
            "OTEL_EXPORTER_OTLP_TIMEOUT",
            "positive",
        ),
        (
            with(|_| {}),
            vec![("OTEL_TRACES_SAMPLER_ARG", "half")],
            "OTEL_TRACES_SAMPLER_ARG",
            "0 to 1",
        ),
        (
            with(|_| {}),
            vec![("OTEL_BSP_MAX_QUEUE_SIZE", "lots")],
            "OTEL_BSP_MAX_QUEUE_SIZE",
            "positive",
        ),
        (
            with(|_| {}),
            vec![("OTEL_METRIC_EXPORT_INTERVAL", "1.5")],
            "OTEL_METRIC_EXPORT_INTERVAL",
            "positive",
        ),
    ];
    for (file, env, key, words) in cases {
        let e = bad(&file, &env);
        assert_eq!(e.key, key, "{e}");
        assert!(e.to_string().contains(words), "{key}: {e}");
        assert!(
            e.to_string().starts_with(&format!("invalid `{key}`")),
            "{e}"
        );
    }
}

#[test]
fn the_table_rejects_unknown_keys_and_reads_camel_case() {
    let t: TelemetryConfig = serde_json::from_value(serde_json::json!({
        "endpoint": "http://h:1", "logContent": true, "serviceName": "svc",
        "exportTimeoutMs": 10, "metricsIntervalSecs": 5, "sampleRatio": 0.25,
        "headers": {"a": "b"}, "protocol": "grpc", "enabled": true
    }))
    .unwrap();
    assert_eq!(t.log_content, Some(true));
    assert_eq!(t.export_timeout_ms, Some(10));
    let e = serde_json::from_value::<TelemetryConfig>(serde_json::json!({"logcontent": true}))
        .unwrap_err();
    assert!(e.to_string().contains("unknown field `logcontent`"), "{e}");
}

#[test]
fn the_queue_bounds_the_batch() {
    let s = on(
        &TelemetryConfig::default(),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:1"),
            ("OTEL_BSP_MAX_QUEUE_SIZE", "8"),
            ("OTEL_BSP_SCHEDULE_DELAY", "50"),
        ],
    );
    assert_eq!(s.queue_size, 8);
    assert_eq!(s.max_batch, 8);
    assert_eq!(s.batch_delay, Duration::from_millis(50));
}

#[test]
fn the_opt_in_is_read() {
    let s = on(
        &TelemetryConfig::default(),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:1"),
            (
                "OTEL_SEMCONV_STABILITY_OPT_IN",
                "gen_ai_latest_experimental",
            ),
        ],
    );
    assert!(s.semconv_opt_in);
}

#[test]
fn the_description_names_headers_but_not_their_values() {
    let file = TelemetryConfig {
        endpoint: Some("https://collector.example:4318".into()),
        headers: Some(BTreeMap::from([(
            "authorization".to_owned(),
            "Bearer s3cret".to_owned(),
        )])),
        ..Default::default()
    };
    let s = on(&file, &[]);
    let d = s.describe();
    assert!(
        d.contains("https://collector.example:4318/v1/traces"),
        "{d}"
    );
    assert!(d.contains("headers authorization"), "{d}");
    assert!(!d.contains("s3cret"), "{d}");
    assert!(d.contains("content not recorded"), "{d}");
    assert_eq!(
        s.traces_authority(),
        Some(("collector.example".to_owned(), 4318))
    );
    let s = on(
        &TelemetryConfig {
            endpoint: Some("https://h".into()),
            ..Default::default()
        },
        &[],
    );
    assert_eq!(s.traces_authority(), Some(("h".to_owned(), 443)));
    let s = on(
        &TelemetryConfig {
            endpoint: Some("http://[::1]:9".into()),
            ..Default::default()
        },
        &[],
    );
    assert_eq!(s.traces_authority(), Some(("::1".to_owned(), 9)));
}
