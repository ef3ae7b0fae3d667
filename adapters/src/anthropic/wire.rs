//! The Anthropic Messages wire format as pure functions, both directions.
//!
//! Differences from chat completions that matter for context management: instructions are
//! one top-level `system` string (every system message is joined into it, in order, so a
//! memory block placed as a system message moves there too); tool calls and results are
//! content blocks; consecutive messages of one role form one turn (the API merges them
//! anyway; doing it here keeps every tool result of a batch in the user turn that follows
//! the calls, which the API requires); and cache reads/writes are reported apart from
//! `input_tokens`, so usage sums them back in.
//!
//! The client ([`super::AnthropicProvider`]) uses [`request_to_json`],
//! [`count_tokens_json`], [`response_from_json`], [`count_from_json`] and
//! [`error_from_http`]; the fake server ([`crate::serve`]) uses the opposite halves:
//! [`request_from_json`], [`response_to_json`], [`response_to_sse_events`],
//! [`count_to_json`] and [`error_to_http`]. Responses and errors round-trip exactly.
//! Requests round-trip exactly when they are already in the wire's shape (at most one
//! system message, first; no two consecutive messages of one role except tool results and
//! the user message after them); any other request comes back as the wire normalizes it
//! (system messages joined, same-role runs merged) — which is what a real Anthropic model
//! sees too — and encoding that gives the identical body again.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use super::super::openai::wire::{
    arguments_from_text, fragments, sse_events, text_pieces, HttpError, SseError, WireError,
    ARGUMENT_FRAGMENTS,
};
use crate::transport::{excerpt, looks_like_overflow, parse_overflow_numbers};
use crate::{
    FinishReason, Message, ModelRequest, ModelResponse, ProviderError, Role, ToolCall,
    ToolDefinition, Usage,
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
    let finish_reason = finish_from_stop_reason(
        body.get("stop_reason").and_then(Value::as_str),
        !tool_calls.is_empty(),
    );
    let usage = body
        .get("usage")
        .filter(|u| !u.is_null())
        .ok_or_else(|| bad("`usage` missing"))?;
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
            input_tokens: input_tokens_of(usage)?,
            output_tokens: output,
        },
        finish_reason,
    })
}

/// A finish reason from a `stop_reason`: `end_turn`, `stop_sequence`, `pause_turn` and
/// `refusal` are a stop, unless the answer calls tools.
fn finish_from_stop_reason(reason: Option<&str>, has_tool_calls: bool) -> FinishReason {
    match reason {
        Some("tool_use") => FinishReason::ToolCalls,
        Some("max_tokens") | Some("model_context_window_exceeded") => FinishReason::Length,
        _ if has_tool_calls => FinishReason::ToolCalls,
        _ => FinishReason::Stop,
    }
}

/// Input tokens of a `usage` object: `input_tokens` plus cache writes and reads, which
/// Anthropic reports apart but which are input all the same.
fn input_tokens_of(usage: &Value) -> Result<u64, WireError> {
    let opt = |k: &str| usage.get(k).and_then(Value::as_u64).unwrap_or(0);
    let input = usage
        .get("input_tokens")
        .and_then(Value::as_u64)
        .ok_or_else(|| bad("`usage.input_tokens` must be a non-negative integer"))?;
    Ok(input + opt("cache_creation_input_tokens") + opt("cache_read_input_tokens"))
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
///
/// A typed `error.ctxbench` member (ctxbench's fake server, [`error_to_http`]) wins, so the
/// fake's errors travel losslessly.
pub fn error_from_http(status: u16, retry_after_ms: Option<u64>, body: &[u8]) -> ProviderError {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    if let Some(typed) = parsed
        .as_ref()
        .and_then(|v| v.get("error"))
        .and_then(|e| e.get("ctxbench"))
        .and_then(|t| serde_json::from_value::<ProviderError>(t.clone()).ok())
    {
        return typed;
    }
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

// ---------------------------------------------------------------------------------------
// Server directions: reading requests, writing responses and errors
// ---------------------------------------------------------------------------------------

fn text_block(b: &Value) -> Result<String, WireError> {
    match b.get("type").and_then(Value::as_str) {
        Some("text") => b
            .get("text")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| bad("`text` must be a string")),
        Some(other) => Err(bad(format!("`{other}` blocks are not supported here"))),
        None => Err(bad("a content block without `type`")),
    }
}

/// A `tool_result`'s content: absent, a string, or text blocks (joined).
fn tool_result_content(v: Option<&Value>) -> Result<String, WireError> {
    match v {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => parts
            .iter()
            .map(text_block)
            .collect::<Result<Vec<_>, _>>()
            .map(|t| t.concat()),
        Some(_) => Err(bad("`content` must be a string or an array of text blocks")),
    }
}

fn string_field(b: &Value, k: &str) -> Result<String, WireError> {
    b.get(k)
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| bad(format!("`{k}` must be a string")))
}

/// One wire turn as messages, appended to `out`.
///
/// A user turn becomes one message per block: a [`Role::Tool`] message per `tool_result`,
/// a user message per `text` block. An assistant turn starts a new message at every `text`
/// block and attaches `tool_use` blocks to the message before them — the inverse of how
/// [`request_to_json`] merges consecutive messages into one turn. Thinking blocks (the
/// model's own, echoed back) carry nothing a request needs and are dropped; any other
/// block (images, documents, server tools) cannot be represented and is refused.
fn turn_from_json(turn: &Value, out: &mut Vec<Message>) -> Result<(), WireError> {
    let assistant = match turn.get("role").and_then(Value::as_str) {
        Some("user") => false,
        Some("assistant") => true,
        // A system turn among the messages (Claude Code 2.1 sends them): its text, as a
        // system message in place.
        Some("system") => {
            let text = match turn.get("content") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Array(blocks)) => blocks
                    .iter()
                    .map(text_block)
                    .collect::<Result<Vec<_>, _>>()?
                    .join("\n"),
                _ => return Err(bad("`content` must be a string or an array of text blocks")),
            };
            out.push(Message::system(text));
            return Ok(());
        }
        Some(other) => return Err(bad(format!("unknown role `{other}`"))),
        None => return Err(bad("`role` must be a string")),
    };
    let blocks = match turn.get("content") {
        Some(Value::String(s)) => {
            out.push(if assistant {
                Message::assistant(s.clone())
            } else {
                Message::user(s.clone())
            });
            return Ok(());
        }
        Some(Value::Array(blocks)) => blocks,
        _ => return Err(bad("`content` must be a string or an array of blocks")),
    };
    let mut current: Option<Message> = None;
    for (j, b) in blocks.iter().enumerate() {
        let at = |e: WireError| bad(format!("content[{j}]: {e}"));
        let kind = b
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| at(bad("a content block without `type`")))?;
        match (assistant, kind) {
            (_, "thinking" | "redacted_thinking") => {}
            (_, "text") => {
                let text = text_block(b).map_err(at)?;
                out.extend(current.take());
                if assistant {
                    current = Some(Message::assistant(text));
                } else {
                    out.push(Message::user(text));
                }
            }
            (true, "tool_use") => {
                let call = ToolCall {
                    id: string_field(b, "id").map_err(at)?,
                    name: string_field(b, "name").map_err(at)?,
                    arguments: b.get("input").cloned().unwrap_or_else(|| json!({})),
                };
                current
                    .get_or_insert_with(|| Message::assistant(""))
                    .tool_calls
                    .push(call);
            }
            (false, "tool_result") => out.push(Message::tool_result(
                string_field(b, "tool_use_id").map_err(at)?,
                tool_result_content(b.get("content")).map_err(at)?,
            )),
            (_, other) => {
                let role = if assistant { "assistant" } else { "user" };
                return Err(at(bad(format!(
                    "`{other}` blocks are not supported in {role} turns"
                ))));
            }
        }
    }
    out.extend(current);
    Ok(())
}

fn tool_from_json(t: &Value) -> Result<ToolDefinition, WireError> {
    Ok(ToolDefinition {
        name: string_field(t, "name")?,
        description: t
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        parameters: t
            .get("input_schema")
            .cloned()
            .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
    })
}

/// Read a Messages API request body (`/v1/messages`, or `/v1/messages/count_tokens`, which
/// has no `max_tokens`): what any Anthropic client sends.
///
/// `system` (a string, or text blocks: one system message each) comes first; a `system`
/// turn among the messages is a system message in place. A user turn
/// becomes a tool message per `tool_result` and a user message per `text` block; an
/// assistant turn starts a message at each `text` block, `tool_use` blocks joining the one
/// before them; thinking blocks are dropped; other blocks (images, documents) are refused.
/// `max_tokens` absent is 0 (no output reserved). Unknown fields (`stream`, `temperature`,
/// `metadata`, `cache_control`, …) are ignored.
pub fn request_from_json(body: &Value) -> Result<ModelRequest, WireError> {
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("`model` must be a string"))?
        .to_string();
    let mut messages = Vec::new();
    match body.get("system") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => messages.push(Message::system(s.clone())),
        Some(Value::Array(blocks)) => {
            for (i, b) in blocks.iter().enumerate() {
                let text = text_block(b).map_err(|e| bad(format!("system[{i}]: {e}")))?;
                messages.push(Message::system(text));
            }
        }
        Some(_) => return Err(bad("`system` must be a string or an array of text blocks")),
    }
    let turns = body
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("`messages` must be an array"))?;
    for (i, turn) in turns.iter().enumerate() {
        turn_from_json(turn, &mut messages).map_err(|e| bad(format!("messages[{i}]: {e}")))?;
    }
    let tools = match body.get("tools") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(tools)) => tools
            .iter()
            .enumerate()
            .map(|(i, t)| tool_from_json(t).map_err(|e| bad(format!("tools[{i}]: {e}"))))
            .collect::<Result<Vec<_>, _>>()?,
        Some(_) => return Err(bad("`tools` must be an array")),
    };
    let max_output_tokens = match body.get("max_tokens") {
        None | Some(Value::Null) => 0,
        Some(v) => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| bad("`max_tokens` must be a non-negative 32-bit integer"))?,
    };
    Ok(ModelRequest {
        model,
        messages,
        tools,
        max_output_tokens,
    })
}

fn stop_reason(f: FinishReason) -> &'static str {
    match f {
        FinishReason::Stop => "end_turn",
        FinishReason::ToolCalls => "tool_use",
        FinishReason::Length => "max_tokens",
    }
}

fn tool_use_block(c: &ToolCall, input: Value) -> Value {
    json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input})
}

/// `response` as a Messages API response body: a `text` block (when there is text), a
/// `tool_use` block per call, `stop_reason` (`end_turn`, `tool_use`, `max_tokens`) and the
/// usage (no cache tokens: everything is `input_tokens`).
pub fn response_to_json(response: &ModelResponse, model: &str, id: &str) -> Value {
    let m = &response.message;
    let mut content = Vec::new();
    if !m.content.is_empty() {
        content.push(json!({"type": "text", "text": m.content}));
    }
    content.extend(
        m.tool_calls
            .iter()
            .map(|c| tool_use_block(c, c.arguments.clone())),
    );
    json!({
        "id": id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason(response.finish_reason),
        "stop_sequence": null,
        "usage": {
            "input_tokens": response.usage.input_tokens,
            "output_tokens": response.usage.output_tokens,
        },
    })
}

/// A `count_tokens` answer: `{"input_tokens": N}`.
pub fn count_to_json(input_tokens: u64) -> Value {
    json!({ "input_tokens": input_tokens })
}

/// Anthropic's error `type` for an HTTP status.
pub fn error_type_for_status(status: u16) -> &'static str {
    match status {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        504 => "timeout_error",
        529 => "overloaded_error",
        500..=599 => "api_error",
        _ => "invalid_request_error",
    }
}

/// The HTTP status that goes with an Anthropic error `type` (for errors met inside an event
/// stream, which has no status of its own).
fn status_for_error_type(kind: &str) -> u16 {
    match kind {
        "authentication_error" => 401,
        "permission_error" => 403,
        "not_found_error" => 404,
        "request_too_large" => 413,
        "rate_limit_error" => 429,
        "api_error" => 500,
        "timeout_error" => 504,
        "overloaded_error" => 529,
        _ => 400,
    }
}

/// An error body in Anthropic's shape: `{"type":"error","error":{"type","message"}}`.
pub fn error_body(error_type: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": error_type, "message": message}})
}

/// A context overflow in Anthropic's words, so that any client's parser (and
/// [`error_from_http`]) finds the numbers: `prompt is too long: I tokens > L maximum` when
/// the input alone is over the window, else `input length and max_tokens exceed context
/// limit: I + O > L, …`; without numbers, the original message behind `prompt is too long`.
fn overflow_message(
    limit: Option<u64>,
    requested: Option<u64>,
    input: Option<u64>,
    original: &str,
) -> String {
    match (limit, input, requested) {
        (Some(l), Some(i), Some(r)) if i <= l && r >= i => format!(
            "input length and `max_tokens` exceed context limit: {i} + {} > {l}, decrease input length or `max_tokens` and try again",
            r - i
        ),
        (Some(l), Some(i), _) => format!("prompt is too long: {i} tokens > {l} maximum"),
        _ if original.to_lowercase().contains("prompt is too long") => original.to_string(),
        _ => format!("prompt is too long: {original}"),
    }
}

/// `err` as Anthropic would answer it: a context overflow is a 400 `invalid_request_error`
/// worded `prompt is too long: N tokens > M maximum`, a rate limit a 429 `rate_limit_error`
/// with `retry-after` (and `retry-after-ms`, so a wait shorter than a second survives), a
/// 529 `overloaded_error`, other server errors `api_error` with their status, a timeout a
/// 504 `timeout_error`, a rejection its 4xx. Like the OpenAI wire, the typed error rides
/// along under `error.ctxbench` so [`error_from_http`] reads it back exactly; clients that
/// do not know the member ignore it.
pub fn error_to_http(err: &ProviderError) -> HttpError {
    let (status, message) = match err {
        ProviderError::ContextOverflow {
            limit,
            requested,
            input_tokens,
            message,
            ..
        } => (
            400,
            overflow_message(*limit, *requested, *input_tokens, message),
        ),
        ProviderError::RateLimited { message, .. } => (429, message.clone()),
        ProviderError::Server { status, message } => (
            if (500..=599).contains(status) {
                *status
            } else {
                502
            },
            message.clone(),
        ),
        ProviderError::Unavailable { message } => (503, message.clone()),
        ProviderError::Timeout { after_ms } => {
            (504, format!("upstream timed out after {after_ms} ms"))
        }
        ProviderError::Malformed { message } => (502, message.clone()),
        ProviderError::Rejected { status, message } => (
            if (400..=499).contains(status) {
                *status
            } else {
                400
            },
            message.clone(),
        ),
    };
    let headers = crate::transport::retry_after_headers(err);
    let mut body = error_body(error_type_for_status(status), &message);
    if let Some(e) = body.get_mut("error").and_then(Value::as_object_mut) {
        e.insert(
            "ctxbench".into(),
            serde_json::to_value(err).unwrap_or(Value::Null),
        );
    }
    HttpError {
        status,
        headers,
        body,
    }
}

// ---------------------------------------------------------------------------------------
// Streaming (server-sent events)
// ---------------------------------------------------------------------------------------

fn event(name: &str, data: Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

fn message_start(model: &str, id: &str, input_tokens: u64) -> String {
    event(
        "message_start",
        json!({"type": "message_start", "message": {
            "id": id, "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": input_tokens, "output_tokens": 0},
        }}),
    )
}

/// A text block at `index`: start, the text as word deltas (none for empty text).
fn text_block_events(index: usize, text: &str) -> Vec<String> {
    let mut out = vec![event(
        "content_block_start",
        json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
    )];
    out.extend(text_pieces(text).into_iter().map(|p| {
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": p}}),
        )
    }));
    out
}

fn block_stop(index: usize) -> String {
    event(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": index}),
    )
}

/// `response` streamed as the Messages API streams it: `message_start` (with the input
/// usage), a `ping`, per content block `content_block_start`, `content_block_delta`s
/// (`text_delta` words; `input_json_delta` fragments of a tool call's input) and
/// `content_block_stop`, then `message_delta` with `stop_reason` and the output usage, and
/// `message_stop`. Each string is one complete event. [`response_from_sse`] reads it back.
pub fn response_to_sse_events(response: &ModelResponse, model: &str, id: &str) -> Vec<String> {
    let m = &response.message;
    let mut out = vec![
        message_start(model, id, response.usage.input_tokens),
        event("ping", json!({"type": "ping"})),
    ];
    let mut index = 0;
    if !m.content.is_empty() {
        out.extend(text_block_events(index, &m.content));
        out.push(block_stop(index));
        index += 1;
    }
    for c in &m.tool_calls {
        out.push(event(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": tool_use_block(c, json!({}))}),
        ));
        let input = c.arguments.to_string();
        for f in fragments(&input, ARGUMENT_FRAGMENTS) {
            out.push(event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": f}}),
            ));
        }
        out.push(block_stop(index));
        index += 1;
    }
    out.push(event(
        "message_delta",
        json!({"type": "message_delta",
               "delta": {"stop_reason": stop_reason(response.finish_reason), "stop_sequence": null},
               "usage": {"output_tokens": response.usage.output_tokens}}),
    ));
    out.push(event("message_stop", json!({"type": "message_stop"})));
    out
}

/// An answer that fails after output, streamed as the Messages API does: `message_start`,
/// the partial output (a context overflow's `partial_output`) as a text block's deltas, then
/// an `error` event with the body of [`error_to_http`], and no `message_stop`. For an error
/// without partial output a server answers with a plain HTTP error instead.
pub fn failure_to_sse_events(err: &ProviderError, model: &str, id: &str) -> Vec<String> {
    let (input, partial) = match err {
        ProviderError::ContextOverflow {
            input_tokens,
            partial_output,
            ..
        } => (input_tokens.unwrap_or(0), partial_output.as_deref()),
        _ => (0, None),
    };
    let mut out = vec![message_start(model, id, input)];
    if let Some(p) = partial.filter(|p| !p.is_empty()) {
        out.extend(text_block_events(0, p));
    }
    out.push(event("error", error_to_http(err).body));
    out
}

/// A content block being reassembled from stream events.
enum StreamBlock {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        input: Value,
        json: String,
    },
    /// Thinking and other blocks a response does not carry.
    Other,
}

/// Read a Messages API event stream back into the response it streams: text blocks
/// concatenated, `tool_use` blocks with their `input_json_delta` fragments parsed once
/// complete (no fragments: the start block's `input`), `stop_reason` and output usage from
/// `message_delta`, input usage from `message_start` (or `message_delta` when it carries
/// one). `ping` and unknown events are skipped. A stream cut before `message_stop` is
/// malformed; an `error` event is [`SseError::Failed`].
pub fn response_from_sse(text: &str) -> Result<ModelResponse, SseError> {
    let mut blocks: BTreeMap<u64, StreamBlock> = BTreeMap::new();
    let mut input: Option<u64> = None;
    let mut output: Option<u64> = None;
    let mut reason: Option<String> = None;
    let mut stopped = false;
    for (i, ev) in sse_events(text).iter().enumerate() {
        let at = |e: WireError| SseError::Malformed(bad(format!("event {i}: {e}")));
        let v: Value = serde_json::from_str(&ev.data)
            .map_err(|e| at(bad(format!("data is not JSON: {e}"))))?;
        let kind = v
            .get("type")
            .and_then(Value::as_str)
            .or(ev.event.as_deref())
            .unwrap_or_default();
        let index = || {
            v.get("index")
                .and_then(Value::as_u64)
                .ok_or_else(|| at(bad("`index` missing")))
        };
        match kind {
            "message_start" => {
                let usage = v
                    .get("message")
                    .and_then(|m| m.get("usage"))
                    .ok_or_else(|| at(bad("`message.usage` missing")))?;
                input = Some(input_tokens_of(usage).map_err(at)?);
                output = usage.get("output_tokens").and_then(Value::as_u64);
            }
            "content_block_start" => {
                let block = v.get("content_block").unwrap_or(&Value::Null);
                let b = match block.get("type").and_then(Value::as_str) {
                    Some("text") => StreamBlock::Text(
                        block
                            .get("text")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string(),
                    ),
                    Some("tool_use") => StreamBlock::ToolUse {
                        id: string_field(block, "id").map_err(at)?,
                        name: string_field(block, "name").map_err(at)?,
                        input: block.get("input").cloned().unwrap_or_else(|| json!({})),
                        json: String::new(),
                    },
                    _ => StreamBlock::Other,
                };
                blocks.insert(index()?, b);
            }
            "content_block_delta" => {
                let i = index()?;
                let delta = v.get("delta").unwrap_or(&Value::Null);
                let piece = |k: &str| delta.get(k).and_then(Value::as_str).unwrap_or_default();
                match (
                    blocks.get_mut(&i),
                    delta.get("type").and_then(Value::as_str),
                ) {
                    (None, _) => return Err(at(bad(format!("a delta for unstarted block {i}")))),
                    (Some(StreamBlock::Text(t)), Some("text_delta")) => t.push_str(piece("text")),
                    (Some(StreamBlock::ToolUse { json, .. }), Some("input_json_delta")) => {
                        json.push_str(piece("partial_json"))
                    }
                    // Thinking and signature deltas, and deltas of skipped blocks.
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(r) = v
                    .get("delta")
                    .and_then(|d| d.get("stop_reason"))
                    .and_then(Value::as_str)
                {
                    reason = Some(r.to_string());
                }
                if let Some(usage) = v.get("usage") {
                    if let Some(o) = usage.get("output_tokens").and_then(Value::as_u64) {
                        output = Some(o);
                    }
                    if usage.get("input_tokens").and_then(Value::as_u64).is_some() {
                        input = Some(input_tokens_of(usage).map_err(at)?);
                    }
                }
            }
            "message_stop" => {
                stopped = true;
                break;
            }
            "error" => {
                let error = v.get("error").unwrap_or(&Value::Null);
                let status =
                    status_for_error_type(error.get("type").and_then(Value::as_str).unwrap_or(""));
                let body = serde_json::to_vec(&v).unwrap_or_default();
                let mut err = error_from_http(status, None, &body);
                if let ProviderError::ContextOverflow { partial_output, .. } = &mut err {
                    let streamed = streamed_text(&blocks);
                    if partial_output.is_none() && !streamed.is_empty() {
                        *partial_output = Some(streamed);
                    }
                }
                return Err(SseError::Failed(err));
            }
            // ping, content_block_stop, and events added after this was written.
            _ => {}
        }
    }
    if !stopped {
        return Err(bad("the stream ended before `message_stop`").into());
    }
    let input = input.ok_or_else(|| bad("no `message_start` with usage"))?;
    let output = output.ok_or_else(|| bad("no output usage"))?;
    let content = streamed_text(&blocks);
    let tool_calls: Vec<ToolCall> = blocks
        .into_values()
        .filter_map(|b| match b {
            StreamBlock::ToolUse {
                id,
                name,
                input,
                json,
            } => Some(ToolCall {
                id,
                name,
                arguments: if json.is_empty() {
                    input
                } else {
                    arguments_from_text(&json)
                },
            }),
            _ => None,
        })
        .collect();
    Ok(ModelResponse {
        finish_reason: finish_from_stop_reason(reason.as_deref(), !tool_calls.is_empty()),
        message: Message {
            role: Role::Assistant,
            content,
            tool_calls,
            tool_call_id: None,
        },
        usage: Usage {
            input_tokens: input,
            output_tokens: output,
        },
    })
}

/// The text blocks' text so far, in block order.
fn streamed_text(blocks: &BTreeMap<u64, StreamBlock>) -> String {
    blocks
        .values()
        .filter_map(|b| match b {
            StreamBlock::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
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

    /// Requests already in the wire's shape: one system message first, no same-role runs
    /// except tool results and the user text after them.
    fn canonical_requests() -> Vec<ModelRequest> {
        let tools = vec![
            ToolDefinition {
                name: "read_file".into(),
                description: "Read a file.".into(),
                parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
            },
            ToolDefinition {
                name: "noop".into(),
                description: String::new(),
                parameters: json!({}),
            },
        ];
        let with_calls = |content: &str, calls: Vec<ToolCall>| Message {
            role: Role::Assistant,
            content: content.into(),
            tool_calls: calls,
            tool_call_id: None,
        };
        vec![
            ModelRequest {
                model: "claude".into(),
                messages: vec![Message::user("Hi")],
                tools: vec![],
                max_output_tokens: 0,
            },
            ModelRequest {
                model: "claude-sonnet-4-20250514".into(),
                messages: vec![
                    Message::system("Be brief.\n\n<conversation-memory trust=\"untrusted\">m</conversation-memory>"),
                    Message::user("Read both — 日本語 🚀 \"q\" \\ \n"),
                    with_calls("", vec![call("a"), call("b")]),
                    Message::tool_result("a", "A"),
                    Message::tool_result("b", ""),
                    Message::user("Now?"),
                    with_calls(
                        "Reading.",
                        vec![ToolCall {
                            id: "c".into(),
                            name: "run".into(),
                            arguments: json!({"cmd": ["ls"], "n": 0.1, "big": 1.0e300, "env": {"X": null}}),
                        }],
                    ),
                    Message::tool_result("c", "{\"json\": \"in a result\"}"),
                    Message::assistant("Done."),
                    Message::user(""),
                ],
                tools: tools.clone(),
                max_output_tokens: 4096,
            },
            ModelRequest {
                model: "m".into(),
                messages: vec![
                    Message::system(""),
                    with_calls(
                        "",
                        vec![ToolCall {
                            id: "x".into(),
                            name: "s".into(),
                            arguments: json!("a bare string argument"),
                        }],
                    ),
                    Message::tool_result("x", "ok"),
                    with_calls("a", vec![call("y")]),
                    with_calls("b", vec![call("z")]),
                ],
                tools,
                max_output_tokens: u32::MAX,
            },
        ]
    }

    #[test]
    fn requests_in_the_wire_shape_round_trip_exactly() {
        for req in canonical_requests() {
            let text = serde_json::to_string(&request_to_json(&req)).unwrap();
            let back = request_from_json(&serde_json::from_str(&text).unwrap()).unwrap();
            assert_eq!(back, req);
            // count_tokens bodies carry no max_tokens: everything else comes back.
            let counted = request_from_json(&count_tokens_json(&req)).unwrap();
            assert_eq!(
                counted,
                ModelRequest {
                    max_output_tokens: 0,
                    ..req
                }
            );
        }
    }

    #[test]
    fn other_requests_come_back_normalized_and_encode_identically() {
        let reqs = vec![
            ModelRequest {
                model: "m".into(),
                messages: vec![
                    Message::system("One."),
                    Message::user("a"),
                    Message::user("b"),
                    Message::system("<conversation-memory>late</conversation-memory>"),
                    Message::assistant("x"),
                    Message::assistant(""),
                    Message::tool_result("none", ""),
                    Message {
                        role: Role::Tool,
                        content: "no id".into(),
                        tool_calls: vec![],
                        tool_call_id: None,
                    },
                ],
                tools: vec![],
                max_output_tokens: 7,
            },
            ModelRequest {
                model: "m".into(),
                messages: vec![Message::assistant("starts with the model")],
                tools: vec![],
                max_output_tokens: 1,
            },
        ];
        for req in reqs {
            let wire = request_to_json(&req);
            let back = request_from_json(&wire).unwrap();
            assert_eq!(request_to_json(&back), wire, "{req:?}");
        }
        let joined = request_from_json(&request_to_json(&ModelRequest {
            model: "m".into(),
            messages: vec![
                Message::system("A"),
                Message::user("u"),
                Message::system("B"),
            ],
            tools: vec![],
            max_output_tokens: 1,
        }))
        .unwrap();
        assert_eq!(
            joined.messages,
            vec![Message::system("A\n\nB"), Message::user("u")]
        );
    }

    #[test]
    fn foreign_request_variants_are_read() {
        let v = json!({
            "model": "claude-opus-4",
            "max_tokens": 32000,
            "stream": true,
            "temperature": 1,
            "metadata": {"user_id": "u"},
            "system": [
                {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "Project rules."},
            ],
            "messages": [
                {"role": "user", "content": [
                    {"type": "text", "text": "<system-reminder>r</system-reminder>"},
                    {"type": "text", "text": "Fix it", "cache_control": {"type": "ephemeral"}},
                ]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                    {"type": "text", "text": "Looking."},
                    {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "/a"}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": false,
                     "content": [{"type": "text", "text": "line 1\n"}, {"type": "text", "text": "line 2"}]},
                ]},
            ],
            "tools": [{"name": "Read", "input_schema": {"type": "object"}}],
        });
        let r = request_from_json(&v).unwrap();
        assert_eq!(r.max_output_tokens, 32000);
        assert_eq!(
            r.messages,
            vec![
                Message::system("You are Claude Code."),
                Message::system("Project rules."),
                Message::user("<system-reminder>r</system-reminder>"),
                Message::user("Fix it"),
                Message {
                    role: Role::Assistant,
                    content: "Looking.".into(),
                    tool_calls: vec![ToolCall {
                        id: "toolu_1".into(),
                        name: "Read".into(),
                        arguments: json!({"file_path": "/a"}),
                    }],
                    tool_call_id: None,
                },
                Message::tool_result("toolu_1", "line 1\nline 2"),
            ]
        );
        assert_eq!(r.tools[0].description, "");
        let refuse = |content: Value| {
            request_from_json(&json!({"model": "m", "messages": [content]}))
                .unwrap_err()
                .message
        };
        let image = refuse(json!({"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "x"}}]}));
        assert!(
            image.contains("messages[0]: content[0]") && image.contains("image"),
            "{image}"
        );
        assert!(refuse(json!({"role": "user", "content": [
            {"type": "tool_use", "id": "t", "name": "n", "input": {}}]}))
        .contains("tool_use"));
        assert!(refuse(json!({"role": "tool", "content": "x"})).contains("role"));
        // A system turn among the messages (Claude Code 2.1) is a system message in place.
        let mid = request_from_json(&json!({"model": "m", "messages": [
            {"role": "user", "content": "a"},
            {"role": "system", "content": [{"type": "text", "text": "s1"}, {"type": "text", "text": "s2"}]},
            {"role": "system", "content": "s3"},
        ]}))
        .unwrap();
        assert_eq!(
            mid.messages,
            vec![
                Message::user("a"),
                Message::system("s1\ns2"),
                Message::system("s3")
            ]
        );
        assert!(refuse(json!({"role": "user", "content": 5})).contains("content"));
        assert!(request_from_json(&json!({"messages": []})).is_err());
        assert!(
            request_from_json(&json!({"model": "m", "messages": [], "max_tokens": -1})).is_err()
        );
    }

    fn varied_responses() -> Vec<ModelResponse> {
        vec![
            ModelResponse {
                message: Message::assistant("Both read. ✓ 🚀\n  next"),
                usage: Usage {
                    input_tokens: 40,
                    output_tokens: 3,
                },
                finish_reason: FinishReason::Stop,
            },
            ModelResponse {
                message: Message {
                    role: Role::Assistant,
                    content: "Let me look.".into(),
                    tool_calls: vec![
                        call("toolu_1"),
                        ToolCall {
                            id: "toolu_2".into(),
                            name: "noop".into(),
                            arguments: json!({}),
                        },
                        ToolCall {
                            id: "toolu_3".into(),
                            name: "s".into(),
                            arguments: json!("bare"),
                        },
                    ],
                    tool_call_id: None,
                },
                usage: Usage {
                    input_tokens: 1110,
                    output_tokens: 5,
                },
                finish_reason: FinishReason::ToolCalls,
            },
            ModelResponse {
                message: Message {
                    role: Role::Assistant,
                    content: String::new(),
                    tool_calls: vec![call("only")],
                    tool_call_id: None,
                },
                usage: Usage {
                    input_tokens: 1,
                    output_tokens: 9,
                },
                finish_reason: FinishReason::ToolCalls,
            },
            ModelResponse {
                message: Message::assistant("cut"),
                usage: Usage::default(),
                finish_reason: FinishReason::Length,
            },
            ModelResponse {
                message: Message::assistant(""),
                usage: Usage {
                    input_tokens: 2,
                    output_tokens: 0,
                },
                finish_reason: FinishReason::Stop,
            },
        ]
    }

    #[test]
    fn responses_round_trip_exactly_plain_and_streamed() {
        for r in varied_responses() {
            let v = response_to_json(&r, "claude", "msg_1");
            assert_eq!(v["type"], "message");
            let text = serde_json::to_string(&v).unwrap();
            assert_eq!(
                response_from_json(&serde_json::from_str(&text).unwrap()).unwrap(),
                r
            );
            let events = response_to_sse_events(&r, "claude", "msg_1").concat();
            assert_eq!(response_from_sse(&events).unwrap(), r);
            assert_eq!(response_from_sse(&events.replace('\n', "\r\n")).unwrap(), r);
        }
        assert_eq!(count_from_json(&count_to_json(208_310)).unwrap(), 208_310);
    }

    #[test]
    fn stream_wire_shape() {
        let r = &varied_responses()[1];
        let events = response_to_sse_events(r, "claude", "msg_9");
        let parsed: Vec<(String, Value)> = events
            .iter()
            .map(|e| {
                let evs = sse_events(e);
                assert_eq!(evs.len(), 1, "one event per string: {e}");
                let ev = &evs[0];
                let data: Value = serde_json::from_str(&ev.data).unwrap();
                assert_eq!(ev.event.as_deref(), data["type"].as_str());
                (ev.event.clone().unwrap(), data)
            })
            .collect();
        let names: Vec<&str> = parsed.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names[..3], ["message_start", "ping", "content_block_start"]);
        assert_eq!(names[names.len() - 2..], ["message_delta", "message_stop"]);
        assert_eq!(
            names
                .iter()
                .filter(|n| **n == "content_block_start")
                .count(),
            4
        );
        let start = &parsed[0].1["message"];
        assert_eq!(start["id"], "msg_9");
        assert_eq!(start["content"], json!([]));
        assert_eq!(start["usage"]["input_tokens"], 1110);
        let tool_start = parsed
            .iter()
            .find(|(_, d)| d["content_block"]["type"] == "tool_use")
            .unwrap();
        assert_eq!(
            tool_start.1["content_block"],
            json!({"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}})
        );
        assert_eq!(tool_start.1["index"], 1);
        let fragments: Vec<&str> = parsed
            .iter()
            .filter(|(_, d)| d["index"] == 1 && d["delta"]["type"] == "input_json_delta")
            .map(|(_, d)| d["delta"]["partial_json"].as_str().unwrap())
            .collect();
        assert_eq!(fragments.len(), ARGUMENT_FRAGMENTS);
        assert_eq!(
            serde_json::from_str::<Value>(&fragments.concat()).unwrap(),
            json!({"path": "toolu_1"})
        );
        let delta = &parsed[parsed.len() - 2].1;
        assert_eq!(delta["delta"]["stop_reason"], "tool_use");
        assert_eq!(delta["usage"]["output_tokens"], 5);

        // Cut anywhere before message_stop: malformed.
        for cut in [0, 2, events.len() / 2, events.len() - 1] {
            let mut text = events[..cut].concat();
            text.push_str(&events[cut][..events[cut].len() / 2]);
            match response_from_sse(&text) {
                Err(SseError::Malformed(e)) => assert!(e.message.contains("message_stop"), "{e}"),
                other => panic!("cut at {cut}: {other:?}"),
            }
        }
    }

    fn all_errors() -> Vec<ProviderError> {
        vec![
            ProviderError::ContextOverflow {
                limit: Some(200_000),
                requested: Some(214_096),
                input_tokens: Some(210_000),
                message: "This model's maximum context length is 200000 tokens.".into(),
                partial_output: None,
            },
            ProviderError::ContextOverflow {
                limit: Some(16_384),
                requested: Some(17_000),
                input_tokens: Some(12_904),
                message: "overflow".into(),
                partial_output: Some("I started to".into()),
            },
            ProviderError::ContextOverflow {
                limit: None,
                requested: None,
                input_tokens: None,
                message: "too big".into(),
                partial_output: None,
            },
            ProviderError::RateLimited {
                retry_after_ms: Some(1500),
                message: "slow".into(),
            },
            ProviderError::RateLimited {
                retry_after_ms: None,
                message: "slow".into(),
            },
            ProviderError::Server {
                status: 529,
                message: "Overloaded".into(),
            },
            ProviderError::Server {
                status: 500,
                message: "boom".into(),
            },
            ProviderError::Server {
                status: 0,
                message: "reset".into(),
            },
            ProviderError::Timeout { after_ms: 30_000 },
            ProviderError::Malformed {
                message: "cut".into(),
            },
            ProviderError::Unavailable {
                message: "refused".into(),
            },
            ProviderError::Rejected {
                status: 401,
                message: "auth".into(),
            },
            ProviderError::Rejected {
                status: 413,
                message: "big".into(),
            },
        ]
    }

    #[test]
    fn errors_round_trip_exactly_in_anthropic_shapes() {
        for e in all_errors() {
            let http = error_to_http(&e);
            assert_eq!(http.body["type"], "error");
            assert_eq!(
                http.body["error"]["type"].as_str(),
                Some(error_type_for_status(http.status))
            );
            let body = serde_json::to_vec(&http.body).unwrap();
            assert_eq!(error_from_http(http.status, None, &body), e);
        }
        let shape = |e: &ProviderError| {
            let h = error_to_http(e);
            (
                h.status,
                h.body["error"]["type"].as_str().unwrap().to_string(),
            )
        };
        let errs = all_errors();
        assert_eq!(shape(&errs[0]), (400, "invalid_request_error".into()));
        assert_eq!(shape(&errs[3]), (429, "rate_limit_error".into()));
        assert_eq!(shape(&errs[5]), (529, "overloaded_error".into()));
        assert_eq!(shape(&errs[6]), (500, "api_error".into()));
        assert_eq!(shape(&errs[8]), (504, "timeout_error".into()));
        assert_eq!(shape(&errs[11]), (401, "authentication_error".into()));
        let rl = error_to_http(&errs[3]);
        assert!(rl.headers.contains(&("retry-after".into(), "2".into())));
        assert!(rl
            .headers
            .contains(&("retry-after-ms".into(), "1500".into())));
    }

    #[test]
    fn overflow_is_worded_as_anthropic_and_parses_back_without_the_typed_member() {
        let strip = |e: &ProviderError| {
            let mut h = error_to_http(e);
            h.body["error"].as_object_mut().unwrap().remove("ctxbench");
            (h.status, h.body)
        };
        let (status, body) = strip(&all_errors()[0]);
        assert_eq!(
            body,
            json!({"type": "error", "error": {"type": "invalid_request_error",
                   "message": "prompt is too long: 210000 tokens > 200000 maximum"}})
        );
        assert_eq!(
            error_from_http(status, None, &serde_json::to_vec(&body).unwrap()),
            ProviderError::ContextOverflow {
                limit: Some(200_000),
                requested: None,
                input_tokens: Some(210_000),
                message: "prompt is too long: 210000 tokens > 200000 maximum".into(),
                partial_output: None,
            }
        );
        // Input fits, input + max_tokens does not: Anthropic's sum wording, all numbers.
        let (status, body) = strip(&all_errors()[1]);
        match error_from_http(status, None, &serde_json::to_vec(&body).unwrap()) {
            ProviderError::ContextOverflow {
                limit,
                requested,
                input_tokens,
                ..
            } => assert_eq!(
                (limit, requested, input_tokens),
                (Some(16_384), Some(17_000), Some(12_904))
            ),
            other => panic!("{other:?}"),
        }
        // No numbers: still an overflow.
        let (status, body) = strip(&all_errors()[2]);
        assert!(matches!(
            error_from_http(status, None, &serde_json::to_vec(&body).unwrap()),
            ProviderError::ContextOverflow { limit: None, .. }
        ));
    }

    #[test]
    fn a_failure_after_output_streams_the_partial_text_then_an_error_event() {
        let err = all_errors()[1].clone();
        let events = failure_to_sse_events(&err, "claude", "msg_1");
        let text = events.concat();
        assert!(text.contains("event: error\n"));
        assert!(!text.contains("message_stop"));
        match response_from_sse(&text) {
            Err(SseError::Failed(back)) => assert_eq!(back, err),
            other => panic!("{other:?}"),
        }
        // Without the typed member: the streamed text is the partial output.
        let mut error_body = error_to_http(&err).body;
        error_body["error"]
            .as_object_mut()
            .unwrap()
            .remove("ctxbench");
        let mut stripped = events[..events.len() - 1].concat();
        stripped.push_str(&format!("event: error\ndata: {error_body}\n\n"));
        assert!(!stripped.contains("ctxbench"));
        match response_from_sse(&stripped) {
            Err(SseError::Failed(ProviderError::ContextOverflow {
                partial_output,
                limit,
                ..
            })) => {
                assert_eq!(partial_output.as_deref(), Some("I started to"));
                assert_eq!(limit, Some(16_384));
            }
            other => panic!("{other:?}"),
        }
        let overloaded = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
        assert_eq!(
            response_from_sse(overloaded),
            Err(SseError::Failed(ProviderError::Server {
                status: 529,
                message: "Overloaded".into()
            }))
        );
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
