//! # ctxbench-sut — the contract between ctxbench and a system under test
//!
//! A [`SystemUnderTest`] is what a real agent runtime is to ctxbench: it receives user
//! turns, restarts and instruction changes, talks to a provider, executes tools through a
//! [`ToolExecutor`], and may report what it decided through [`EngineEvent`]s. This crate
//! owns that trait, what a system is configured with ([`SutSetup`]), what it declares about
//! its request format ([`Declaration`]), the event and outcome vocabulary, the budget's
//! shape and formula ([`budget`]), and the redaction helper every writer uses.
//!
//! What it must not do: know any system's implementation (the reference engine lives in
//! `ctxbench-engine`, which depends on this crate, never the reverse), or carry a scenario's
//! facts, probes, expectations or graders — a system under test sees only what a real
//! runtime would.
#![deny(missing_docs)]

pub mod budget;
pub mod config;
pub mod events;
pub mod mode;
pub mod outcome;
pub mod redact;

use std::path::Path;

use ctxbench_adapters::{Provider, ToolCall};
use thiserror::Error;

pub use budget::BudgetBreakdown;
pub use config::{
    ContextConfig, Corruption, Declaration, Markup, SummaryStrategy, SutFaults, SutSetup,
};
pub use events::{Budgeted, CompactionCompleted, EngineEvent, EventFamily};
pub use mode::Mode;
pub use outcome::{reasons, CompactionOutcome, Trigger, TurnOutcome};

/// What a tool returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// Result text.
    pub content: String,
    /// Whether the tool succeeded.
    pub ok: bool,
}

/// Executes tool calls for the system (the driver implements it with scripted results).
pub trait ToolExecutor: Send {
    /// Run one tool call. Every call is a side effect: it must be made at most once.
    fn execute(&mut self, call: &ToolCall) -> ToolOutput;
}

/// Receives the system's events in order.
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

/// Errors of a system under test itself (not turn outcomes).
#[derive(Debug, Error)]
pub enum EngineError {
    /// Its session storage failed.
    #[error("session: {0}")]
    Session(String),
    /// Reading the instruction file failed.
    #[error("instruction file {path}: {source}")]
    Instructions {
        /// The file.
        path: std::path::PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The requested mode or variant is not available.
    #[error("{0}")]
    Unsupported(String),
    /// An external agent failed.
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
    async fn compact(&mut self, dry_run: bool, io: TurnIo<'_>) -> CompactionOutcome;
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
    async fn instructions_edited(&mut self, path: &Path) -> Result<(), EngineError> {
        let _ = path;
        Ok(())
    }
    /// The trial is over: shut down (an external agent reports its transcript here).
    /// Default: nothing.
    async fn finish(&mut self) {}
    /// A typed failure of the system itself (reason, detail), e.g. `agent_timeout`: the
    /// trial ends and the system fails it. Default: none.
    fn failure(&self) -> Option<(String, String)> {
        None
    }
    /// Damage the checkpoint the system persisted (the recovery scenario's fault; a test
    /// hook): `Ok(true)` when something was damaged, `Ok(false)` when the system has no
    /// checkpoint to damage or offers no such hook. Default: `Ok(false)`.
    async fn corrupt_checkpoint(&mut self, how: Corruption) -> Result<bool, EngineError> {
        let _ = how;
        Ok(false)
    }
    /// What the system declares about its request format (see [`Declaration`]).
    fn declaration(&self) -> Declaration {
        Declaration::default()
    }
    /// The canonical transcript as the system says it stands (compared against what
    /// ctxbench observed; never taken as evidence on its own).
    fn transcript(&self) -> Vec<ctxbench_adapters::Message>;
    /// Head of the system's transcript hash chain (hex), as it reports it.
    fn transcript_hash(&self) -> String;
}

/// A deliberately broken variant of a system: a test fixture proving graders can fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variant {
    /// Its name, e.g. `keep-approval-claims`.
    pub name: String,
    /// The graders meant to catch it (a catch by any other grader is incidental).
    pub intended: Vec<String>,
    /// The broken decision, in one line.
    pub description: String,
}

/// Builds in-process systems under test, one per trial.
pub trait SutFactory: Send + Sync {
    /// A short name for reports and the run manifest, e.g. `reference`.
    fn name(&self) -> &str;
    /// What the systems it builds declare about their request format.
    fn declaration(&self) -> Declaration;
    /// A system for one trial.
    fn create(&self, setup: SutSetup) -> Result<Box<dyn SystemUnderTest>, EngineError>;
    /// Its deliberately broken variants (for `selftest`); empty when it has none.
    fn variants(&self) -> Vec<Variant> {
        Vec::new()
    }
}
