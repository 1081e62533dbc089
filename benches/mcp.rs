//! Cost of a tool call from outside the kernel, against an in-process tool through the
//! same pipeline: an MCP tool over streamable HTTP on loopback (a real `rmcp` server in
//! this process), and a host tool answered by a Rust host through the kernel's API.
//!
//! Run: `cargo bench --bench mcp`. Figures go to docs/performance.md.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::Burst;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use keel_envelope::commands::SessionStart;
use keel_envelope::host::HostToolSpec;
use keel_envelope::types::{PermissionLevel, PermissionMode};
use keel_envelope::{ErrorPayload, Event};
use keel_kernel::mcp::{McpServerConfig, McpTransport};
use keel_kernel::{Kernel, KernelConfig};
use keel_tools::{ApprovalRequirement, PlanBehavior, Tool, ToolContext, ToolSpec};

const CALLS: usize = 200;
const ROUNDS: usize = 5;

#[derive(Debug)]
struct Echo(ToolSpec);

#[async_trait]
impl Tool for Echo {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    async fn run(
        &self,
        args: serde_json::Value,
        _: ToolContext,
    ) -> Result<serde_json::Value, ErrorPayload> {
        Ok(serde_json::json!({"message": format!("echo: {}", args["text"])}))
    }
}

/// Median over rounds of the mean time per call, in microseconds.
async fn measure(kernel: &Kernel, opts: SessionStart, host: bool) -> f64 {
    let mut per_call = Vec::new();
    for round in 0..=ROUNDS {
        let (session, mut events) = kernel.start_session(opts.clone()).await.unwrap();
        let started = Instant::now();
        let rid = session.send("go").await.unwrap();
        loop {
            let env = events.recv().await.unwrap();
            match env.event {
                Event::HostToolRequested(r) if host => {
                    session
                        .respond_host_tool(&r.tool_call_id, Ok(serde_json::json!("echo: x")))
                        .await
                        .unwrap();
                }
                Event::SessionCompleted(_) if env.request_id == rid => break,
                _ => {}
            }
        }
        let elapsed = started.elapsed();
        session.close().await.unwrap();
        if round > 0 {
            per_call.push(elapsed.as_secs_f64() * 1e6 / CALLS as f64);
        }
    }
    per_call.sort_by(|a, b| a.total_cmp(b));
    per_call[per_call.len() / 2]
}

fn kernel(tool: &'static str, dir: &std::path::Path, servers: Vec<McpServerConfig>) -> Kernel {
    let echo = Echo(ToolSpec::custom(
        "echo",
        "echo",
        serde_json::json!({"type": "object"}),
        PermissionLevel::Read,
        PlanBehavior::Allowed,
        ApprovalRequirement::Never,
    ));
    Kernel::builder()
        .config(KernelConfig {
            workspace: Some(dir.to_path_buf()),
            permission_mode: PermissionMode::Auto,
            mcp_servers: servers,
            mcp_call_timeout: Duration::from_secs(30),
            ..KernelConfig::default()
        })
        .memory_store()
        .model(Burst::new(CALLS, tool, serde_json::json!({"text": "x"})))
        .tool(Arc::new(echo))
        .build()
        .unwrap()
}

fn main() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let server = keel_mcp::testing::serve_http(None).await.unwrap();
        let plain = SessionStart::new();
        let base = measure(&kernel("echo", dir.path(), vec![]), plain.clone(), false).await;
        let web = McpServerConfig {
            name: "web".into(),
            transport: McpTransport::Http {
                url: server.url(),
                headers: vec![],
            },
            trust: keel_envelope::host::McpTrust::Read,
            startup_timeout: None,
            call_timeout: None,
        };
        let mcp = measure(
            &kernel("mcp__web__echo", dir.path(), vec![web]),
            plain.clone(),
            false,
        )
        .await;
        let with_host = plain.host_tools(vec![HostToolSpec::new(
            "host_echo",
            "echo",
            serde_json::json!({"type": "object"}),
            PermissionLevel::Read,
        )]);
        let host = measure(&kernel("host_echo", dir.path(), vec![]), with_host, true).await;
        println!("per tool call through the pipeline, median of {ROUNDS} rounds of {CALLS} calls:");
        println!("  in-process tool (baseline)       {base:>9.1} µs   1.0×");
        println!(
            "  MCP tool, streamable HTTP        {mcp:>9.1} µs   {:.1}×",
            mcp / base
        );
        println!(
            "  host tool, answered by the host  {host:>9.1} µs   {:.1}×",
            host / base
        );
    });
}
