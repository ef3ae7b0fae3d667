//! The fake provider over loopback HTTP: the same conversation as in process, every HTTP
//! fault kind typed and recovered through `Resilient<OpenAiProvider>`, and the OpenAI
//! client's wire shape and key hygiene against a mock.

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ctxbench_adapters::fake::{FakeProvider, FakeScript};
use ctxbench_adapters::openai::{MaxTokensField, OpenAiConfig, OpenAiProvider};
use ctxbench_adapters::resilience::{AdaptiveLimiter, ResilienceStats, Resilient, RetryPolicy};
use ctxbench_adapters::serve::{
    FakeServer, FakeServerConfig, FakeServerHandle, FaultPlan, HttpFault, ScheduledFault,
    ScriptResolver,
};
use ctxbench_adapters::{Message, ModelRequest, Provider, ProviderError};
use serde_json::json;

use common::conversation::{converse, script, tools};

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

async fn server(resolver: Resolver) -> FakeServerHandle {
    let (_, handle) = FakeServer::new(Arc::new(resolver), FakeServerConfig::default())
        .spawn()
        .await
        .unwrap();
    handle
}

fn client(base_url: String) -> OpenAiProvider {
    OpenAiProvider::new(OpenAiConfig {
        timeout: Duration::from_secs(20),
        ..OpenAiConfig::local("fake-http", base_url)
    })
    .unwrap()
}

#[tokio::test(flavor = "current_thread")]
async fn a_scripted_conversation_over_http_equals_the_in_process_one() {
    let expected = converse(&FakeProvider::new(script())).await;
    // The conversation exercises tool calls, probes, both overflow faults and a real one.
    assert!(expected
        .iter()
        .any(|r| matches!(r, Ok(x) if !x.message.tool_calls.is_empty())));
    assert!(expected.iter().any(|r| matches!(
        r,
        Err(ProviderError::ContextOverflow {
            partial_output: Some(_),
            ..
        })
    )));
    assert!(matches!(
        expected.last(),
        Some(Err(ProviderError::ContextOverflow {
            limit: Some(16_384),
            requested: Some(_),
            input_tokens: Some(_),
            ..
        }))
    ));
    assert!(expected
        .iter()
        .any(|r| matches!(r, Ok(x) if x.message.content.contains("1. "))));

    let handle = server(Resolver::default()).await;
    // Routed by path.
    let by_path = converse(&client(handle.trial_base_url("trial-path"))).await;
    assert_eq!(by_path, expected);
    // Routed by header.
    let by_header = client(handle.base_url())
        .with_trial_key("trial-header")
        .unwrap();
    assert_eq!(converse(&by_header).await, expected);
    // Neither: the default key.
    assert_eq!(converse(&client(handle.base_url())).await, expected);
    let n = expected.len() as u64;
    for key in ["trial-path", "trial-header", "default"] {
        assert_eq!(handle.requests(key), n, "{key}");
        assert_eq!(handle.provider_requests(key), n, "{key}");
    }
    assert_eq!(handle.faults_injected(), 0);

    // A key the resolver does not know is a typed rejection, not a panic.
    let unknown = client(handle.trial_base_url("nobody"))
        .complete(&ModelRequest {
            model: "fake-16k".into(),
            messages: vec![Message::user("hi")],
            tools: vec![],
            max_output_tokens: 8,
        })
        .await
        .unwrap_err();
    assert!(
        matches!(unknown, ProviderError::Rejected { status: 404, .. }),
        "{unknown:?}"
    );
    handle.shutdown().await;
}

#[tokio::test(flavor = "current_thread")]
async fn models_route_lists_the_trial_model() {
    let handle = server(Resolver::default()).await;
    let body: serde_json::Value = reqwest::get(format!("{}/models", handle.trial_base_url("m")))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body["object"], "list");
    assert_eq!(body["data"][0]["id"], "fake-16k");
    let status = reqwest::get(format!("http://{}/nope", handle.addr()))
        .await
        .unwrap()
        .status();
    assert_eq!(status.as_u16(), 404);
    handle.shutdown().await;
}

fn at(request: u64, fault: HttpFault) -> ScheduledFault {
    ScheduledFault { request, fault }
}

fn fault_resolver() -> Resolver {
    let mut faults = HashMap::new();
    faults.insert(
        "rate".to_string(),
        vec![at(1, HttpFault::RateLimit { retry_after_ms: 60 })],
    );
    faults.insert(
        "server".to_string(),
        vec![
            at(1, HttpFault::ServerError { status: 500 }),
            at(2, HttpFault::ServerError { status: 503 }),
        ],
    );
    faults.insert(
        "hang".to_string(),
        vec![at(1, HttpFault::Hang { ms: 60_000 })],
    );
    faults.insert(
        "truncated".to_string(),
        vec![at(1, HttpFault::TruncatedBody)],
    );
    faults.insert(
        "malformed".to_string(),
        vec![at(1, HttpFault::MalformedBody)],
    );
    faults.insert(
        "always".to_string(),
        (1..=10)
            .map(|n| at(n, HttpFault::ServerError { status: 502 }))
            .collect(),
    );
    Resolver { faults }
}

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

fn policy() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 3,
        base_delay: Duration::from_millis(5),
        max_delay: Duration::from_millis(20),
        max_retry_after: Duration::from_secs(2),
        attempt_timeout: Some(Duration::from_millis(400)),
        jitter_seed: 1,
    }
}

#[tokio::test(flavor = "current_thread")]
async fn every_fault_kind_is_typed_on_a_bare_client() {
    let handle = server(fault_resolver()).await;
    let bare = |key: &str| {
        OpenAiProvider::new(OpenAiConfig {
            timeout: Duration::from_millis(300),
            ..OpenAiConfig::local("fake-http", handle.trial_base_url(key))
        })
        .unwrap()
    };
    let req = first_request();
    let err = |key: &'static str| {
        let p = bare(key);
        let req = req.clone();
        async move { p.complete(&req).await.unwrap_err() }
    };
    match err("rate").await {
        ProviderError::RateLimited { retry_after_ms, .. } => assert_eq!(retry_after_ms, Some(60)),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        err("server").await,
        ProviderError::Server { status: 500, .. }
    ));
    assert_eq!(err("hang").await, ProviderError::Timeout { after_ms: 300 });
    let truncated = err("truncated").await;
    assert_eq!(truncated.kind(), "malformed", "{truncated:?}");
    let malformed = err("malformed").await;
    assert_eq!(malformed.kind(), "malformed", "{malformed:?}");
    assert!(malformed.to_string().contains("not JSON"));
    // None of them reached the fake provider.
    for key in ["rate", "server", "hang", "truncated", "malformed"] {
        assert_eq!(handle.requests(key), 1, "{key}");
        assert_eq!(handle.provider_requests(key), 0, "{key}");
    }
    assert_eq!(handle.faults_injected(), 5);
    handle.shutdown().await;
}

#[tokio::test(flavor = "current_thread")]
async fn resilient_client_recovers_from_every_fault_kind_with_the_fault_free_answer() {
    let expected = FakeProvider::new(script())
        .complete(&first_request())
        .await
        .unwrap();
    let handle = server(fault_resolver()).await;
    let limiter = Arc::new(AdaptiveLimiter::new(4));
    type Counter = fn(&ResilienceStats) -> u64;
    let cases: [(&str, u64, Counter); 5] = [
        ("rate", 1, |s| s.retries_rate_limited),
        ("server", 2, |s| s.retries_server),
        ("hang", 1, |s| s.retries_timeout),
        ("truncated", 1, |s| s.retries_malformed),
        ("malformed", 1, |s| s.retries_malformed),
    ];
    for (key, retries, counter) in cases {
        let p = Resilient::new(
            client(handle.trial_base_url(key)),
            policy(),
            limiter.clone(),
        );
        let got = p.complete(&first_request()).await.unwrap();
        assert_eq!(got, expected, "{key}");
        let s = p.stats();
        assert_eq!(counter(&s), retries, "{key}: {s:?}");
        assert_eq!(s.retries(), retries, "{key}: {s:?}");
        assert_eq!(
            (s.calls, s.attempts, s.gave_up),
            (1, retries + 1, 0),
            "{key}"
        );
        // The provider saw exactly one request: faults happen before it.
        assert_eq!(handle.provider_requests(key), 1, "{key}");
        assert_eq!(handle.requests(key), retries + 1, "{key}");
        if key == "rate" {
            assert!(s.backoff_ms >= 60, "Retry-After honoured: {s:?}");
        }
    }
    assert_eq!(
        limiter.decreases(),
        1,
        "the 429 halved the shared limit once"
    );
    assert_eq!(limiter.in_flight(), 0);

    // Bounded: a key that always fails gives up with the typed error after max_attempts.
    let p = Resilient::new(
        client(handle.trial_base_url("always")),
        policy(),
        limiter.clone(),
    );
    let err = p.complete(&first_request()).await.unwrap_err();
    assert!(
        matches!(err, ProviderError::Server { status: 502, .. }),
        "{err:?}"
    );
    let s = p.stats();
    assert_eq!((s.attempts, s.gave_up, s.retries_server), (3, 1, 2));
    assert_eq!(handle.provider_requests("always"), 0);

    // A context overflow travels typed and is never retried.
    let p = Resilient::new(
        client(handle.trial_base_url("overflow")),
        policy(),
        limiter.clone(),
    );
    let mut big = first_request();
    big.messages.push(Message::user("word ".repeat(20_000)));
    let want = FakeProvider::new(script())
        .complete(&big)
        .await
        .unwrap_err();
    assert_eq!(p.complete(&big).await.unwrap_err(), want);
    assert_eq!(p.stats().attempts, 1);
    handle.shutdown().await;
}

#[tokio::test(flavor = "current_thread")]
async fn seeded_random_faults_recover_to_the_in_process_conversation() {
    let plan = FaultPlan {
        at_request: vec![],
        random: Some(ctxbench_adapters::serve::RandomFaults {
            rate: 0.3,
            seed: 9,
            kinds: vec![
                HttpFault::ServerError { status: 503 },
                HttpFault::MalformedBody,
                HttpFault::TruncatedBody,
                HttpFault::RateLimit { retry_after_ms: 1 },
            ],
        }),
    };
    let (_, handle) = FakeServer::new(
        Arc::new(Resolver::default()),
        FakeServerConfig {
            faults: plan,
            ..FakeServerConfig::default()
        },
    )
    .spawn()
    .await
    .unwrap();
    let expected = converse(&FakeProvider::new(script())).await;
    let mut p = policy();
    p.max_attempts = 10;
    let r = Resilient::new(
        client(handle.trial_base_url("flaky")),
        p,
        Arc::new(AdaptiveLimiter::new(2)),
    );
    assert_eq!(converse(&r).await, expected);
    assert!(handle.faults_injected() > 0);
    assert_eq!(handle.provider_requests("flaky"), expected.len() as u64);
    assert_eq!(r.stats().retries(), handle.faults_injected());
    handle.shutdown().await;
}

#[tokio::test(flavor = "current_thread")]
async fn openai_client_wire_shape_headers_and_key_hygiene() {
    const CANARY: &str = "sk-CANARY-openai-9876543210";
    let mock = common::mock(|r| {
        if r.body["model"] == "auth" {
            return (
                401,
                vec![],
                json!({"error": {"message": format!("Incorrect API key provided: {CANARY}"), "type": "invalid_request_error", "code": "invalid_api_key"}}).to_string(),
            );
        }
        (
            200,
            vec![],
            json!({"id": "x", "object": "chat.completion", "created": 1, "model": "gpt-4o",
                   "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
                   "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}})
            .to_string(),
        )
    })
    .await;
    std::env::set_var("CTXBENCH_TEST_OPENAI_KEY", CANARY);
    let p = OpenAiProvider::new(OpenAiConfig {
        base_url: format!("{}/v1/", mock.url()),
        api_key_env: Some("CTXBENCH_TEST_OPENAI_KEY".into()),
        max_tokens_field: MaxTokensField::MaxCompletionTokens,
        extra_headers: vec![("x-extra".into(), "1".into())],
        ..OpenAiConfig::default()
    })
    .unwrap()
    .with_trial_key("run-1/trial-2")
    .unwrap();
    let resp = p.complete(&first_request()).await.unwrap();
    assert_eq!(resp.message.content, "hi");
    let seen = mock.requests();
    let r = &seen[0];
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(r.headers["authorization"], format!("Bearer {CANARY}"));
    assert_eq!(r.headers["x-ctxbench-trial"], "run-1/trial-2");
    assert_eq!(r.headers["x-extra"], "1");
    assert_eq!(r.body["max_completion_tokens"], 256);
    assert!(r.body.get("max_tokens").is_none());
    assert_eq!(
        r.body["messages"][1],
        json!({"role": "user", "content": "Fix the build."})
    );

    let err = p
        .complete(&ModelRequest {
            model: "auth".into(),
            ..first_request()
        })
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::Rejected { status: 401, .. }));
    for text in [err.to_string(), format!("{err:?}"), format!("{p:?}")] {
        assert!(!text.contains(CANARY), "key leaked: {text}");
    }
    // A connection that cannot be made is an infrastructure failure, without the key.
    let dead = OpenAiProvider::new(OpenAiConfig::local("dead", "http://127.0.0.1:9/v1")).unwrap();
    let e = dead.complete(&first_request()).await.unwrap_err();
    assert!(matches!(e, ProviderError::Unavailable { .. }), "{e:?}");
}

/// A trial pushed out by a newer one (`max_trials: 1`) is not silently restarted: its next
/// request is a 410 that names the trial and why, which the client does not retry.
#[tokio::test(flavor = "current_thread")]
async fn an_evicted_trial_gets_a_clear_error_not_a_restarted_script() {
    let (_, handle) = FakeServer::new(
        Arc::new(Resolver::default()),
        FakeServerConfig {
            limits: ctxbench_adapters::serve::TrialLimits {
                max_trials: 1,
                ..Default::default()
            },
            ..FakeServerConfig::default()
        },
    )
    .spawn()
    .await
    .unwrap();
    let req = ModelRequest {
        model: "fake-16k".into(),
        messages: vec![
            Message::system("Be careful."),
            Message::user("Fix the build."),
        ],
        tools: tools(),
        max_output_tokens: 256,
    };
    let a = client(handle.trial_base_url("trial-a"));
    let b = client(handle.trial_base_url("trial-b"));
    a.complete(&req).await.unwrap();
    b.complete(&req).await.unwrap();
    assert_eq!(handle.live_trials(), 1);
    match a.complete(&req).await.unwrap_err() {
        ProviderError::Rejected { status, message } => {
            assert_eq!(status, 410);
            assert!(
                message.contains("trial `trial-a` was evicted")
                    && message.contains("after 1 request(s)")
                    && message.contains("at most 1 trials"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    // An over-long key is refused before any state is kept.
    let long = client(handle.trial_base_url(&"k".repeat(300)));
    let err = long.complete(&req).await.unwrap_err();
    assert!(
        matches!(err, ProviderError::Rejected { status: 400, .. }),
        "{err:?}"
    );
    assert_eq!(handle.live_trials(), 1);
    handle.shutdown().await;
}
