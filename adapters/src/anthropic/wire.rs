//! The Anthropic Messages wire format as pure functions.
//!
//! Differences from chat completions that matter for context management: instructions are
//! one top-level `system` string (every system message is joined into it, in order, so a
//! memory block placed as a system message moves there too); tool calls and results are
//! content blocks; consecutive messages of one role form one turn (the API merges them
//! anyway; doing it here keeps every tool result of a batch in the user turn that follows
//! the calls, which the API requires); and cache reads/writes are reported apart from
//! `input_tokens`, so usage sums them back in.

use serde_json::{json, Map, Value};

use super::super::openai::wire::WireError;
use crate::transport::{excerpt, looks_like_overflow, parse_overflow_numbers};
use crate::{
    FinishReason, Message, ModelRequest, ModelResponse, ProviderError, Role, ToolCall, Usage,
};

fn bad(message: impl Into<String>) -> WireError {
    WireError {
        message: message.into(),
    }
}

/// The joined system text (`\n\n` between messages), when there is any.
fn system_text(request: &ModelRequest) -> Option<String> {
    let parts: Vec<&str> = request
        .messages
        .iter()
        .filter(|m| m.role == Role::System)
        .map(|m| m.content.as_str())
        .collect();
    (!parts.is_empty()).then(|| parts.join("\n\n"))
}

fn blocks_of(m: &Message) -> Vec<Value> {
    match m.role {
        Role::System => Vec::new(),
        Role::Tool => {
            let mut b = Map::new();
            b.insert("type".into(), json!("tool_result"));
            b.insert(
                "tool_use_id".into(),
                json!(m.tool_call_id.clone().unwrap_or_default()),
            );
            if !m.content.is_empty() {
                b.insert("content".into(), json!(m.content));
            }
            vec![Value::Object(b)]
        }
        Role::User | Role::Assistant => {
            let mut blocks = vec![json!({"type": "text", "text": m.content})];
            blocks.extend(m.tool_calls.iter().map(
                |c| json!({"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}),
            ));
            blocks
        }
    }
}

fn wire_role(role: Role) -> &'static str {
    match role {
        Role::Assistant => "assistant",
        _ => "user",
    }
}

/// The `messages` array: non-system messages, consecutive same-role ones merged into one
/// turn; empty text blocks dropped (the API rejects them) unless a turn would be empty; a
/// turn of a single text block sent as a plain string.
fn messages_json(request: &ModelRequest) -> Vec<Value> {
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for m in request.messages.iter().filter(|m| m.role != Role::System) {
        let role = wire_role(m.role);
        let blocks = blocks_of(m);
        match turns.last_mut() {
            Some((r, b)) if *r == role => b.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    turns
        .into_iter()
        .map(|(role, blocks)| {
            let is_empty_text = |b: &Value| b["type"] == "text" && b["text"] == "";
            let kept: Vec<Value> = blocks
                .iter()
                .filter(|b| !is_empty_text(b))
                .cloned()
                .collect();
            let content = match kept.as_slice() {
                [] => json!(""),
                [only] if only["type"] == "text" => only["text"].clone(),
                _ => Value::Array(kept),
            };
            json!({"role": role, "content": content})
        })
        .collect()
}

fn tools_json(request: &ModelRequest) -> Option<Value> {
    (!request.tools.is_empty()).then(|| {
        Value::Array(
            request
                .tools
                .iter()
                .map(|t| {
                    json!({"name": t.name, "description": t.description, "input_schema": t.parameters})
                })
                .collect(),
        )
    })
}

/// `request` as a Messages API body.
pub fn request_to_json(request: &ModelRequest) -> Value {
    let mut body = count_tokens_json(request);
    if let Value::Object(o) = &mut body {
        o.insert("max_tokens".into(), json!(request.max_output_tokens));
    }
    body
}

/// `request` as a `count_tokens` body: the same, without `max_tokens`.
pub fn count_tokens_json(request: &ModelRequest) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    if let Some(system) = system_text(request) {
        body.insert("system".into(), json!(system));
    }
    body.insert("messages".into(), Value::Array(messages_json(request)));
    if let Some(tools) = tools_json(request) {
        body.insert("tools".into(), tools);
    }
    Value::Object(body)
}

/// Read a Messages API response: text blocks concatenated, `tool_use` blocks as tool calls
/// (other blocks, such as thinking, ignored), usage with cache tokens summed into input.
pub fn response_from_json(body: &Value) -> Result<ModelResponse, WireError> {
    let blocks = body
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("`content` must be an array"))?;
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for (i, b) in blocks.iter().enumerate() {
        match b.get("type").and_then(Value::as_str) {
            Some("text") => text.push_str(
                b.get("text")
                    .and_then(Value::as_str)
                    .ok_or_else(|| bad(format!("content[{i}].text missing")))?,
            ),
            Some("tool_use") => tool_calls.push(ToolCall {
                id: b
                    .get("id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| bad(format!("content[{i}].id missing")))?
                    .to_string(),
                name: b
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| bad(format!("content[{i}].name missing")))?
                    .to_string(),
                arguments: b.get("input").cloned().unwrap_or_else(|| json!({})),
            }),
            _ => {}
        }
    }
    let finish_reason = match body.get("stop_reason").and_then(Value::as_str) {
        Some("tool_use") => FinishReason::ToolCalls,
        Some("max_tokens") | Some("model_context_window_exceeded") => FinishReason::Length,
        _ if !tool_calls.is_empty() => FinishReason::ToolCalls,
        // end_turn, stop_sequence, pause_turn, refusal.
        _ => FinishReason::Stop,
    };
    let usage = body
        .get("usage")
        .filter(|u| !u.is_null())
        .ok_or_else(|| bad("`usage` missing"))?;
    let opt = |k: &str| usage.get(k).and_then(Value::as_u64).unwrap_or(0);
    let input = usage
        .get("input_tokens")
        .and_then(Value::as_u64)
        .ok_or_else(|| bad("`usage.input_tokens` must be a non-negative integer"))?;
    let output = usage
        .get("output_tokens")
        .and_then(Value::as_u64)
        .ok_or_else(|| bad("`usage.output_tokens` must be a non-negative integer"))?;
    Ok(ModelResponse {
        message: Message {
            role: Role::Assistant,
            content: text,
            tool_calls,
            tool_call_id: None,
        },
        usage: Usage {
            input_tokens: input
                + opt("cache_creation_input_tokens")
                + opt("cache_read_input_tokens"),
            output_tokens: output,
        },
        finish_reason,
    })
}

/// Read a `count_tokens` answer: `{"input_tokens": N}`.
pub fn count_from_json(body: &Value) -> Result<u64, WireError> {
    body.get("input_tokens")
        .and_then(Value::as_u64)
        .ok_or_else(|| bad("`input_tokens` must be a non-negative integer"))
}

/// Classify an Anthropic error answer (`{"type":"error","error":{"type","message"}}`):
/// a 4xx saying `prompt is too long: N tokens > M maximum` (or the `max_tokens` sum form)
/// is a context overflow with those numbers; 429 a rate limit; 529 `overloaded_error` and
/// every 5xx a server error; 408 a timeout; anything else rejected.
pub fn error_from_http(status: u16, retry_after_ms: Option<u64>, body: &[u8]) -> ProviderError {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let message = parsed
        .as_ref()
        .and_then(|v| v.get("error"))
        .and_then(|e| e.get("message"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| excerpt(body, 500));
    if (400..=499).contains(&status) && status != 429 && looks_like_overflow(&message) {
        let n = parse_overflow_numbers(&message);
        return ProviderError::ContextOverflow {
            limit: n.limit,
            requested: n.requested,
            input_tokens: n.input_tokens,
            message,
            partial_output: None,
        };
    }
    match status {
        429 => ProviderError::RateLimited {
            retry_after_ms,
            message,
        },
        408 => ProviderError::Timeout { after_ms: 0 },
        500..=599 => ProviderError::Server { status, message },
        _ => ProviderError::Rejected { status, message },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolDefinition;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "read_file".into(),
            arguments: json!({"path": id}),
        }
    }

    #[test]
    fn request_shape() {
        let req = ModelRequest {
            model: "claude-sonnet-4-20250514".into(),
            messages: vec![
                Message::system("Be brief."),
                Message::user("Read both."),
                Message {
                    role: Role::Assistant,
                    content: String::new(),
                    tool_calls: vec![call("a"), call("b")],
                    tool_call_id: None,
                },
                Message::tool_result("a", "A"),
                Message::tool_result("b", ""),
                Message::system("<conversation-memory trust=\"untrusted\">m</conversation-memory>"),
                Message::user("Now?"),
            ],
            tools: vec![ToolDefinition {
                name: "read_file".into(),
                description: "Read.".into(),
                parameters: json!({"type": "object"}),
            }],
            max_output_tokens: 1024,
        };
        let v = request_to_json(&req);
        assert_eq!(
            v["system"],
            "Be brief.\n\n<conversation-memory trust=\"untrusted\">m</conversation-memory>"
        );
        assert_eq!(v["max_tokens"], 1024);
        assert_eq!(v["tools"][0]["input_schema"], json!({"type": "object"}));
        let msgs = v["messages"].as_array().unwrap();
        assert_eq!(msgs.len(), 3);
        assert_eq!(msgs[0], json!({"role": "user", "content": "Read both."}));
        assert_eq!(
            msgs[1],
            json!({"role": "assistant", "content": [
                {"type": "tool_use", "id": "a", "name": "read_file", "input": {"path": "a"}},
                {"type": "tool_use", "id": "b", "name": "read_file", "input": {"path": "b"}},
            ]})
        );
        assert_eq!(
            msgs[2],
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "a", "content": "A"},
                {"type": "tool_result", "tool_use_id": "b"},
                {"type": "text", "text": "Now?"},
            ]})
        );
        let c = count_tokens_json(&req);
        assert!(c.get("max_tokens").is_none());
        assert_eq!(c["messages"], v["messages"]);
    }

    #[test]
    fn response_and_usage() {
        let v = json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "x"},
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "x"}},
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 10, "output_tokens": 5,
                      "cache_creation_input_tokens": 100, "cache_read_input_tokens": 1000},
        });
        let r = response_from_json(&v).unwrap();
        assert_eq!(r.message.content, "Let me look.");
        assert_eq!(r.message.tool_calls[0].id, "toolu_1");
        assert_eq!(r.finish_reason, FinishReason::ToolCalls);
        assert_eq!(
            r.usage,
            Usage {
                input_tokens: 1110,
                output_tokens: 5
            }
        );
        for (reason, want) in [
            ("end_turn", FinishReason::Stop),
            ("stop_sequence", FinishReason::Stop),
            ("max_tokens", FinishReason::Length),
            ("refusal", FinishReason::Stop),
        ] {
            let v = json!({"content": [{"type": "text", "text": "t"}], "stop_reason": reason,
                           "usage": {"input_tokens": 1, "output_tokens": 1}});
            assert_eq!(response_from_json(&v).unwrap().finish_reason, want);
        }
        assert!(response_from_json(&json!({"content": []})).is_err());
        assert_eq!(count_from_json(&json!({"input_tokens": 42})).unwrap(), 42);
    }

    #[test]
    fn errors() {
        let body = |t: &str, m: &str| {
            serde_json::to_vec(&json!({"type": "error", "error": {"type": t, "message": m}}))
                .unwrap()
        };
        assert_eq!(
            error_from_http(
                400,
                None,
                &body(
                    "invalid_request_error",
                    "prompt is too long: 208310 tokens > 200000 maximum"
                )
            ),
            ProviderError::ContextOverflow {
                limit: Some(200_000),
                requested: None,
                input_tokens: Some(208_310),
                message: "prompt is too long: 208310 tokens > 200000 maximum".into(),
                partial_output: None,
            }
        );
        assert_eq!(
            error_from_http(429, Some(3000), &body("rate_limit_error", "slow down")),
            ProviderError::RateLimited {
                retry_after_ms: Some(3000),
                message: "slow down".into()
            }
        );
        assert_eq!(
            error_from_http(529, None, &body("overloaded_error", "Overloaded")),
            ProviderError::Server {
                status: 529,
                message: "Overloaded".into()
            }
        );
        assert!(matches!(
            error_from_http(
                401,
                None,
                &body("authentication_error", "invalid x-api-key")
            ),
            ProviderError::Rejected { status: 401, .. }
        ));
        assert!(matches!(
            error_from_http(
                413,
                None,
                &body(
                    "request_too_large",
                    "Request exceeds the maximum allowed number of bytes."
                )
            ),
            ProviderError::Rejected { status: 413, .. }
        ));
    }
}
