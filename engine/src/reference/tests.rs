//! Tests of the reference engine's runs.

use super::*;
use ctxbench_adapters::capabilities::lookup;
use ctxbench_adapters::fake::{FakeProvider, FakeReply, FakeScript, FakeToolCall, FakeTurn};
use ctxbench_adapters::ToolCall;
use ctxbench_sut::{ToolExecutor, ToolOutput};

struct Events(Vec<EngineEvent>);
impl EventSink for Events {
    fn emit(&mut self, event: EngineEvent) {
        self.0.push(event);
    }
}

/// A tool that rewrites the instruction file mid-run, as a model-driven edit of
/// AGENTS.md would.
struct EditsInstructions(PathBuf);
impl ToolExecutor for EditsInstructions {
    fn execute(&mut self, _call: &ToolCall) -> ToolOutput {
        std::fs::write(&self.0, "Edited mid-run.").unwrap();
        ToolOutput {
            content: "edited".into(),
            ok: true,
        }
    }
}

fn engine(dir: &std::path::Path, mode: Mode) -> ReferenceEngine {
    std::fs::write(dir.join("AGENTS.md"), "Original instructions.").unwrap();
    ReferenceEngine::create(EngineConfig {
        mode,
        model: lookup("fake-16k"),
        context: ContextConfig {
            reserved_output_tokens: 512,
            buffer_tokens: 1024,
            ..ContextConfig::default()
        },
        tools: vec![ToolDefinition {
            name: "edit".into(),
            description: "Edit a file.".into(),
            parameters: serde_json::json!({"type": "object"}),
        }],
        instructions_path: dir.join("AGENTS.md"),
        session_dir: dir.join("session"),
        redact: Vec::new(),
        faults: EngineFaults::default(),
        mutation: None,
    })
    .unwrap()
}

fn budget_hashes(events: &[EngineEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            EngineEvent::Budgeted(b) => Some(b.instruction_hash.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn instructions_are_frozen_within_a_run_and_reloaded_at_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let mut e = engine(dir.path(), Mode::Warn);
    let provider = FakeProvider::new(FakeScript {
        model: "fake-16k".into(),
        context_window: 16384,
        turns: vec![
            FakeTurn {
                user: "edit it".into(),
                replies: vec![
                    FakeReply::ToolCalls {
                        calls: vec![FakeToolCall {
                            name: "edit".into(),
                            arguments: serde_json::json!({}),
                        }],
                    },
                    FakeReply::Text {
                        text: "done".into(),
                    },
                ],
            },
            FakeTurn {
                user: "next".into(),
                replies: vec![FakeReply::Text { text: "ok".into() }],
            },
        ],
        ..Default::default()
    });
    let mut tools = EditsInstructions(dir.path().join("AGENTS.md"));
    let mut events = Events(Vec::new());
    let out = e
        .run_turn(
            "edit it",
            TurnIo {
                provider: &provider,
                tools: &mut tools,
                events: &mut events,
            },
        )
        .await;
    assert!(matches!(out, TurnOutcome::Completed { .. }), "{out:?}");
    let first = budget_hashes(&events.0);
    assert_eq!(first.len(), 2, "two physical attempts in the first run");
    assert_eq!(first[0], first[1], "the snapshot is frozen within a run");
    let out = e
        .run_turn(
            "next",
            TurnIo {
                provider: &provider,
                tools: &mut tools,
                events: &mut events,
            },
        )
        .await;
    assert!(matches!(out, TurnOutcome::Completed { .. }), "{out:?}");
    let all = budget_hashes(&events.0);
    assert_ne!(all[2], all[0], "the edit takes effect at the next run");
}

#[tokio::test]
async fn restart_reloads_the_same_transcript_from_disk() {
    let dir = tempfile::tempdir().unwrap();
    let mut e = engine(dir.path(), Mode::Off);
    let provider = FakeProvider::new(FakeScript {
        model: "fake-16k".into(),
        context_window: 16384,
        turns: vec![FakeTurn {
            user: "hello".into(),
            replies: vec![FakeReply::Text { text: "hi".into() }],
        }],
        ..Default::default()
    });
    let mut tools = EditsInstructions(dir.path().join("unused"));
    let mut events = Events(Vec::new());
    e.run_turn(
        "hello",
        TurnIo {
            provider: &provider,
            tools: &mut tools,
            events: &mut events,
        },
    )
    .await;
    let (before, hash) = (e.transcript(), e.transcript_hash());
    e.restart(&mut events).unwrap();
    assert_eq!(e.transcript(), before);
    assert_eq!(e.transcript_hash(), hash);
    assert!(matches!(
        events.0.last(),
        Some(EngineEvent::SessionRestored { messages: 2, .. })
    ));
}

/// A provider with an exact counter that counts twice what the local estimator does
/// (as a model with a very different tokenizer would), or no counter at all.
struct Counted {
    inner: FakeProvider,
    factor: Option<u64>,
    counts: std::sync::atomic::AtomicU64,
}

#[async_trait::async_trait]
impl Provider for Counted {
    fn name(&self) -> &str {
        "counted"
    }
    async fn complete(
        &self,
        request: &ModelRequest,
    ) -> Result<ctxbench_adapters::ModelResponse, ProviderError> {
        self.inner.complete(request).await
    }
    async fn count_tokens(&self, request: &ModelRequest) -> Result<Option<u64>, ProviderError> {
        self.counts
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let local = RequestEstimator::new(lookup("fake-16k").estimator).request_tokens(request);
        Ok(self.factor.map(|f| local * f))
    }
}

fn long_turns(n: usize) -> (Vec<String>, FakeProvider) {
    let users: Vec<String> = (0..n)
        .map(|t| {
            (0..600)
                .map(|w| format!("w{t}x{w}"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    let provider = FakeProvider::new(FakeScript {
        model: "fake-16k".into(),
        context_window: 1 << 20,
        turns: users
            .iter()
            .map(|u| FakeTurn {
                user: u.clone(),
                replies: vec![FakeReply::Text { text: "ok".into() }],
            })
            .collect(),
        ..Default::default()
    });
    (users, provider)
}

#[tokio::test]
async fn an_exact_counter_steers_the_budget_and_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let mut e = engine(dir.path(), Mode::Compact);
    let (users, inner) = long_turns(4);
    let provider = Counted {
        inner,
        factor: Some(2),
        counts: Default::default(),
    };
    let mut tools = EditsInstructions(dir.path().join("unused"));
    let mut events = Events(Vec::new());
    for u in &users {
        let out = e
            .run_turn(
                u,
                TurnIo {
                    provider: &provider,
                    tools: &mut tools,
                    events: &mut events,
                },
            )
            .await;
        assert!(matches!(out, TurnOutcome::Completed { .. }), "{out:?}");
    }
    let budgets: Vec<&Budgeted> = events
        .0
        .iter()
        .filter_map(|e| match e {
            EngineEvent::Budgeted(b) => Some(b),
            _ => None,
        })
        .collect();
    assert_eq!(budgets.len(), 4);
    for b in &budgets {
        assert_eq!(
            (b.confidence.as_str(), b.estimation_method.as_str()),
            ("exact", "provider-tokenizer")
        );
        assert!(b.budget.total <= b.budget.available_input, "{:?}", b.budget);
    }
    // Locally each turn is ~2,800 tokens of a 15,360-token allowance, so four turns
    // would fit; counted exactly (×2) they do not, and the engine compacts first.
    assert!(
        events
            .0
            .iter()
            .any(|e| matches!(e, EngineEvent::CompactionCompleted(_))),
        "the exact count forced a compaction"
    );
    assert!(provider.counts.load(std::sync::atomic::Ordering::SeqCst) >= 4);
}

#[tokio::test]
async fn a_provider_without_a_counter_is_asked_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut e = engine(dir.path(), Mode::Compact);
    let (users, inner) = long_turns(3);
    let provider = Counted {
        inner,
        factor: None,
        counts: Default::default(),
    };
    let mut tools = EditsInstructions(dir.path().join("unused"));
    let mut events = Events(Vec::new());
    for u in &users {
        e.run_turn(
            u,
            TurnIo {
                provider: &provider,
                tools: &mut tools,
                events: &mut events,
            },
        )
        .await;
    }
    assert_eq!(provider.counts.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert!(events.0.iter().all(|e| match e {
        EngineEvent::Budgeted(b) => b.confidence == "estimated",
        _ => true,
    }));
    assert!(!events
        .0
        .iter()
        .any(|e| matches!(e, EngineEvent::CompactionCompleted(_))));
}
