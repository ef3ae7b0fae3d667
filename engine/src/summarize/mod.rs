//! Summarizers: the strategies that turn a transcript prefix into checkpoint content.
//!
//! Every strategy sits behind [`Summarizer`]; the compaction transaction does not care which
//! one runs. [`extractive`] is the default and makes no model call.

pub mod extractive;
pub mod model;
pub mod native;

use ctxbench_adapters::estimate::RequestEstimator;
use ctxbench_adapters::{OpaqueItem, Provider};
use thiserror::Error;

use super::checkpoint::Checkpoint;
use crate::session::Entry;
use ctxbench_sut::redact::Redactor;
use ctxbench_sut::SummaryStrategy;

/// What a summarizer is asked to do: roll the previous checkpoint (if any) and the newly
/// covered messages into one bounded summary.
pub struct SummaryRequest<'a> {
    /// The checkpoint being rolled up, if any (its content is the start of the new one).
    pub previous: Option<&'a Checkpoint>,
    /// Messages newly covered, in transcript order.
    pub covered: &'a [Entry],
    /// Transcript index of `covered[0]`.
    pub first_index: usize,
    /// Turn number (1-based) of each covered message, same length as `covered`.
    pub turn_numbers: &'a [usize],
    /// Size bound for the summary, in estimated tokens.
    pub target_tokens: u64,
    /// The runtime's configured secret redaction: applied before anything is summarized.
    pub redactor: &'a Redactor,
    /// The engine's estimator.
    pub estimator: &'a RequestEstimator,
    /// Model id of the conversation (for model and native strategies).
    pub model: &'a str,
    /// What the messages kept after the covered ones already hold: a newer request or a
    /// newer call makes the covered turn's task state history.
    pub later: Later,
    /// The current instructions (the instruction file as sent): a user sentence that
    /// revises one of them is what a resumed agent must not lose (the extractive
    /// summarizer's `revisions.rs`).
    pub instructions: &'a str,
}

/// What the retained messages (the tail after the covered span) hold that supersedes the
/// covered span's task state. A compaction that cuts inside a turn keeps that turn's
/// request current; one that keeps a newer turn does not.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Later {
    /// A user message follows the covered span: its newest request is no longer the task.
    pub request: bool,
    /// A tool call follows the covered span: its last command and file in flight are no
    /// longer the last.
    pub calls: bool,
    /// A call that runs a command follows the covered span: its last command is no longer
    /// the last (a file read after it leaves it the last one).
    pub commands: bool,
}

impl Later {
    /// What `kept` (the messages after the covered span) holds.
    pub fn of(kept: &[Entry]) -> Later {
        use ctxbench_adapters::Role;
        Later {
            request: kept.iter().any(|e| e.message.role == Role::User),
            calls: kept.iter().any(|e| !e.message.tool_calls.is_empty()),
            commands: kept
                .iter()
                .flat_map(|e| e.message.tool_calls.iter())
                .any(|c| extractive::runs_a_command(&c.arguments)),
        }
    }
}

/// What a summarizer produced.
#[derive(Debug, Clone, PartialEq)]
pub enum SummaryContent {
    /// An inspectable summary.
    Text(String),
    /// An opaque provider item.
    Opaque(OpaqueItem),
}

/// A summarizer's result.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryResult {
    /// The content.
    pub content: SummaryContent,
    /// Model calls made.
    pub model_calls: u32,
    /// Model id that produced it (`extractive` when none).
    pub model_id: String,
}

/// Why a summarizer produced nothing usable. Each maps to a stable failure reason.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SummarizeError {
    /// The summarizer (or its model call) failed.
    #[error("summarizer failed: {0}")]
    Failed(String),
    /// The output failed validation (missing sections, truncated, too large, authority).
    #[error("summary rejected: {0}")]
    Invalid(String),
    /// The summarization request itself would not fit the model.
    #[error("summarization input too large: {0}")]
    InputTooLarge(String),
    /// The strategy is not available with this provider.
    #[error("strategy unavailable: {0}")]
    Unavailable(String),
}

impl SummarizeError {
    /// The stable failure reason (`summarizer_failed`, `summary_invalid`, …).
    pub fn reason(&self) -> &'static str {
        match self {
            SummarizeError::Failed(_) => "summarizer_failed",
            SummarizeError::Invalid(_) => "summary_invalid",
            SummarizeError::InputTooLarge(_) => "summary_input_too_large",
            SummarizeError::Unavailable(_) => "strategy_unavailable",
        }
    }
}

/// One checkpoint strategy.
#[async_trait::async_trait]
pub trait Summarizer: Send + Sync {
    /// Which strategy this is.
    fn strategy(&self) -> SummaryStrategy;
    /// The most estimated input one summarization request may carry, when the strategy
    /// sends one (the transaction sizes staged summaries by it); `None`: no bound.
    fn input_bound(&self) -> Option<u64> {
        None
    }
    /// Summarize. Must not mutate anything; the transaction decides what to persist.
    async fn summarize(
        &self,
        request: SummaryRequest<'_>,
        provider: &dyn Provider,
    ) -> Result<SummaryResult, SummarizeError>;
}
