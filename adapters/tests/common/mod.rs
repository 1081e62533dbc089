//! Functions shared by the integration tests.
#![allow(dead_code)]

use std::time::Duration;

use futures::StreamExt;
use keel_adapters::build_model_with_env;
use keel_config::{Config, EnvMap, RetryPolicy};
use keel_kernel::model::{Model, ModelError, ModelEvent, ModelStream};
use std::sync::Arc;

/// Hang guard only: no test asserts on timing.
pub const GUARD: Duration = Duration::from_secs(10);

pub type Item = Result<ModelEvent, ModelError>;

/// The next item, failing the test if the stream hangs.
pub async fn next(stream: &mut ModelStream) -> Option<Item> {
    tokio::time::timeout(GUARD, stream.next())
        .await
        .expect("the stream hung")
}

/// Every remaining item.
pub async fn collect(mut stream: ModelStream) -> Vec<Item> {
    let mut out = Vec::new();
    while let Some(item) = next(&mut stream).await {
        out.push(item);
    }
    out
}

/// The concatenated text deltas.
pub fn text_of(items: &[Item]) -> String {
    items
        .iter()
        .filter_map(|i| match i {
            Ok(ModelEvent::TextDelta(t)) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

/// A config with tiny retry delays.
pub fn fast_config(max_retries: u32) -> Config {
    Config {
        retry: RetryPolicy {
            max_retries,
            base_delay_ms: 1,
            max_delay_ms: 5,
        },
        ..Config::default()
    }
}

/// An OpenAI model pointed at `base` (the server's root; `/v1` is appended).
pub fn openai_model(base: &str, config: &Config) -> Arc<dyn Model> {
    let env = EnvMap::from_pairs([
        ("OPENAI_BASE_URL", format!("{base}/v1")),
        ("OPENAI_API_KEY", "sk-test-123".to_owned()),
    ]);
    build_model_with_env("openai:gpt-4o-mini", config, &env).expect("openai model")
}

/// An Anthropic model pointed at `base`.
pub fn anthropic_model(base: &str, config: &Config) -> Arc<dyn Model> {
    let env = EnvMap::from_pairs([
        ("ANTHROPIC_BASE_URL", base.to_owned()),
        ("ANTHROPIC_API_KEY", "sk-ant-test".to_owned()),
    ]);
    build_model_with_env("anthropic:claude-sonnet-4-5", config, &env).expect("anthropic model")
}
