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
use super::summarize::{SummarizeError, Summarizer, SummaryContent, SummaryRequest, SummaryResult};
use super::tool_projection::project_tool_outputs;
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

/// Most summarizer calls one staged summarization makes (each stage, and each back-down to a
/// smaller prefix, is one call).
pub const MAX_SUMMARY_STAGES: usize = 8;

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

    /// Project a request. `checkpoint` overrides the session's (for candidate checkpoints);
    /// `current_start` is the current turn's first message (None: no current turn, as for a
    /// manual compact between turns).
    fn project_with(
        &self,
        snapshot: &InstructionSnapshot,
        checkpoint: Option<&Checkpoint>,
        current_start: Option<usize>,
        prune: bool,
    ) -> (Projection, usize) {
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
        let (history, current, projected) = if prune {
            // Protect the newest round: results after the current turn's last assistant
            // message are what the model has not answered yet.
            let protect = current
                .iter()
                .rposition(|e| e.message.role == Role::Assistant)
                .unwrap_or(current.len());
            let mut combined: Vec<Entry> = history.to_vec();
            combined.extend_from_slice(current);
            let (mut p, n) =
                project_tool_outputs(&combined, history.len() + protect, &self.estimator);
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
        let history_tokens = (projected == 0 && !prune && mutation != Some(Mutation::DropHistory))
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
        let mut prune = false;
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
            if !prune {
                prune = true;
                continue;
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
                    prune,
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

    /// The compaction transaction (see [`super::compaction`]).
    #[allow(clippy::too_many_arguments)]
    async fn transaction(
        &mut self,
        trigger: Trigger,
        snapshot: &InstructionSnapshot,
        current_start: Option<usize>,
        target: Option<u64>,
        prune: bool,
        state: &mut TurnState,
        provider: &dyn Provider,
        events: &mut dyn EventSink,
    ) -> CompactionOutcome {
        let calls_before = self.summarizer_calls;
        // Seed 000 step 6: native only when the provider offers it.
        let planned =
            strategy::by_capability(self.summarizer.strategy(), provider.native_compaction());
        let started = match &planned {
            Some(f) => strategy::label(self.fallback.strategy(), Some(f)),
            None => strategy::label(self.summarizer.strategy(), None),
        };
        events.emit(EngineEvent::CompactionStarted {
            trigger: trigger.as_str().into(),
            strategy: started,
        });
        let outcome = self
            .transaction_inner(
                trigger,
                snapshot,
                current_start,
                target,
                prune,
                state,
                planned,
                provider,
                events,
            )
            .await;
        let outcome = match outcome {
            CompactionOutcome::Failed { detail, .. }
                if self.config.mutation == Some(Mutation::MistypeFailureReason) =>
            {
                // Mutant: every failure is blamed on the summarizer.
                CompactionOutcome::Failed {
                    reason: "summarizer_failed".into(),
                    detail,
                }
            }
            other => other,
        };
        match &outcome {
            CompactionOutcome::Compacted { .. } => {}
            CompactionOutcome::Unchanged { reason } => {
                events.emit(EngineEvent::CompactionUnchanged {
                    trigger: trigger.as_str().into(),
                    reason: reason.clone(),
                })
            }
            CompactionOutcome::Failed { reason, detail } => {
                events.emit(EngineEvent::CompactionFailed {
                    trigger: trigger.as_str().into(),
                    reason: reason.clone(),
                    detail: detail.clone(),
                    summarizer_calls: (self.summarizer_calls - calls_before) as u32,
                })
            }
        }
        outcome
    }

    /// Summarize `entries[covered..tail_start]` rolling `previous`, in stages when the whole
    /// span is too large for one summarization request (seed 004: back down to a smaller
    /// completed prefix): the oldest part that fits — halving at turn boundaries — is
    /// summarized first, and each later part rolls the stage before it. At most
    /// [`MAX_SUMMARY_STAGES`] requests; the last stage's result is the checkpoint's content.
    ///
    /// `model_calls` counts the model calls made, failed ones included; a successful result
    /// reports the total.
    #[allow(clippy::too_many_arguments)]
    async fn summarize_staged(
        &self,
        which: Which,
        previous: Option<&Checkpoint>,
        entries: &[Entry],
        covered: usize,
        tail_start: usize,
        boundaries: &[usize],
        provider: &dyn Provider,
        model_calls: &mut u32,
    ) -> Result<SummaryResult, SummarizeError> {
        let summarizer = self.summarizer(which);
        let no_redaction = Redactor::default();
        let redactor = if self.config.mutation == Some(Mutation::LeakSecret) {
            &no_redaction
        } else {
            &self.redactor
        };
        let mut staged: Option<Checkpoint> = previous.cloned();
        let mut start = covered;
        let mut calls = 0usize;
        loop {
            let mut end = tail_start;
            let result = loop {
                let numbers = turn_numbers(self.session.turns(), start, end);
                calls += 1;
                let r = summarizer
                    .summarize(
                        SummaryRequest {
                            previous: staged.as_ref(),
                            covered: &entries[start..end],
                            first_index: start,
                            turn_numbers: &numbers,
                            target_tokens: self.config.context.summary_target_tokens,
                            redactor,
                            estimator: &self.estimator,
                            model: &self.config.model.model,
                        },
                        provider,
                    )
                    .await;
                match &r {
                    Ok(done) => *model_calls += done.model_calls,
                    // A rejected or failed answer was a model call too.
                    Err(SummarizeError::Invalid(_) | SummarizeError::Failed(_))
                        if summarizer.strategy() != SummaryStrategy::Extractive =>
                    {
                        *model_calls += 1
                    }
                    Err(_) => {}
                }
                // Too large: the turn boundary nearest the middle of what is left.
                let smaller = boundaries
                    .iter()
                    .copied()
                    .filter(|&b| b > start && b < end)
                    .min_by_key(|&b| b.abs_diff(start + (end - start) / 2));
                match (r, smaller) {
                    (Err(SummarizeError::InputTooLarge(_)), Some(b))
                        if calls < MAX_SUMMARY_STAGES =>
                    {
                        end = b
                    }
                    (r, _) => break r?,
                }
            };
            if end >= tail_start || calls >= MAX_SUMMARY_STAGES {
                if end < tail_start {
                    return Err(SummarizeError::InputTooLarge(format!(
                        "{MAX_SUMMARY_STAGES} staged summarization requests covered messages \
                         {covered}–{end} of {covered}–{tail_start}"
                    )));
                }
                return Ok(SummaryResult {
                    model_calls: *model_calls,
                    ..result
                });
            }
            // A stage: what the next part rolls up (never persisted).
            let (summary, opaque_item) = match result.content {
                SummaryContent::Text(t) => (Some(t), None),
                SummaryContent::Opaque(o) => (None, Some(o)),
            };
            staged = Some(Checkpoint {
                schema_version: CHECKPOINT_SCHEMA_VERSION,
                id: format!("stage-{end}"),
                strategy: summarizer.strategy(),
                summarized_through: end - 1,
                source_hash: range_hash(&entries[..end]),
                retained_tail_start: end,
                retained_tail_end: tail_start,
                retained_tail_hash: String::new(),
                summary,
                opaque_item,
                compaction_model_id: result.model_id.clone(),
                estimated_tokens: 0,
                source_message_count: end,
                created_at: String::new(),
                safety_labels: Vec::new(),
                previous_id: previous.map(|p| p.id.clone()),
            });
            start = end;
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn transaction_inner(
        &mut self,
        trigger: Trigger,
        snapshot: &InstructionSnapshot,
        current_start: Option<usize>,
        target: Option<u64>,
        prune: bool,
        state: &mut TurnState,
        planned: Option<Fallback>,
        provider: &dyn Provider,
        events: &mut dyn EventSink,
    ) -> CompactionOutcome {
        let history_end = current_start.unwrap_or(self.session.entries().len());
        let previous = self.session.checkpoint().cloned();
        let covered = previous.as_ref().map(|c| c.covered_end()).unwrap_or(0);
        let spans = closed_turns(self.session.turns(), covered, history_end);
        if spans.is_empty() {
            return if previous.is_some() {
                CompactionOutcome::Unchanged {
                    reason: "already_compacted".into(),
                }
            } else if closed_turns(self.session.turns(), 0, history_end).is_empty() {
                CompactionOutcome::Failed {
                    reason: "no_safe_completed_span".into(),
                    detail: "no completed turn precedes the current one: an open turn and its \
                             pending tool calls cannot be summarized"
                        .into(),
                }
            } else {
                CompactionOutcome::Unchanged {
                    reason: "nothing_to_compact".into(),
                }
            };
        }
        let entries = self.session.entries().to_vec();
        let tokens = |s: usize, e: usize| -> u64 { self.range_tokens(s, e) };
        let mut candidates = tail_candidates(
            &spans,
            covered,
            history_end,
            self.config.context.recent_tail_tokens,
            &tokens,
        );
        if trigger == Trigger::Manual {
            // A manual compact keeps the configured verbatim tail; it never backs down.
            candidates.truncate(1);
        }
        candidates.retain(|&start| start > covered);
        if self.config.mutation == Some(Mutation::SplitToolPairs) {
            // Mutant: cut inside the turn, right after its first tool call.
            candidates = candidates
                .into_iter()
                .map(|start| mutant_mid_turn(&entries, start, history_end))
                .collect();
        }
        if candidates.is_empty() {
            return CompactionOutcome::Unchanged {
                reason: if previous.is_some() {
                    "already_compacted".into()
                } else {
                    "nothing_to_compact".into()
                },
            };
        }
        let before = self
            .project_with(snapshot, previous.as_ref(), current_start, prune)
            .0
            .budget
            .total;
        let mut tried = 0usize;
        // Once the configured strategy is unavailable or its summary rejected, the rest of
        // this transaction (every back-down candidate) uses the fallback.
        let mut fallback = planned;
        let mut summarized_from = covered;
        let mut smallest_total = None;
        for tail_start in candidates {
            if tried >= MAX_SUMMARIZER_CALLS_PER_TRANSACTION {
                break;
            }
            if !state
                .attempted_sources
                .insert(source_key(&entries[..tail_start]))
                && self.config.mutation != Some(Mutation::LoopCompaction)
            {
                continue;
            }
            tried += 1;
            self.summarizer_calls += 1;
            if self
                .config
                .faults
                .summarizer_failures
                .contains(&self.summarizer_calls)
            {
                return CompactionOutcome::Failed {
                    reason: "summarizer_failed".into(),
                    detail: format!(
                        "summarizer call {} failed (injected)",
                        self.summarizer_calls
                    ),
                };
            }
            let boundaries: Vec<usize> = spans.iter().map(|&(_, e)| e).collect();
            let mut model_calls = 0u32;
            let mut result = Err(SummarizeError::Failed("not run".into()));
            if fallback.is_none() {
                result = self
                    .summarize_staged(
                        Which::Configured,
                        previous.as_ref(),
                        &entries,
                        covered,
                        tail_start,
                        &boundaries,
                        provider,
                        &mut model_calls,
                    )
                    .await;
                if let Err(e) = &result {
                    fallback = strategy::after_error(self.summarizer.strategy(), e);
                }
            }
            if fallback.is_some() {
                // The extractive summary stands in. It cannot read an opaque previous
                // checkpoint: then it rebuilds from the canonical transcript.
                let readable = previous.as_ref().filter(|p| p.summary.is_some());
                summarized_from = if readable.is_some() { covered } else { 0 };
                result = self
                    .summarize_staged(
                        Which::Fallback,
                        readable,
                        &entries,
                        summarized_from,
                        tail_start,
                        &boundaries,
                        provider,
                        &mut model_calls,
                    )
                    .await;
            }
            let used = if fallback.is_some() {
                self.fallback.strategy()
            } else {
                self.summarizer.strategy()
            };
            let result = match result {
                Ok(r) => r,
                Err(e) => {
                    return CompactionOutcome::Failed {
                        reason: e.reason().into(),
                        detail: e.to_string(),
                    }
                }
            };
            let (summary, opaque_item) = match result.content {
                SummaryContent::Text(t) => (Some(t), None),
                SummaryContent::Opaque(o) => (None, Some(o)),
            };
            if let Some(t) = &summary {
                let limit = self.config.context.summary_target_tokens * 3 / 2 + 64;
                let size = self.estimator.count_text(t);
                if size > limit {
                    return CompactionOutcome::Failed {
                        reason: "summary_invalid".into(),
                        detail: format!("summary of {size} tokens exceeds the bound of {limit}"),
                    };
                }
            }
            let mut cp = Checkpoint {
                schema_version: CHECKPOINT_SCHEMA_VERSION,
                id: String::new(),
                strategy: used,
                summarized_through: tail_start - 1,
                source_hash: range_hash(&entries[..tail_start]),
                retained_tail_start: tail_start,
                retained_tail_end: history_end,
                retained_tail_hash: range_hash(&entries[tail_start..history_end]),
                summary,
                opaque_item,
                compaction_model_id: result.model_id.clone(),
                estimated_tokens: 0,
                source_message_count: tail_start,
                created_at: now_rfc3339(),
                safety_labels: SAFETY_LABELS.iter().map(|s| s.to_string()).collect(),
                previous_id: previous.as_ref().map(|p| p.id.clone()),
            };
            let memory = cp.memory_message();
            cp.estimated_tokens = self.estimator.message_tokens_uncached(&memory);
            cp.id = cp.compute_id();
            let after = self
                .project_with(snapshot, Some(&cp), current_start, prune)
                .0
                .budget
                .total;
            smallest_total = Some(smallest_total.map_or(after, |s: u64| s.min(after)));
            if let Some(target) = target {
                if after > target {
                    continue; // back down: fewer verbatim turns
                }
            }
            let reclaimed = before.saturating_sub(after);
            if trigger != Trigger::Manual
                && reclaimed < MIN_USEFUL_RECLAIM_TOKENS
                && self.config.mutation != Some(Mutation::LoopCompaction)
            {
                return CompactionOutcome::Failed {
                    reason: "no_progress".into(),
                    detail: format!(
                        "the checkpoint would reclaim {reclaimed} tokens (< {MIN_USEFUL_RECLAIM_TOKENS})"
                    ),
                };
            }
            self.checkpoint_writes += 1;
            if self
                .config
                .faults
                .checkpoint_write_crashes
                .contains(&self.checkpoint_writes)
            {
                self.session.crash_next_checkpoint_write();
            }
            let (content_hash, content_bytes) = match (&cp.summary, &cp.opaque_item) {
                (Some(s), _) => (
                    ctxbench_adapters::ContentHash::of_bytes(s.as_bytes()).to_hex(),
                    s.len() as u64,
                ),
                (None, Some(o)) => (o.hash().to_hex(), o.data.len() as u64),
                (None, None) => (String::new(), 0),
            };
            // Mutant (`opaque-in-trace`): the trace carries the opaque item itself.
            let content_hash = match (&cp.opaque_item, self.config.mutation) {
                (Some(o), Some(Mutation::OpaqueInTrace)) => o.data.clone(),
                _ => content_hash,
            };
            let completed = CompactionCompleted {
                trigger: trigger.as_str().into(),
                checkpoint_id: cp.id.clone(),
                previous_id: cp.previous_id.clone(),
                strategy: strategy::label(used, fallback.as_ref()),
                summarized_from: summarized_from as u64,
                summarized_through: cp.summarized_through as u64,
                tail_start: cp.retained_tail_start as u64,
                tail_end: cp.retained_tail_end as u64,
                reclaimed_tokens: reclaimed,
                summary_tokens: cp.estimated_tokens,
                summarizer_calls: result.model_calls,
                content_hash,
                content_bytes,
            };
            let id = cp.id.clone();
            if let Err(e) = self.session.set_checkpoint(cp) {
                return CompactionOutcome::Failed {
                    reason: "checkpoint_write_failed".into(),
                    detail: e.to_string(),
                };
            }
            events.emit(EngineEvent::CompactionCompleted(completed));
            if self.config.mutation == Some(Mutation::MutateTranscript) {
                // Mutant: destructive compaction rewrites what it summarized.
                for (i, e) in entries.iter().enumerate().take(tail_start).skip(covered) {
                    let mut m = e.message.clone();
                    m.content = format!("[compacted into {id}]");
                    self.session.mutant_rewrite(i, m);
                }
                self.forget_token_prefix(covered);
            }
            return CompactionOutcome::Compacted {
                checkpoint_id: id,
                reclaimed_tokens: reclaimed,
            };
        }
        if tried == 0 {
            return CompactionOutcome::Failed {
                reason: "no_progress".into(),
                detail: "every eligible prefix was already compacted for this input".into(),
            };
        }
        CompactionOutcome::Failed {
            reason: "does_not_fit".into(),
            detail: format!(
                "even with no verbatim history turns the request needs {} tokens, over the target {}",
                smallest_total.unwrap_or(before),
                target.unwrap_or(0)
            ),
        }
    }

    /// A manual `/compact` (or its dry run) between turns.
    pub async fn compact_manual(
        &mut self,
        dry_run: bool,
        provider: &dyn Provider,
        events: &mut dyn EventSink,
    ) -> CompactionOutcome {
        if self.config.mode != Mode::Compact {
            let reason = "mode_not_compact".to_string();
            events.emit(EngineEvent::CompactionUnchanged {
                trigger: Trigger::Manual.as_str().into(),
                reason: reason.clone(),
            });
            return CompactionOutcome::Unchanged { reason };
        }
        let snapshot = match self.load_instructions() {
            Ok(s) => s,
            Err(detail) => {
                return CompactionOutcome::Failed {
                    reason: "instructions_unreadable".into(),
                    detail,
                }
            }
        };
        if dry_run {
            return self.preview(&snapshot, events);
        }
        let mut state = TurnState::default();
        self.transaction(
            Trigger::Manual,
            &snapshot,
            None,
            None,
            false,
            &mut state,
            provider,
            events,
        )
        .await
    }

    fn preview(
        &self,
        snapshot: &InstructionSnapshot,
        events: &mut dyn EventSink,
    ) -> CompactionOutcome {
        let entries = self.session.entries();
        let end = entries.len();
        let previous = self.session.checkpoint();
        let covered = previous.map(|c| c.covered_end()).unwrap_or(0);
        let spans = closed_turns(self.session.turns(), covered, end);
        let tokens = |s: usize, e: usize| -> u64 { self.range_tokens(s, e) };
        let (current, _) = self.project_with(snapshot, previous, None, false);
        let tail_start = tail_candidates(
            &spans,
            covered,
            end,
            self.config.context.recent_tail_tokens,
            &tokens,
        )
        .first()
        .copied()
        .unwrap_or(covered);
        let summarized =
            tokens(covered, tail_start) + previous.map(|c| c.estimated_tokens).unwrap_or(0);
        let projected = current
            .budget
            .total
            .saturating_sub(summarized)
            .saturating_add(if tail_start > covered || previous.is_some() {
                self.config.context.summary_target_tokens
            } else {
                0
            });
        events.emit(EngineEvent::CompactionPreview {
            from: covered as u64,
            to: tail_start as u64,
            tail_start: tail_start as u64,
            tail_end: end as u64,
            current_total: current.budget.total,
            projected_total: projected,
            available_input: current.budget.available_input,
        });
        CompactionOutcome::Unchanged {
            reason: "dry_run".into(),
        }
    }

    async fn play_rounds(
        &mut self,
        snapshot: &InstructionSnapshot,
        turn_start: usize,
        provider: &dyn Provider,
        tools: &mut dyn ToolExecutor,
        events: &mut dyn EventSink,
    ) -> TurnOutcome {
        let mutation = self.config.mutation;
        let mut state = TurnState::default();
        for round in 0..MAX_ROUNDS_PER_TURN {
            let mut attempt: u32 = 1;
            let mut retry_reason: Option<String> = None;
            let mut target: Option<u64> = None;
            let mut trigger = Trigger::Automatic;
            let response = loop {
                let reloaded;
                let snapshot = if mutation == Some(Mutation::ReloadInstructionsPerAttempt) {
                    // Mutant: re-read the instruction file before every physical request.
                    let text = self.load_instructions().map(|s| s.text).unwrap_or_default();
                    reloaded = InstructionSnapshot::of(format!(
                        "{text}\n(re-read before round {round}, attempt {attempt})"
                    ));
                    &reloaded
                } else {
                    snapshot
                };
                let mut prepared = self
                    .prepare(
                        snapshot, turn_start, round, target, trigger, &mut state, provider, events,
                    )
                    .await;
                // With an exact counter, the local estimate only plans: count the planned
                // request and learn the ratio; when the count shows it over the allowance in
                // compact mode, re-plan with that ratio — which compacts — and count again.
                // The budget then reports the count (categories rescaled proportionally).
                let mut counted = None;
                let mut counts = 0;
                while let Ok(p) = &prepared {
                    let Some(n) = self.exact_count(&p.request, provider).await else {
                        break;
                    };
                    counts += 1;
                    counted = Some(n);
                    if p.raw_total > 0 {
                        self.calibration = n as f64 / p.raw_total as f64;
                    }
                    let allowance = target
                        .unwrap_or(p.budget.available_input)
                        .min(p.budget.available_input);
                    let over = self.config.mode == Mode::Compact && n > allowance;
                    if !over || counts == MAX_EXACT_COUNTS_PER_REQUEST {
                        break;
                    }
                    counted = None;
                    prepared = self
                        .prepare(
                            snapshot, turn_start, round, target, trigger, &mut state, provider,
                            events,
                        )
                        .await;
                }
                let exact = counted.is_some();
                if let (Some(n), Ok(p)) = (counted, &mut prepared) {
                    p.budget = p.budget.scaled_to(n);
                }
                let projection = match prepared {
                    Ok(p) => p,
                    Err(outcome) => {
                        return match (attempt, outcome) {
                            // Recovery could not make room: the overflow stands, reported.
                            (2, TurnOutcome::LimitReached { reason, detail, .. }) => {
                                TurnOutcome::Failed {
                                    reason: "provider_overflow".into(),
                                    detail: format!(
                                        "overflow recovery failed ({reason}): {detail}"
                                    ),
                                }
                            }
                            (_, o) => o,
                        };
                    }
                };
                let budget = projection.budget;
                events.emit(EngineEvent::Budgeted(Budgeted {
                    round,
                    attempt,
                    model: self.config.model.model.clone(),
                    window_source: self.window_source().into(),
                    estimator: self.estimator.kind().as_str().into(),
                    estimation_method: if exact {
                        EstimationMethod::ProviderTokenizer
                    } else {
                        self.estimator.method()
                    }
                    .as_str()
                    .into(),
                    confidence: if exact {
                        Confidence::Exact
                    } else {
                        self.estimator.confidence()
                    }
                    .as_str()
                    .into(),
                    budget,
                    retained_messages: projection.retained_messages,
                    checkpoint_id: if self.config.mode == Mode::Compact {
                        self.session.checkpoint().map(|c| c.id.clone())
                    } else {
                        None
                    },
                    instruction_hash: snapshot.hash.to_hex(),
                    retry_reason: retry_reason.clone(),
                }));
                if self.config.mode == Mode::Warn {
                    if budget.mandatory() > budget.available_input
                        && mutation != Some(Mutation::IgnoreMandatoryLimit)
                    {
                        return self.limit(
                            events,
                            REASON_MANDATORY,
                            mandatory_detail(&budget),
                            budget,
                        );
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
                match provider.complete(&projection.request).await {
                    Ok(r) => {
                        self.learn_calibration(projection.raw_total, r.usage.input_tokens);
                        events.emit(EngineEvent::Usage {
                            round,
                            attempt,
                            estimated_input: budget.total,
                            provider_input: r.usage.input_tokens,
                            provider_output: r.usage.output_tokens,
                        });
                        break r;
                    }
                    Err(err) => {
                        let (limit, input_tokens, partial) = match &err {
                            ProviderError::ContextOverflow {
                                limit,
                                input_tokens,
                                partial_output,
                                ..
                            } => (*limit, *input_tokens, partial_output.clone()),
                            _ => (None, None, None),
                        };
                        events.emit(EngineEvent::ProviderError {
                            round,
                            attempt,
                            error_kind: err.kind().into(),
                            estimated_input: budget.total,
                            provider_limit: limit,
                            message: err.to_string(),
                        });
                        match err {
                            ProviderError::ContextOverflow { .. } if partial.is_some() => {
                                return TurnOutcome::Failed {
                                    reason: "provider_overflow_after_output".into(),
                                    detail: format!(
                                        "{err}; visible output was produced, so the attempt is not retried"
                                    ),
                                };
                            }
                            ProviderError::ContextOverflow { .. }
                                if self.config.mode == Mode::Compact
                                    && ((attempt == 1 && !state.overflow_recovered)
                                        || (mutation == Some(Mutation::RetryTwice)
                                            && attempt == 2)) =>
                            {
                                // One recovery per input: compact to a target scaled by how
                                // much the provider counted over our estimate, then retry the
                                // same admitted input (it is not appended again).
                                state.overflow_recovered = true;
                                let provider_count =
                                    input_tokens.unwrap_or(budget.total + budget.total / 10);
                                let ratio = (provider_count as f64 / budget.total.max(1) as f64)
                                    .max(1.0)
                                    + 0.02;
                                // Retrying the identical request is pointless: the retry must
                                // also be at least 10% smaller than the rejected one.
                                let shrink = (budget.total / 10).max(MIN_USEFUL_RECLAIM_TOKENS);
                                target = Some(
                                    ((budget.available_input as f64 / ratio) as u64)
                                        .min(budget.total.saturating_sub(shrink)),
                                );
                                trigger = Trigger::Overflow;
                                attempt += 1;
                                retry_reason = Some("provider_overflow".into());
                                if mutation == Some(Mutation::DuplicateInputOnRetry) {
                                    // Mutant: admit the user input a second time.
                                    let again = self.session.entries()[turn_start].message.clone();
                                    if let Err(e) = self.session.append(again) {
                                        return TurnOutcome::Errored {
                                            detail: e.to_string(),
                                        };
                                    }
                                }
                                continue;
                            }
                            ProviderError::ContextOverflow { .. } => {
                                return TurnOutcome::Failed {
                                    reason: "provider_overflow".into(),
                                    detail: format!(
                                        "{err} (estimated input {} of {} available; attempt {attempt})",
                                        budget.total, budget.available_input
                                    ),
                                };
                            }
                            ProviderError::Rejected { .. } => {
                                return TurnOutcome::Failed {
                                    reason: "provider_rejected".into(),
                                    detail: err.to_string(),
                                }
                            }
                            other => {
                                return TurnOutcome::Errored {
                                    detail: other.to_string(),
                                }
                            }
                        }
                    }
                }
            };
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
mod tests {
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
}
