//! Run storage schema: the contract between running and reporting.
//!
//! A run directory `runs/<id>/` holds:
//!
//! | file | content |
//! | --- | --- |
//! | `manifest.json` | [`Manifest`], written before the first trial and rewritten atomically |
//! | `trials.jsonl` | one [`TrialRow`] per finished trial, appended and flushed when it finishes |
//! | `requests.jsonl` | one [`RequestRow`] per physical provider request (or preflight stop) |
//! | `events.jsonl` | one [`EventRow`] per engine event |
//! | `messages.jsonl` | [`MessageRow`]: every distinct (redacted) message once, by content hash |
//!
//! Rows of one trial are appended together, after the trial finishes, with its
//! `trials.jsonl` line last: a trial is present exactly when its trial row is. Every row
//! carries `schema` so readers can refuse what they do not understand. Field names are
//! stable; new fields are only ever added.

use serde::{Deserialize, Serialize};

pub use ctxbench_sut::budget::BudgetBreakdown;
use ctxbench_sut::Mode;

/// Schema tag of [`Manifest`].
pub const MANIFEST_SCHEMA: &str = "ctxbench.manifest/1";
/// Schema tag of [`TrialRow`].
pub const TRIAL_SCHEMA: &str = "ctxbench.trial/1";
/// Schema tag of [`RequestRow`].
pub const REQUEST_SCHEMA: &str = "ctxbench.request/1";
/// Schema tag of [`EventRow`].
pub const EVENT_SCHEMA: &str = "ctxbench.event/1";
/// Schema tag of [`MessageRow`].
pub const MESSAGE_SCHEMA: &str = "ctxbench.message/1";

/// `manifest.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`MANIFEST_SCHEMA`].
    pub schema: String,
    /// Run id (also the directory name).
    pub run_id: String,
    /// RFC 3339 creation time.
    pub created_at: String,
    /// ctxbench version that ran it.
    pub ctxbench_version: String,
    /// Base seed of the run.
    pub seed: u64,
    /// Provider spec, e.g. `fake`.
    pub provider: String,
    /// Modes in the matrix.
    pub modes: Vec<Mode>,
    /// Trials per scenario × mode as `--trials` gave it; `None`: each scenario's own count
    /// (`vary: {instances: N}`, default 1), recorded per scenario.
    pub trials: Option<u32>,
    /// Concurrency limit used.
    pub concurrency: u32,
    /// Where the suite came from (`builtin` or a path).
    pub suite_source: String,
    /// Scenarios in the matrix.
    pub scenarios: Vec<ManifestScenario>,
    /// Number of trials in the matrix.
    pub matrix_size: u64,
    /// Pre-registered gates, written before the first trial runs.
    pub gates: Option<RegisteredGates>,
    /// How the provider was configured — kind, model, base URL and the *name* of the key's
    /// environment variable; never a key. `--resume` reconnects with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_config: Option<ProviderConfig>,
    /// This run's part of a sharded matrix (`--shard K/N`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<Shard>,
    /// Trials in the whole (unsharded) matrix; equals `matrix_size` without a shard.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_matrix_size: Option<u64>,
    /// Per-run caps on provider tokens and estimated cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caps: Option<RunCaps>,
    /// A cassette the run recorded to or replayed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cassette: Option<CassetteUse>,
    /// Every `--resume` of this run, in order (segment n is `resumes[n - 1]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resumes: Vec<ResumeRecord>,
    /// The system under test: `reference`, or `exec:COMMAND ARGS` for an external agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sut: Option<String>,
    /// Set when the run stopped before finishing its matrix (a cap was reached); cleared
    /// by a `--resume` that completes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<RunStop>,
}

/// A provider's configuration as recorded in the manifest (no secrets).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderConfig {
    /// `fake`, `openai` or `anthropic`.
    pub kind: String,
    /// Model sent to the provider; `None` sends each scenario's own model name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Base URL override.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// Name of the environment variable the key is read from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_env: Option<String>,
}

/// One shard of a matrix: trials whose matrix index `i` has `i % count == index - 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// 1-based shard number `K`.
    pub index: u32,
    /// Number of shards `N`.
    pub count: u32,
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl std::str::FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("--shard `{s}`: expected K/N with 1 <= K <= N, e.g. 2/4");
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let index: u32 = k.trim().parse().map_err(|_| bad())?;
        let count: u32 = n.trim().parse().map_err(|_| bad())?;
        if index == 0 || count == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

/// Per-run caps; a run that reaches one starts no further trials and says so.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunCaps {
    /// Provider-reported input + output tokens over the whole run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Estimated cost in US dollars over the whole run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
    /// Prices used for the estimate, US dollars per million input / output tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_per_mtok: Option<(f64, f64)>,
}

/// A cassette in use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CassetteUse {
    /// `record` or `replay`.
    pub mode: String,
    /// The cassette file.
    pub path: String,
}

/// One `--resume`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResumeRecord {
    /// RFC 3339 time of the resume.
    pub at: String,
    /// Complete trials found.
    pub trials_done: u64,
    /// Torn final records cut off, as `file: bytes` (recorded before they are cut).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub torn: Vec<String>,
    /// Final records that were whole but lacked their newline (a power cut between the row
    /// and its `\n`), completed instead of cut, as `file: line N`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repaired: Vec<String>,
    /// Trials whose trial row was complete but whose request or event rows were torn (rows
    /// written without a sync before a power cut): their trial row was withdrawn and they run
    /// again, so no finished trial keeps a lost request row.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rerun: Vec<String>,
    /// Scratch workspaces of the interrupted run's trials that were deleted.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub workspaces_removed: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Why a run stopped early.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunStop {
    /// `token_cap` or `cost_cap`.
    pub reason: String,
    /// Human-readable detail.
    pub detail: String,
    /// Trials complete when it stopped.
    pub trials_done: u64,
}

/// A scenario as registered in the manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ManifestScenario {
    /// Id.
    pub id: String,
    /// Title.
    pub title: String,
    /// Tags.
    pub tags: Vec<String>,
    /// Source (path or `builtin:<file>`).
    pub source: String,
    /// SHA-256 of the source text.
    pub source_hash: String,
    /// Modes it ran in.
    pub modes: Vec<Mode>,
    /// Trials per mode it ran.
    #[serde(default)]
    pub trials: u32,
}

/// The gates file as registered before the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegisteredGates {
    /// Path, or `builtin`.
    pub source: String,
    /// SHA-256 of the gates file text.
    pub sha256: String,
    /// RFC 3339 registration time.
    pub registered_at: String,
    /// The gates file text itself, so the run is self-describing.
    pub text: String,
}

/// Terminal status of a trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeStatus {
    /// Every turn completed.
    Success,
    /// The engine stopped honestly because context could not fit.
    LimitReached,
    /// A model-side failure (e.g. provider overflow that was not recovered).
    Failed,
    /// Infrastructure failure (retries exhausted, harness error); never a pass.
    Errored,
}

impl OutcomeStatus {
    /// snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            OutcomeStatus::Success => "success",
            OutcomeStatus::LimitReached => "limit_reached",
            OutcomeStatus::Failed => "failed",
            OutcomeStatus::Errored => "errored",
        }
    }
}

/// A trial's terminal outcome with its typed reason.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialOutcome {
    /// Status.
    pub status: OutcomeStatus,
    /// Stable snake_case reason (`provider_overflow`, `mandatory_context_exceeds_budget`, …);
    /// empty on success.
    pub reason: String,
    /// The step at which the first non-success happened.
    pub step: Option<u64>,
    /// Human-readable detail.
    pub detail: String,
    /// The system under test crashed, hung or broke the protocol (observed by ctxbench, not
    /// reported by the system): a failure no scenario expects, so the trial never passes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sut_fault: bool,
}

/// Verdict status of one grader.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictStatus {
    /// The invariant holds.
    Pass,
    /// The invariant is violated; see evidence.
    Fail,
    /// Not applicable to this trial (e.g. nothing to check); never counts as a pass.
    Skip,
}

/// One piece of evidence a person can follow.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// Physical request number (1-based within the trial), when it concerns a request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<u64>,
    /// Script step index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u64>,
    /// What should have been seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<String>,
    /// What was seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen: Option<String>,
    /// A short (redacted) excerpt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excerpt: Option<String>,
    /// Relevant hashes (message, instruction snapshot, checkpoint).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hashes: Vec<String>,
    /// One-line explanation.
    pub note: String,
}

/// One grader's verdict on one trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// Grader name.
    pub grader: String,
    /// Status.
    pub status: VerdictStatus,
    /// One-line summary.
    pub summary: String,
    /// Evidence (bounded; the first failures).
    pub evidence: Vec<Evidence>,
}

/// Recall of one probed fact at one probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecallRow {
    /// Fact id.
    pub fact: String,
    /// Probe step index.
    pub step: u64,
    /// How the answer was checked, e.g. `contains: PostgreSQL`.
    pub expected: String,
    /// What the model answered (`None` when the probe got no answer, e.g. overflow).
    pub answer: Option<String>,
    /// Whether the answer is right.
    pub correct: bool,
    /// The fact's kind (`constraint`, `decision`, `task`, `detail`, `abstention`).
    #[serde(default)]
    pub kind: String,
}

/// Counters of one trial.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TrialStats {
    /// Steps in the script.
    pub steps: u64,
    /// Turns that completed.
    pub turns_completed: u64,
    /// Turns the script plays (completion = completed ÷ scripted).
    #[serde(default)]
    pub turns_scripted: u64,
    /// Turns that ended otherwise.
    pub turns_failed: u64,
    /// Physical provider requests sent.
    pub requests: u64,
    /// Provider errors of kind context_overflow.
    pub provider_overflows: u64,
    /// Other provider errors.
    pub provider_errors: u64,
    /// `context.warning` events.
    pub warnings: u64,
    /// `context.limit_reached` stops.
    pub limit_stops: u64,
    /// Requests sent over their declared input budget.
    pub over_budget_requests: u64,
    /// Sum of provider-reported input tokens.
    pub total_input_tokens: u64,
    /// Largest provider-reported input of one request.
    pub peak_input_tokens: u64,
    /// Sum of provider-reported output tokens.
    pub total_output_tokens: u64,
    /// Estimated tool-schema tokens per request (constant within a trial).
    pub tool_schema_tokens: u64,
    /// SHA-256 over the final transcript's message hashes in order.
    pub transcript_hash: String,
    /// Messages in the final transcript.
    pub transcript_messages: u64,
    /// What the HTTP retry layer did for this trial (attempts, retries by kind,
    /// give-ups); absent for the in-process fake, which has no transport.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure: Option<ctxbench_adapters::resilience::ResilienceStats>,
}

/// `trials.jsonl`: one line per finished trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialRow {
    /// [`TRIAL_SCHEMA`].
    pub schema: String,
    /// `<scenario>/<mode>/<trial>`; unique in a run.
    pub trial_id: String,
    /// The run segment that wrote this row: 0 for the first execution, n for the n-th
    /// `--resume`. Readers keep a trial's request and event rows only from the segment of its
    /// trial row, so rows of a killed attempt never mix with the re-run's.
    #[serde(default)]
    pub segment: u32,
    /// Scenario id.
    pub scenario: String,
    /// Scenario tags.
    pub tags: Vec<String>,
    /// Mode.
    pub mode: Mode,
    /// Provider name.
    pub provider: String,
    /// Model id.
    pub model: String,
    /// Trial index (0-based).
    pub trial: u32,
    /// Seed of this trial (derived from the run seed, scenario and trial; same in every mode).
    pub seed: u64,
    /// Which session the trial played: `as-written`, or `varied-<trial>` when the scenario's
    /// `vary:` scaled its script. Trials of one scenario with the same instance are copies
    /// (one unit for the gates); different instances are different sessions.
    #[serde(default = "as_written")]
    pub instance: String,
    /// Terminal outcome.
    pub outcome: TrialOutcome,
    /// Expected outcome (as text, e.g. `success`).
    pub expected_outcome: String,
    /// Whether the outcome matched and every applied grader passed.
    pub passed: bool,
    /// Grader verdicts.
    pub verdicts: Vec<Verdict>,
    /// Recall per probed fact.
    pub recall: Vec<RecallRow>,
    /// Counters.
    pub stats: TrialStats,
    /// RFC 3339 start time (timing column).
    pub started_at: String,
    /// Wall time in milliseconds (timing column).
    pub elapsed_ms: u64,
}

/// `requests.jsonl`: one line per physical provider request, or per preflight stop
/// (`sent = false`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestRow {
    /// [`REQUEST_SCHEMA`].
    pub schema: String,
    /// Trial id.
    pub trial_id: String,
    /// The run segment that wrote this row: 0 for the first execution, n for the n-th
    /// `--resume`. Readers keep a trial's request and event rows only from the segment of its
    /// trial row, so rows of a killed attempt never mix with the re-run's.
    #[serde(default)]
    pub segment: u32,
    /// Scenario id.
    pub scenario: String,
    /// Mode.
    pub mode: Mode,
    /// Provider name.
    pub provider: String,
    /// Model id.
    pub model: String,
    /// Trial index.
    pub trial: u32,
    /// 1-based physical request number within the trial (0 for a preflight stop).
    pub seq: u64,
    /// Script step index (pairs requests across modes).
    pub step: u64,
    /// Round within the turn (0 = first request of the turn).
    pub round: u64,
    /// Attempt of this round (1 = first; 2 = retry after overflow recovery).
    pub attempt: u32,
    /// Whether the request was sent to the provider.
    pub sent: bool,
    /// `turn` (a request of the conversation) or `summary` (a model-generated checkpoint's
    /// summarization request).
    #[serde(default = "purpose_turn")]
    pub purpose: String,
    /// Budget by category, as the engine estimated it before sending.
    pub budget: BudgetBreakdown,
    /// Estimator id, e.g. `cl100k_base`.
    pub estimator: String,
    /// `provider-tokenizer`, `sdk` or `conservative-fallback`.
    pub estimation_method: String,
    /// `exact` or `estimated`.
    pub confidence: String,
    /// The harness's own estimate of the exact request sent (same estimator), independent
    /// of what the engine declared.
    pub observed_estimate: u64,
    /// Whether the request exceeded its declared input budget.
    pub over_budget: bool,
    /// Whether a `context.warning` preceded it.
    pub warned: bool,
    /// Provider-reported input tokens (answered requests).
    pub provider_input_tokens: Option<u64>,
    /// Provider-reported output tokens (answered requests).
    pub provider_output_tokens: Option<u64>,
    /// Input tokens the provider's overflow error reported, when it did.
    pub overflow_input_tokens: Option<u64>,
    /// Provider error kind, e.g. `context_overflow`.
    pub error_kind: Option<String>,
    /// Why this attempt is a retry, if it is one.
    pub retry_reason: Option<String>,
    /// SHA-256 of the frozen instruction snapshot used.
    pub instruction_hash: String,
    /// Checkpoint id in use, if any.
    pub checkpoint_id: Option<String>,
    /// Content hashes of the request's messages, in order (see `messages.jsonl`).
    pub message_hashes: Vec<String>,
    /// Latency in milliseconds (timing column).
    pub latency_ms: u64,
}

fn purpose_turn() -> String {
    "turn".into()
}

/// `events.jsonl`: one engine event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventRow {
    /// [`EVENT_SCHEMA`].
    pub schema: String,
    /// Trial id.
    pub trial_id: String,
    /// The run segment that wrote this row: 0 for the first execution, n for the n-th
    /// `--resume`. Readers keep a trial's request and event rows only from the segment of its
    /// trial row, so rows of a killed attempt never mix with the re-run's.
    #[serde(default)]
    pub segment: u32,
    /// 1-based event number within the trial.
    pub seq: u64,
    /// Script step index.
    pub step: u64,
    /// Event kind, e.g. `context.budgeted`.
    pub kind: String,
    /// Event payload (versioned by kind).
    pub data: serde_json::Value,
}

/// `messages.jsonl`: a distinct message, redacted, by content hash.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageRow {
    /// [`MESSAGE_SCHEMA`].
    pub schema: String,
    /// Content hash of the original message (the one requests refer to).
    pub hash: String,
    /// The message with secrets redacted.
    pub message: ctxbench_adapters::Message,
}

fn as_written() -> String {
    crate::scenario::AS_WRITTEN.to_string()
}
