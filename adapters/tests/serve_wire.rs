//! The server's wires end to end over loopback: streaming on the OpenAI route, the
//! Anthropic Messages routes (plain, streamed, `count_tokens`, errors and faults in
//! Anthropic's shapes), any provider as a backend, and failed requests reported to the
//! observer.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use ctxbench_adapters::anthropic::wire as anthropic_wire;
use ctxbench_adapters::anthropic::{AnthropicConfig, AnthropicProvider};
use ctxbench_adapters::fake::{FakeFault, FakeProvider, FakeScript};
use ctxbench_adapters::openai::wire::{self as openai_wire, SseError};
use ctxbench_adapters::openai::{OpenAiConfig, OpenAiProvider};
use ctxbench_adapters::resilience::{AdaptiveLimiter, Resilient, RetryPolicy};
use ctxbench_adapters::serve::{
    Backend, Endpoint, ExchangeObserver, FakeServer, FakeServerConfig, FakeServerHandle,
    HttpFailure, HttpFailureKind, HttpFault, ScheduledFault, ScriptResolver, TRIAL_HEADER,
};
use ctxbench_adapters::transport::parse_retry_after_ms;
use ctxbench_adapters::{
    FinishReason, Message, ModelRequest, ModelResponse, Provider, ProviderError, Role, ToolCall,
    Usage,
};
use serde_json::{json, Value};

use common::conversation::{converse, script, tools};

fn first_request() -> ModelRequest {
    ModelRequest {
        model: "fake-16k".into(),
        messages: vec![
            Message::system("Be careful."),
            Message::user("Fix the build."),
        ],
        tools: tools(),
        max_output_tokens: 256,
    }
}

fn big_request() -> ModelRequest {
    let mut r = first_request();
    r.messages.push(Message::user("word ".repeat(20_000)));
    r
}

/// What the Anthropic wire makes of a request: a provider seeing `P` through it.
struct ThroughAnthropicWire<P>(P);

#[async_trait::async_trait]
impl<P: Provider> Provider for ThroughAnthropicWire<P> {
    fn name(&self) -> &str {
        "through-anthropic-wire"
    }
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        let seen = anthropic_wire::request_from_json(&anthropic_wire::request_to_json(request))
            .map_err(|e| ProviderError::Malformed { message: e.message })?;
        self.0.complete(&seen).await
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Wire {
    OpenAi,
    Anthropic,
}

/// A client that streams, as `llm` and Claude Code do by default: `stream: true` (with
/// `stream_options.include_usage` on the OpenAI wire), the event stream read back with the
/// wire's decoder. `base` is an OpenAI base URL (`…/v1`) or an Anthropic one (no `/v1`).
struct Streaming {
    wire: Wire,
    base: String,
    http: reqwest::Client,
}

impl Streaming {
    fn new(wire: Wire, base: String) -> Self {
        Streaming {
            wire,
            base,
            http: reqwest::Client::new(),
        }
    }
}

#[async_trait::async_trait]
impl Provider for Streaming {
    fn name(&self) -> &str {
        "streaming"
    }
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        let (url, mut body) = match self.wire {
            Wire::OpenAi => (
                format!("{}/chat/completions", self.base),
                openai_wire::request_to_json(request),
            ),
            Wire::Anthropic => (
                format!("{}/v1/messages", self.base),
                anthropic_wire::request_to_json(request),
            ),
        };
        body["stream"] = json!(true);
        if self.wire == Wire::OpenAi {
            body["stream_options"] = json!({"include_usage": true});
        }
        let resp = self.http.post(url).json(&body).send().await.map_err(|e| {
            ProviderError::Unavailable {
                message: e.to_string(),
            }
        })?;
        let status = resp.status().as_u16();
        let header = |k: &str| {
            resp.headers()
                .get(k)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let retry = parse_retry_after_ms(
            header("retry-after").as_deref(),
            header("retry-after-ms").as_deref(),
            SystemTime::now(),
        );
        let content_type = header("content-type").unwrap_or_default();
        let text = resp.text().await.map_err(|e| ProviderError::Malformed {
            message: e.to_string(),
        })?;
        if status != 200 {
            assert_eq!(content_type, "application/json", "errors are plain JSON");
            return Err(match self.wire {
                Wire::OpenAi => openai_wire::error_from_http(status, retry, text.as_bytes()),
                Wire::Anthropic => anthropic_wire::error_from_http(status, retry, text.as_bytes()),
            });
        }
        assert_eq!(content_type, "text/event-stream");
        match self.wire {
            Wire::OpenAi => openai_wire::response_from_sse(&text),
            Wire::Anthropic => anthropic_wire::response_from_sse(&text),
        }
        .map_err(SseError::into_provider_error)
    }
}

#[derive(Default)]
struct Resolver {
    faults: HashMap<String, Vec<ScheduledFault>>,
}

impl ScriptResolver for Resolver {
    fn resolve(&self, key: &str) -> Option<FakeScript> {
        (key != "nobody").then(script)
    }
    fn http_faults(&self, key: &str) -> Vec<ScheduledFault> {
        self.faults.get(key).cloned().unwrap_or_default()
    }
}

fn at(request: u64, fault: HttpFault) -> ScheduledFault {
    ScheduledFault { request, fault }
}

fn fault_resolver() -> Resolver {
    let mut faults = HashMap::new();
    for (key, fault) in [
        ("rate", HttpFault::RateLimit { retry_after_ms: 60 }),
        ("overloaded", HttpFault::ServerError { status: 529 }),
        ("server", HttpFault::ServerError { status: 500 }),
        ("hang", HttpFault::Hang { ms: 60_000 }),
        ("truncated", HttpFault::TruncatedBody),
        ("malformed", HttpFault::MalformedBody),
    ] {
        faults.insert(key.to_string(), vec![at(1, fault)]);
    }
    Resolver { faults }
}

async fn server(resolver: Resolver) -> FakeServerHandle {
    let (_, handle) = FakeServer::new(Arc::new(resolver), FakeServerConfig::default())
        .spawn()
        .await
        .unwrap();
    handle
}

fn anthropic(base: String, timeout: Duration) -> AnthropicProvider {
    AnthropicProvider::new(AnthropicConfig {
        base_url: base,
        api_key_env: None,
        timeout,
        ..AnthropicConfig::default()
    })
    .unwrap()
}

fn openai(base: String) -> OpenAiProvider {
    OpenAiProvider::new(OpenAiConfig {
        timeout: Duration::from_secs(20),
        ..OpenAiConfig::local("fake-http", base)
    })
    .unwrap()
}

/// POST `body` to `url`: status, `content-type`, headers we look at, body text.
async fn post(url: &str, body: &Value) -> (u16, String, HashMap<String, String>, String) {
    let resp = reqwest::Client::new()
        .post(url)
        .json(body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let headers: HashMap<String, String> = resp
        .headers()
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string()))
        .collect();
    let ct = headers.get("content-type").cloned().unwrap_or_default();
    (status, ct, headers, resp.text().await.unwrap())
}

fn streamed(mut body: Value, include_usage: bool) -> Value {
    body["stream"] = json!(true);
    if include_usage {
        body["stream_options"] = json!({"include_usage": true});
    }
    body
}

// ---------------------------------------------------------------------------------------
// OpenAI streaming
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "current_thread")]
async fn a_streamed_openai_conversation_equals_the_in_process_one() {
    let expected = converse(&FakeProvider::new(script())).await;
    // The partial-output overflow is in it: on a stream, partial text then an error event.
    assert!(expected.iter().any(|r| matches!(
        r,
        Err(ProviderError::ContextOverflow {
            partial_output: Some(_),
            ..
        })
    )));
    let handle = server(Resolver::default()).await;
    let streaming = Streaming::new(Wire::OpenAi, handle.trial_base_url("s"));
    assert_eq!(converse(&streaming).await, expected);
    assert_eq!(handle.provider_requests("s"), expected.len() as u64);
    assert_eq!(handle.requests("s"), expected.len() as u64);
    handle.shutdown().await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_streamed_answer_is_the_plain_answer_in_openai_chunks() {
    let handle = server(Resolver::default()).await;
    let body = openai_wire::request_to_json(&first_request());
    let url = |key: &str| format!("{}/chat/completions", handle.trial_base_url(key));

    let (status, ct, _, plain) = post(&url("plain"), &body).await;
    assert_eq!((status, ct.as_str()), (200, "application/json"));
    let plain = openai_wire::response_from_json(&serde_json::from_str(&plain).unwrap()).unwrap();
    assert!(!plain.message.tool_calls.is_empty());

    let (status, ct, headers, text) = post(&url("stream"), &streamed(body.clone(), true)).await;
    assert_eq!((status, ct.as_str()), (200, "text/event-stream"));
    assert!(!headers.contains_key("content-length"), "{headers:?}");
    assert_eq!(openai_wire::response_from_sse(&text).unwrap(), plain);
    assert!(text.ends_with("data: [DONE]\n\n"));
    let chunks: Vec<Value> = text
        .split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert_eq!(chunks[0]["object"], "chat.completion.chunk");
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let call = &chunks[1]["choices"][0]["delta"]["tool_calls"][0];
    assert_eq!(call["index"], 0);
    assert_eq!(call["type"], "function");
    assert_eq!(call["function"]["name"], "read_file");
    assert_eq!(call["id"], plain.message.tool_calls[0].id.as_str());
    let last = chunks.last().unwrap();
    assert_eq!(last["choices"], json!([]));
    assert_eq!(
        last["usage"]["prompt_tokens"].as_u64(),
        Some(plain.usage.input_tokens)
    );

    // Without include_usage: no usage chunk (and so no usage to read back).
    let (_, _, _, text) = post(&url("no-usage"), &streamed(body, false)).await;
    assert!(text.ends_with("data: [DONE]\n\n") && !text.contains("usage"));
    assert!(matches!(
        openai_wire::response_from_sse(&text),
        Err(SseError::Malformed(_))
    ));

    // An error before any output is the plain error, status and body, streamed or not.
    let big = openai_wire::request_to_json(&big_request());
    let (s1, ct1, _, e1) = post(&url("big-plain"), &big).await;
    let (s2, ct2, _, e2) = post(&url("big-stream"), &streamed(big, true)).await;
    assert_eq!((s1, ct1.as_str()), (400, "application/json"));
    assert_eq!((s2, &ct2, &e2), (s1, &ct1, &e1));
    assert!(matches!(
        openai_wire::error_from_http(s2, None, e2.as_bytes()),
        ProviderError::ContextOverflow {
            limit: Some(16_384),
            ..
        }
    ));
    handle.shutdown().await;
}

#[tokio::test(flavor = "current_thread")]
async fn an_overflow_after_partial_output_streams_the_output_then_an_error_event() {
    let partial_script = FakeScript {
        faults: vec![FakeFault::OverflowAfterPartialOutput { request: 1 }],
        ..script()
    };
    let want = FakeProvider::new(partial_script.clone())
        .complete(&first_request())
        .await
        .unwrap_err();
    assert!(
        matches!(&want, ProviderError::ContextOverflow { partial_output: Some(p), .. } if !p.is_empty()),
        "{want:?}"
    );
    let resolver = move |_: &str| Some(Backend::fake(FakeProvider::new(partial_script.clone())));
    let (_, handle) = FakeServer::with_backends(Arc::new(resolver), FakeServerConfig::default())
        .spawn()
        .await
        .unwrap();
    for wire in [Wire::OpenAi, Wire::Anthropic] {
        let (url, plain) = match wire {
            Wire::OpenAi => (
                format!(
                    "{}/chat/completions",
                    handle.trial_base_url(&format!("{wire:?}"))
                ),
                openai_wire::request_to_json(&first_request()),
            ),
            Wire::Anthropic => (
                format!(
                    "{}/v1/messages",
                    handle.trial_anthropic_base_url(&format!("{wire:?}"))
                ),
                anthropic_wire::request_to_json(&first_request()),
            ),
        };
        // Streamed: a 200 stream carrying the partial output, then an error event.
        let (status, ct, _, text) = post(&url, &streamed(plain.clone(), true)).await;
        assert_eq!(
            (status, ct.as_str()),
            (200, "text/event-stream"),
            "{wire:?}"
        );
        let decoded = match wire {
            Wire::OpenAi => {
                assert!(text.contains(r#""role":"assistant""#) && !text.contains("[DONE]"));
                openai_wire::response_from_sse(&text)
            }
            Wire::Anthropic => {
                assert!(text.contains("event: error\n") && !text.contains("message_stop"));
                anthropic_wire::response_from_sse(&text)
            }
        };
        assert_eq!(decoded, Err(SseError::Failed(want.clone())), "{wire:?}");
        // Not streamed: the plain error (a retry is request 2, which the fault spares).
        handle.forget(&format!("{wire:?}"));
        let (status, ct, _, _) = post(&url, &plain).await;
        assert_eq!((status, ct.as_str()), (400, "application/json"), "{wire:?}");
    }
    handle.shutdown().await;
}

/// Read a response body chunk by chunk until it ends or fails: the bytes, and whether it
/// failed.
async fn read_until_cut(resp: reqwest::Response) -> (String, bool) {
    let mut resp = resp;
    let mut bytes = Vec::new();
    loop {
        match resp.chunk().await {
            Ok(Some(c)) => bytes.extend_from_slice(&c),
            Ok(None) => return (String::from_utf8_lossy(&bytes).into_owned(), false),
            Err(_) => return (String::from_utf8_lossy(&bytes).into_owned(), true),
        }
    }
}

#[tokio::test(flavor = "current_thread")]
async fn faults_apply_to_streams_on_both_wires() {
    let handle = server(fault_resolver()).await;
    for wire in [Wire::OpenAi, Wire::Anthropic] {
        let (url, body) = match wire {
            Wire::OpenAi => (
                format!("{}/chat/completions", handle.trial_base_url("truncated")),
                streamed(openai_wire::request_to_json(&first_request()), true),
            ),
            Wire::Anthropic => (
                format!(
                    "{}/v1/messages",
                    handle.trial_anthropic_base_url("truncated")
                ),
                streamed(anthropic_wire::request_to_json(&first_request()), false),
            ),
        };
        let resp = reqwest::Client::new()
            .post(&url)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        assert_eq!(resp.headers()["content-type"], "text/event-stream");
        let (text, cut) = read_until_cut(resp).await;
        assert!(cut, "{wire:?}: the stream must end in a connection cut");
        assert!(
            text.len() > 40,
            "{wire:?}: some events arrive first: {text:?}"
        );
        let decoded = match wire {
            Wire::OpenAi => openai_wire::response_from_sse(&text),
            Wire::Anthropic => anthropic_wire::response_from_sse(&text),
        };
        assert!(
            matches!(decoded, Err(SseError::Malformed(_))),
            "{wire:?}: {decoded:?}"
        );
        // A retry of the same key is request 2: no fault, the real answer, streamed.
        let client = Streaming::new(
            wire,
            match wire {
                Wire::OpenAi => handle.trial_base_url("truncated"),
                Wire::Anthropic => handle.trial_anthropic_base_url("truncated"),
            },
        );
        let expected = FakeProvider::new(script())
            .complete(&first_request())
            .await
            .unwrap();
        assert_eq!(client.complete(&first_request()).await.unwrap(), expected);
        handle.forget("truncated");
    }
    for wire in [Wire::OpenAi, Wire::Anthropic] {
        let base = |key: &str| match wire {
            Wire::OpenAi => handle.trial_base_url(key),
            Wire::Anthropic => handle.trial_anthropic_base_url(key),
        };
        let err = |key: &'static str| {
            let c = Streaming::new(wire, base(key));
            async move { c.complete(&first_request()).await.unwrap_err() }
        };
        assert_eq!(err("malformed").await.kind(), "malformed", "{wire:?}");
        assert_eq!(
            err("rate").await,
            ProviderError::RateLimited {
                retry_after_ms: Some(60),
                message: match wire {
                    Wire::OpenAi => "Rate limit reached for requests (injected by ctxbench).",
                    Wire::Anthropic =>
                        "Number of requests has exceeded your rate limit (injected by ctxbench).",
                }
                .into()
            },
            "{wire:?}"
        );
        assert!(matches!(
            err("overloaded").await,
            ProviderError::Server { status: 529, .. }
        ));
        for key in ["malformed", "rate", "overloaded"] {
            assert_eq!(handle.provider_requests(key), 0, "{key}");
            handle.forget(key);
        }
    }
    handle.shutdown().await;
}

// ---------------------------------------------------------------------------------------
// The Anthropic wire
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "current_thread")]
async fn an_anthropic_conversation_plain_or_streamed_equals_the_in_process_one() {
    let expected = converse(&ThroughAnthropicWire(FakeProvider::new(script()))).await;
    assert!(expected
        .iter()
        .any(|r| matches!(r, Ok(x) if !x.message.tool_calls.is_empty())));
    assert!(matches!(
        expected.last(),
        Some(Err(ProviderError::ContextOverflow {
            limit: Some(16_384),
            ..
        }))
    ));
    let handle = server(Resolver::default()).await;
    let timeout = Duration::from_secs(20);
    // Routed by path, by header, and neither (the default key).
    let by_path = anthropic(handle.trial_anthropic_base_url("a-path"), timeout);
    assert_eq!(converse(&by_path).await, expected);
    let by_header = anthropic(handle.anthropic_base_url(), timeout)
        .with_header(TRIAL_HEADER, "a-header")
        .unwrap();
    assert_eq!(converse(&by_header).await, expected);
    assert_eq!(
        converse(&anthropic(handle.anthropic_base_url(), timeout)).await,
        expected
    );
    let streaming = Streaming::new(Wire::Anthropic, handle.trial_anthropic_base_url("a-stream"));
    assert_eq!(converse(&streaming).await, expected);
    for key in ["a-path", "a-header", "default", "a-stream"] {
        assert_eq!(
            handle.provider_requests(key),
            expected.len() as u64,
            "{key}"
        );
    }
    handle.shutdown().await;
}

/// Asks `count_tokens` before every completion, as a budgeting client does, and checks the
/// count against the usage the answer reports.
struct CountFirst(AnthropicProvider);

#[async_trait::async_trait]
impl Provider for CountFirst {
    fn name(&self) -> &str {
        "count-first"
    }
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        let counted = self.0.count_tokens(request).await?;
        let answer = self.0.complete(request).await;
        if let Ok(r) = &answer {
            assert_eq!(counted, Some(r.usage.input_tokens));
        }
        answer
    }
}

#[tokio::test(flavor = "current_thread")]
async fn count_tokens_is_the_fakes_own_count_and_not_a_request() {
    let handle = server(Resolver::default()).await;
    let client = anthropic(
        handle.trial_anthropic_base_url("count"),
        Duration::from_secs(20),
    );
    let fake = FakeProvider::new(script());
    let seen =
        anthropic_wire::request_from_json(&anthropic_wire::request_to_json(&first_request()))
            .unwrap();
    assert_eq!(
        client.count_tokens(&first_request()).await.unwrap(),
        Some(fake.true_input_tokens(&seen))
    );
    // Over the window: still counted, never refused.
    assert_eq!(
        client.count_tokens(&big_request()).await.unwrap(),
        Some(
            fake.true_input_tokens(
                &anthropic_wire::request_from_json(
                    &anthropic_wire::request_to_json(&big_request())
                )
                .unwrap()
            )
        )
    );
    assert_eq!(handle.requests("count"), 0);
    assert_eq!(handle.provider_requests("count"), 0);
    // Counting before every completion changes nothing: scripted faults still land on the
    // same completion numbers, the cursor plays the same turns.
    let expected = converse(&ThroughAnthropicWire(FakeProvider::new(script()))).await;
    let counting = CountFirst(anthropic(
        handle.trial_anthropic_base_url("count-first"),
        Duration::from_secs(20),
    ));
    assert_eq!(converse(&counting).await, expected);
    assert_eq!(
        handle.provider_requests("count-first"),
        expected.len() as u64
    );
    // An unknown trial is Anthropic's 404.
    let (status, _, _, body) = post(
        &format!(
            "{}/v1/messages/count_tokens",
            handle.trial_anthropic_base_url("nobody")
        ),
        &anthropic_wire::count_tokens_json(&first_request()),
    )
    .await;
    assert_eq!(status, 404);
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "not_found_error");
    handle.shutdown().await;
}

#[tokio::test(flavor = "current_thread")]
async fn anthropic_errors_and_faults_use_anthropics_shapes() {
    let handle = server(fault_resolver()).await;
    let url = |key: &str| format!("{}/v1/messages", handle.trial_anthropic_base_url(key));
    let body = anthropic_wire::request_to_json(&first_request());
    let error = |text: &str| -> (String, String) {
        let v: Value = serde_json::from_str(text).unwrap();
        assert_eq!(v["type"], "error", "{v}");
        (
            v["error"]["type"].as_str().unwrap().to_string(),
            v["error"]["message"].as_str().unwrap().to_string(),
        )
    };

    // Context overflow: 400 invalid_request_error, worded as Anthropic words it, and the
    // client reads it back with the window and the input count.
    let (status, ct, _, text) = post(
        &url("overflow"),
        &anthropic_wire::request_to_json(&big_request()),
    )
    .await;
    assert_eq!((status, ct.as_str()), (400, "application/json"));
    let (kind, message) = error(&text);
    assert_eq!(kind, "invalid_request_error");
    assert!(
        message.starts_with("prompt is too long: ") && message.ends_with(" tokens > 16384 maximum"),
        "{message}"
    );
    let mut stripped: Value = serde_json::from_str(&text).unwrap();
    stripped["error"]
        .as_object_mut()
        .unwrap()
        .remove("ctxbench");
    match anthropic_wire::error_from_http(400, None, &serde_json::to_vec(&stripped).unwrap()) {
        ProviderError::ContextOverflow {
            limit: Some(16_384),
            input_tokens: Some(n),
            ..
        } => assert!(n > 16_384),
        other => panic!("{other:?}"),
    }

    let (status, _, headers, text) = post(&url("rate"), &body).await;
    assert_eq!(status, 429);
    assert_eq!(error(&text).0, "rate_limit_error");
    assert_eq!(headers["retry-after"], "1");
    let (status, _, _, text) = post(&url("overloaded"), &body).await;
    assert_eq!((status, error(&text).0.as_str()), (529, "overloaded_error"));
    let (status, _, _, text) = post(&url("server"), &body).await;
    assert_eq!((status, error(&text).0.as_str()), (500, "api_error"));
    let (status, _, _, text) = post(&url("nobody"), &body).await;
    assert_eq!((status, error(&text).0.as_str()), (404, "not_found_error"));
    let (status, _, _, text) = post(&url("bad"), &json!({"model": "m"})).await;
    assert_eq!(
        (status, error(&text).0.as_str()),
        (400, "invalid_request_error")
    );

    // Every fault kind reaches the Anthropic client typed.
    let handle = {
        handle.shutdown().await;
        server(fault_resolver()).await
    };
    let client = |key: &str| {
        anthropic(
            handle.trial_anthropic_base_url(key),
            Duration::from_millis(300),
        )
    };
    let req = first_request();
    assert!(matches!(
        client("rate").complete(&req).await.unwrap_err(),
        ProviderError::RateLimited {
            retry_after_ms: Some(60),
            ..
        }
    ));
    assert!(matches!(
        client("overloaded").complete(&req).await.unwrap_err(),
        ProviderError::Server { status: 529, .. }
    ));
    assert!(matches!(
        client("server").complete(&req).await.unwrap_err(),
        ProviderError::Server { status: 500, .. }
    ));
    assert_eq!(
        client("hang").complete(&req).await.unwrap_err(),
        ProviderError::Timeout { after_ms: 300 }
    );
    for key in ["truncated", "malformed"] {
        let e = client(key).complete(&req).await.unwrap_err();
        assert_eq!(e.kind(), "malformed", "{key}: {e:?}");
    }
    for key in [
        "rate",
        "overloaded",
        "server",
        "hang",
        "truncated",
        "malformed",
    ] {
        assert_eq!(handle.requests(key), 1, "{key}");
        assert_eq!(handle.provider_requests(key), 0, "{key}");
    }
    assert_eq!(handle.faults_injected(), 6);
    handle.shutdown().await;
}

// ---------------------------------------------------------------------------------------
// Any provider as the backend
// ---------------------------------------------------------------------------------------

/// Answers with what it was told: the latest user text, or a call of the first tool when
/// that text starts with `call`. Counts its completions.
struct Echo {
    counts_tokens: bool,
    calls: AtomicU64,
}

#[async_trait::async_trait]
impl Provider for Echo {
    fn name(&self) -> &str {
        "echo"
    }
    async fn complete(&self, r: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let last = r
            .messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .map(|m| m.content.clone())
            .unwrap_or_default();
        let usage = Usage {
            input_tokens: r.messages.len() as u64,
            output_tokens: 2,
        };
        if let Some(tool) = r.tools.first().filter(|_| last.starts_with("call")) {
            return Ok(ModelResponse {
                message: Message {
                    role: Role::Assistant,
                    content: "Calling.".into(),
                    tool_calls: vec![ToolCall {
                        id: "echo_1".into(),
                        name: tool.name.clone(),
                        arguments: json!({"said": last}),
                    }],
                    tool_call_id: None,
                },
                usage,
                finish_reason: FinishReason::ToolCalls,
            });
        }
        Ok(ModelResponse {
            message: Message::assistant(format!("echo: {last}")),
            usage,
            finish_reason: FinishReason::Stop,
        })
    }
    async fn count_tokens(&self, r: &ModelRequest) -> Result<Option<u64>, ProviderError> {
        Ok(self.counts_tokens.then(|| 10 * r.messages.len() as u64))
    }
}

#[tokio::test(flavor = "current_thread")]
async fn any_provider_is_served_over_both_wires_plain_and_streamed() {
    let echo = Arc::new(Echo {
        counts_tokens: true,
        calls: AtomicU64::new(0),
    });
    let silent = Arc::new(Echo {
        counts_tokens: false,
        calls: AtomicU64::new(0),
    });
    let (e, s) = (echo.clone(), silent.clone());
    let resolver = move |key: &str| match key {
        "echo" => Some(Backend::new(e.clone()).with_model("echo-1")),
        "silent" => Some(Backend::new(s.clone())),
        _ => None,
    };
    let recorder = Arc::new(Recorder::default());
    let (_, handle) = FakeServer::with_backends(Arc::new(resolver), FakeServerConfig::default())
        .with_observer(recorder.clone())
        .spawn()
        .await
        .unwrap();
    let reference = Arc::new(Echo {
        counts_tokens: true,
        calls: AtomicU64::new(0),
    });
    let mut requests = vec![first_request()];
    let mut calling = first_request();
    calling.messages.push(Message::user("call me — ✓"));
    requests.push(calling);

    let openai_plain = openai(handle.trial_base_url("echo"));
    let openai_stream = Streaming::new(Wire::OpenAi, handle.trial_base_url("echo"));
    let anthropic_plain = anthropic(
        handle.trial_anthropic_base_url("echo"),
        Duration::from_secs(20),
    );
    let anthropic_stream = Streaming::new(Wire::Anthropic, handle.trial_anthropic_base_url("echo"));
    for req in &requests {
        let want = reference.complete(req).await.unwrap();
        assert_eq!(openai_plain.complete(req).await.unwrap(), want);
        assert_eq!(openai_stream.complete(req).await.unwrap(), want);
        let want = ThroughAnthropicWire(reference.clone())
            .complete(req)
            .await
            .unwrap();
        assert_eq!(anthropic_plain.complete(req).await.unwrap(), want);
        assert_eq!(anthropic_stream.complete(req).await.unwrap(), want);
    }
    assert_eq!(echo.calls.load(Ordering::SeqCst), 8);
    assert_eq!(handle.provider_requests("echo"), 8);
    assert_eq!(handle.requests("echo"), 8);
    // The observer saw every exchange, whichever wire carried it.
    assert_eq!(recorder.exchanges().len(), 8);

    // count_tokens is forwarded; a backend without a count answers 404.
    assert_eq!(
        anthropic_plain
            .count_tokens(&first_request())
            .await
            .unwrap(),
        Some(20)
    );
    let silent_client = anthropic(
        handle.trial_anthropic_base_url("silent"),
        Duration::from_secs(20),
    );
    assert!(matches!(
        silent_client
            .count_tokens(&first_request())
            .await
            .unwrap_err(),
        ProviderError::Rejected { status: 404, .. }
    ));
    let unsupported = recorder.failures();
    assert_eq!(unsupported.len(), 1);
    assert_eq!(unsupported[0].0, "silent");
    assert_eq!(unsupported[0].1.kind, HttpFailureKind::Unsupported);
    assert_eq!(unsupported[0].1.status, Some(404));
    assert_eq!(handle.provider_requests("silent"), 0);
    assert_eq!(silent.calls.load(Ordering::SeqCst), 0);

    // /v1/models lists the model the resolver named, nothing when it named none.
    let models = |key: &str| {
        let url = format!("{}/models", handle.trial_base_url(key));
        async move {
            reqwest::get(url)
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        }
    };
    let listed = models("echo").await;
    assert_eq!(listed["data"][0]["id"], "echo-1");
    assert_eq!(listed["data"][0]["type"], "model");
    assert_eq!(listed["has_more"], false);
    assert_eq!(models("silent").await["data"], json!([]));
    handle.shutdown().await;
}

// ---------------------------------------------------------------------------------------
// Failed requests reach the observer
// ---------------------------------------------------------------------------------------

#[derive(Default)]
struct Recorder {
    exchanges: Mutex<Vec<(String, ModelRequest)>>,
    failures: Mutex<Vec<(String, HttpFailure)>>,
    notify: Mutex<Option<tokio::sync::mpsc::UnboundedSender<HttpFailure>>>,
}

impl Recorder {
    fn exchanges(&self) -> Vec<(String, ModelRequest)> {
        self.exchanges.lock().unwrap().clone()
    }
    fn failures(&self) -> Vec<(String, HttpFailure)> {
        self.failures.lock().unwrap().clone()
    }
}

impl ExchangeObserver for Recorder {
    fn exchange(
        &self,
        key: &str,
        request: &ModelRequest,
        _result: &Result<ModelResponse, ProviderError>,
        _latency_ms: u64,
    ) {
        self.exchanges
            .lock()
            .unwrap()
            .push((key.to_string(), request.clone()));
    }
    fn http_failure(&self, key: &str, failure: &HttpFailure) {
        self.failures
            .lock()
            .unwrap()
            .push((key.to_string(), failure.clone()));
        if let Some(tx) = &*self.notify.lock().unwrap() {
            let _ = tx.send(failure.clone());
        }
    }
}

/// An observer written before `http_failure` existed still compiles (the method has a
/// default) and still sees exchanges.
struct ExchangesOnly(AtomicU64);

impl ExchangeObserver for ExchangesOnly {
    fn exchange(
        &self,
        _: &str,
        _: &ModelRequest,
        _: &Result<ModelResponse, ProviderError>,
        _: u64,
    ) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "current_thread")]
async fn requests_that_never_reach_the_backend_are_reported() {
    const KEY_CANARY: &str = "sk-ant-CANARY-5555";
    let mut resolver = fault_resolver();
    resolver
        .faults
        .insert("late".into(), vec![at(2, HttpFault::MalformedBody)]);
    let recorder = Arc::new(Recorder::default());
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    *recorder.notify.lock().unwrap() = Some(tx);
    let (_, handle) = FakeServer::new(Arc::new(resolver), FakeServerConfig::default())
        .with_observer(recorder.clone())
        .with_max_body_bytes(64 * 1024)
        .spawn()
        .await
        .unwrap();
    let http = reqwest::Client::new();
    let send = |method: reqwest::Method, url: String, body: Vec<u8>| {
        let http = http.clone();
        async move {
            let resp = http
                .request(method, url)
                .header("x-api-key", KEY_CANARY)
                .header("authorization", format!("Bearer {KEY_CANARY}"))
                .header("anthropic-version", "2023-06-01")
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap();
            let status = resp.status().as_u16();
            let _ = resp.bytes().await;
            status
        }
    };
    let chat = |key: &str| format!("{}/chat/completions", handle.trial_base_url(key));
    let messages = |key: &str| format!("{}/v1/messages", handle.trial_anthropic_base_url(key));
    let openai_body = serde_json::to_vec(&openai_wire::request_to_json(&first_request())).unwrap();
    let anthropic_body =
        serde_json::to_vec(&anthropic_wire::request_to_json(&first_request())).unwrap();
    let parsed = Some(first_request());
    let post = reqwest::Method::POST;

    assert_eq!(
        send(post.clone(), chat("ok"), b"{not json".to_vec()).await,
        400
    );
    assert_eq!(
        send(post.clone(), messages("ok"), br#"{"model": "m"}"#.to_vec()).await,
        400
    );
    assert_eq!(
        send(post.clone(), chat("nobody"), openai_body.clone()).await,
        404
    );
    assert_eq!(
        send(post.clone(), messages("ok"), vec![b' '; 100 * 1024]).await,
        413
    );
    assert_eq!(
        send(reqwest::Method::GET, chat("ok"), Vec::new()).await,
        405
    );
    assert_eq!(
        send(
            post.clone(),
            format!("{}/responses", handle.trial_base_url("ok")),
            openai_body.clone()
        )
        .await,
        404
    );
    assert_eq!(
        send(post.clone(), messages("rate"), anthropic_body.clone()).await,
        429
    );
    // Answered exchanges are exchanges, not failures; a fault at request 2 comes after one.
    assert_eq!(
        send(post.clone(), chat("late"), openai_body.clone()).await,
        200
    );
    assert_eq!(
        send(post.clone(), chat("late"), openai_body.clone()).await,
        200
    );
    // Counting is neither.
    let count = format!(
        "{}/v1/messages/count_tokens",
        handle.trial_anthropic_base_url("ok")
    );
    assert_eq!(send(post.clone(), count, anthropic_body.clone()).await, 200);

    let failures = recorder.failures();
    /// Key, status, kind, endpoint, whether the parsed request came along, request index.
    type Row<'a> = (
        &'a str,
        Option<u16>,
        &'a str,
        Option<Endpoint>,
        bool,
        Option<u64>,
    );
    let summary: Vec<Row> = failures
        .iter()
        .map(|(key, f)| {
            (
                key.as_str(),
                f.status,
                f.kind.as_str(),
                f.endpoint,
                f.request == parsed,
                f.request_index,
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (
                "ok",
                Some(400),
                "malformed_json",
                Some(Endpoint::ChatCompletions),
                false,
                Some(1)
            ),
            (
                "ok",
                Some(400),
                "invalid_request",
                Some(Endpoint::Messages),
                false,
                Some(2)
            ),
            (
                "nobody",
                Some(404),
                "unknown_trial",
                Some(Endpoint::ChatCompletions),
                true,
                None
            ),
            (
                "ok",
                Some(413),
                "body_too_large",
                Some(Endpoint::Messages),
                false,
                None
            ),
            (
                "ok",
                Some(405),
                "method_not_allowed",
                Some(Endpoint::ChatCompletions),
                false,
                None
            ),
            ("ok", Some(404), "unknown_route", None, false, None),
            (
                "rate",
                Some(429),
                "fault",
                Some(Endpoint::Messages),
                true,
                Some(1)
            ),
            (
                "late",
                Some(200),
                "fault",
                Some(Endpoint::ChatCompletions),
                true,
                Some(2)
            ),
        ]
    );
    assert_eq!(
        failures[6].1.kind,
        HttpFailureKind::Fault {
            fault: HttpFault::RateLimit { retry_after_ms: 60 }
        }
    );
    assert!(failures[1].1.message.contains("messages"), "{failures:?}");
    let exchanges = recorder.exchanges();
    assert_eq!(exchanges.len(), 1);
    assert_eq!(exchanges[0], ("late".to_string(), first_request()));
    // Keys sent in headers appear nowhere.
    assert!(!format!("{failures:?}{exchanges:?}").contains(KEY_CANARY));

    // A hang is reported before it hangs, without a status.
    while rx.try_recv().is_ok() {}
    let hanging = {
        let (http, url, body) = (http.clone(), chat("hang"), openai_body.clone());
        tokio::spawn(async move { http.post(url).body(body).send().await.is_err() })
    };
    let reported = rx.recv().await.unwrap();
    assert_eq!(reported.status, None);
    assert_eq!(
        reported.kind,
        HttpFailureKind::Fault {
            fault: HttpFault::Hang { ms: 60_000 }
        }
    );
    assert_eq!(reported.request, parsed);
    handle.shutdown().await;
    assert!(hanging.await.unwrap(), "the hung request gets no answer");

    // An observer that only knows exchanges still works.
    let only = Arc::new(ExchangesOnly(AtomicU64::new(0)));
    let (_, handle) = FakeServer::new(Arc::new(fault_resolver()), FakeServerConfig::default())
        .with_observer(only.clone())
        .spawn()
        .await
        .unwrap();
    let _ = openai(handle.trial_base_url("rate"))
        .complete(&first_request())
        .await;
    let _ = openai(handle.trial_base_url("ok"))
        .complete(&first_request())
        .await;
    assert_eq!(only.0.load(Ordering::SeqCst), 1);
    handle.shutdown().await;
}

// ---------------------------------------------------------------------------------------
// A stream cut mid-response, through the recording proxy
// ---------------------------------------------------------------------------------------

/// ctxbench's recording proxy as the driver builds it for an external agent with an HTTP
/// provider: a server whose backend is the upstream model behind the retry layer. The
/// upstream is the fake served over HTTP (fault-free, or cutting its first answer in half).
async fn proxy(
    upstream: &FakeServerHandle,
    upstream_key: &str,
    faults: Vec<ScheduledFault>,
) -> (
    FakeServerHandle,
    Arc<Recorder>,
    Arc<Resilient<OpenAiProvider>>,
) {
    let retrying = Arc::new(Resilient::new(
        openai(upstream.trial_base_url(upstream_key)),
        RetryPolicy {
            max_attempts: 3,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(5),
            attempt_timeout: Some(Duration::from_secs(20)),
            ..RetryPolicy::default()
        },
        Arc::new(AdaptiveLimiter::new(2)),
    ));
    let backend = Backend::new(retrying.clone() as Arc<dyn Provider>).with_model("fake-16k");
    let resolver = move |_: &str| Some(backend.clone());
    let recorder = Arc::new(Recorder::default());
    let mut config = FakeServerConfig::default();
    config.faults.at_request = faults;
    let (_, handle) = FakeServer::with_backends(Arc::new(resolver), config)
        .with_observer(recorder.clone())
        .spawn()
        .await
        .unwrap();
    (handle, recorder, retrying)
}

/// The agent's stream from the proxy is cut mid-event (on both wires): the agent sees a
/// typed `malformed` failure, the proxy reports the cut with the request it had parsed, the
/// upstream never saw that attempt (so it is not charged twice), and the agent's retry gets
/// the complete answer — the one the fake gives in process.
#[tokio::test(flavor = "current_thread")]
async fn a_stream_cut_between_the_proxy_and_the_agent_is_typed_and_retried_cleanly() {
    let expected = FakeProvider::new(script())
        .complete(&first_request())
        .await
        .unwrap();
    for wire in [Wire::OpenAi, Wire::Anthropic] {
        let upstream = server(Resolver::default()).await;
        let key = format!("{wire:?}");
        let (handle, recorder, _) =
            proxy(&upstream, &key, vec![at(1, HttpFault::TruncatedBody)]).await;
        let agent = Streaming::new(
            wire,
            match wire {
                Wire::OpenAi => handle.trial_base_url("agent"),
                Wire::Anthropic => handle.trial_anthropic_base_url("agent"),
            },
        );
        let cut = agent.complete(&first_request()).await.unwrap_err();
        assert_eq!(cut.kind(), "malformed", "{wire:?}: {cut:?}");
        let failures = recorder.failures();
        assert_eq!(failures.len(), 1, "{wire:?}");
        assert_eq!(
            failures[0].1.kind,
            HttpFailureKind::Fault {
                fault: HttpFault::TruncatedBody
            }
        );
        assert_eq!(failures[0].1.request.as_ref(), Some(&first_request()));
        assert_eq!(
            upstream.requests(&key),
            0,
            "{wire:?}: the cut attempt went upstream"
        );

        let answer = agent.complete(&first_request()).await.unwrap();
        assert_eq!(answer, expected, "{wire:?}");
        assert_eq!(upstream.requests(&key), 1, "{wire:?}");
        assert_eq!(recorder.exchanges().len(), 1, "{wire:?}");
        handle.shutdown().await;
        upstream.shutdown().await;
    }
}

/// The upstream cuts its answer to the proxy mid-body: the proxy's retry layer absorbs it
/// (counted as a `malformed` retry), and the agent's stream on either wire arrives whole,
/// equal to the fault-free answer.
#[tokio::test(flavor = "current_thread")]
async fn an_upstream_cut_mid_body_is_retried_by_the_proxy_and_the_agents_stream_is_whole() {
    let expected = FakeProvider::new(script())
        .complete(&first_request())
        .await
        .unwrap();
    for wire in [Wire::OpenAi, Wire::Anthropic] {
        let mut faults = HashMap::new();
        faults.insert("up".to_string(), vec![at(1, HttpFault::TruncatedBody)]);
        let upstream = server(Resolver { faults }).await;
        let (handle, recorder, retrying) = proxy(&upstream, "up", Vec::new()).await;
        let agent = Streaming::new(
            wire,
            match wire {
                Wire::OpenAi => handle.trial_base_url("agent"),
                Wire::Anthropic => handle.trial_anthropic_base_url("agent"),
            },
        );
        let answer = agent.complete(&first_request()).await.unwrap();
        assert_eq!(answer, expected, "{wire:?}");
        let s = retrying.stats();
        assert_eq!((s.attempts, s.retries_malformed), (2, 1), "{wire:?}: {s:?}");
        // Two HTTP requests upstream, one answered by the fake: the cut one did not move
        // its script.
        assert_eq!(upstream.requests("up"), 2);
        assert_eq!(upstream.provider_requests("up"), 1);
        assert!(recorder.failures().is_empty(), "{wire:?}");
        assert_eq!(recorder.exchanges().len(), 1);
        handle.shutdown().await;
        upstream.shutdown().await;
    }
}
