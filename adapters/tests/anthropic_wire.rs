//! AnthropicProvider against a loopback mock that checks the wire shape.

mod common;

use ctxbench_adapters::anthropic::{AnthropicConfig, AnthropicProvider};
use ctxbench_adapters::{
    FinishReason, Message, ModelRequest, Provider, ProviderError, Role, ToolCall, ToolDefinition,
    Usage,
};
use serde_json::json;

const CANARY: &str = "sk-ant-CANARY-0123456789";

fn provider(base: String, var: &str) -> AnthropicProvider {
    std::env::set_var(var, CANARY);
    AnthropicProvider::new(AnthropicConfig {
        base_url: base,
        api_key_env: Some(var.to_string()),
        ..AnthropicConfig::default()
    })
    .unwrap()
}

fn request() -> ModelRequest {
    ModelRequest {
        model: "claude-sonnet-4-20250514".into(),
        messages: vec![
            Message::system("Be brief."),
            Message::user("Read a and b."),
            Message {
                role: Role::Assistant,
                content: "Reading.".into(),
                tool_calls: vec![
                    ToolCall {
                        id: "toolu_a".into(),
                        name: "read".into(),
                        arguments: json!({"path": "a"}),
                    },
                    ToolCall {
                        id: "toolu_b".into(),
                        name: "read".into(),
                        arguments: json!({"path": "b"}),
                    },
                ],
                tool_call_id: None,
            },
            Message::tool_result("toolu_a", "A"),
            Message::tool_result("toolu_b", "B"),
        ],
        tools: vec![ToolDefinition {
            name: "read".into(),
            description: "Read a file.".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }],
        max_output_tokens: 512,
    }
}

#[tokio::test(flavor = "current_thread")]
async fn messages_and_count_tokens_wire_shape() {
    let mock = common::mock(|r| match r.path.as_str() {
        "/v1/messages" => (
            200,
            vec![],
            json!({
                "id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
                "content": [{"type": "text", "text": "Both read."}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 40, "output_tokens": 3, "cache_read_input_tokens": 2}
            })
            .to_string(),
        ),
        "/v1/messages/count_tokens" => (200, vec![], json!({"input_tokens": 42}).to_string()),
        _ => (404, vec![], "{}".into()),
    })
    .await;
    let p = provider(mock.url(), "CTXBENCH_TEST_ANTHROPIC_KEY_A");
    let resp = p.complete(&request()).await.unwrap();
    assert_eq!(resp.message.content, "Both read.");
    assert_eq!(resp.finish_reason, FinishReason::Stop);
    assert_eq!(
        resp.usage,
        Usage {
            input_tokens: 42,
            output_tokens: 3
        }
    );
    assert_eq!(p.count_tokens(&request()).await.unwrap(), Some(42));

    let seen = mock.requests();
    assert_eq!(seen.len(), 2);
    let m = &seen[0];
    assert_eq!(
        (m.method.as_str(), m.path.as_str()),
        ("POST", "/v1/messages")
    );
    assert_eq!(m.headers["x-api-key"], CANARY);
    assert_eq!(m.headers["anthropic-version"], "2023-06-01");
    assert!(m.headers["content-type"].starts_with("application/json"));
    assert!(!m.headers.contains_key("authorization"));
    assert_eq!(
        m.body,
        json!({
            "model": "claude-sonnet-4-20250514",
            "system": "Be brief.",
            "max_tokens": 512,
            "messages": [
                {"role": "user", "content": "Read a and b."},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Reading."},
                    {"type": "tool_use", "id": "toolu_a", "name": "read", "input": {"path": "a"}},
                    {"type": "tool_use", "id": "toolu_b", "name": "read", "input": {"path": "b"}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_a", "content": "A"},
                    {"type": "tool_result", "tool_use_id": "toolu_b", "content": "B"},
                ]},
            ],
            "tools": [{"name": "read", "description": "Read a file.",
                       "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}],
        })
    );
    let c = &seen[1];
    assert_eq!(c.path, "/v1/messages/count_tokens");
    assert!(c.body.get("max_tokens").is_none());
    assert_eq!(c.body["messages"], m.body["messages"]);
}

#[tokio::test(flavor = "current_thread")]
async fn errors_are_typed_and_never_show_the_key() {
    let mock = common::mock(|r| {
        let err = |t: &str, m: &str| {
            json!({"type": "error", "error": {"type": t, "message": m}}).to_string()
        };
        match r.body["model"].as_str().unwrap_or("") {
            "too-long" => (
                400,
                vec![],
                err(
                    "invalid_request_error",
                    "prompt is too long: 208310 tokens > 200000 maximum",
                ),
            ),
            "limited" => (
                429,
                vec![("retry-after".into(), "7".into())],
                err(
                    "rate_limit_error",
                    "Number of requests has exceeded your rate limit",
                ),
            ),
            "overloaded" => (529, vec![], err("overloaded_error", "Overloaded")),
            "auth" => (
                401,
                vec![],
                err(
                    "authentication_error",
                    &format!("invalid x-api-key {CANARY}"),
                ),
            ),
            _ => (200, vec![], "{\"content\": [".into()),
        }
    })
    .await;
    let p = provider(mock.url(), "CTXBENCH_TEST_ANTHROPIC_KEY_B");
    let with_model = |m: &str| ModelRequest {
        model: m.into(),
        ..request()
    };
    assert_eq!(
        p.complete(&with_model("too-long")).await.unwrap_err(),
        ProviderError::ContextOverflow {
            limit: Some(200_000),
            requested: None,
            input_tokens: Some(208_310),
            message: "prompt is too long: 208310 tokens > 200000 maximum".into(),
            partial_output: None,
        }
    );
    assert!(matches!(
        p.complete(&with_model("limited")).await.unwrap_err(),
        ProviderError::RateLimited {
            retry_after_ms: Some(7_000),
            ..
        }
    ));
    assert!(matches!(
        p.complete(&with_model("overloaded")).await.unwrap_err(),
        ProviderError::Server { status: 529, .. }
    ));
    let auth = p.complete(&with_model("auth")).await.unwrap_err();
    assert!(matches!(auth, ProviderError::Rejected { status: 401, .. }));
    let malformed = p.complete(&with_model("cut")).await.unwrap_err();
    assert_eq!(malformed.kind(), "malformed");
    for text in [
        auth.to_string(),
        format!("{auth:?}"),
        malformed.to_string(),
        format!("{p:?}"),
        serde_json::to_string(&auth).unwrap(),
    ] {
        assert!(!text.contains(CANARY), "key leaked: {text}");
    }
}

#[test]
fn missing_key_is_a_config_error_naming_the_variable() {
    let err = AnthropicProvider::new(AnthropicConfig {
        api_key_env: Some("CTXBENCH_TEST_UNSET_ANTHROPIC_VAR".into()),
        ..AnthropicConfig::default()
    })
    .unwrap_err();
    assert!(err
        .to_string()
        .contains("CTXBENCH_TEST_UNSET_ANTHROPIC_VAR"));
}
