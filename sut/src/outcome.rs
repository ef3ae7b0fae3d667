//! Typed outcomes of a turn and of a compaction transaction, and the reason vocabulary
//! they use (seed 004: one transaction, one typed outcome).
//!
//! The reason names are part of the protocol (`docs/agent-protocol.md` lists them for
//! runtime authors). A system under test picks a reason; graders never take its word for
//! what happened — they compare the reason with what ctxbench observed (a stop before any
//! provider call, a rejected request, …).

use serde::{Deserialize, Serialize};

use crate::budget::BudgetBreakdown;

/// How a turn ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum TurnOutcome {
    /// The model answered with text.
    Completed {
        /// The final assistant text.
        reply: String,
    },
    /// The system stopped honestly: context cannot fit.
    LimitReached {
        /// Stable reason, e.g. `mandatory_context_exceeds_budget`.
        reason: String,
        /// Which budget is exhausted (free text; may be left out over the protocol).
        #[serde(default)]
        detail: String,
        /// The budget breakdown at the stop, when the system reports one in this shape
        /// (a black-box runtime may not have one).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        budget: Option<BudgetBreakdown>,
    },
    /// A model-side failure, e.g. an unrecovered provider overflow.
    Failed {
        /// Stable reason, e.g. `provider_overflow`.
        reason: String,
        /// Detail (free text; may be left out over the protocol).
        #[serde(default)]
        detail: String,
    },
    /// An infrastructure failure (provider unreachable, cassette miss).
    Errored {
        /// Detail.
        detail: String,
    },
}

impl TurnOutcome {
    /// `completed`, `limit_reached`, `failed` or `errored`.
    pub fn status(&self) -> &'static str {
        match self {
            TurnOutcome::Completed { .. } => "completed",
            TurnOutcome::LimitReached { .. } => "limit_reached",
            TurnOutcome::Failed { .. } => "failed",
            TurnOutcome::Errored { .. } => "errored",
        }
    }

    /// The typed reason, when the turn did not complete.
    pub fn reason(&self) -> Option<&str> {
        match self {
            TurnOutcome::LimitReached { reason, .. } | TurnOutcome::Failed { reason, .. } => {
                Some(reason)
            }
            _ => None,
        }
    }
}

/// What asked for a compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    /// A user's `/compact`.
    Manual,
    /// The budget check before a request.
    Automatic,
    /// Recovery from a provider context overflow.
    Overflow,
}

impl Trigger {
    /// snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Manual => "manual",
            Trigger::Automatic => "automatic",
            Trigger::Overflow => "overflow",
        }
    }
}

/// The one typed outcome of a compaction transaction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum CompactionOutcome {
    /// A new checkpoint was written.
    Compacted {
        /// Its id.
        checkpoint_id: String,
        /// Estimated tokens reclaimed (the system's own estimate).
        reclaimed_tokens: u64,
    },
    /// Nothing changed, by design (idempotent).
    Unchanged {
        /// One of [`reasons::UNCHANGED`].
        reason: String,
    },
    /// Nothing changed because something went wrong; previous state kept.
    Failed {
        /// One of [`reasons::COMPACTION_FAILED`].
        reason: String,
        /// Detail.
        detail: String,
    },
}

impl CompactionOutcome {
    /// `compacted`, `unchanged` or `failed`.
    pub fn kind(&self) -> &'static str {
        match self {
            CompactionOutcome::Compacted { .. } => "compacted",
            CompactionOutcome::Unchanged { .. } => "unchanged",
            CompactionOutcome::Failed { .. } => "failed",
        }
    }
}

/// The protocol's reason vocabulary (documented in `docs/agent-protocol.md`).
pub mod reasons {
    /// Mandatory context (instructions, current request, tools, protocol continuation)
    /// cannot fit the available input: the stop comes before any provider call.
    pub const MANDATORY_CONTEXT: &str = "mandatory_context_exceeds_budget";
    /// Compaction cannot bring the request under budget.
    pub const CONTEXT_EXHAUSTED: &str = "context_exhausted";
    /// An open tool call with no safe completed span to summarize.
    pub const NO_SAFE_SPAN: &str = "no_safe_completed_span";
    /// The summarizer threw.
    pub const SUMMARIZER_FAILED: &str = "summarizer_failed";
    /// The provider rejected a request for its size and it was not recovered.
    pub const PROVIDER_OVERFLOW: &str = "provider_overflow";
    /// The provider overflowed after producing visible output (never retried).
    pub const PROVIDER_OVERFLOW_AFTER_OUTPUT: &str = "provider_overflow_after_output";
    /// The model kept calling tools past the system's own bound on rounds.
    pub const ROUND_LIMIT: &str = "round_limit";

    /// Every `failed` reason of a compaction transaction.
    pub const COMPACTION_FAILED: &[&str] = &[
        NO_SAFE_SPAN,
        SUMMARIZER_FAILED,
        "summary_invalid",
        "summary_input_too_large",
        "strategy_unavailable",
        "no_progress",
        "does_not_fit",
        "checkpoint_write_failed",
        "instructions_unreadable",
    ];

    /// Every `unchanged` reason of a compaction transaction.
    pub const UNCHANGED: &[&str] = &[
        "already_compacted",
        "nothing_to_compact",
        "dry_run",
        "mode_not_compact",
    ];

    /// Every reason a turn that did not complete can carry: the context stops, any
    /// compaction failure reason (a stop caused by a failed compaction carries its reason),
    /// and the provider failures.
    pub const TURN: &[&str] = &[
        MANDATORY_CONTEXT,
        CONTEXT_EXHAUSTED,
        NO_SAFE_SPAN,
        SUMMARIZER_FAILED,
        "summary_invalid",
        "summary_input_too_large",
        "strategy_unavailable",
        "no_progress",
        "does_not_fit",
        "checkpoint_write_failed",
        "instructions_unreadable",
        PROVIDER_OVERFLOW,
        PROVIDER_OVERFLOW_AFTER_OUTPUT,
        "provider_rejected",
        ROUND_LIMIT,
        "infrastructure",
    ];
}
