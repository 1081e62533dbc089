//! The names Keel's spans and metrics carry: the OpenTelemetry GenAI semantic
//! conventions at the version pinned in [`SEMCONV_VERSION`], the MCP client
//! conventions of the same release, and Keel's own attributes under `keel.`.
//!
//! The GenAI conventions are at "Development" status. Keel has never emitted an
//! older version, so it emits this one whether or not
//! `OTEL_SEMCONV_STABILITY_OPT_IN` contains `gen_ai_latest_experimental` (the
//! variable exists for instrumentations that used v1.36.0 or before); see
//! [`stability_opt_in`].

/// The semantic conventions release whose names Keel emits.
pub const SEMCONV_VERSION: &str = "1.41.0";
/// Its schema URL, set on the instrumentation scope of every span and metric.
pub const SCHEMA_URL: &str = "https://opentelemetry.io/schemas/1.41.0";
/// The instrumentation scope's name.
pub const SCOPE: &str = "keel";
/// The environment variable of the conventions' transition plan.
pub const STABILITY_OPT_IN_ENV: &str = "OTEL_SEMCONV_STABILITY_OPT_IN";

/// `gen_ai.operation.name`.
pub const GEN_AI_OPERATION_NAME: &str = "gen_ai.operation.name";
/// `gen_ai.provider.name`.
pub const GEN_AI_PROVIDER_NAME: &str = "gen_ai.provider.name";
/// `gen_ai.request.model`.
pub const GEN_AI_REQUEST_MODEL: &str = "gen_ai.request.model";
/// `gen_ai.response.model`.
pub const GEN_AI_RESPONSE_MODEL: &str = "gen_ai.response.model";
/// `gen_ai.request.max_tokens`.
pub const GEN_AI_REQUEST_MAX_TOKENS: &str = "gen_ai.request.max_tokens";
/// `gen_ai.response.finish_reasons` (recorded as one string: Keel's calls have one choice).
pub const GEN_AI_RESPONSE_FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
/// `gen_ai.usage.input_tokens`.
pub const GEN_AI_USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
/// `gen_ai.usage.output_tokens`.
pub const GEN_AI_USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
/// `gen_ai.usage.cache_read.input_tokens`.
pub const GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: &str = "gen_ai.usage.cache_read.input_tokens";
/// `gen_ai.conversation.id`: Keel's session id.
pub const GEN_AI_CONVERSATION_ID: &str = "gen_ai.conversation.id";
/// `gen_ai.agent.name`.
pub const GEN_AI_AGENT_NAME: &str = "gen_ai.agent.name";
/// `gen_ai.agent.id`.
pub const GEN_AI_AGENT_ID: &str = "gen_ai.agent.id";
/// `gen_ai.tool.name`.
pub const GEN_AI_TOOL_NAME: &str = "gen_ai.tool.name";
/// `gen_ai.tool.call.id`.
pub const GEN_AI_TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
/// `gen_ai.tool.type`.
pub const GEN_AI_TOOL_TYPE: &str = "gen_ai.tool.type";
/// `gen_ai.token.type` (metric attribute: `input` or `output`).
pub const GEN_AI_TOKEN_TYPE: &str = "gen_ai.token.type";
/// `error.type`.
pub const ERROR_TYPE: &str = "error.type";

/// Content, recorded only with `logContent = true`: the messages a model call got.
pub const GEN_AI_INPUT_MESSAGES: &str = "gen_ai.input.messages";
/// Content: the messages a model call returned.
pub const GEN_AI_OUTPUT_MESSAGES: &str = "gen_ai.output.messages";
/// Content: the system instructions of a model call.
pub const GEN_AI_SYSTEM_INSTRUCTIONS: &str = "gen_ai.system_instructions";
/// Content: a tool call's arguments.
pub const GEN_AI_TOOL_CALL_ARGUMENTS: &str = "gen_ai.tool.call.arguments";
/// Content: a tool call's result.
pub const GEN_AI_TOOL_CALL_RESULT: &str = "gen_ai.tool.call.result";

/// `mcp.method.name`.
pub const MCP_METHOD_NAME: &str = "mcp.method.name";
/// `network.transport` (`pipe` for stdio, `tcp` for HTTP).
pub const NETWORK_TRANSPORT: &str = "network.transport";

/// `keel.session.id`.
pub const KEEL_SESSION_ID: &str = "keel.session.id";
/// `keel.request.id`.
pub const KEEL_REQUEST_ID: &str = "keel.request.id";
/// `keel.permission.decision`: the gate's verdict (`allow`, `ask`, `deny`) on an
/// `execute_tool` span, the person's answer on an approval span.
pub const KEEL_PERMISSION_DECISION: &str = "keel.permission.decision";
/// `keel.permission.level`: the level of the call (`read`, `write`, `execute`, …).
pub const KEEL_PERMISSION_LEVEL: &str = "keel.permission.level";
/// `keel.tool.outcome`: how a tool call ended (see [`ToolOutcome`](crate::ToolOutcome)).
pub const KEEL_TOOL_OUTCOME: &str = "keel.tool.outcome";
/// `keel.hook.point`: `PreToolUse`, `PostToolUse`, `UserPromptSubmit`, `Stop`, `SessionStart`.
pub const KEEL_HOOK_POINT: &str = "keel.hook.point";
/// `keel.hook.outcome`: `ok`, `block`, `error` or `timeout`.
pub const KEEL_HOOK_OUTCOME: &str = "keel.hook.outcome";
/// `keel.hook.exit_code`.
pub const KEEL_HOOK_EXIT_CODE: &str = "keel.hook.exit_code";
/// `keel.response.time_to_first_chunk`: seconds from a model call's start to the
/// first chunk of its streamed answer (text, thought or tool call), on its `chat` span.
pub const KEEL_RESPONSE_TIME_TO_FIRST_CHUNK: &str = "keel.response.time_to_first_chunk";
/// `keel.mcp.server`: the configured name of an MCP server.
pub const KEEL_MCP_SERVER: &str = "keel.mcp.server";

/// `gen_ai.operation.name` of a request or a sub-agent's run.
pub const OP_INVOKE_AGENT: &str = "invoke_agent";
/// `gen_ai.operation.name` of a model call.
pub const OP_CHAT: &str = "chat";
/// `gen_ai.operation.name` of a tool call.
pub const OP_EXECUTE_TOOL: &str = "execute_tool";
/// `mcp.method.name` of an MCP tool call.
pub const MCP_TOOLS_CALL: &str = "tools/call";

/// Histogram: tokens per model call, by `gen_ai.token.type`.
pub const METRIC_TOKEN_USAGE: &str = "gen_ai.client.token.usage";
/// Histogram: seconds per model call.
pub const METRIC_OPERATION_DURATION: &str = "gen_ai.client.operation.duration";
/// Histogram: seconds from a streamed model call's start to its first chunk.
pub const METRIC_TIME_TO_FIRST_CHUNK: &str = "gen_ai.client.operation.time_to_first_chunk";
/// Histogram: seconds per MCP call.
pub const METRIC_MCP_DURATION: &str = "mcp.client.operation.duration";
/// Counter: tool calls, by `gen_ai.tool.name` and `keel.tool.outcome`.
pub const METRIC_TOOL_CALLS: &str = "keel.tool.calls";
/// Histogram: seconds per tool call (decode to end, approval wait included).
pub const METRIC_TOOL_DURATION: &str = "keel.tool.duration";
/// Counter: approvals answered, by `keel.permission.decision`.
pub const METRIC_APPROVALS: &str = "keel.approvals";
/// Histogram: seconds an approval waited for its answer.
pub const METRIC_APPROVAL_WAIT: &str = "keel.approval.wait";
/// Counter: hook runs, by `keel.hook.point` and `keel.hook.outcome`.
pub const METRIC_HOOK_RUNS: &str = "keel.hook.runs";

/// Bucket boundaries of [`METRIC_TOKEN_USAGE`], as the conventions advise.
pub const TOKEN_BUCKETS: [f64; 14] = [
    1.0,
    4.0,
    16.0,
    64.0,
    256.0,
    1024.0,
    4096.0,
    16384.0,
    65536.0,
    262_144.0,
    1_048_576.0,
    4_194_304.0,
    16_777_216.0,
    67_108_864.0,
];
/// Bucket boundaries of the duration histograms, in seconds, as the conventions advise.
pub const DURATION_BUCKETS: [f64; 14] = [
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];

/// Whether `OTEL_SEMCONV_STABILITY_OPT_IN` (a comma-separated list) asks for the
/// latest experimental GenAI conventions. Keel emits them either way; `keel doctor`
/// shows the value.
pub fn stability_opt_in(value: Option<&str>) -> bool {
    value.is_some_and(|v| {
        v.split(',')
            .any(|item| item.trim() == "gen_ai_latest_experimental")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_opt_in_is_one_item_of_a_list() {
        assert!(stability_opt_in(Some("gen_ai_latest_experimental")));
        assert!(stability_opt_in(Some("http, gen_ai_latest_experimental")));
        assert!(!stability_opt_in(Some("gen_ai_latest")));
        assert!(!stability_opt_in(None));
    }

    #[test]
    fn the_schema_url_names_the_pinned_version() {
        assert!(SCHEMA_URL.ends_with(SEMCONV_VERSION));
    }
}
