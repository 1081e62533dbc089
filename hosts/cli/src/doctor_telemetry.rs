//! `keel doctor`'s `telemetry` check: whether OpenTelemetry export is on and where
//! to, a bad setting, and whether the collector accepts a connection.

use std::time::Duration;

use crate::doctor_cmd::Check;
use crate::telemetry::TelemetryStatus;

/// The `telemetry` check: `ok` when export is off or its endpoint answers, `warn` for
/// a bad setting or an endpoint that cannot be reached (commands run all the same).
pub(crate) async fn telemetry_check(status: &TelemetryStatus, limit: Duration) -> Check {
    if let Some(p) = &status.problem {
        return Check::warn(
            "telemetry",
            p.clone(),
            "fix the [telemetry] table of $KEEL_HOME/config.toml or the OTEL_* variable named (see docs/configuration.md#telemetry)",
        );
    }
    let Some((host, port)) = &status.authority else {
        return Check::ok("telemetry", status.summary.clone());
    };
    let connect = tokio::net::TcpStream::connect((host.as_str(), *port));
    match tokio::time::timeout(limit, connect).await {
        Ok(Ok(_)) => Check::ok("telemetry", status.summary.clone()),
        Ok(Err(e)) => Check::warn(
            "telemetry",
            format!("{}; {host}:{port} cannot be reached: {e}", status.summary),
            "start the collector, or fix telemetry.endpoint / OTEL_EXPORTER_OTLP_ENDPOINT; meanwhile spans and metrics are dropped (one warning in the log)",
        ),
        Err(_) => Check::warn(
            "telemetry",
            format!("{}; {host}:{port} did not answer within {}s", status.summary, limit.as_secs()),
            "check that the collector is running and reachable; meanwhile spans and metrics are dropped (one warning in the log)",
        ),
    }
}
