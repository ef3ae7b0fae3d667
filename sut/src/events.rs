//! Versioned engine events (seed 000 §Events, traces, and inspection).
//!
//! Events carry budget metadata and hashes, never a duplicate of the transcript.

use serde::{Deserialize, Serialize};

use crate::budget::BudgetBreakdown;

/// Version of every event payload below.
pub const EVENT_VERSION: u32 = 1;

/// An engine event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "data")]
pub enum EngineEvent {
    /// A run (user turn) started; instructions were reloaded and frozen.
    #[serde(rename = "context.run_started")]
    RunStarted {
        /// Mode in force.
        mode: String,
        /// SHA-256 of the frozen instruction snapshot.
        instruction_hash: String,
        /// Messages in the transcript before this run's user message.
        transcript_messages: u64,
    },
    /// The budget of the next physical request, before it is sent.
    #[serde(rename = "context.budgeted")]
    Budgeted(Budgeted),
    /// The next request exceeds its input budget (mode `warn`).
    #[serde(rename = "context.warning")]
    Warning {
        /// Round within the turn.
        round: u64,
        /// Attempt of the round.
        attempt: u32,
        /// Estimated request total.
        total: u64,
        /// Available input budget.
        available_input: u64,
        /// total − available input.
        over_by: u64,
    },
    /// The run stops: context cannot fit. No provider call follows for this request.
    #[serde(rename = "context.limit_reached")]
    LimitReached {
        /// Stable reason, e.g. `mandatory_context_exceeds_budget`.
        reason: String,
        /// Which budget is exhausted, in words.
        detail: String,
        /// The full breakdown.
        budget: BudgetBreakdown,
    },
    /// Estimate vs provider-reported usage after an answered request.
    #[serde(rename = "context.usage")]
    Usage {
        /// Round within the turn.
        round: u64,
        /// Attempt of the round.
        attempt: u32,
        /// The preflight estimate of the request's input.
        estimated_input: u64,
        /// Provider-reported input tokens.
        provider_input: u64,
        /// Provider-reported output tokens.
        provider_output: u64,
    },
    /// The provider rejected a request.
    #[serde(rename = "context.provider_error")]
    ProviderError {
        /// Round within the turn.
        round: u64,
        /// Attempt of the round.
        attempt: u32,
        /// Error kind, e.g. `context_overflow`.
        error_kind: String,
        /// Estimate of the rejected request.
        estimated_input: u64,
        /// The provider's limit, when reported.
        provider_limit: Option<u64>,
        /// The provider's message.
        message: String,
    },
    /// A compaction transaction started.
    #[serde(rename = "context.compaction.started")]
    CompactionStarted {
        /// `manual`, `automatic` or `overflow`.
        trigger: String,
        /// Strategy.
        strategy: String,
    },
    /// A compaction transaction wrote a new checkpoint.
    #[serde(rename = "context.compaction.completed")]
    CompactionCompleted(CompactionCompleted),
    /// A compaction transaction changed nothing.
    #[serde(rename = "context.compaction.unchanged")]
    CompactionUnchanged {
        /// Trigger.
        trigger: String,
        /// Stable reason, e.g. `already_compacted`.
        reason: String,
    },
    /// A compaction transaction failed; the previous checkpoint and the transcript stay.
    #[serde(rename = "context.compaction.failed")]
    CompactionFailed {
        /// Trigger.
        trigger: String,
        /// Stable reason, e.g. `no_safe_completed_span`, `summarizer_failed`, `no_progress`.
        reason: String,
        /// Detail.
        detail: String,
        /// Summarizer invocations (any strategy) made before failing.
        summarizer_calls: u32,
    },
    /// A dry-run preview: what a compaction would cover and save, with no model call.
    #[serde(rename = "context.compaction.preview")]
    CompactionPreview {
        /// First message that would be newly summarized.
        from: u64,
        /// One past the last message that would be summarized.
        to: u64,
        /// Verbatim tail that would remain: `[tail_start, tail_end)`.
        tail_start: u64,
        /// End of the tail.
        tail_end: u64,
        /// Estimated request total now.
        current_total: u64,
        /// Estimated request total after compaction (summary at its target size).
        projected_total: u64,
        /// Available input budget.
        available_input: u64,
    },
    /// A stored checkpoint was rejected on load and will be rebuilt from the transcript.
    #[serde(rename = "context.checkpoint.rejected")]
    CheckpointRejected {
        /// Why.
        reason: String,
    },
    /// A stored checkpoint was validated and reused after a restart.
    #[serde(rename = "context.checkpoint.reused")]
    CheckpointReused {
        /// Its id.
        checkpoint_id: String,
    },
    /// Older completed tool outputs were projected in the next request.
    #[serde(rename = "context.tool_output.projected")]
    ToolOutputProjected {
        /// Round within the turn.
        round: u64,
        /// Results projected.
        results: u64,
    },
    /// The engine reloaded its session from disk.
    #[serde(rename = "session.restored")]
    SessionRestored {
        /// Messages restored.
        messages: u64,
        /// Head of the transcript hash chain.
        transcript_hash: String,
    },
}

/// A family of events. A system reports the families it can (it declares them in the
/// handshake, else ctxbench infers them from what it emitted); each family enables only the
/// graders that need it, so reporting some events never makes unrelated graders strict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventFamily {
    /// `context.run_started`, `session.restored`: transcript sizes and hashes per run.
    Run,
    /// `context.budgeted`, `context.usage`, `context.provider_error`: the system's estimates.
    Budget,
    /// `context.warning`: warnings before over-budget requests.
    Warning,
    /// `context.limit_reached`.
    Limit,
    /// `context.compaction.*`: compaction transactions and their outcomes.
    Compaction,
    /// `context.checkpoint.*`: stored checkpoints rejected or reused.
    Checkpoint,
    /// `context.tool_output.projected`.
    ToolOutput,
}

impl EventFamily {
    /// Every family, in documentation order.
    pub const ALL: [EventFamily; 7] = [
        EventFamily::Run,
        EventFamily::Budget,
        EventFamily::Warning,
        EventFamily::Limit,
        EventFamily::Compaction,
        EventFamily::Checkpoint,
        EventFamily::ToolOutput,
    ];

    /// snake_case name, as in the handshake.
    pub fn as_str(self) -> &'static str {
        match self {
            EventFamily::Run => "run",
            EventFamily::Budget => "budget",
            EventFamily::Warning => "warning",
            EventFamily::Limit => "limit",
            EventFamily::Compaction => "compaction",
            EventFamily::Checkpoint => "checkpoint",
            EventFamily::ToolOutput => "tool_output",
        }
    }
}

impl EngineEvent {
    /// The family this event belongs to.
    pub fn family(&self) -> EventFamily {
        match self {
            EngineEvent::RunStarted { .. } | EngineEvent::SessionRestored { .. } => {
                EventFamily::Run
            }
            EngineEvent::Budgeted(_)
            | EngineEvent::Usage { .. }
            | EngineEvent::ProviderError { .. } => EventFamily::Budget,
            EngineEvent::Warning { .. } => EventFamily::Warning,
            EngineEvent::LimitReached { .. } => EventFamily::Limit,
            EngineEvent::CompactionStarted { .. }
            | EngineEvent::CompactionCompleted(_)
            | EngineEvent::CompactionUnchanged { .. }
            | EngineEvent::CompactionFailed { .. }
            | EngineEvent::CompactionPreview { .. } => EventFamily::Compaction,
            EngineEvent::CheckpointRejected { .. } | EngineEvent::CheckpointReused { .. } => {
                EventFamily::Checkpoint
            }
            EngineEvent::ToolOutputProjected { .. } => EventFamily::ToolOutput,
        }
    }

    /// The event's kind string, e.g. `context.budgeted`.
    pub fn kind(&self) -> &'static str {
        match self {
            EngineEvent::RunStarted { .. } => "context.run_started",
            EngineEvent::Budgeted(_) => "context.budgeted",
            EngineEvent::Warning { .. } => "context.warning",
            EngineEvent::LimitReached { .. } => "context.limit_reached",
            EngineEvent::Usage { .. } => "context.usage",
            EngineEvent::ProviderError { .. } => "context.provider_error",
            EngineEvent::SessionRestored { .. } => "session.restored",
            EngineEvent::CompactionStarted { .. } => "context.compaction.started",
            EngineEvent::CompactionCompleted(_) => "context.compaction.completed",
            EngineEvent::CompactionUnchanged { .. } => "context.compaction.unchanged",
            EngineEvent::CompactionFailed { .. } => "context.compaction.failed",
            EngineEvent::CompactionPreview { .. } => "context.compaction.preview",
            EngineEvent::CheckpointRejected { .. } => "context.checkpoint.rejected",
            EngineEvent::CheckpointReused { .. } => "context.checkpoint.reused",
            EngineEvent::ToolOutputProjected { .. } => "context.tool_output.projected",
        }
    }

    /// The payload as JSON (for `events.jsonl`).
    pub fn data(&self) -> serde_json::Value {
        match serde_json::to_value(self) {
            Ok(serde_json::Value::Object(mut o)) => {
                o.remove("data").unwrap_or(serde_json::Value::Null)
            }
            _ => serde_json::Value::Null,
        }
    }
}

/// Payload of `context.budgeted`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Budgeted {
    /// Round within the turn (0 = first request).
    pub round: u64,
    /// Attempt of the round (1 = first).
    pub attempt: u32,
    /// Model id.
    pub model: String,
    /// Where the window came from (`table`, `declared`, `conservative-fallback`).
    pub window_source: String,
    /// Estimator id.
    pub estimator: String,
    /// Estimation method.
    pub estimation_method: String,
    /// Estimation confidence.
    pub confidence: String,
    /// Estimated tokens by category, with window, reserve and available input.
    pub budget: BudgetBreakdown,
    /// Verbatim transcript messages included.
    pub retained_messages: u64,
    /// Checkpoint in use, if any.
    pub checkpoint_id: Option<String>,
    /// Instruction snapshot hash.
    pub instruction_hash: String,
    /// Why this attempt is a retry, if it is one.
    pub retry_reason: Option<String>,
}

/// Payload of `context.compaction.completed`: metadata and hashes only, never the summary
/// or an opaque item's payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompactionCompleted {
    /// Trigger.
    pub trigger: String,
    /// New checkpoint id.
    pub checkpoint_id: String,
    /// The checkpoint it rolled up.
    pub previous_id: Option<String>,
    /// Strategy.
    pub strategy: String,
    /// First newly summarized message.
    pub summarized_from: u64,
    /// Last summarized message (inclusive).
    pub summarized_through: u64,
    /// Verbatim tail at creation: `[tail_start, tail_end)`.
    pub tail_start: u64,
    /// End of the tail.
    pub tail_end: u64,
    /// Estimated tokens the next request saves.
    pub reclaimed_tokens: u64,
    /// Estimated tokens of the memory message.
    pub summary_tokens: u64,
    /// Summarizer model calls.
    pub summarizer_calls: u32,
    /// SHA-256 of the summary text or opaque payload.
    pub content_hash: String,
    /// Size of the summary text or opaque payload, in bytes.
    pub content_bytes: u64,
}
