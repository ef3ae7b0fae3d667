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
    /// The engine reloaded its session from disk.
    #[serde(rename = "session.restored")]
    SessionRestored {
        /// Messages restored.
        messages: u64,
        /// Head of the transcript hash chain.
        transcript_hash: String,
    },
}

impl EngineEvent {
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
