//! The system under test: the reference context engine, behind one trait.
//!
//! A [`SystemUnderTest`] is what a real agent runtime is to ctxbench: it receives user
//! turns, restarts and instruction changes, talks to a provider, executes tools through a
//! [`ToolExecutor`], and reports what it decided through [`EngineEvent`]s. It sees what a
//! real runtime sees and nothing else — never a scenario's facts, probes or expectations.
//!
//! - [`budget`](crate::budget): the budget formula.
//! - [`projection`]: builds the request (instructions, memory, recent turns, current
//!   request, tools) and its budget breakdown by category.
//! - [`reference`](mod@reference): the reference engine, modes `off`, `warn` and `compact`;
//! - [`compaction`]: selection and the one compaction transaction; [`checkpoint`]: the
//!   checkpoint record; [`summarize`]: the summarizer strategies; [`tool_projection`]:
//!   projection of older tool outputs; [`mutants`]: deliberately broken variants.

pub mod checkpoint;
pub mod compaction;
pub mod events;
pub mod mutants;
pub mod projection;
pub mod reference;
pub mod summarize;
pub mod tool_projection;

#[cfg(test)]
mod tests_compact;

use ctxbench_adapters::{Provider, ToolCall};
use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use events::{Budgeted, EngineEvent};

use crate::budget::BudgetBreakdown;

/// What a tool returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// Result text.
    pub content: String,
    /// Whether the tool succeeded.
    pub ok: bool,
}

/// Executes tool calls for the engine (the driver implements it with scripted results).
pub trait ToolExecutor: Send {
    /// Run one tool call. Every call is a side effect: it must be made at most once.
    fn execute(&mut self, call: &ToolCall) -> ToolOutput;
}

/// Receives engine events in order.
pub trait EventSink: Send {
    /// Record one event.
    fn emit(&mut self, event: EngineEvent);
}

/// What one turn needs from the outside world.
pub struct TurnIo<'a> {
    /// The model.
    pub provider: &'a dyn Provider,
    /// The tools.
    pub tools: &'a mut dyn ToolExecutor,
    /// Where events go.
    pub events: &'a mut dyn EventSink,
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum TurnOutcome {
    /// The model answered with text.
    Completed {
        /// The final assistant text.
        reply: String,
    },
    /// The engine stopped honestly: context cannot fit.
    LimitReached {
        /// Stable reason, e.g. `mandatory_context_exceeds_budget`.
        reason: String,
        /// Which budget is exhausted.
        detail: String,
        /// The budget breakdown at the stop.
        budget: BudgetBreakdown,
    },
    /// A model-side failure, e.g. an unrecovered provider overflow.
    Failed {
        /// Stable reason, e.g. `provider_overflow`.
        reason: String,
        /// Detail.
        detail: String,
    },
    /// An infrastructure failure (provider unreachable, session I/O).
    Errored {
        /// Detail.
        detail: String,
    },
}

/// Engine-level errors (not turn outcomes).
#[derive(Debug, Error)]
pub enum EngineError {
    /// Session persistence failed.
    #[error(transparent)]
    Session(#[from] crate::session::SessionError),
    /// Reading the instruction file failed.
    #[error("instruction file {path}: {source}")]
    Instructions {
        /// The file.
        path: std::path::PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The requested mode is not available in this build.
    #[error("{0}")]
    Unsupported(String),
    /// An external agent failed (see [`crate::external::AgentError`]).
    #[error("{0}")]
    Agent(String),
}

/// A system under test.
#[async_trait::async_trait]
pub trait SystemUnderTest: Send {
    /// A short name for reports, e.g. `reference`.
    fn name(&self) -> &str;
    /// Play one user turn (one "run"): admit the input, talk to the model, run tools.
    async fn run_turn(&mut self, user: &str, io: TurnIo<'_>) -> TurnOutcome;
    /// A manual `/compact` between turns (`dry_run`: preview only, no model call, no write).
    async fn compact(&mut self, dry_run: bool, io: TurnIo<'_>) -> compaction::CompactionOutcome;
    /// Persist, drop every in-memory state, and reload from disk.
    fn restart(&mut self, events: &mut dyn EventSink) -> Result<(), EngineError>;
    /// The driver is about to play script step `step` (external systems label protocol
    /// messages with it). Default: nothing.
    fn begin_step(&mut self, step: u64) {
        let _ = step;
    }
    /// [`SystemUnderTest::restart`] for systems that must wait on I/O (an external
    /// process). Default: the synchronous restart.
    async fn restart_async(&mut self, events: &mut dyn EventSink) -> Result<(), EngineError> {
        self.restart(events)
    }
    /// The instruction file was edited between runs. Default: nothing (the reference
    /// engine rereads it at every run start).
    async fn instructions_edited(&mut self, path: &std::path::Path) -> Result<(), EngineError> {
        let _ = path;
        Ok(())
    }
    /// The trial is over: shut down (an external agent reports its transcript here).
    /// Default: nothing.
    async fn finish(&mut self) {}
    /// A typed failure of the system itself (reason, detail) that ends the trial as
    /// errored, e.g. `agent_timeout`. Default: none.
    fn failure(&self) -> Option<(String, String)> {
        None
    }
    /// The canonical transcript as it stands.
    fn transcript(&self) -> Vec<ctxbench_adapters::Message>;
    /// Head of the transcript hash chain (hex).
    fn transcript_hash(&self) -> String;
}
