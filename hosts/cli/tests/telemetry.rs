//! OpenTelemetry through the real binary: export is off by default; `[telemetry]` in
//! the user's config file or the `OTEL_*` variables turn it on for every command; an
//! endpoint that is down never fails a command or writes to its stdout; a bad setting
//! is one clear warning and the command runs without export; `keel doctor` says
//! where spans go and whether the collector answers.
#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use keel_envelope::codec;
use keel_telemetry::testing::{closed_endpoint, Receiver};
use serde_json::Value;

const OTEL_VARS: [&str; 8] = [
    "OTEL_SDK_DISABLED",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_SERVICE_NAME",
    "OTEL_TRACES_SAMPLER_ARG",
];

fn keel(home: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_keel"));
    c.env_remove("KEEL_MODEL")
        .env_remove("KEEL_LOG")
        .env("KEEL_HOME", home);
    for v in OTEL_VARS {
        c.env_remove(v);
    }
    c
}

fn script(dir: &Path) -> String {
    let p = dir.join("script.json");
    std::fs::write(&p, r#"{"turns": [{"text": "Fine."}]}"#).unwrap();
    format!("scripted:{}", p.display())
}

fn exec(home: &Path, ws: &Path, env: &[(&str, &str)]) -> Output {
    let mut c = keel(home);
    c.args(["exec", "hello", "--workspace"])
        .arg(ws)
        .args(["--model", &script(home)]);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn log_text(home: &Path) -> String {
    let Ok(dir) = std::fs::read_dir(home.join("logs")) else {
        return String::new();
    };
    dir.map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect()
}

fn doctor_check(home: &Path, env: &[(&str, &str)]) -> Value {
    let mut c = keel(home);
    c.args(["doctor", "--json", "--timeout", "2"]);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "telemetry")
        .cloned()
        .unwrap_or_else(|| panic!("no telemetry check: {report}"))
}

#[test]
fn export_is_off_by_default() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let out = exec(home.path(), ws.path(), &[]);
    assert_eq!(out.status.code(), Some(0));
    assert!(!log_text(home.path()).contains("telemetry export on"));
    let c = doctor_check(home.path(), &[]);
    assert_eq!(c["status"], "ok");
    assert!(
        c["summary"]
            .as_str()
            .unwrap()
            .starts_with("off (no endpoint"),
        "{c}"
    );
}

#[test]
fn an_endpoint_that_is_down_never_fails_a_command() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let down = closed_endpoint().unwrap();
    let out = exec(
        home.path(),
        ws.path(),
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", &down)],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("Fine."));
    // Nothing about telemetry on the terminal; the log says it was on.
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    let log = log_text(home.path());
    assert!(log.contains("telemetry export on"), "{log}");
    assert!(log.contains(&format!("{down}/v1/traces")), "{log}");

    // The bridge's stdout stays protocol lines only.
    let mut child = keel(home.path())
        .args(["bridge", "--workspace"])
        .arg(ws.path())
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &down)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(
        stdin,
        r#"{{"version":"1.0","type":"runtime.shutdown","requestId":"r9"}}"#
    )
    .unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        codec::decode_envelope(line.as_bytes())
            .unwrap_or_else(|e| panic!("not an envelope ({e:?}): {line:?}"));
    }

    let c = doctor_check(home.path(), &[("OTEL_EXPORTER_OTLP_ENDPOINT", &down)]);
    assert_eq!(c["status"], "warn", "{c}");
    assert!(
        c["summary"].as_str().unwrap().contains("cannot be reached"),
        "{c}"
    );
}

#[test]
fn the_config_file_turns_export_on_and_doctor_shows_where_to() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let receiver = Receiver::start().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "[telemetry]\nendpoint = \"{}\"\nserviceName = \"keel-test\"\nheaders = {{ authorization = \"Bearer s3cret\" }}\n",
            receiver.endpoint()
        ),
    )
    .unwrap();
    let out = exec(home.path(), ws.path(), &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(log_text(home.path()).contains("telemetry export on"));
    // Whatever reached the receiver was valid OTLP.
    assert_eq!(receiver.bad_requests(), 0);

    let c = doctor_check(home.path(), &[]);
    assert_eq!(c["status"], "ok", "{c}");
    let summary = c["summary"].as_str().unwrap();
    assert!(
        summary.contains(&format!("{}/v1/traces", receiver.endpoint())),
        "{c}"
    );
    assert!(summary.contains("service keel-test") && summary.contains("headers authorization"));
    assert!(!summary.contains("s3cret"), "{c}");

    // The standard switch wins over the file.
    let c = doctor_check(home.path(), &[("OTEL_SDK_DISABLED", "true")]);
    assert_eq!(c["summary"], "off (OTEL_SDK_DISABLED=true)");
}

#[test]
fn bad_settings_are_one_warning_and_the_command_runs() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let out = exec(
        home.path(),
        ws.path(),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "carrier-pigeon"),
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("telemetry is off: invalid `OTEL_EXPORTER_OTLP_PROTOCOL`"),
        "{stderr}"
    );

    std::fs::write(
        home.path().join("config.toml"),
        "[telemetry]\nendpoint = \"http://127.0.0.1:4318\"\nlogcontent = true\n",
    )
    .unwrap();
    let out = exec(home.path(), ws.path(), &[]);
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("config.toml: telemetry is off: invalid [telemetry]")
            && stderr.contains("logcontent"),
        "{stderr}"
    );
    let c = doctor_check(home.path(), &[]);
    assert_eq!(c["status"], "warn", "{c}");
    assert!(c["summary"].as_str().unwrap().contains("logcontent"), "{c}");

    std::fs::write(
        home.path().join("config.toml"),
        "[telemetry]\nendpoint = \"localhost:4318\"\n",
    )
    .unwrap();
    let out = exec(home.path(), ws.path(), &[]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid `telemetry.endpoint`"));
}

#[test]
fn a_projects_telemetry_table_is_ignored_with_a_warning() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join(".keel")).unwrap();
    std::fs::write(
        ws.path().join(".keel/config.toml"),
        "[telemetry]\nendpoint = \"http://collector.example\"\nlogContent = true\n",
    )
    .unwrap();
    let out = exec(home.path(), ws.path(), &[]);
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("[telemetry] is ignored in a project's file"),
        "{stderr}"
    );
    assert!(!log_text(home.path()).contains("telemetry export on"));
}
