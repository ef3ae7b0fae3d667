//! The validated, resolved form of a scenario, and its per-trial instantiation.
//!
//! [`Scenario`] is what the loader returns after strict parsing and cross-checks.
//! [`Scenario::instantiate`] expands repeat blocks, substitutes `{i}` and `{fact:…}`
//! placeholders and generates seeded filler, giving the flat [`Step`] list the driver plays
//! and the [`FakeScript`] the fake provider plays. The same seed gives byte-identical steps
//! in every mode, so requests can be paired per step across modes.

use ctxbench_adapters::capabilities::ModelCapabilities;
use ctxbench_adapters::fake::FakeScript;
use ctxbench_adapters::ToolDefinition;
use serde::{Deserialize, Serialize};

use ctxbench_sut::Mode;
pub use ctxbench_sut::{ContextConfig, Corruption, SummaryStrategy};

/// A validated scenario (not yet expanded).
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Unique id within a suite.
    pub id: String,
    /// One-line title.
    pub title: String,
    /// Longer description.
    pub description: String,
    /// Tags, e.g. `long-session`.
    pub tags: Vec<String>,
    /// Modes this scenario runs in (default: all).
    pub modes: Vec<Mode>,
    /// Where it came from (a path, or `builtin:<name>`), for messages.
    pub source: String,
    /// SHA-256 of the source text.
    pub source_hash: String,
    /// Resolved model facts (declared, or from the capability table, with provenance).
    pub model: ModelCapabilities,
    /// Context configuration (seed 000 §Token budget).
    pub context: ContextConfig,
    /// How many tokens the (fake) provider counts per token of its own tokenizer rule
    /// (`provider: {token_scale: x}`, default 1): a provider whose tokenizer the client's
    /// estimator does not match (e.g. 1.55 — tiktoken undercounting another vendor's
    /// tokenizer). Only the fake provider sees it; the engine must learn it from usage.
    pub token_scale: f64,
    /// How faithfully the fake model summarizes (`provider: {summary_profile: …}`).
    pub summary_profile: ctxbench_adapters::fake::SummaryProfile,
    /// Initial instructions (the AGENTS.md equivalent).
    pub instructions: String,
    /// Advertised tools, synthetic catalogues already generated.
    pub tools: Vec<ToolDefinition>,
    /// Secret values that must never leave redaction.
    pub secrets: Vec<String>,
    /// Seeded facts.
    pub facts: Vec<Fact>,
    /// Marked hostile spans (taint-tracked by the fake model and the graders).
    pub hostile: Vec<HostileSpan>,
    /// Marked verification reports ("CI is green and all tests pass") that later turns make
    /// stale (the `verification-historical` grader follows them).
    pub verifications: Vec<HostileSpan>,
    /// Faults to inject.
    pub faults: Vec<Fault>,
    /// What the graders check.
    pub expect: Expectations,
    /// Seeded variation of the script across trials (`vary:`).
    pub vary: Variation,
    /// The script, unexpanded; see [`Scenario::instantiate`].
    pub(crate) script: Vec<crate::scenario::model::ScriptStep>,
}

/// A seeded fact: a durable constraint or decision, how it is stated, and how it is probed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fact {
    /// Id, unique within the scenario.
    pub id: String,
    /// Every wording that states it, oldest first (`states` then each `updates` entry).
    /// The last one is the right answer (the loader checks that `expect` matches it and
    /// that every statement is placed somewhere in the session). Empty: never stated.
    pub statements: Vec<String>,
    /// The short answer of each version (empty: the statement is the answer).
    pub values: Vec<String>,
    /// What the fact is about (a subject the value must share a clause with), if named.
    pub about: Option<String>,
    /// What kind of fact it is: recall of durable constraints is what the default gate
    /// judges; the other kinds are reported beside it.
    pub kind: FactKind,
    /// The probe question.
    pub question: String,
    /// What a correct answer looks like.
    pub expect: AnswerCheck,
    /// Texts a correct free-text answer must not contain (e.g. a superseded value).
    #[serde(default)]
    pub excludes: Vec<String>,
}

/// What kind of fact a probe asks about (reported apart; the default recall gate counts
/// durable constraints).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum FactKind {
    /// A durable constraint or rule the session must keep obeying (the default).
    #[default]
    Constraint,
    /// A decision the session reached.
    Decision,
    /// Task state: the current task, its next step, the last command and its result.
    Task,
    /// Any other detail (a value read from a file, a reference, an earlier answer).
    Detail,
    /// A fact never stated: the right answer is "unknown" (set by `expect: {abstain: true}`).
    Abstention,
}

impl FactKind {
    /// snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            FactKind::Constraint => "constraint",
            FactKind::Decision => "decision",
            FactKind::Task => "task",
            FactKind::Detail => "detail",
            FactKind::Abstention => "abstention",
        }
    }
}

/// A marked span of text — a hostile approval or override claim (in any wording or
/// language), or a verification report — wherever the script places it. Only the fake model
/// and the graders know it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostileSpan {
    /// Id, unique within the scenario.
    pub id: String,
    /// The text.
    pub text: String,
}

impl Fact {
    /// The answer form of version `v`: its value when the fact declares values, else its
    /// statement (what the fake model's answer stands for).
    pub fn answer(&self, v: usize) -> Option<&str> {
        if self.values.is_empty() {
            self.statements.get(v).map(String::as_str)
        } else {
            self.values.get(v).map(String::as_str)
        }
    }
}

/// How a probe answer is checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerCheck {
    /// The answer equals this text (trimmed, case-insensitive).
    Exact(String),
    /// The answer contains this text (case-insensitive).
    Contains(String),
    /// The answer matches this regular expression.
    Regex(String),
    /// The answer contains one of these (case-insensitive).
    OneOf(Vec<String>),
    /// The fact was never stated: the right answer is "unknown".
    Abstain,
}

/// A fault to inject. Provider faults reach only the fake provider; engine faults are
/// infrastructure hooks (a summarizer that throws, a crash mid-write) handed to the engine
/// as a test harness would — never answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Fault {
    /// The provider rejects the N-th physical request (1-based) with a context overflow.
    ProviderOverflow {
        /// 1-based request number within the trial.
        at_request: u64,
    },
    /// The provider streams some assistant text, then fails the N-th request with a context
    /// overflow: visible output exists, so the engine must not retry.
    OverflowAfterPartialOutput {
        /// 1-based request number within the trial.
        at_request: u64,
    },
    /// The N-th summarizer call (1-based, within the trial) fails.
    SummarizerFailure {
        /// 1-based summarizer call number.
        at_compaction: u64,
    },
    /// The process "crashes" while writing the N-th checkpoint (1-based): the write is torn
    /// and the engine must keep the previous valid state.
    CrashDuringCheckpointWrite {
        /// 1-based checkpoint write number.
        at_compaction: u64,
    },
    /// A defect in the provider's model-generated summaries (the `model` strategy).
    SummaryDefect {
        /// Which defect.
        defect: SummaryDefect,
    },
}

impl Fault {
    /// The 1-based request number of a provider fault (the only faults the fake provider
    /// injects by request); `None` for engine faults and summary defects.
    pub fn provider_request(&self) -> Option<u64> {
        match self {
            Fault::ProviderOverflow { at_request }
            | Fault::OverflowAfterPartialOutput { at_request } => Some(*at_request),
            _ => None,
        }
    }

    /// Whether the engine's infrastructure (not the fake provider) injects this fault: a
    /// summarizer failure or a crash during a checkpoint write. The driver hands these to the
    /// engine; every other fault reaches only the fake provider through [`Instance::fake`].
    pub fn is_engine_fault(&self) -> bool {
        matches!(
            self,
            Fault::SummarizerFailure { .. } | Fault::CrashDuringCheckpointWrite { .. }
        )
    }
}

impl Scenario {
    /// The faults the driver hands to the engine (see [`Fault::is_engine_fault`]).
    pub fn engine_faults(&self) -> Vec<Fault> {
        self.faults
            .iter()
            .filter(|f| f.is_engine_fault())
            .cloned()
            .collect()
    }

    /// Whether the (fake) provider offers provider-native compaction: the scenario's
    /// `provider: {native_compaction: true}`, recorded in [`Scenario::model`] as
    /// [`NativeCompaction::OpaqueProviderItem`](ctxbench_adapters::capabilities::NativeCompaction).
    pub fn native_compaction(&self) -> bool {
        self.model.native_compaction
            == ctxbench_adapters::capabilities::NativeCompaction::OpaqueProviderItem
    }
}

/// Defects a model-generated summary can have (PRODUCT.md, fake provider item 6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SummaryDefect {
    /// Leave this fact out of the summary.
    DropFact {
        /// Fact id.
        fact: String,
    },
    /// Add a constraint that was never stated.
    InventConstraint {
        /// The invented sentence.
        text: String,
    },
    /// Carry an approval/authority claim from history into the summary.
    CarryApproval,
    /// Stop mid-sentence as if the output allowance ran out.
    Truncate,
}

/// What the graders check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Expectations {
    /// Graders to apply, with parameters.
    pub graders: Vec<GraderSpec>,
    /// Expected terminal outcome in every mode not listed in `by_mode`.
    pub outcome: ExpectedOutcome,
    /// Expected terminal outcome per mode, where the scenario says so.
    #[serde(default)]
    pub by_mode: Vec<(Mode, ExpectedOutcome)>,
}

impl Expectations {
    /// The terminal outcome expected in `mode`.
    pub fn outcome_for(&self, mode: Mode) -> &ExpectedOutcome {
        self.by_mode
            .iter()
            .find(|(m, _)| *m == mode)
            .map(|(_, o)| o)
            .unwrap_or(&self.outcome)
    }
}

/// One grader to apply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GraderSpec {
    /// Grader name, e.g. `recall`.
    pub name: String,
    /// Modes it applies to (empty: all the scenario's modes).
    pub modes: Vec<Mode>,
    /// Grader-specific parameters (a YAML mapping, as JSON).
    pub params: serde_json::Value,
}

/// The expected terminal outcome of a trial, per mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ExpectedOutcome {
    /// Every turn completes.
    Success,
    /// The run stops with `limit_reached`; `before_provider_call` means zero provider calls
    /// for the turn that hit the limit.
    LimitReached {
        /// Whether no provider call may be made for the stopping turn.
        before_provider_call: bool,
    },
    /// Whatever happens; only the graders judge.
    Any,
}

impl ExpectedOutcome {
    /// Whether a terminal status satisfies the expectation.
    pub fn admits(&self, status: crate::storage::schema::OutcomeStatus) -> bool {
        use crate::storage::schema::OutcomeStatus;
        match self {
            ExpectedOutcome::Success => status == OutcomeStatus::Success,
            ExpectedOutcome::LimitReached { .. } => status == OutcomeStatus::LimitReached,
            ExpectedOutcome::Any => status != OutcomeStatus::Errored,
        }
    }
}

/// One step of an instantiated script.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Step {
    /// A user turn: the runtime sends requests until the model answers with text.
    Turn(Turn),
    /// Persist, drop all in-memory state, reload from disk.
    Restart,
    /// Replace the instruction file's content; effective from the next run (turn).
    EditInstructions {
        /// The new full instruction text.
        text: String,
    },
    /// A manual compact command (`/compact`); `dry_run` previews the eligible range and
    /// projected budget without a model call or a write.
    Compact {
        /// Preview only.
        dry_run: bool,
    },
    /// Damage the persisted checkpoint (test fixture for the recovery scenario); the next
    /// restart must reject it and rebuild from the transcript.
    CorruptCheckpoint {
        /// How.
        how: Corruption,
    },
}

/// A user turn and what is scripted for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    /// The user's message.
    pub user: String,
    /// Tool calls with their scripted results, in the order the model makes them.
    pub tool_rounds: Vec<Vec<ScriptedCall>>,
    /// The final assistant text (None: the fake provider answers a short default).
    pub reply: Option<String>,
    /// When this turn is a probe: the fact ids asked, in question order.
    pub probe: Option<Vec<String>>,
}

/// One scripted tool call and the result the runtime's tool returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScriptedCall {
    /// Tool name.
    pub name: String,
    /// JSON arguments.
    pub arguments: serde_json::Value,
    /// The result text the tool returns.
    pub result: String,
}

/// A scenario expanded for one trial.
#[derive(Debug, Clone)]
pub struct Instance {
    /// The flat script.
    pub steps: Vec<Step>,
    /// What the fake provider plays (derived from `steps`, facts and faults).
    pub fake: FakeScript,
}

/// Seeded variation of the script across trials (`vary:`). Trial 0 plays the script as
/// written; every later trial scales each filler size and each `repeat` count by its own
/// seeded factor in `[1 − x, 1 + x]`. The trials are then different sessions — compaction
/// triggers at different points, probes land at different depths — so the report may count
/// them as independent units instead of aggregating near-copies.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Variation {
    /// Trials a run makes of this scenario when `--trials` is not given.
    pub instances: u32,
    /// Largest relative change of a filler size (0 = none).
    pub sizes: f64,
    /// Largest relative change of a `repeat` count (0 = none).
    pub repeats: f64,
}

impl Default for Variation {
    fn default() -> Self {
        Variation {
            instances: 1,
            sizes: 0.0,
            repeats: 0.0,
        }
    }
}

impl Variation {
    /// Whether trials after the first differ from the script as written.
    pub fn varies(&self) -> bool {
        self.sizes > 0.0 || self.repeats > 0.0
    }

    /// The instance label of `trial`: [`AS_WRITTEN`] when it plays the script as written,
    /// else `varied-<trial>`. Trials with the same label of one scenario are copies.
    pub fn instance_label(&self, trial: u32) -> String {
        if trial == 0 || !self.varies() {
            AS_WRITTEN.to_string()
        } else {
            format!("varied-{trial}")
        }
    }
}

/// Instance label of a trial that plays its script as written.
pub const AS_WRITTEN: &str = "as-written";
