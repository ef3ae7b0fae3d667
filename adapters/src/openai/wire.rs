//! The OpenAI chat-completions wire format as pure functions, both directions.
//!
//! The client ([`super::OpenAiProvider`]) uses the `*_to_json` request side and the
//! `*_from_json` response/error side; the fake server ([`crate::serve`]) uses the opposite
//! halves. Because both ends share these functions, and each pair round-trips exactly
//! (tested below), a scripted conversation over loopback HTTP is the same conversation as
//! one played in process.
//!
//! Errors carry, next to OpenAI's own fields, a `ctxbench` member with the typed
//! [`ProviderError`] so the fake's errors travel losslessly (partial output included); any
//! other server's errors are classified from status, `code`, `type` and message.
//!
//! Streaming: [`response_to_sse_events`] renders a response as OpenAI's
//! `chat.completion.chunk` server-sent events and [`response_from_sse`] reassembles them,
//! to the same response [`response_from_json`] reads from the unstreamed body. The
//! event-stream helpers here are shared with the Anthropic wire.

use serde_json::{json, Map, Value};
use thiserror::Error;

use crate::transport::{looks_like_overflow, parse_overflow_numbers};
use crate::{
    FinishReason, Message, ModelRequest, ModelResponse, ProviderError, Role, ToolCall,
    ToolDefinition, Usage,
};

/// A JSON document that is not the expected chat-completions shape.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{message}")]
pub struct WireError {
    /// What was wrong, with its JSON path.
    pub message: String,
}

fn bad(message: impl Into<String>) -> WireError {
    WireError {
        message: message.into(),
    }
}

/// Which request field carries the output allowance: classic `max_tokens`, or
/// `max_completion_tokens`, which OpenAI's reasoning models (o-series, gpt-5) require.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MaxTokensField {
    /// `max_tokens` (every OpenAI-compatible server understands it).
    #[default]
    MaxTokens,
    /// `max_completion_tokens`.
    MaxCompletionTokens,
}

impl MaxTokensField {
    fn key(self) -> &'static str {
        match self {
            MaxTokensField::MaxTokens => "max_tokens",
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
        }
    }
}

// ---------------------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------------------

/// `request` as a chat-completions body with `max_tokens`.
pub fn request_to_json(request: &ModelRequest) -> Value {
    request_to_json_with(request, MaxTokensField::MaxTokens)
}

/// `request` as a chat-completions body, the allowance in `field`.
///
/// `tools` is omitted when empty (OpenAI rejects an empty array); an assistant message that
/// only calls tools has `content: null`; tool-call arguments are JSON text, as the API wants.
pub fn request_to_json_with(request: &ModelRequest, field: MaxTokensField) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    body.insert(
        "messages".into(),
        Value::Array(request.messages.iter().map(message_to_json).collect()),
    );
    if !request.tools.is_empty() {
        body.insert(
            "tools".into(),
            Value::Array(request.tools.iter().map(tool_to_json).collect()),
        );
    }
    body.insert(field.key().into(), json!(request.max_output_tokens));
    Value::Object(body)
}

fn message_to_json(m: &Message) -> Value {
    let mut o = Map::new();
    o.insert("role".into(), json!(m.role.as_str()));
    let content = if m.content.is_empty() && !m.tool_calls.is_empty() {
        Value::Null
    } else {
        json!(m.content)
    };
    o.insert("content".into(), content);
    if !m.tool_calls.is_empty() {
        o.insert(
            "tool_calls".into(),
            Value::Array(m.tool_calls.iter().map(tool_call_to_json).collect()),
        );
    }
    if let Some(id) = &m.tool_call_id {
        o.insert("tool_call_id".into(), json!(id));
    }
    Value::Object(o)
}

fn tool_call_to_json(c: &ToolCall) -> Value {
    json!({
        "id": c.id,
        "type": "function",
        "function": {"name": c.name, "arguments": c.arguments.to_string()},
    })
}

fn tool_to_json(t: &ToolDefinition) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": t.name,
            "description": t.description,
            "parameters": t.parameters,
        },
    })
}

/// Read a chat-completions request body (what any OpenAI client sends).
///
/// Accepts the variations real clients produce: content as a string, `null` or an array of
/// `{"type":"text"}` parts (joined); arguments as JSON text or an object; `max_tokens` or
/// `max_completion_tokens` (absent means 0: no output reserved, as when OpenAI is given no
/// limit the window check is on input alone). Unknown fields are ignored.
pub fn request_from_json(body: &Value) -> Result<ModelRequest, WireError> {
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("`model` must be a string"))?
        .to_string();
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("`messages` must be an array"))?
        .iter()
        .enumerate()
        .map(|(i, m)| message_from_json(m).map_err(|e| bad(format!("messages[{i}]: {e}"))))
        .collect::<Result<Vec<_>, _>>()?;
    let tools = match body.get("tools") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(tools)) => tools
            .iter()
            .enumerate()
            .map(|(i, t)| tool_from_json(t).map_err(|e| bad(format!("tools[{i}]: {e}"))))
            .collect::<Result<Vec<_>, _>>()?,
        Some(_) => return Err(bad("`tools` must be an array")),
    };
    let allowance = body
        .get("max_completion_tokens")
        .filter(|v| !v.is_null())
        .or_else(|| body.get("max_tokens").filter(|v| !v.is_null()));
    let max_output_tokens = match allowance {
        None => 0,
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

fn role_from_str(s: &str) -> Result<Role, WireError> {
    match s {
        "system" | "developer" => Ok(Role::System),
        "user" => Ok(Role::User),
        "assistant" => Ok(Role::Assistant),
        "tool" => Ok(Role::Tool),
        other => Err(bad(format!("unknown role `{other}`"))),
    }
}

/// Text content: a string, `null`/absent (empty), or an array of text parts.
fn content_from_json(v: Option<&Value>) -> Result<String, WireError> {
    match v {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => {
            let mut out = String::new();
            for p in parts {
                match p.get("text").and_then(Value::as_str) {
                    Some(t) => out.push_str(t),
                    None => return Err(bad("only text content parts are supported")),
                }
            }
            Ok(out)
        }
        Some(_) => Err(bad("`content` must be a string, null or an array of parts")),
    }
}

fn message_from_json(m: &Value) -> Result<Message, WireError> {
    let role = role_from_str(
        m.get("role")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("`role` must be a string"))?,
    )?;
    let content = content_from_json(m.get("content"))?;
    let tool_calls = tool_calls_from_json(m.get("tool_calls"))?;
    let tool_call_id = match m.get("tool_call_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(bad("`tool_call_id` must be a string")),
    };
    Ok(Message {
        role,
        content,
        tool_calls,
        tool_call_id,
    })
}

fn tool_calls_from_json(v: Option<&Value>) -> Result<Vec<ToolCall>, WireError> {
    let calls = match v {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(calls)) => calls,
        Some(_) => return Err(bad("`tool_calls` must be an array")),
    };
    calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let f = c
                .get("function")
                .ok_or_else(|| bad(format!("tool_calls[{i}].function missing")))?;
            let name = f
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| bad(format!("tool_calls[{i}].function.name missing")))?;
            let arguments = match f.get("arguments") {
                None | Some(Value::Null) => Value::Object(Map::new()),
                Some(Value::String(s)) => arguments_from_text(s),
                Some(other) => other.clone(),
            };
            Ok(ToolCall {
                id: c
                    .get("id")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                name: name.to_string(),
                arguments,
            })
        })
        .collect()
}

/// Tool-call arguments from their JSON text; text that is not JSON (a model's mistake) is
/// kept verbatim as a string.
pub(crate) fn arguments_from_text(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.to_string()))
}

fn tool_from_json(t: &Value) -> Result<ToolDefinition, WireError> {
    let f = t.get("function").ok_or_else(|| bad("`function` missing"))?;
    Ok(ToolDefinition {
        name: f
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("`function.name` missing"))?
            .to_string(),
        description: f
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        parameters: f
            .get("parameters")
            .cloned()
            .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
    })
}

// ---------------------------------------------------------------------------------------
// Responses
// ---------------------------------------------------------------------------------------

fn finish_to_str(f: FinishReason) -> &'static str {
    match f {
        FinishReason::Stop => "stop",
        FinishReason::ToolCalls => "tool_calls",
        FinishReason::Length => "length",
    }
}

/// `response` as a chat-completions response body (`id` and `model` as given; `created` is
/// 0 so bodies are deterministic).
pub fn response_to_json(response: &ModelResponse, model: &str, id: &str) -> Value {
    let m = &response.message;
    let mut message = Map::new();
    message.insert("role".into(), json!("assistant"));
    message.insert(
        "content".into(),
        if m.content.is_empty() && !m.tool_calls.is_empty() {
            Value::Null
        } else {
            json!(m.content)
        },
    );
    if !m.tool_calls.is_empty() {
        message.insert(
            "tool_calls".into(),
            Value::Array(m.tool_calls.iter().map(tool_call_to_json).collect()),
        );
    }
    json!({
        "id": id,
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{
            "index": 0,
            "message": Value::Object(message),
            "finish_reason": finish_to_str(response.finish_reason),
        }],
        "usage": usage_to_json(response.usage),
    })
}

/// Read a chat-completions response body: the first choice's message, its finish reason and
/// the usage. A response without usage is malformed: estimation error is measured against
/// provider-reported tokens, and inventing them would fake the measurement.
pub fn response_from_json(body: &Value) -> Result<ModelResponse, WireError> {
    let choice = body
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or_else(|| bad("`choices` must be a non-empty array"))?;
    let msg = choice
        .get("message")
        .ok_or_else(|| bad("`choices[0].message` missing"))?;
    let content = content_from_json(msg.get("content"))?;
    let tool_calls = tool_calls_from_json(msg.get("tool_calls"))?;
    let finish_reason = finish_from_str(
        choice.get("finish_reason").and_then(Value::as_str),
        !tool_calls.is_empty(),
    );
    let usage = body
        .get("usage")
        .filter(|u| !u.is_null())
        .ok_or_else(|| bad("`usage` missing"))?;
    Ok(ModelResponse {
        message: Message {
            role: Role::Assistant,
            content,
            tool_calls,
            tool_call_id: None,
        },
        usage: usage_from_json(usage)?,
        finish_reason,
    })
}

/// A finish reason from its wire name; `stop`, `content_filter`, vendor values or null
/// with tool calls present still mean tools.
fn finish_from_str(reason: Option<&str>, has_tool_calls: bool) -> FinishReason {
    match reason {
        Some("length") => FinishReason::Length,
        Some("tool_calls") | Some("function_call") => FinishReason::ToolCalls,
        _ if has_tool_calls => FinishReason::ToolCalls,
        _ => FinishReason::Stop,
    }
}

fn usage_to_json(u: Usage) -> Value {
    json!({
        "prompt_tokens": u.input_tokens,
        "completion_tokens": u.output_tokens,
        "total_tokens": u.input_tokens + u.output_tokens,
    })
}

fn usage_from_json(usage: &Value) -> Result<Usage, WireError> {
    let tokens = |k: &str| {
        usage
            .get(k)
            .and_then(Value::as_u64)
            .ok_or_else(|| bad(format!("`usage.{k}` must be a non-negative integer")))
    };
    Ok(Usage {
        input_tokens: tokens("prompt_tokens")?,
        output_tokens: tokens("completion_tokens")?,
    })
}

// ---------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------

/// An error as an HTTP answer: status, extra headers and JSON body.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpError {
    /// HTTP status.
    pub status: u16,
    /// Extra headers (`retry-after`, `retry-after-ms` on a 429).
    pub headers: Vec<(String, String)>,
    /// `{"error": {...}}` in OpenAI's shape.
    pub body: Value,
}

/// `err` as OpenAI would answer it (a context overflow is a 400 with
/// `code: context_length_exceeded`, a rate limit a 429 with `Retry-After`, …), with the
/// typed error under `error.ctxbench` so [`error_from_http`] reads it back exactly.
pub fn error_to_http(err: &ProviderError) -> HttpError {
    let (status, kind, code, param, message) = match err {
        ProviderError::ContextOverflow { message, .. } => (
            400,
            "invalid_request_error",
            Some("context_length_exceeded"),
            Some("messages"),
            message.clone(),
        ),
        ProviderError::RateLimited { message, .. } => (
            429,
            "requests",
            Some("rate_limit_exceeded"),
            None,
            message.clone(),
        ),
        ProviderError::Server { status, message } => (
            if (500..=599).contains(status) {
                *status
            } else {
                502
            },
            "server_error",
            None,
            None,
            message.clone(),
        ),
        ProviderError::Unavailable { message } => {
            (503, "server_error", None, None, message.clone())
        }
        ProviderError::Timeout { after_ms } => (
            504,
            "timeout",
            Some("timeout"),
            None,
            format!("upstream timed out after {after_ms} ms"),
        ),
        ProviderError::Malformed { message } => (502, "server_error", None, None, message.clone()),
        ProviderError::Rejected { status, message } => (
            if (400..=499).contains(status) {
                *status
            } else {
                400
            },
            "invalid_request_error",
            None,
            None,
            message.clone(),
        ),
    };
    let headers = crate::transport::retry_after_headers(err);
    let typed = serde_json::to_value(err).unwrap_or(Value::Null);
    HttpError {
        status,
        headers,
        body: json!({
            "error": {
                "message": message,
                "type": kind,
                "param": param,
                "code": code,
                "ctxbench": typed,
            }
        }),
    }
}

/// Classify an error answer from any OpenAI-compatible server.
///
/// `retry_after_ms` is the already-parsed `Retry-After` (see
/// [`crate::transport::parse_retry_after_ms`]). A typed `error.ctxbench` member (ctxbench's
/// fake) wins; otherwise: a 4xx that says the context overflowed (OpenAI's
/// `context_length_exceeded` code, llama.cpp's `exceed_context_size_error` type with
/// `n_prompt_tokens`/`n_ctx`, or a known message wording) is
/// [`ProviderError::ContextOverflow`] with the numbers it states; 429 is
/// [`ProviderError::RateLimited`] (except `insufficient_quota`, which no retry fixes: it is
/// rejected); 408 is a timeout; 5xx is [`ProviderError::Server`]; any other status is
/// [`ProviderError::Rejected`].
pub fn error_from_http(status: u16, retry_after_ms: Option<u64>, body: &[u8]) -> ProviderError {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let error = parsed.as_ref().and_then(|v| v.get("error"));
    if let Some(typed) = error
        .and_then(|e| e.get("ctxbench"))
        .and_then(|t| serde_json::from_value::<ProviderError>(t.clone()).ok())
    {
        return typed;
    }
    let field = |k: &str| error.and_then(|e| e.get(k)).and_then(Value::as_str);
    let message = field("message")
        .or_else(|| error.and_then(Value::as_str))
        .or_else(|| parsed.as_ref()?.get("message")?.as_str())
        .map(str::to_string)
        .unwrap_or_else(|| crate::transport::excerpt(body, 500));
    let code = field("code").unwrap_or_default();
    let kind = field("type").unwrap_or_default();

    let overflow = code == "context_length_exceeded"
        || kind == "exceed_context_size_error"
        || looks_like_overflow(&message);
    if (400..=499).contains(&status) && status != 429 && overflow {
        let mut n = parse_overflow_numbers(&message);
        let num = |k: &str| error.and_then(|e| e.get(k)).and_then(Value::as_u64);
        n.input_tokens = num("n_prompt_tokens").or(n.input_tokens);
        n.limit = num("n_ctx").or(n.limit);
        return ProviderError::ContextOverflow {
            limit: n.limit,
            requested: n.requested,
            input_tokens: n.input_tokens,
            message,
            partial_output: None,
        };
    }
    match status {
        429 if code == "insufficient_quota" => ProviderError::Rejected { status, message },
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
// Streaming (server-sent events)
// ---------------------------------------------------------------------------------------

/// How many `arguments` fragments a streamed tool call is cut into: real APIs send the JSON
/// text in pieces, and a client must concatenate them before parsing.
pub(crate) const ARGUMENT_FRAGMENTS: usize = 3;

/// Why a server-sent event stream could not be read back as a response.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SseError {
    /// Not the expected stream: cut off before its end marker, an event that is not JSON,
    /// no usage.
    #[error(transparent)]
    Malformed(#[from] WireError),
    /// The stream carried an error event — once output has been sent, the only way a
    /// streaming server can still fail. A context overflow's `partial_output` is the text
    /// streamed before it, unless the error carried its own.
    #[error("the stream failed: {0}")]
    Failed(ProviderError),
}

impl SseError {
    /// As a provider error, the way a client reports it: a malformed stream is
    /// [`ProviderError::Malformed`].
    pub fn into_provider_error(self) -> ProviderError {
        match self {
            SseError::Malformed(e) => ProviderError::Malformed {
                message: format!("unexpected event stream: {e}"),
            },
            SseError::Failed(e) => e,
        }
    }
}

/// One server-sent event: its `event:` name, if any, and its `data:` lines joined by `\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SseEvent {
    pub(crate) event: Option<String>,
    pub(crate) data: String,
}

/// The complete events of an event stream (the WHATWG `text/event-stream` rules that matter
/// here: `\n` or `\r\n` line ends, `:` comments, one optional space after the colon, a
/// blank line dispatches). An event not terminated by a blank line is dropped, as the spec
/// says — that is what a client sees of a stream cut mid-event.
pub(crate) fn sse_events(text: &str) -> Vec<SseEvent> {
    let mut out = Vec::new();
    let mut event: Option<String> = None;
    let mut data: Option<String> = None;
    for line in text.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() {
            match data.take() {
                Some(data) => out.push(SseEvent {
                    event: event.take(),
                    data,
                }),
                None => event = None,
            }
            continue;
        }
        if line.starts_with(':') {
            continue;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "event" => event = Some(value.to_string()),
            "data" => match &mut data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => data = Some(value.to_string()),
            },
            _ => {}
        }
    }
    out
}

/// `value` as one `data:` event (compact JSON never contains a raw newline).
pub(crate) fn sse_data(value: &Value) -> String {
    format!("data: {value}\n\n")
}

/// `text` as streamed deltas: each maximal run of non-whitespace with the whitespace that
/// follows it (leading whitespace is a piece of its own), so the pieces concatenate to
/// `text` exactly. Word-sized like a real model's deltas, and deterministic, so a replayed
/// answer streams byte for byte the same.
pub(crate) fn text_pieces(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut in_space = false;
    for (i, c) in text.char_indices() {
        let space = c.is_whitespace();
        if !space && in_space {
            out.push(&text[start..i]);
            start = i;
        }
        in_space = space;
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

/// `text` cut at character boundaries into at most `pieces` non-empty parts of about equal
/// length (none for empty text).
pub(crate) fn fragments(text: &str, pieces: usize) -> Vec<&str> {
    let starts: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
    let n = starts.len();
    if n == 0 {
        return Vec::new();
    }
    let pieces = pieces.clamp(1, n);
    let mut out = Vec::with_capacity(pieces);
    let mut from = 0;
    for k in 1..=pieces {
        let to = if k == pieces {
            text.len()
        } else {
            starts[k * n / pieces]
        };
        out.push(&text[from..to]);
        from = to;
    }
    out
}

/// Builds `chat.completion.chunk` events.
struct Chunks<'a> {
    model: &'a str,
    id: &'a str,
    include_usage: bool,
}

impl Chunks<'_> {
    fn chunk(&self, choices: Value, usage: Value) -> String {
        let mut o = Map::new();
        o.insert("id".into(), json!(self.id));
        o.insert("object".into(), json!("chat.completion.chunk"));
        o.insert("created".into(), json!(0));
        o.insert("model".into(), json!(self.model));
        o.insert("choices".into(), choices);
        // With `include_usage`, OpenAI sends `usage: null` on every chunk but the last.
        if self.include_usage {
            o.insert("usage".into(), usage);
        }
        sse_data(&Value::Object(o))
    }

    fn delta(&self, delta: Value, finish_reason: Value) -> String {
        self.chunk(
            json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason}]),
            Value::Null,
        )
    }

    /// The role chunk, then the text as word deltas.
    fn opening(&self, text: &str, tool_calls_only: bool) -> Vec<String> {
        let first = if tool_calls_only {
            json!({"role": "assistant", "content": null})
        } else {
            json!({"role": "assistant", "content": ""})
        };
        let mut events = vec![self.delta(first, Value::Null)];
        events.extend(
            text_pieces(text)
                .into_iter()
                .map(|p| self.delta(json!({"content": p}), Value::Null)),
        );
        events
    }
}

/// The end-of-stream marker.
const DONE: &str = "data: [DONE]\n\n";

/// `response` streamed as OpenAI streams a chat completion: one `data:` event per
/// `chat.completion.chunk` — the role (`delta.role: "assistant"`), the text as word deltas,
/// each tool call as a fragment with `index`, `id`, `type` and `function.name` followed by
/// `function.arguments` fragments, a chunk with `finish_reason` — then, when
/// `include_usage` (the request's `stream_options.include_usage`), a chunk with
/// `choices: []` and the usage, then `data: [DONE]`. Each string is one complete event.
/// [`response_from_sse`] reads it back to `response`.
pub fn response_to_sse_events(
    response: &ModelResponse,
    model: &str,
    id: &str,
    include_usage: bool,
) -> Vec<String> {
    let c = Chunks {
        model,
        id,
        include_usage,
    };
    let m = &response.message;
    let mut events = c.opening(&m.content, m.content.is_empty() && !m.tool_calls.is_empty());
    for (k, call) in m.tool_calls.iter().enumerate() {
        events.push(c.delta(
            json!({"tool_calls": [{
                "index": k, "id": call.id, "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }]}),
            Value::Null,
        ));
        let arguments = call.arguments.to_string();
        for f in fragments(&arguments, ARGUMENT_FRAGMENTS) {
            events.push(c.delta(
                json!({"tool_calls": [{"index": k, "function": {"arguments": f}}]}),
                Value::Null,
            ));
        }
    }
    events.push(c.delta(json!({}), json!(finish_to_str(response.finish_reason))));
    if include_usage {
        events.push(c.chunk(json!([]), usage_to_json(response.usage)));
    }
    events.push(DONE.to_string());
    events
}

/// An answer that fails after output, streamed as OpenAI does: the role chunk, the partial
/// output (a context overflow's `partial_output`) as word deltas, then one `data:` event
/// with the error body of [`error_to_http`], and no `[DONE]`. For an error without partial
/// output a server answers with a plain HTTP error instead, as OpenAI does.
pub fn failure_to_sse_events(
    err: &ProviderError,
    model: &str,
    id: &str,
    include_usage: bool,
) -> Vec<String> {
    let c = Chunks {
        model,
        id,
        include_usage,
    };
    let partial = match err {
        ProviderError::ContextOverflow {
            partial_output: Some(p),
            ..
        } => p.as_str(),
        _ => "",
    };
    let mut events = c.opening(partial, false);
    events.push(sse_data(&error_to_http(err).body));
    events
}

/// The string at `v`, or empty.
fn text_of(v: Option<&Value>) -> &str {
    v.and_then(Value::as_str).unwrap_or_default()
}

/// A tool call being reassembled from stream fragments.
#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// The HTTP status an in-stream error would have had, for [`error_from_http`]'s
/// classification (the stream itself was a 200).
fn stream_error_status(error: &Value) -> u16 {
    let field = |k: &str| error.get(k).and_then(Value::as_str).unwrap_or_default();
    match (field("type"), field("code")) {
        (_, "rate_limit_exceeded") | ("requests" | "tokens", _) => 429,
        ("server_error", _) => 500,
        _ => 400,
    }
}

/// Read a chat-completions event stream back into the response it streams: content deltas
/// concatenated, tool calls reassembled by `index` (arguments parsed once complete), the
/// last `finish_reason`, and the usage chunk. Like [`response_from_json`], a stream without
/// usage (no `stream_options.include_usage`) is malformed; so is one cut before
/// `data: [DONE]`. An error event is [`SseError::Failed`].
pub fn response_from_sse(text: &str) -> Result<ModelResponse, SseError> {
    let mut content = String::new();
    let mut calls: std::collections::BTreeMap<u64, PartialCall> = Default::default();
    let mut finish: Option<String> = None;
    let mut usage: Option<Usage> = None;
    let mut done = false;
    for (i, ev) in sse_events(text).iter().enumerate() {
        if ev.data == "[DONE]" {
            done = true;
            break;
        }
        let v: Value = serde_json::from_str(&ev.data)
            .map_err(|e| bad(format!("event {i}: data is not JSON: {e}")))?;
        if let Some(error) = v.get("error").filter(|e| !e.is_null()) {
            let body = serde_json::to_vec(&v).unwrap_or_default();
            let mut err = error_from_http(stream_error_status(error), None, &body);
            if let ProviderError::ContextOverflow { partial_output, .. } = &mut err {
                if partial_output.is_none() && !content.is_empty() {
                    *partial_output = Some(content);
                }
            }
            return Err(SseError::Failed(err));
        }
        if let Some(u) = v.get("usage").filter(|u| !u.is_null()) {
            usage = Some(usage_from_json(u).map_err(|e| bad(format!("event {i}: {e}")))?);
        }
        let Some(choice) = v
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            continue;
        };
        let delta = choice.get("delta").unwrap_or(&Value::Null);
        match delta.get("content") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => content.push_str(s),
            Some(_) => {
                return Err(bad(format!("event {i}: `delta.content` must be a string")).into())
            }
        }
        for tc in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            let index = tc
                .get("index")
                .and_then(Value::as_u64)
                .ok_or_else(|| bad(format!("event {i}: a tool-call delta without `index`")))?;
            let call = calls.entry(index).or_default();
            call.id.push_str(text_of(tc.get("id")));
            let function = tc.get("function");
            call.name
                .push_str(text_of(function.and_then(|f| f.get("name"))));
            call.arguments
                .push_str(text_of(function.and_then(|f| f.get("arguments"))));
        }
        if let Some(f) = choice.get("finish_reason").and_then(Value::as_str) {
            finish = Some(f.to_string());
        }
    }
    if !done {
        return Err(bad("the stream ended before `data: [DONE]`").into());
    }
    let usage = usage.ok_or_else(|| {
        bad("`usage` missing (the request must set `stream_options.include_usage`)")
    })?;
    let tool_calls: Vec<ToolCall> = calls
        .into_values()
        .map(|c| ToolCall {
            id: c.id,
            name: c.name,
            arguments: if c.arguments.is_empty() {
                Value::Object(Map::new())
            } else {
                arguments_from_text(&c.arguments)
            },
        })
        .collect();
    Ok(ModelResponse {
        finish_reason: finish_from_str(finish.as_deref(), !tool_calls.is_empty()),
        message: Message {
            role: Role::Assistant,
            content,
            tool_calls,
            tool_call_id: None,
        },
        usage,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varied_requests() -> Vec<ModelRequest> {
        let tools = vec![
            ToolDefinition {
                name: "read_file".into(),
                description: "Read a file from the workspace.".into(),
                parameters: json!({
                    "type": "object",
                    "properties": {"path": {"type": "string"}, "max_bytes": {"type": "integer"}},
                    "required": ["path"],
                }),
            },
            ToolDefinition {
                name: "noop".into(),
                description: String::new(),
                parameters: json!({}),
            },
        ];
        let call = |id: &str, name: &str, args: Value| ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: args,
        };
        vec![
            ModelRequest {
                model: "gpt-4o".into(),
                messages: vec![Message::user("Hi")],
                tools: vec![],
                max_output_tokens: 0,
            },
            ModelRequest {
                model: "fake-16k".into(),
                messages: vec![
                    Message::system("You are terse."),
                    Message::system(
                        "<conversation-memory trust=\"untrusted\">\nold\n</conversation-memory>",
                    ),
                    Message::user(
                        "Fix the build — vite ✓, 日本語, emoji 🚀, \"quotes\", \\ and \n newlines.",
                    ),
                    Message {
                        role: Role::Assistant,
                        content: String::new(),
                        tool_calls: vec![
                            call(
                                "call_0_0_0",
                                "read_file",
                                json!({"path": "Cargo.toml", "max_bytes": 4096}),
                            ),
                            call(
                                "call_0_0_1",
                                "run",
                                json!({"cmd": ["cargo", "build"], "env": {"RUST_LOG": null}, "ratio": 0.1, "big": 1.0e300, "neg": -3}),
                            ),
                        ],
                        tool_call_id: None,
                    },
                    Message::tool_result("call_0_0_0", "[package]\nname = \"x\""),
                    Message::tool_result("call_0_0_1", ""),
                    Message {
                        role: Role::Assistant,
                        content: "Reading more.".into(),
                        tool_calls: vec![call("c2", "noop", json!({}))],
                        tool_call_id: None,
                    },
                    Message::tool_result("c2", "ok"),
                    Message::assistant(""),
                    Message::assistant("Fixed."),
                    Message::user("Thanks"),
                ],
                tools: tools.clone(),
                max_output_tokens: 4096,
            },
            ModelRequest {
                model: "deepseek-chat".into(),
                messages: vec![
                    Message {
                        role: Role::Assistant,
                        content: String::new(),
                        tool_calls: vec![call("x", "s", json!("a bare string argument"))],
                        tool_call_id: None,
                    },
                    Message::tool_result("x", "{\"json\": \"in a result\"}"),
                ],
                tools,
                max_output_tokens: u32::MAX,
            },
        ]
    }

    #[test]
    fn requests_round_trip_exactly() {
        for req in varied_requests() {
            for field in [
                MaxTokensField::MaxTokens,
                MaxTokensField::MaxCompletionTokens,
            ] {
                let v = request_to_json_with(&req, field);
                // Through text too, as over HTTP.
                let text = serde_json::to_string(&v).unwrap();
                let back = request_from_json(&serde_json::from_str(&text).unwrap()).unwrap();
                assert_eq!(back, req);
            }
        }
    }

    #[test]
    fn request_wire_shape() {
        let req = &varied_requests()[1];
        let v = request_to_json(req);
        assert_eq!(v["max_tokens"], 4096);
        assert!(v.get("max_completion_tokens").is_none());
        assert_eq!(v["tools"][0]["type"], "function");
        assert_eq!(v["tools"][0]["function"]["name"], "read_file");
        let asst = &v["messages"][3];
        assert_eq!(asst["role"], "assistant");
        assert!(asst["content"].is_null());
        assert_eq!(asst["tool_calls"][0]["type"], "function");
        assert!(asst["tool_calls"][0]["function"]["arguments"].is_string());
        assert_eq!(v["messages"][4]["tool_call_id"], "call_0_0_0");
        assert_eq!(v["messages"][4]["role"], "tool");
        let v = request_to_json_with(req, MaxTokensField::MaxCompletionTokens);
        assert_eq!(v["max_completion_tokens"], 4096);
        assert!(v.get("max_tokens").is_none());
        // No tools: no `tools` key at all.
        assert!(request_to_json(&varied_requests()[0])
            .get("tools")
            .is_none());
    }

    #[test]
    fn foreign_request_variants_are_read() {
        let v = json!({
            "model": "m",
            "messages": [
                {"role": "developer", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                {"role": "assistant", "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": {"k": 1}}}]},
                {"role": "tool", "tool_call_id": "1", "content": "r"},
            ],
            "max_completion_tokens": 7,
            "stream": false,
            "temperature": 0,
        });
        let r = request_from_json(&v).unwrap();
        assert_eq!(r.messages[0].role, Role::System);
        assert_eq!(r.messages[0].content, "ab");
        assert_eq!(r.messages[1].tool_calls[0].arguments, json!({"k": 1}));
        assert_eq!(r.max_output_tokens, 7);
        assert!(
            request_from_json(&json!({"model": "m", "messages": [{"role": "robot"}]}))
                .unwrap_err()
                .message
                .contains("messages[0]")
        );
        assert!(request_from_json(&json!({"messages": []})).is_err());
    }

    fn varied_responses() -> Vec<ModelResponse> {
        vec![
            ModelResponse {
                message: Message::assistant("Fixed the flag. ✓ 🚀"),
                usage: Usage {
                    input_tokens: 1234,
                    output_tokens: 7,
                },
                finish_reason: FinishReason::Stop,
            },
            ModelResponse {
                message: Message {
                    role: Role::Assistant,
                    content: String::new(),
                    tool_calls: vec![ToolCall {
                        id: "call_1_0_0".into(),
                        name: "run".into(),
                        arguments: json!({"cmd": "ls", "n": 2.5}),
                    }],
                    tool_call_id: None,
                },
                usage: Usage {
                    input_tokens: 99,
                    output_tokens: 12,
                },
                finish_reason: FinishReason::ToolCalls,
            },
            ModelResponse {
                message: Message::assistant("cut"),
                usage: Usage::default(),
                finish_reason: FinishReason::Length,
            },
            ModelResponse {
                message: Message {
                    role: Role::Assistant,
                    content: "  Reading both —\n\tthen 日本語 🚀 ".into(),
                    tool_calls: vec![
                        ToolCall {
                            id: "call_a".into(),
                            name: "read_file".into(),
                            arguments: json!({"path": "ä/b.rs", "big": 1.0e300, "list": [1, null]}),
                        },
                        ToolCall {
                            id: "call_b".into(),
                            name: "noop".into(),
                            arguments: json!({}),
                        },
                        ToolCall {
                            id: "call_c".into(),
                            name: "s".into(),
                            arguments: json!("a bare string argument"),
                        },
                    ],
                    tool_call_id: None,
                },
                usage: Usage {
                    input_tokens: 5,
                    output_tokens: 40,
                },
                finish_reason: FinishReason::ToolCalls,
            },
            ModelResponse {
                message: Message::assistant(""),
                usage: Usage {
                    input_tokens: 3,
                    output_tokens: 0,
                },
                finish_reason: FinishReason::Stop,
            },
        ]
    }

    #[test]
    fn responses_round_trip_exactly() {
        for r in varied_responses() {
            let text =
                serde_json::to_string(&response_to_json(&r, "fake-16k", "chatcmpl-1")).unwrap();
            let back = response_from_json(&serde_json::from_str(&text).unwrap()).unwrap();
            assert_eq!(back, r);
        }
    }

    #[test]
    fn real_response_shapes() {
        let v = json!({
            "id": "chatcmpl-abc", "object": "chat.completion", "created": 1, "model": "gpt-4o",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi", "refusal": null},
                         "logprobs": null, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12,
                      "prompt_tokens_details": {"cached_tokens": 0}},
            "system_fingerprint": "fp"
        });
        let r = response_from_json(&v).unwrap();
        assert_eq!(r.message.content, "Hi");
        assert_eq!(
            r.usage,
            Usage {
                input_tokens: 10,
                output_tokens: 2
            }
        );
        let mut no_usage = v.clone();
        no_usage.as_object_mut().unwrap().remove("usage");
        assert!(response_from_json(&no_usage)
            .unwrap_err()
            .message
            .contains("usage"));
        assert!(response_from_json(&json!({"choices": []})).is_err());
    }

    #[test]
    fn streamed_responses_reassemble_to_the_unstreamed_ones() {
        for r in varied_responses() {
            let events = response_to_sse_events(&r, "fake-16k", "chatcmpl-1", true);
            let text = events.concat();
            assert_eq!(response_from_sse(&text).unwrap(), r);
            // The same as what the non-streamed body reads back to.
            let unstreamed = response_from_json(&response_to_json(&r, "m", "i")).unwrap();
            assert_eq!(response_from_sse(&text).unwrap(), unstreamed);
            // CRLF line ends are read the same.
            assert_eq!(response_from_sse(&text.replace('\n', "\r\n")).unwrap(), r);
            // Deterministic.
            assert_eq!(
                response_to_sse_events(&r, "fake-16k", "chatcmpl-1", true),
                events
            );
        }
    }

    #[test]
    fn stream_wire_shape() {
        let r = &varied_responses()[3];
        let events = response_to_sse_events(r, "fake-16k", "chatcmpl-7", true);
        assert!(events
            .iter()
            .all(|e| e.starts_with("data: ") && e.ends_with("\n\n")));
        assert_eq!(events.last().map(String::as_str), Some("data: [DONE]\n\n"));
        let chunks: Vec<Value> = events[..events.len() - 1]
            .iter()
            .map(|e| serde_json::from_str(e.trim_start_matches("data: ").trim()).unwrap())
            .collect();
        for c in &chunks {
            assert_eq!(c["object"], "chat.completion.chunk");
            assert_eq!(c["id"], "chatcmpl-7");
            assert_eq!(c["model"], "fake-16k");
        }
        assert_eq!(
            chunks[0]["choices"][0]["delta"],
            json!({"role": "assistant", "content": ""})
        );
        let text_deltas: Vec<&str> = chunks
            .iter()
            .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
            .filter(|t| !t.is_empty())
            .collect();
        assert!(text_deltas.len() > 3, "{text_deltas:?}");
        assert_eq!(text_deltas.concat(), r.message.content);
        let calls: Vec<&Value> = chunks
            .iter()
            .filter_map(|c| c["choices"][0]["delta"]["tool_calls"].get(0))
            .collect();
        // First fragment of each call: index, id, type, name; then argument fragments only.
        assert_eq!(
            calls[0],
            &json!({"index": 0, "id": "call_a", "type": "function", "function": {"name": "read_file", "arguments": ""}})
        );
        assert_eq!(calls[1]["index"], 0);
        assert!(calls[1].get("id").is_none());
        assert!(calls[1]["function"].get("name").is_none());
        let args_a: String = calls
            .iter()
            .filter(|c| c["index"] == 0)
            .filter_map(|c| c["function"]["arguments"].as_str())
            .collect();
        assert_eq!(
            serde_json::from_str::<Value>(&args_a).unwrap(),
            r.message.tool_calls[0].arguments
        );
        assert_eq!(
            calls.iter().filter(|c| c["index"] == 0).count(),
            1 + ARGUMENT_FRAGMENTS
        );
        let finish = &chunks[chunks.len() - 2];
        assert_eq!(finish["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(finish["choices"][0]["delta"], json!({}));
        assert!(finish["usage"].is_null());
        let usage = &chunks[chunks.len() - 1];
        assert_eq!(usage["choices"], json!([]));
        assert_eq!(
            usage["usage"],
            json!({"prompt_tokens": 5, "completion_tokens": 40, "total_tokens": 45})
        );
        // A tool-call-only answer opens with `content: null`.
        let tool_only = &varied_responses()[1];
        let first = &response_to_sse_events(tool_only, "m", "i", false)[0];
        assert!(first.contains(r#""content":null"#), "{first}");

        // Without include_usage: no usage anywhere, and the stream cannot be read back.
        let events = response_to_sse_events(r, "fake-16k", "chatcmpl-7", false);
        assert!(events.iter().all(|e| !e.contains("usage")));
        match response_from_sse(&events.concat()) {
            Err(SseError::Malformed(e)) => assert!(e.message.contains("include_usage"), "{e}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_cut_stream_is_malformed() {
        let r = &varied_responses()[3];
        let events = response_to_sse_events(r, "m", "i", true);
        for cut in [0, 1, events.len() / 2, events.len() - 1] {
            let mut text = events[..cut].concat();
            // And half of the next event, as a connection cut mid-write leaves it.
            let next = &events[cut];
            text.push_str(&next[..next.len() / 2]);
            match response_from_sse(&text) {
                Err(SseError::Malformed(e)) => assert!(e.message.contains("[DONE]"), "{e}"),
                other => panic!("cut at {cut}: {other:?}"),
            }
        }
        let bad_json = "data: <html>502</html>\n\n";
        assert!(matches!(
            response_from_sse(bad_json),
            Err(SseError::Malformed(_))
        ));
        assert_eq!(
            SseError::Malformed(bad("x")).into_provider_error().kind(),
            "malformed"
        );
    }

    #[test]
    fn a_failure_after_output_streams_the_partial_text_then_the_error() {
        let err = ProviderError::ContextOverflow {
            limit: Some(16_384),
            requested: Some(17_000),
            input_tokens: Some(12_904),
            message: "This model's maximum context length is 16384 tokens. However, you requested 17000 tokens (12904 in the messages, 4096 in the completion).".into(),
            partial_output: Some("I started to fix it.".into()),
        };
        let events = failure_to_sse_events(&err, "m", "i", true);
        assert!(!events.concat().contains("[DONE]"));
        match response_from_sse(&events.concat()) {
            Err(SseError::Failed(back)) => assert_eq!(back, err),
            other => panic!("{other:?}"),
        }
        // A foreign server's error event (no typed member): classified, and the streamed
        // text becomes the partial output.
        let mut last: Value =
            serde_json::from_str(events.last().unwrap().trim_start_matches("data: ")).unwrap();
        last["error"].as_object_mut().unwrap().remove("ctxbench");
        let mut foreign = events[..events.len() - 1].concat();
        foreign.push_str(&sse_data(&last));
        match response_from_sse(&foreign) {
            Err(SseError::Failed(back)) => assert_eq!(back, err),
            other => panic!("{other:?}"),
        }
        let server = sse_data(&json!({"error": {"message": "boom", "type": "server_error"}}));
        assert!(matches!(
            response_from_sse(&server),
            Err(SseError::Failed(ProviderError::Server { status: 500, .. }))
        ));
    }

    #[test]
    fn event_stream_parsing_rules() {
        let text = ": keep-alive\nevent: a\ndata: 1\ndata:2\n\nid: 9\ndata: x\r\n\r\n\nevent: lonely\n\ndata: unterminated";
        assert_eq!(
            sse_events(text),
            vec![
                SseEvent {
                    event: Some("a".into()),
                    data: "1\n2".into()
                },
                SseEvent {
                    event: None,
                    data: "x".into()
                },
            ]
        );
    }

    #[test]
    fn text_pieces_and_fragments_concatenate_back() {
        for text in [
            "",
            " ",
            "one",
            "two words",
            "  lead and trail  ",
            "a\n\nb\tc — 日本語 🚀",
        ] {
            let pieces = text_pieces(text);
            assert_eq!(pieces.concat(), text);
            assert!(pieces.iter().all(|p| !p.is_empty()));
            for n in [1, 2, 3, 50] {
                let f = fragments(text, n);
                assert_eq!(f.concat(), text);
                assert!(f.len() <= n && f.iter().all(|p| !p.is_empty()));
            }
        }
        assert_eq!(text_pieces("a b  c"), vec!["a ", "b  ", "c"]);
        assert_eq!(fragments("abcdef", 3), vec!["ab", "cd", "ef"]);
    }

    fn all_errors() -> Vec<ProviderError> {
        vec![
            ProviderError::ContextOverflow {
                limit: Some(16_384),
                requested: Some(17_000),
                input_tokens: Some(12_904),
                message: "This model's maximum context length is 16384 tokens. However, you requested 17000 tokens (12904 in the messages, 4096 in the completion).".into(),
                partial_output: None,
            },
            ProviderError::ContextOverflow {
                limit: Some(1),
                requested: None,
                input_tokens: None,
                message: "overflow ✓".into(),
                partial_output: Some("I started to".into()),
            },
            ProviderError::RateLimited { retry_after_ms: Some(1500), message: "slow".into() },
            ProviderError::RateLimited { retry_after_ms: None, message: "slow".into() },
            ProviderError::Server { status: 503, message: "down".into() },
            ProviderError::Server { status: 0, message: "reset".into() },
            ProviderError::Timeout { after_ms: 30_000 },
            ProviderError::Malformed { message: "cut".into() },
            ProviderError::Unavailable { message: "refused".into() },
            ProviderError::Rejected { status: 401, message: "auth".into() },
        ]
    }

    #[test]
    fn errors_round_trip_exactly() {
        for e in all_errors() {
            let http = error_to_http(&e);
            let body = serde_json::to_vec(&http.body).unwrap();
            let back = error_from_http(http.status, None, &body);
            assert_eq!(back, e);
            assert!(http.body["error"]["message"].as_str().is_some());
        }
    }

    #[test]
    fn fake_overflow_reads_the_same_without_the_typed_member() {
        let e = &all_errors()[0];
        let mut http = error_to_http(e);
        assert_eq!(http.status, 400);
        assert_eq!(http.body["error"]["code"], "context_length_exceeded");
        assert_eq!(http.body["error"]["type"], "invalid_request_error");
        assert_eq!(http.body["error"]["param"], "messages");
        http.body["error"]
            .as_object_mut()
            .unwrap()
            .remove("ctxbench");
        let back = error_from_http(400, None, &serde_json::to_vec(&http.body).unwrap());
        assert_eq!(&back, e);
        let rl = error_to_http(&all_errors()[2]);
        assert_eq!(rl.status, 429);
        assert!(rl.headers.contains(&("retry-after".into(), "2".into())));
        assert!(rl
            .headers
            .contains(&("retry-after-ms".into(), "1500".into())));
    }

    #[test]
    fn foreign_errors_are_classified() {
        let llama = json!({"error": {"code": 400, "message": "request (8300 tokens) exceeds the available context size (8192 tokens), try increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": 8300, "n_ctx": 8192}});
        match error_from_http(400, None, &serde_json::to_vec(&llama).unwrap()) {
            ProviderError::ContextOverflow {
                limit,
                input_tokens,
                requested,
                partial_output,
                ..
            } => {
                assert_eq!(
                    (limit, input_tokens, requested),
                    (Some(8192), Some(8300), None)
                );
                assert_eq!(partial_output, None);
            }
            other => panic!("{other:?}"),
        }
        let openai_new = json!({"error": {"message": "Your input exceeds the context window of this model. Please adjust your input and try again.", "type": "invalid_request_error", "param": "input", "code": "context_length_exceeded"}});
        assert!(matches!(
            error_from_http(400, None, &serde_json::to_vec(&openai_new).unwrap()),
            ProviderError::ContextOverflow { limit: None, .. }
        ));
        let rl = json!({"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}});
        assert_eq!(
            error_from_http(429, Some(20), &serde_json::to_vec(&rl).unwrap()),
            ProviderError::RateLimited {
                retry_after_ms: Some(20),
                message: "Rate limit reached".into()
            }
        );
        let quota = json!({"error": {"message": "You exceeded your current quota", "type": "insufficient_quota", "code": "insufficient_quota"}});
        assert!(matches!(
            error_from_http(429, None, &serde_json::to_vec(&quota).unwrap()),
            ProviderError::Rejected { status: 429, .. }
        ));
        assert_eq!(
            error_from_http(502, None, b"<html>Bad Gateway</html>"),
            ProviderError::Server {
                status: 502,
                message: "<html>Bad Gateway</html>".into()
            }
        );
        assert_eq!(
            error_from_http(404, None, br#"{"error":"model 'x' not found"}"#),
            ProviderError::Rejected {
                status: 404,
                message: "model 'x' not found".into()
            }
        );
        // A 5xx that mentions context is still a server error (only a 4xx is an overflow).
        assert!(matches!(
            error_from_http(
                500,
                None,
                br#"{"error":{"message":"maximum context length exceeded in worker"}}"#
            ),
            ProviderError::Server { .. }
        ));
    }
}
