//! The reference context engine (seed 000): modes `off`, `warn` and `compact`.
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
//!   then send;
//! - `compact`: use the valid checkpoint (labelled untrusted memory, below the
//!   instructions) plus the verbatim history after it; when the request is over budget,
//!   first project older tool outputs, then run the compaction transaction
//!   ([`super::compaction`]); never send an over-budget request — stop with a typed
//!   `limit_reached` instead. One clean provider overflow (no visible output) is recovered
//!   by compacting to a tighter target and retrying the same admitted input once.

mod rounds;
mod transaction;

use std::borrow::Cow;
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

use ctxbench_adapters::capabilities::{ModelCapabilities, Provenance};
use ctxbench_adapters::estimate::{Confidence, EstimationMethod, RequestEstimator, TokenLedger};
use ctxbench_adapters::{Message, ModelRequest, Provider, ProviderError, Role, ToolDefinition};

use super::checkpoint::{range_hash, Checkpoint, CHECKPOINT_SCHEMA_VERSION, SAFETY_LABELS};
use super::compaction::{
    closed_turns, source_key, tail_candidates, turn_numbers, MAX_COMPACTIONS_PER_TURN,
    MAX_SUMMARIZER_CALLS_PER_TRANSACTION, MIN_USEFUL_RECLAIM_TOKENS,
};
use super::mutants::Mutation;
use super::projection::{project, Projection, ProjectionInput};
use super::strategy::{self, Fallback, Which};
use super::summarize::extractive::{ExtractiveSummarizer, MutantExtractive};
use super::summarize::model::ModelSummarizer;
use super::summarize::native::NativeSummarizer;
use super::summarize::{
    Later, SummarizeError, Summarizer, SummaryContent, SummaryRequest, SummaryResult,
};
use super::tool_projection::project_oldest;
use crate::budget::BudgetBreakdown;
use crate::instructions::InstructionSnapshot;
use crate::session::{Entry, Session, StoredCheckpoint, TurnStatus};
use ctxbench_sut::redact::Redactor;
use ctxbench_sut::Mode;
use ctxbench_sut::{Budgeted, CompactionCompleted, EngineEvent};
use ctxbench_sut::{CompactionOutcome, Trigger};
use ctxbench_sut::{ContextConfig, SummaryStrategy};
use ctxbench_sut::{EngineError, EventSink, SystemUnderTest, ToolExecutor, TurnIo, TurnOutcome};

/// Upper bound on model requests within one run: a model that keeps calling tools cannot
/// loop forever.
pub const MAX_ROUNDS_PER_TURN: u64 = 64;

/// Most stages one staged summarization writes (each is one summarizer call that succeeded).
pub const MAX_SUMMARY_STAGES: usize = 8;
/// Most summarizer calls one staged summarization makes, refused ones included (each
/// back-down to a smaller prefix is one call; a refusal costs an estimate, not a request).
pub const MAX_SUMMARY_ATTEMPTS: usize = 48;

/// Reason of a stop when compaction cannot bring the request under budget.
pub use ctxbench_sut::reasons::CONTEXT_EXHAUSTED as REASON_EXHAUSTED;
/// Reason of a stop when mandatory context cannot fit (the protocol's vocabulary).
pub use ctxbench_sut::reasons::MANDATORY_CONTEXT as REASON_MANDATORY;

/// Compactions per input the `loop-compaction` mutant allows (a bound, so the broken
/// variant still terminates).
const MUTANT_LOOP_COMPACTIONS: u32 = 4 * MAX_COMPACTIONS_PER_TURN;

/// Infrastructure faults a test harness injects into the engine (never answers).
pub type EngineFaults = ctxbench_sut::SutFaults;

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
    /// Secret values the runtime's redaction is configured with.
    pub redact: Vec<String>,
    /// Injected infrastructure faults.
    pub faults: EngineFaults,
    /// A deliberately broken behaviour (test fixtures only; `None` in every real run).
    pub mutation: Option<Mutation>,
}

/// Per-input (per user turn) compaction state for the no-progress guard.
#[derive(Debug, Default)]
struct TurnState {
    compactions: u32,
    attempted_sources: HashSet<String>,
    overflow_recovered: bool,
}

/// The reference engine.
pub struct ReferenceEngine {
    config: EngineConfig,
    estimator: Arc<RequestEstimator>,
    session: Session,
    redactor: Redactor,
    summarizer: Box<dyn Summarizer>,
    /// The extractive summarizer a compaction falls back to ([`crate::strategy`]).
    fallback: Box<dyn Summarizer>,
    summarizer_calls: u64,
    checkpoint_writes: u64,
    /// provider input ÷ raw estimate, smoothed; 1.0 until the first usage report.
    calibration: f64,
    /// Running sums of raw estimated tokens over the append-only transcript
    /// (`[i]` = tokens of entries `..i`), so a request's history costs one subtraction
    /// and a long session's accounting stays linear.
    token_ledger: std::sync::Mutex<TokenLedger>,
    /// Whether the provider counts requests exactly (Anthropic `count_tokens`): `None`
    /// until asked once, then remembered for the session (a provider without the endpoint
    /// answers `None` and is not asked again).
    exact_counting: Option<bool>,
}

/// At most this many exact counts per physical request: count, re-plan (compact) with the
/// learned ratio while the count is over the allowance. Past it, the last count stands.
const MAX_EXACT_COUNTS_PER_REQUEST: u32 = 3;

fn summarizer_for(config: &EngineConfig) -> Box<dyn Summarizer> {
    match config.context.strategy {
        SummaryStrategy::Extractive => Box::new(ExtractiveSummarizer),
        SummaryStrategy::Model => {
            // The summarization request must fit the window with its own output allowance.
            let max_input = crate::budget::available_input(
                config.model.context_window,
                config.context.summary_target_tokens,
                config.context.buffer_tokens,
            );
            Box::new(ModelSummarizer::new(max_input).with_mutation(config.mutation))
        }
        SummaryStrategy::Native => Box::new(NativeSummarizer),
    }
}

impl ReferenceEngine {
    /// Start a new session.
    pub fn create(config: EngineConfig) -> Result<Self, EngineError> {
        let session = Session::create(&config.session_dir)?;
        let estimator = Arc::new(RequestEstimator::new(config.model.estimator));
        let extractive = || -> Box<dyn Summarizer> {
            match config.mutation {
                Some(m) if MutantExtractive::applies(m) => Box::new(MutantExtractive(m)),
                _ => Box::new(ExtractiveSummarizer),
            }
        };
        let summarizer = match config.context.strategy {
            SummaryStrategy::Extractive => extractive(),
            _ => summarizer_for(&config),
        };
        let fallback = extractive();
        let redactor = Redactor::new(&config.redact);
        Ok(ReferenceEngine {
            config,
            estimator,
            session,
            redactor,
            summarizer,
            fallback,
            summarizer_calls: 0,
            checkpoint_writes: 0,
            calibration: 1.0,
            token_ledger: std::sync::Mutex::new(TokenLedger::default()),
            exact_counting: None,
        })
    }

    /// Raw estimated tokens of transcript entries `start..end`, from the running sums
    /// (extended on demand; entries never change once appended).
    fn range_tokens(&self, start: usize, end: usize) -> u64 {
        let entries = self.session.entries();
        let mut ledger = self.token_ledger.lock().unwrap_or_else(|e| e.into_inner());
        ledger.truncate(entries.len());
        while ledger.len() < end.min(entries.len()) {
            let e = &entries[ledger.len()];
            ledger.push(&self.estimator, &e.message, &e.hash);
        }
        ledger.range(start, end)
    }

    /// Forget the running sums from `index` on (the transcript was reloaded or rewritten).
    fn forget_token_prefix(&self, index: usize) {
        self.token_ledger
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .truncate(index);
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

    fn summarizer(&self, which: Which) -> &dyn Summarizer {
        match which {
            Which::Configured => self.summarizer.as_ref(),
            Which::Fallback => self.fallback.as_ref(),
        }
    }

    fn load_instructions(&self) -> Result<InstructionSnapshot, String> {
        InstructionSnapshot::load(&self.config.instructions_path).map_err(|e| {
            format!(
                "instruction file {}: {e}",
                self.config.instructions_path.display()
            )
        })
    }

    /// Project a request. `prune` says how much older tool output is projected
    /// ([`Prune`]). `checkpoint` overrides the session's (for candidate checkpoints);
    /// `current_start` is the current turn's first message (None: no current turn, as for a
    /// manual compact between turns).
    fn project_with(
        &self,
        snapshot: &InstructionSnapshot,
        checkpoint: Option<&Checkpoint>,
        current_start: Option<usize>,
        prune: impl Into<Prune>,
    ) -> (Projection, usize) {
        let prune: Prune = prune.into();
        let entries = self.session.entries();
        let end = current_start.unwrap_or(entries.len());
        let mutation = self.config.mutation;
        let use_checkpoint = self.config.mode == Mode::Compact;
        let checkpoint = if use_checkpoint { checkpoint } else { None };
        let covered = checkpoint.map(|c| c.covered_end()).unwrap_or(0).min(end);
        let no_instructions = InstructionSnapshot::of(String::new());
        let snapshot = if mutation == Some(Mutation::DropInstructions) {
            &no_instructions
        } else {
            snapshot
        };
        let history: &[Entry] = if mutation == Some(Mutation::DropHistory) {
            &[]
        } else {
            &entries[covered..end]
        };
        let current: &[Entry] = &entries[end..];
        let (history, current, projected) = if prune != Prune::None {
            // Protect the newest round: results after the current turn's last assistant
            // message are what the model has not answered yet.
            let protect = current
                .iter()
                .rposition(|e| e.message.role == Role::Assistant)
                .unwrap_or(current.len());
            let mut combined: Vec<Entry> = history.to_vec();
            combined.extend_from_slice(current);
            let excess = match prune {
                Prune::Oldest(excess) => excess,
                _ => u64::MAX,
            };
            let (mut p, n) =
                project_oldest(&combined, history.len() + protect, &self.estimator, excess);
            if mutation == Some(Mutation::DropArchiveRefs) {
                mutant_drop_projection_refs(&mut p, &combined);
            }
            let cur = p[history.len()..].to_vec();
            let hist = p[..history.len()].to_vec();
            (Cow::Owned(hist), Cow::Owned(cur), n)
        } else {
            // No copy of the history when nothing is rewritten.
            (Cow::Borrowed(history), Cow::Borrowed(current), 0)
        };
        // The history's raw tokens from the running sums when it is the transcript range
        // itself (not rewritten by tool-output projection, not dropped by a mutant).
        let history_tokens =
            (projected == 0 && prune == Prune::None && mutation != Some(Mutation::DropHistory))
                .then(|| self.range_tokens(covered, end));
        let empty_recap = mutation == Some(Mutation::EmptyRecap)
            && checkpoint.is_some_and(|c| c.retained_tail_start == c.retained_tail_end);
        // Mutant (`empty-recap`): no verbatim tail was kept, and the memory is left out too.
        let memory = checkpoint.filter(|_| !empty_recap).map(|c| {
            let m = c.memory_message();
            let h = m.content_hash();
            (m, h)
        });
        let mut p = project(
            &ProjectionInput {
                instructions: snapshot,
                memory: memory.as_ref().map(|(m, h)| (m, *h)),
                history: &history,
                history_tokens,
                current: &current,
                tools: &self.config.tools,
                model: &self.config.model.model,
                window: self.config.model.context_window,
                requested_output: self.requested_output(),
                buffer: self.config.context.buffer_tokens,
                calibration: self.calibration,
            },
            &self.estimator,
        );
        if mutation == Some(Mutation::MemoryAboveInstructions) && checkpoint.is_some() {
            mutant_memory_first(&mut p.request.messages);
        }
        if self.config.context.wrapper {
            if mutation == Some(Mutation::WrapFullTranscript) {
                // Mutant: the wrapper carries the whole transcript, not the active view.
                let keep = usize::from(!snapshot.text.is_empty());
                p.request.messages.truncate(keep);
                p.request
                    .messages
                    .extend(entries.iter().map(|e| e.message.clone()));
            }
            self.wrap(&mut p);
        }
        (p, projected)
    }

    /// The "Codex wrapper" (seed 000 §Forge engine coverage): the instructions stay a system
    /// message; everything else becomes the JSON array inside ONE user message. The budget
    /// is the estimate of that serialized form: the JSON overhead (keys, escaping) is
    /// reported as framing, so compaction triggers on what is actually sent.
    fn wrap(&self, p: &mut Projection) {
        p.request.messages = ctxbench_adapters::wrapper::wrap_messages(&p.request.messages);
        let wrapped_raw = self.estimator.request_tokens(&p.request);
        let overhead = wrapped_raw.saturating_sub(p.raw_total);
        p.budget.framing += (overhead as f64 * self.calibration).ceil() as u64;
        p.budget = p.budget.with_total();
        p.raw_total = wrapped_raw.max(p.raw_total);
    }

    /// Prepare the next request of a turn. In `compact` mode this prunes and compacts until
    /// the request fits `target` (default: the available input), or stops typed.
    #[allow(clippy::too_many_arguments)]
    async fn prepare(
        &mut self,
        snapshot: &InstructionSnapshot,
        turn_start: usize,
        round: u64,
        target: Option<u64>,
        trigger: Trigger,
        state: &mut TurnState,
        provider: &dyn Provider,
        events: &mut dyn EventSink,
    ) -> Result<Projection, TurnOutcome> {
        if self.config.mode != Mode::Compact {
            return Ok(self.project_with(snapshot, None, Some(turn_start), false).0);
        }
        self.ensure_checkpoint_usable(provider, events);
        if self.config.mutation == Some(Mutation::SilentOverBudgetCompact) {
            // Mutant: send the request as it is, over budget or not.
            let checkpoint = self.session.checkpoint().cloned();
            return Ok(self
                .project_with(snapshot, checkpoint.as_ref(), Some(turn_start), false)
                .0);
        }
        let mut prune = Prune::None;
        loop {
            let checkpoint = self.session.checkpoint().cloned();
            let (p, projected) =
                self.project_with(snapshot, checkpoint.as_ref(), Some(turn_start), prune);
            let budget = p.budget;
            let target = target
                .unwrap_or(budget.available_input)
                .min(budget.available_input);
            if budget.total <= target {
                if projected > 0 {
                    events.emit(EngineEvent::ToolOutputProjected {
                        round,
                        results: projected as u64,
                    });
                }
                return Ok(p);
            }
            // Pressure is met by the least loss first: the oldest tool results projected
            // just far enough (with a margin for the estimate), then all of them, and only
            // then a compaction.
            match prune {
                Prune::None => {
                    let excess = budget.total - target * PRUNE_LOW_WATER_PERCENT / 100;
                    prune = Prune::Oldest(
                        (excess as f64 / self.calibration.max(0.1) * 1.1).ceil() as u64 + 16,
                    );
                    continue;
                }
                Prune::Oldest(_) => {
                    prune = Prune::All;
                    continue;
                }
                Prune::All => {}
            }
            if budget.mandatory() > budget.available_input {
                return Err(self.limit(
                    events,
                    REASON_MANDATORY,
                    mandatory_detail(&budget),
                    budget,
                ));
            }
            let max_compactions = if self.config.mutation == Some(Mutation::LoopCompaction) {
                MUTANT_LOOP_COMPACTIONS
            } else {
                MAX_COMPACTIONS_PER_TURN
            };
            if state.compactions >= max_compactions {
                return Err(self.limit(
                    events,
                    "no_progress",
                    format!(
                        "{} compactions for this input already; the request still needs {} of {} tokens",
                        state.compactions, budget.total, target
                    ),
                    budget,
                ));
            }
            state.compactions += 1;
            let outcome = self
                .transaction(
                    trigger,
                    snapshot,
                    Some(turn_start),
                    Some(target),
                    true,
                    state,
                    provider,
                    events,
                )
                .await;
            match outcome {
                CompactionOutcome::Compacted { .. } => continue,
                CompactionOutcome::Unchanged { reason } => {
                    return Err(self.limit(
                        events,
                        REASON_EXHAUSTED,
                        format!(
                        "compaction changed nothing ({reason}); the request needs {} of {} tokens",
                        budget.total, target
                    ),
                        budget,
                    ))
                }
                CompactionOutcome::Failed { reason, detail } => {
                    return Err(self.limit(events, &reason, detail, budget))
                }
            }
        }
    }

    /// An opaque provider item may only go back to the provider and model that created it;
    /// with any other, the checkpoint is dropped and rebuilt from the transcript.
    fn ensure_checkpoint_usable(&mut self, provider: &dyn Provider, events: &mut dyn EventSink) {
        let incompatible = self.session.checkpoint().and_then(|c| {
            c.opaque_item.as_ref().and_then(|o| {
                (o.provider != provider.name() || o.model != self.config.model.model).then(|| {
                    format!(
                        "opaque compaction item of {}/{} cannot be sent to {}/{}; rebuilding from the transcript",
                        o.provider,
                        o.model,
                        provider.name(),
                        self.config.model.model
                    )
                })
            })
        });
        if let Some(reason) = incompatible {
            if self.session.drop_checkpoint().is_ok() {
                events.emit(EngineEvent::CheckpointRejected { reason });
            }
        }
    }

    /// The provider's exact count of `request`, when it offers one (seed 000 §Token
    /// estimation: a provider tokenizer is preferred to a local one). A provider without
    /// the endpoint is asked once per session; a failed count falls back to the local
    /// estimate for this request (the send itself will surface a real outage).
    async fn exact_count(
        &mut self,
        request: &ModelRequest,
        provider: &dyn Provider,
    ) -> Option<u64> {
        if self.exact_counting == Some(false) {
            return None;
        }
        match provider.count_tokens(request).await {
            Ok(Some(n)) => {
                self.exact_counting = Some(true);
                Some(n)
            }
            Ok(None) => {
                self.exact_counting = Some(false);
                None
            }
            Err(_) => None,
        }
    }

    /// Learn provider input ÷ raw estimate (exponentially smoothed, never below 1).
    fn learn_calibration(&mut self, raw_estimate: u64, provider_input: u64) {
        if raw_estimate == 0 || provider_input == 0 {
            return;
        }
        let ratio = provider_input as f64 / raw_estimate as f64;
        self.calibration = if self.calibration == 1.0 {
            ratio.max(1.0)
        } else {
            (0.5 * self.calibration + 0.5 * ratio).max(1.0)
        };
    }

    fn limit(
        &self,
        events: &mut dyn EventSink,
        reason: &str,
        detail: String,
        budget: BudgetBreakdown,
    ) -> TurnOutcome {
        let reason = if self.config.mutation == Some(Mutation::UntypedLimitReason) {
            String::new()
        } else {
            reason.to_string()
        };
        events.emit(EngineEvent::LimitReached {
            reason: reason.clone(),
            detail: detail.clone(),
            budget,
        });
        TurnOutcome::LimitReached {
            reason,
            detail,
            budget: Some(budget),
        }
    }
}

/// `memory-above-instructions` mutant: move the checkpoint memory to the top of the
/// request and strip its untrusted-memory label.
fn mutant_memory_first(messages: &mut Vec<Message>) {
    use crate::markup::{MEMORY_CLOSE, MEMORY_OPEN};
    let Some(i) = messages
        .iter()
        .position(|m| m.role == Role::System && m.content.contains(MEMORY_OPEN))
    else {
        return;
    };
    let memory = messages.remove(i);
    let text = memory
        .content
        .replace(MEMORY_OPEN, "")
        .replace(MEMORY_CLOSE, "")
        .trim()
        .to_string();
    messages.insert(0, Message::system(text));
}

/// `drop-archive-refs` mutant: cut the `refs:` list off every projected tool result.
fn mutant_drop_projection_refs(projected: &mut [Entry], originals: &[Entry]) {
    for (p, o) in projected.iter_mut().zip(originals) {
        if p.hash == o.hash {
            continue;
        }
        if let Some(cut) = p.message.content.find(" refs: ") {
            p.message.content.truncate(cut);
            p.hash = p.message.content_hash();
        }
    }
}

/// `split-tool-pairs` mutant: move a tail start on a turn boundary to just after the turn's
/// first assistant tool call, so the call is summarized and its results stay verbatim.
fn mutant_mid_turn(entries: &[Entry], start: usize, history_end: usize) -> usize {
    for (j, e) in entries.iter().enumerate().take(history_end).skip(start) {
        if j > start && e.message.role == Role::User {
            break;
        }
        if e.message.role == Role::Assistant && !e.message.tool_calls.is_empty() {
            return if j + 1 < history_end { j + 1 } else { start };
        }
    }
    start
}

fn mandatory_detail(budget: &BudgetBreakdown) -> String {
    format!(
        "mandatory context needs {} tokens (instructions {}, current request {}, tool schemas {}, \
         continuation {}, framing {}) but only {} are available (window {} − reserve {})",
        budget.mandatory(),
        budget.instructions,
        budget.current_request,
        budget.tool_schemas,
        budget.continuation,
        budget.framing,
        budget.available_input,
        budget.window,
        budget.reserve
    )
}

fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
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
        let snapshot = match self.load_instructions() {
            Ok(s) => s,
            Err(detail) => return TurnOutcome::Errored { detail },
        };
        events.emit(EngineEvent::RunStarted {
            mode: self.config.mode.as_str().into(),
            instruction_hash: snapshot.hash.to_hex(),
            transcript_messages: self.session.entries().len() as u64,
        });
        // Admit the input once, and commit it before any request is sent: a crash from
        // here on restarts with the input in the transcript (the rest of the turn is
        // group-committed at its end).
        if let Err(e) = self
            .session
            .begin_turn()
            .and_then(|_| self.session.append(Message::user(user)).map(|_| ()))
            .and_then(|_| self.session.commit())
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

    async fn compact(&mut self, dry_run: bool, io: TurnIo<'_>) -> CompactionOutcome {
        self.compact_manual(dry_run, io.provider, io.events).await
    }

    fn restart(&mut self, events: &mut dyn EventSink) -> Result<(), EngineError> {
        let trusted = if self.config.mutation == Some(Mutation::TrustStaleCheckpoint) {
            self.session.checkpoint().cloned()
        } else {
            None
        };
        // Drop everything held in memory, including the estimator cache, and reload.
        self.session.commit()?;
        let session = Session::open(&self.config.session_dir)?;
        self.session = session;
        self.forget_token_prefix(0);
        self.estimator = Arc::new(RequestEstimator::new(self.config.model.estimator));
        self.calibration = 1.0;
        events.emit(EngineEvent::SessionRestored {
            messages: self.session.entries().len() as u64,
            transcript_hash: self.session.chain_head().to_hex(),
        });
        match self.session.opened_checkpoint() {
            StoredCheckpoint::None => {}
            StoredCheckpoint::Valid(c) => events.emit(EngineEvent::CheckpointReused {
                checkpoint_id: c.id.clone(),
            }),
            StoredCheckpoint::Rejected(reason) => {
                let reason = reason.clone();
                match trusted {
                    // Mutant: the stored checkpoint failed validation; use it anyway.
                    Some(c) if self.session.set_checkpoint(c.clone()).is_ok() => {
                        events.emit(EngineEvent::CheckpointReused {
                            checkpoint_id: c.id,
                        })
                    }
                    _ => events.emit(EngineEvent::CheckpointRejected { reason }),
                }
            }
        }
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

    fn declaration(&self) -> ctxbench_sut::Declaration {
        crate::markup::declaration()
    }

    async fn corrupt_checkpoint(
        &mut self,
        how: ctxbench_sut::Corruption,
    ) -> Result<bool, EngineError> {
        crate::session::corrupt_checkpoint(&self.config.session_dir, how)
            .map_err(|e| EngineError::Session(e.to_string()))
    }
}

#[cfg(test)]
mod tests;

/// How much older tool output a request projects (seed 000 §In-run context pressure,
/// step 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Prune {
    /// Every result verbatim.
    None,
    /// The oldest results, until about this many tokens are saved.
    Oldest(u64),
    /// Every result outside the newest round.
    All,
}

impl From<bool> for Prune {
    fn from(all: bool) -> Self {
        if all {
            Prune::All
        } else {
            Prune::None
        }
    }
}

/// Pruning projects the oldest tool results until the request is down to this share of
/// its target, not merely under it: a request pruned only to the limit would need another
/// projection on the next step, and the next, and save nothing.
const PRUNE_LOW_WATER_PERCENT: u64 = 60;
