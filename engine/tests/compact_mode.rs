//! End-to-end tests of compact mode through the driver (scenario → engine ⇄ fake provider).

use std::sync::Arc;

use ctxbench_engine::ReferenceFactory;
use ctxbench_harness::connect::Services;
use ctxbench_harness::driver::{run_trial, ProviderSpec, TrialSpec};
use ctxbench_harness::record::TrialRecord;
use ctxbench_harness::scenario::load_str;
use ctxbench_sut::Mode;
use ctxbench_sut::{CompactionOutcome, EngineEvent, TurnOutcome};

async fn run(yaml: &str, mode: Mode) -> TrialRecord {
    let scenario = Arc::new(load_str("t.yaml", yaml).unwrap_or_else(|e| panic!("{e}")));
    let dir = tempfile::tempdir().unwrap();
    run_trial(
        &TrialSpec {
            scenario,
            mode,
            trial: 0,
            run_seed: 3,
            provider: ProviderSpec::Fake,
            variant: None,
            services: Services::in_process(Arc::new(ReferenceFactory)),
        },
        dir.path(),
    )
    .await
}

fn kinds(rec: &TrialRecord) -> Vec<&'static str> {
    rec.events.iter().map(|e| e.event.kind()).collect()
}

const HEAD: &str = r#"
id: t
model: {context_window: 8192, max_output: 512}
context: {reserved_output_tokens: 512, buffer_tokens: 1024, recent_tail_tokens: 1500, summary_target_tokens: 300}
instructions: "You are a coding agent."
tools:
  - name: read_file
    description: Read a file.
    parameters: {type: object, properties: {path: {type: string}}, required: [path]}
facts:
  - id: db
    states: "All storage must use PostgreSQL 16."
    question: "Which database must all storage use?"
    expect: {contains: PostgreSQL}
"#;

fn scenario(script: &str, extra: &str) -> String {
    format!("{HEAD}{extra}script:\n{script}expect:\n  outcome: any\n")
}

const WORK: &str = r#"  - user: "Start. {fact:db}"
  - assistant: "Noted."
  - repeat: 30
    steps:
      - user: "Read part {i}."
      - tool_calls:
          - call: {name: read_file, args: {path: "src/p{i}.rs"}}
            result: {filler: {tokens: 420, kind: code}}
      - assistant: {filler: {tokens: 160, kind: prose}}
"#;

#[tokio::test]
async fn compact_stays_within_budget_keeps_the_fact_and_never_touches_the_transcript() {
    let rec = run(
        &scenario(&format!("{WORK}  - probe: [db]\n"), ""),
        Mode::Compact,
    )
    .await;
    assert!(
        rec.turns
            .iter()
            .all(|t| matches!(t.outcome, TurnOutcome::Completed { .. })),
        "{:?}",
        rec.outcome
    );
    assert!(kinds(&rec).contains(&"context.compaction.completed"));
    for r in rec.requests.iter().filter(|r| r.row.sent) {
        assert!(!r.row.over_budget, "request {} over budget", r.row.seq);
        // Instructions first, then (when present) the labelled memory block.
        let msgs = rec.request_messages(r);
        assert_eq!(msgs[0].content, "You are a coding agent.");
        if let Some(cp) = &r.row.checkpoint_id {
            assert!(msgs[1]
                .content
                .starts_with("<conversation-memory trust=\"untrusted\">"));
            assert!(msgs[1].content.contains(cp.as_str()));
        }
    }
    let probe = rec.turns.last().unwrap();
    match &probe.outcome {
        // The fake model names the version it found (never its text).
        TurnOutcome::Completed { reply } => assert!(
            reply.contains(&ctxbench_adapters::fake::version_token(
                "db",
                0,
                "All storage must use PostgreSQL 16."
            )),
            "{reply}"
        ),
        o => panic!("{o:?}"),
    }
    // The transcript holds every admitted message once: 1 + 14×4 messages + probe pair.
    assert_eq!(rec.transcript.len(), 2 + 30 * 4 + 2);
}

#[tokio::test]
async fn manual_compact_outcomes_are_typed_and_idempotent() {
    let script = r#"  - compact: {}
  - user: "Start. {fact:db}"
  - assistant: "Noted."
  - repeat: 6
    steps:
      - user: "Read part {i}."
      - tool_calls:
          - call: {name: read_file, args: {path: "src/p{i}.rs"}}
            result: {filler: {tokens: 420, kind: code}}
      - assistant: "Read part {i}."
  - compact: {dry_run: true}
  - compact: {}
  - compact: {}
"#;
    let rec = run(&scenario(script, ""), Mode::Compact).await;
    let outcomes: Vec<&CompactionOutcome> = rec.compactions.iter().map(|c| &c.outcome).collect();
    assert!(
        matches!(outcomes[0], CompactionOutcome::Failed { reason, .. } if reason == "no_safe_completed_span"),
        "{outcomes:?}"
    );
    assert!(matches!(outcomes[1], CompactionOutcome::Unchanged { reason } if reason == "dry_run"));
    assert!(
        matches!(outcomes[2], CompactionOutcome::Compacted { .. }),
        "{outcomes:?}"
    );
    assert!(
        matches!(outcomes[3], CompactionOutcome::Unchanged { reason } if reason == "already_compacted"),
        "{outcomes:?}"
    );
    assert!(kinds(&rec).contains(&"context.compaction.preview"));
    // No summarizer work for the first (failed) compact: it precedes any completed event.
    let first_failed = rec
        .events
        .iter()
        .position(|e| e.event.kind() == "context.compaction.failed")
        .unwrap();
    assert!(!rec.events[..first_failed]
        .iter()
        .any(|e| e.event.kind() == "context.compaction.completed"));
}

#[tokio::test]
async fn summarizer_failure_is_fail_open_and_typed() {
    let script = format!("{WORK}  - probe: [db]\n");
    let rec = run(
        &scenario(
            &script,
            "faults:\n  - {at_compaction: 1, summarizer: fail}\n",
        ),
        Mode::Compact,
    )
    .await;
    let failed: Vec<String> = rec
        .events
        .iter()
        .filter_map(|e| match &e.event {
            EngineEvent::CompactionFailed { reason, .. } => Some(reason.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        failed.first().map(String::as_str),
        Some("summarizer_failed")
    );
    // The turn that needed the compaction stopped with the typed reason; later turns
    // compacted successfully (the summarizer works again).
    assert!(rec.turns.iter().any(|t| matches!(&t.outcome,
        TurnOutcome::LimitReached { reason, .. } if reason == "summarizer_failed")));
    assert!(kinds(&rec).contains(&"context.compaction.completed"));
    assert!(rec
        .requests
        .iter()
        .filter(|r| r.row.sent)
        .all(|r| !r.row.over_budget));
}

#[tokio::test]
async fn crash_during_checkpoint_write_keeps_the_previous_checkpoint_across_restart() {
    let script = r#"  - user: "Start. {fact:db}"
  - assistant: "Noted."
  - repeat: 6
    steps:
      - user: "Read part {i}."
      - tool_calls:
          - call: {name: read_file, args: {path: "src/p{i}.rs"}}
            result: {filler: {tokens: 420, kind: code}}
      - assistant: "Read part {i}."
  - compact: {}
  - repeat: 10
    steps:
      - user: "Read more {i}."
      - assistant: {filler: {tokens: 250, kind: prose}}
  - compact: {}
  - restart: {}
  - probe: [db]
"#;
    let rec = run(
        &scenario(
            script,
            "faults:\n  - {at_compaction: 2, checkpoint_write: crash}\n",
        ),
        Mode::Compact,
    )
    .await;
    let first = match &rec.compactions[0].outcome {
        CompactionOutcome::Compacted { checkpoint_id, .. } => checkpoint_id.clone(),
        o => panic!("{o:?}"),
    };
    assert!(matches!(&rec.compactions[1].outcome,
        CompactionOutcome::Failed { reason, .. } if reason == "checkpoint_write_failed"));
    let reused = rec.events.iter().find_map(|e| match &e.event {
        EngineEvent::CheckpointReused { checkpoint_id } => Some(checkpoint_id.clone()),
        _ => None,
    });
    assert_eq!(
        reused.as_deref(),
        Some(first.as_str()),
        "restart reuses the previous valid checkpoint"
    );
}

#[tokio::test]
async fn a_corrupted_checkpoint_is_rejected_on_restart_and_rebuilt() {
    for how in ["garbage", "stale_source", "out_of_range"] {
        let script = format!(
            r#"  - user: "Start. {{fact:db}}"
  - assistant: "Noted."
  - repeat: 6
    steps:
      - user: "Read part {{i}}."
      - tool_calls:
          - call: {{name: read_file, args: {{path: "src/p{{i}}.rs"}}}}
            result: {{filler: {{tokens: 420, kind: code}}}}
      - assistant: "Read part {{i}}."
  - compact: {{}}
  - corrupt_checkpoint: {how}
  - restart: {{}}
  - compact: {{}}
  - probe: [db]
"#
        );
        let rec = run(&scenario(&script, ""), Mode::Compact).await;
        assert!(
            kinds(&rec).contains(&"context.checkpoint.rejected"),
            "{how}"
        );
        assert!(!kinds(&rec).contains(&"context.checkpoint.reused"), "{how}");
        assert!(
            matches!(
                rec.compactions[1].outcome,
                CompactionOutcome::Compacted { .. }
            ),
            "{how}: rebuilt from the transcript: {:?}",
            rec.compactions[1].outcome
        );
        assert_eq!(
            rec.outcome.status.as_str(),
            "success",
            "{how}: {:?}",
            rec.outcome
        );
    }
}

#[tokio::test]
async fn a_clean_overflow_is_recovered_once_without_duplicating_input() {
    let script = format!("{WORK}  - probe: [db]\n");
    let rec = run(
        &scenario(
            &script,
            "faults:\n  - {at_request: 12, provider: overflow}\n",
        ),
        Mode::Compact,
    )
    .await;
    let failed = rec.requests.iter().find(|r| r.row.seq == 12).unwrap();
    assert_eq!(failed.row.error_kind.as_deref(), Some("context_overflow"));
    let retry = rec.requests.iter().find(|r| r.row.seq == 13).unwrap();
    assert_eq!(retry.row.attempt, 2);
    assert_eq!(retry.row.retry_reason.as_deref(), Some("provider_overflow"));
    assert_eq!(retry.row.step, failed.row.step);
    // The admitted user message appears once in the retried request and in the transcript.
    let user = rec
        .turns
        .iter()
        .find(|t| t.step == failed.row.step)
        .unwrap()
        .user
        .clone();
    let is_user = |m: &&ctxbench_adapters::Message| {
        m.role == ctxbench_adapters::Role::User && m.content == user
    };
    let in_request = rec
        .request_messages(retry)
        .iter()
        .filter(|m| is_user(m))
        .count();
    assert_eq!(in_request, 1);
    assert_eq!(rec.transcript.iter().filter(|m| is_user(m)).count(), 1);
    assert_eq!(rec.outcome.status.as_str(), "success", "{:?}", rec.outcome);
}

#[tokio::test]
async fn overflow_after_partial_output_is_not_retried() {
    let script = format!("{WORK}  - probe: [db]\n");
    let rec = run(
        &scenario(
            &script,
            "faults:\n  - {at_request: 5, provider: overflow_after_partial_output}\n",
        ),
        Mode::Compact,
    )
    .await;
    let failed = rec.requests.iter().find(|r| r.row.seq == 5).unwrap();
    assert!(!rec
        .requests
        .iter()
        .any(|r| r.row.step == failed.row.step && r.row.attempt == 2));
    assert!(rec.turns.iter().any(|t| matches!(&t.outcome,
        TurnOutcome::Failed { reason, .. } if reason == "provider_overflow_after_output")));
}

#[test]
fn a_v1_session_migrates() {
    use ctxbench_engine::session::Session;
    let dir = tempfile::tempdir().unwrap();
    let mut s = Session::create(dir.path()).unwrap();
    s.append(ctxbench_adapters::Message::user("hi")).unwrap();
    drop(s);
    let snap = dir.path().join("session.json");
    let text = std::fs::read_to_string(&snap)
        .unwrap()
        .replace("ctxbench.session/2", "ctxbench.session/1");
    std::fs::write(&snap, text).unwrap();
    let mut s = Session::open(dir.path()).unwrap();
    assert_eq!(s.entries().len(), 1);
    assert!(s.checkpoint().is_none());
    s.append(ctxbench_adapters::Message::assistant("hello"))
        .unwrap();
    let text = std::fs::read_to_string(&snap).unwrap();
    assert!(
        text.contains("ctxbench.session/2"),
        "rewritten as v2: {text}"
    );
}

mod direct {
    //! Engine-level tests that need control over the provider.

    use ctxbench_adapters::capabilities::lookup;
    use ctxbench_adapters::fake::{FakeProvider, FakeReply, FakeScript, FakeTurn};
    use ctxbench_adapters::{
        ModelRequest, ModelResponse, OpaqueItem, Provider, ProviderError, ToolCall,
    };

    use ctxbench_engine::reference::{EngineConfig, EngineFaults, ReferenceEngine};
    use ctxbench_engine::session::Session;
    use ctxbench_sut::Mode;
    use ctxbench_sut::{
        CompactionOutcome, EngineEvent, EventSink, SystemUnderTest, ToolExecutor, ToolOutput,
        TurnIo,
    };
    use ctxbench_sut::{ContextConfig, SummaryStrategy};

    struct Events(Vec<EngineEvent>);
    impl EventSink for Events {
        fn emit(&mut self, e: EngineEvent) {
            self.0.push(e);
        }
    }
    struct NoTools;
    impl ToolExecutor for NoTools {
        fn execute(&mut self, _c: &ToolCall) -> ToolOutput {
            ToolOutput {
                content: String::new(),
                ok: false,
            }
        }
    }

    fn users(n: usize) -> Vec<String> {
        (0..n)
            .map(|i| {
                format!(
                    "Step {i}: keep going. {}",
                    "More words about the plan. ".repeat(40)
                )
            })
            .collect()
    }

    fn script(users: &[String], native: bool) -> FakeScript {
        FakeScript {
            model: "fake-16k".into(),
            context_window: 16384,
            turns: users
                .iter()
                .map(|u| FakeTurn {
                    user: u.clone(),
                    replies: vec![FakeReply::Text {
                        text: "Done.".into(),
                    }],
                })
                .collect(),
            native_compaction: native,
            ..Default::default()
        }
    }

    fn engine(dir: &std::path::Path, strategy: SummaryStrategy) -> ReferenceEngine {
        std::fs::write(dir.join("AGENTS.md"), "You are a coding agent.").unwrap();
        ReferenceEngine::create(EngineConfig {
            mode: Mode::Compact,
            model: lookup("fake-16k"),
            context: ContextConfig {
                reserved_output_tokens: 512,
                buffer_tokens: 2048,
                recent_tail_tokens: 800,
                summary_target_tokens: 300,
                strategy,
                wrapper: false,
            },
            tools: Vec::new(),
            instructions_path: dir.join("AGENTS.md"),
            session_dir: dir.join("session"),
            redact: Vec::new(),
            faults: EngineFaults::default(),
            mutation: None,
        })
        .unwrap()
    }

    async fn play(e: &mut ReferenceEngine, p: &dyn Provider, texts: &[String], ev: &mut Events) {
        for u in texts {
            e.run_turn(
                u,
                TurnIo {
                    provider: p,
                    tools: &mut NoTools,
                    events: ev,
                },
            )
            .await;
        }
    }

    /// Answers like the fake, but a summarization request never returns: it signals, then
    /// waits forever (the test cancels it).
    struct StallsOnSummary {
        inner: FakeProvider,
        called: tokio::sync::mpsc::UnboundedSender<()>,
    }

    #[async_trait::async_trait]
    impl Provider for StallsOnSummary {
        fn name(&self) -> &str {
            "fake"
        }
        async fn complete(&self, r: &ModelRequest) -> Result<ModelResponse, ProviderError> {
            if r.messages.first().is_some_and(|m| {
                m.content
                    .starts_with(ctxbench_engine::markup::SUMMARY_REQUEST_MARKER)
            }) {
                let _ = self.called.send(());
                std::future::pending::<()>().await;
            }
            self.inner.complete(r).await
        }
    }

    #[tokio::test]
    async fn cancellation_during_summary_generation_leaves_the_session_valid() {
        let dir = tempfile::tempdir().unwrap();
        let texts = users(8);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let provider = StallsOnSummary {
            inner: FakeProvider::new(script(&texts, false)),
            called: tx,
        };
        let mut e = engine(dir.path(), SummaryStrategy::Model);
        let mut ev = Events(Vec::new());
        play(&mut e, &provider.inner, &texts, &mut ev).await;
        let before = e.transcript();
        let mut tools = NoTools;
        {
            let compact = e.compact(
                false,
                TurnIo {
                    provider: &provider,
                    tools: &mut tools,
                    events: &mut ev,
                },
            );
            tokio::select! {
                _ = compact => panic!("the summarization request never returns"),
                _ = rx.recv() => {} // the summary request is in flight: cancel by dropping
            }
        }
        let reopened = Session::open(&dir.path().join("session")).unwrap();
        assert!(reopened.checkpoint().is_none(), "no half-made checkpoint");
        let after: Vec<_> = reopened
            .entries()
            .iter()
            .map(|x| x.message.clone())
            .collect();
        assert_eq!(after, before, "the transcript is intact");
    }

    /// The fake provider under another name: an opaque item made by "fake" must not go to it.
    struct Renamed(FakeProvider);

    #[async_trait::async_trait]
    impl Provider for Renamed {
        fn name(&self) -> &str {
            "other"
        }
        async fn complete(&self, r: &ModelRequest) -> Result<ModelResponse, ProviderError> {
            self.0.complete(r).await
        }
        fn native_compaction(&self) -> bool {
            false
        }
        async fn compact(&self, r: &ModelRequest) -> Result<OpaqueItem, ProviderError> {
            let _ = r;
            Err(ProviderError::Rejected {
                status: 400,
                message: "no native compaction".into(),
            })
        }
    }

    #[tokio::test]
    async fn switching_away_from_a_native_checkpoint_rebuilds_from_the_transcript() {
        let dir = tempfile::tempdir().unwrap();
        let mut texts = users(8);
        texts.push("One more after the switch.".into());
        let fake = FakeProvider::new(script(&texts, true));
        let mut e = engine(dir.path(), SummaryStrategy::Native);
        let mut ev = Events(Vec::new());
        play(&mut e, &fake, &texts[..8], &mut ev).await;
        let out = e
            .compact(
                false,
                TurnIo {
                    provider: &fake,
                    tools: &mut NoTools,
                    events: &mut ev,
                },
            )
            .await;
        assert!(
            matches!(out, CompactionOutcome::Compacted { .. }),
            "{out:?}"
        );
        let other = Renamed(FakeProvider::new(script(&texts, false)));
        let n = ev.0.len();
        play(&mut e, &other, &texts[8..], &mut ev).await;
        let rejected = ev.0[n..].iter().any(|e| {
            matches!(e, EngineEvent::CheckpointRejected { reason } if reason.contains("opaque"))
        });
        assert!(rejected, "{:?}", &ev.0[n..]);
        // The request sent to the other provider carries no opaque item.
        let budget = ev.0[n..].iter().find_map(|e| match e {
            EngineEvent::Budgeted(b) => Some(b.clone()),
            _ => None,
        });
        assert_eq!(budget.and_then(|b| b.checkpoint_id), None);
    }

    /// The compaction events of `ev`: (started strategy, completed strategy).
    fn strategies(ev: &Events) -> Vec<(String, Option<String>)> {
        let mut out: Vec<(String, Option<String>)> = Vec::new();
        for e in &ev.0 {
            match e {
                EngineEvent::CompactionStarted { strategy, .. } => {
                    out.push((strategy.clone(), None))
                }
                EngineEvent::CompactionCompleted(c) => {
                    if let Some(last) = out.last_mut() {
                        last.1 = Some(c.strategy.clone());
                    }
                }
                _ => {}
            }
        }
        out
    }

    #[tokio::test]
    async fn native_without_the_capability_falls_back_to_summarizing() {
        // Seed 000 step 6: native compaction only when the adapter offers it; otherwise the
        // prefix is summarized — not `strategy_unavailable`.
        let dir = tempfile::tempdir().unwrap();
        let texts = users(8);
        let fake = FakeProvider::new(script(&texts, false));
        let mut e = engine(dir.path(), SummaryStrategy::Native);
        let mut ev = Events(Vec::new());
        play(&mut e, &fake, &texts, &mut ev).await;
        let out = e
            .compact(
                false,
                TurnIo {
                    provider: &fake,
                    tools: &mut NoTools,
                    events: &mut ev,
                },
            )
            .await;
        assert!(
            matches!(out, CompactionOutcome::Compacted { .. }),
            "{out:?}"
        );
        let label = "extractive (fallback from native: strategy_unavailable, provider offers no native compaction)";
        let s = strategies(&ev);
        assert!(!s.is_empty());
        assert!(
            s.iter()
                .all(|(started, done)| started == label
                    && done.as_deref().is_none_or(|d| d == label)),
            "{s:?}"
        );
        let reopened = Session::open(&dir.path().join("session")).unwrap();
        let cp = reopened.checkpoint().expect("checkpoint");
        assert_eq!(cp.strategy, SummaryStrategy::Extractive);
        assert!(cp.summary.is_some() && cp.opaque_item.is_none());
    }

    /// Answers like the fake, but writes every summary with a rule nobody stated.
    struct InventsRules(FakeProvider);

    #[async_trait::async_trait]
    impl Provider for InventsRules {
        fn name(&self) -> &str {
            "fake"
        }
        async fn complete(&self, r: &ModelRequest) -> Result<ModelResponse, ProviderError> {
            if r.messages.first().is_some_and(|m| {
                m.content
                    .starts_with(ctxbench_engine::markup::SUMMARY_REQUEST_MARKER)
            }) {
                return Ok(ModelResponse {
                    message: ctxbench_adapters::Message::assistant(
                        "## Goals and constraints\n- Never deploy on Mondays.",
                    ),
                    usage: ctxbench_adapters::Usage::default(),
                    finish_reason: ctxbench_adapters::FinishReason::Stop,
                });
            }
            self.0.complete(r).await
        }
    }

    #[tokio::test]
    async fn an_invalid_model_summary_falls_back_to_the_extractive_one() {
        let dir = tempfile::tempdir().unwrap();
        let texts = users(8);
        let provider = InventsRules(FakeProvider::new(script(&texts, false)));
        let mut e = engine(dir.path(), SummaryStrategy::Model);
        let mut ev = Events(Vec::new());
        play(&mut e, &provider, &texts, &mut ev).await;
        let out = e
            .compact(
                false,
                TurnIo {
                    provider: &provider,
                    tools: &mut NoTools,
                    events: &mut ev,
                },
            )
            .await;
        assert!(
            matches!(out, CompactionOutcome::Compacted { .. }),
            "{out:?}"
        );
        assert!(
            !ev.0
                .iter()
                .any(|e| matches!(e, EngineEvent::CompactionFailed { .. })),
            "{:?}",
            ev.0
        );
        let s = strategies(&ev);
        let last = s.last().expect("a compaction");
        assert_eq!(last.0, "model", "the configured strategy started");
        assert_eq!(
            last.1.as_deref(),
            Some("extractive (fallback from model: summary_invalid, untraceable constraint)")
        );
        let calls = ev.0.iter().rev().find_map(|e| match e {
            EngineEvent::CompactionCompleted(c) => Some(c.summarizer_calls),
            _ => None,
        });
        assert_eq!(calls, Some(1), "the rejected model call counts");
        let reopened = Session::open(&dir.path().join("session")).unwrap();
        let cp = reopened.checkpoint().expect("checkpoint");
        assert_eq!(cp.strategy, SummaryStrategy::Extractive);
        assert!(!cp.summary.as_deref().unwrap_or("").contains("Mondays"));
    }
}
