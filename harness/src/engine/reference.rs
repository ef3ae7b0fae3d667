//! The reference context engine (seed 000), modes `off` and `warn`.
//!
//! Per run (user turn): reload the instruction file and freeze it; admit the user message
//! into the canonical transcript (persisted before anything is sent); then, for every
//! physical request, project the request, estimate it by category, emit
//! `context.budgeted`, and apply the mode:
//!
//! - `off`: send it as it is (current behaviour), still measuring;
//! - `warn`: if mandatory context (instructions, current request, tools, protocol
//!   continuation) cannot fit the available input, stop with `limit_reached` **before** the
//!   provider call; otherwise, if the whole request is over budget, emit `context.warning`,
//!   then send.
//!
//! `compact` is refused at construction until the compaction engine lands: it must never
//! silently behave like `warn`.

use std::path::PathBuf;
use std::sync::Arc;

use ctxbench_adapters::capabilities::{ModelCapabilities, Provenance};
use ctxbench_adapters::estimate::RequestEstimator;
use ctxbench_adapters::{Message, ProviderError, ToolDefinition};

use super::events::{Budgeted, EngineEvent};
use super::mutants::Mutation;
use super::projection::{project, ProjectionInput};
use super::{EngineError, EventSink, SystemUnderTest, TurnIo, TurnOutcome};
use crate::instructions::InstructionSnapshot;
use crate::mode::Mode;
use crate::scenario::ContextConfig;
use crate::session::{Session, TurnStatus};

/// Upper bound on model requests within one run: a model that keeps calling tools cannot
/// loop forever.
pub const MAX_ROUNDS_PER_TURN: u64 = 64;

/// Reason of a stop when mandatory context cannot fit.
pub const REASON_MANDATORY: &str = "mandatory_context_exceeds_budget";

/// Configuration of the reference engine: what a real runtime is configured with.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Context mode.
    pub mode: Mode,
    /// Model facts (window, output limit, estimator, provenance).
    pub model: ModelCapabilities,
    /// Budget configuration.
    pub context: ContextConfig,
    /// Tools the runtime advertises.
    pub tools: Vec<ToolDefinition>,
    /// The instruction file, reloaded at the start of every run.
    pub instructions_path: PathBuf,
    /// Where the session lives.
    pub session_dir: PathBuf,
    /// A deliberately broken behaviour (test fixtures only; `None` in every real run).
    pub mutation: Option<Mutation>,
}

/// The reference engine.
pub struct ReferenceEngine {
    config: EngineConfig,
    estimator: Arc<RequestEstimator>,
    session: Session,
}

impl ReferenceEngine {
    /// Start a new session.
    pub fn create(config: EngineConfig) -> Result<Self, EngineError> {
        check_mode(config.mode)?;
        let session = Session::create(&config.session_dir)?;
        let estimator = Arc::new(RequestEstimator::new(config.model.estimator));
        Ok(ReferenceEngine {
            config,
            estimator,
            session,
        })
    }

    fn window_source(&self) -> &'static str {
        match self.config.model.provenance {
            Provenance::Table { .. } => "table",
            Provenance::Declared { .. } => "declared",
            Provenance::ConservativeFallback { .. } => "conservative-fallback",
        }
    }

    fn requested_output(&self) -> u64 {
        self.config
            .context
            .reserved_output_tokens
            .min(self.config.model.max_output_tokens)
    }
}

fn check_mode(mode: Mode) -> Result<(), EngineError> {
    if mode == Mode::Compact {
        return Err(EngineError::Unsupported(
            "mode `compact` is not available in this build yet: the compaction engine \
             (issue #3) has not landed; run `--modes off,warn`"
                .into(),
        ));
    }
    Ok(())
}

#[async_trait::async_trait]
impl SystemUnderTest for ReferenceEngine {
    fn name(&self) -> &str {
        "reference"
    }

    async fn run_turn(&mut self, user: &str, io: TurnIo<'_>) -> TurnOutcome {
        let TurnIo {
            provider,
            tools,
            events,
        } = io;
        // Reload and freeze the instructions for this run.
        let snapshot = match InstructionSnapshot::load(&self.config.instructions_path) {
            Ok(s) => s,
            Err(e) => {
                return TurnOutcome::Errored {
                    detail: format!(
                        "instruction file {}: {e}",
                        self.config.instructions_path.display()
                    ),
                }
            }
        };
        events.emit(EngineEvent::RunStarted {
            mode: self.config.mode.as_str().into(),
            instruction_hash: snapshot.hash.to_hex(),
            transcript_messages: self.session.entries().len() as u64,
        });
        // Admit the input once; it is persisted before any request is sent.
        if let Err(e) = self
            .session
            .begin_turn()
            .and_then(|_| self.session.append(Message::user(user)).map(|_| ()))
        {
            return TurnOutcome::Errored {
                detail: e.to_string(),
            };
        }
        let turn_start = self.session.entries().len() - 1;
        let outcome = self
            .play_rounds(&snapshot, turn_start, provider, tools, events)
            .await;
        let status = match outcome {
            TurnOutcome::Completed { .. } => TurnStatus::Completed,
            _ => TurnStatus::Incomplete,
        };
        if let Err(e) = self.session.end_turn(status) {
            return TurnOutcome::Errored {
                detail: e.to_string(),
            };
        }
        outcome
    }

    fn restart(&mut self, events: &mut dyn EventSink) -> Result<(), EngineError> {
        // Drop everything held in memory, including the estimator cache, and reload.
        let session = Session::open(&self.config.session_dir)?;
        self.session = session;
        self.estimator = Arc::new(RequestEstimator::new(self.config.model.estimator));
        events.emit(EngineEvent::SessionRestored {
            messages: self.session.entries().len() as u64,
            transcript_hash: self.session.chain_head().to_hex(),
        });
        Ok(())
    }

    fn transcript(&self) -> Vec<Message> {
        self.session
            .entries()
            .iter()
            .map(|e| e.message.clone())
            .collect()
    }

    fn transcript_hash(&self) -> String {
        self.session.chain_head().to_hex()
    }
}

impl ReferenceEngine {
    async fn play_rounds(
        &mut self,
        snapshot: &InstructionSnapshot,
        turn_start: usize,
        provider: &dyn ctxbench_adapters::Provider,
        tools: &mut dyn super::ToolExecutor,
        events: &mut dyn EventSink,
    ) -> TurnOutcome {
        let requested_output = self.requested_output();
        let mutation = self.config.mutation;
        let no_instructions = InstructionSnapshot::of(String::new());
        let snapshot = if mutation == Some(Mutation::DropInstructions) {
            &no_instructions
        } else {
            snapshot
        };
        for round in 0..MAX_ROUNDS_PER_TURN {
            let attempt = 1;
            let entries = self.session.entries();
            let projection = project(
                &ProjectionInput {
                    instructions: snapshot,
                    memory: None,
                    history: if mutation == Some(Mutation::DropHistory) {
                        &[]
                    } else {
                        &entries[..turn_start]
                    },
                    current: &entries[turn_start..],
                    tools: &self.config.tools,
                    model: &self.config.model.model,
                    window: self.config.model.context_window,
                    requested_output,
                    buffer: self.config.context.buffer_tokens,
                },
                &self.estimator,
            );
            let budget = projection.budget;
            events.emit(EngineEvent::Budgeted(Budgeted {
                round,
                attempt,
                model: self.config.model.model.clone(),
                window_source: self.window_source().into(),
                estimator: self.estimator.kind().as_str().into(),
                estimation_method: self.estimator.method().as_str().into(),
                confidence: self.estimator.confidence().as_str().into(),
                budget,
                retained_messages: projection.retained_messages,
                checkpoint_id: None,
                instruction_hash: snapshot.hash.to_hex(),
                retry_reason: None,
            }));
            if self.config.mode == Mode::Warn {
                if budget.mandatory() > budget.available_input
                    && mutation != Some(Mutation::IgnoreMandatoryLimit)
                {
                    let detail = format!(
                        "mandatory context needs {} tokens (instructions {}, current request {}, \
                         tool schemas {}, continuation {}, framing {}) but only {} are available \
                         (window {} − reserve {})",
                        budget.mandatory(),
                        budget.instructions,
                        budget.current_request,
                        budget.tool_schemas,
                        budget.continuation,
                        budget.framing,
                        budget.available_input,
                        budget.window,
                        budget.reserve
                    );
                    let reason = if mutation == Some(Mutation::UntypedLimitReason) {
                        String::new()
                    } else {
                        REASON_MANDATORY.to_string()
                    };
                    events.emit(EngineEvent::LimitReached {
                        reason: reason.clone(),
                        detail: detail.clone(),
                        budget,
                    });
                    return TurnOutcome::LimitReached {
                        reason,
                        detail,
                        budget,
                    };
                }
                if budget.over_budget() && mutation != Some(Mutation::SilentOverBudget) {
                    events.emit(EngineEvent::Warning {
                        round,
                        attempt,
                        total: budget.total,
                        available_input: budget.available_input,
                        over_by: budget.total - budget.available_input,
                    });
                }
            }
            let response = match provider.complete(&projection.request).await {
                Ok(r) => r,
                Err(err) => {
                    let limit = match &err {
                        ProviderError::ContextOverflow { limit, .. } => *limit,
                        _ => None,
                    };
                    events.emit(EngineEvent::ProviderError {
                        round,
                        attempt,
                        error_kind: err.kind().into(),
                        estimated_input: budget.total,
                        provider_limit: limit,
                        message: err.to_string(),
                    });
                    return match err {
                        ProviderError::ContextOverflow { .. } => TurnOutcome::Failed {
                            reason: "provider_overflow".into(),
                            detail: format!(
                                "{err} (estimated input {} of {} available)",
                                budget.total, budget.available_input
                            ),
                        },
                        ProviderError::Rejected { .. } => TurnOutcome::Failed {
                            reason: "provider_rejected".into(),
                            detail: err.to_string(),
                        },
                        other => TurnOutcome::Errored {
                            detail: other.to_string(),
                        },
                    };
                }
            };
            events.emit(EngineEvent::Usage {
                round,
                attempt,
                estimated_input: budget.total,
                provider_input: response.usage.input_tokens,
                provider_output: response.usage.output_tokens,
            });
            let message = response.message;
            let calls = message.tool_calls.clone();
            let text = message.content.clone();
            if let Err(e) = self.session.append(message) {
                return TurnOutcome::Errored {
                    detail: e.to_string(),
                };
            }
            if calls.is_empty() {
                return TurnOutcome::Completed { reply: text };
            }
            for call in &calls {
                let out = tools.execute(call);
                if let Err(e) = self
                    .session
                    .append(Message::tool_result(call.id.clone(), out.content))
                {
                    return TurnOutcome::Errored {
                        detail: e.to_string(),
                    };
                }
            }
        }
        TurnOutcome::Failed {
            reason: "round_limit".into(),
            detail: format!("the model kept calling tools for {MAX_ROUNDS_PER_TURN} rounds"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{ToolExecutor, ToolOutput};
    use ctxbench_adapters::capabilities::lookup;
    use ctxbench_adapters::fake::{FakeProvider, FakeReply, FakeScript, FakeToolCall, FakeTurn};
    use ctxbench_adapters::ToolCall;

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

    #[test]
    fn compact_is_refused_until_it_exists() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("AGENTS.md"), "x").unwrap();
        let r = ReferenceEngine::create(EngineConfig {
            mode: Mode::Compact,
            model: lookup("fake-16k"),
            context: ContextConfig::default(),
            tools: Vec::new(),
            instructions_path: dir.path().join("AGENTS.md"),
            session_dir: dir.path().join("session"),
            mutation: None,
        });
        assert!(matches!(r, Err(EngineError::Unsupported(_))));
    }
}
