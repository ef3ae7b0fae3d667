//! Gates: pre-registered pass/fail thresholds that judge the **candidate** mode against
//! its baselines (METRICS.md §Gates).
//!
//! A gates file is YAML (see [`DEFAULT_GATES`]); unknown keys are errors, with their
//! location. [`evaluate`] turns a run and a gates file into a [`GateReport`]: one
//! [`GateResult`] per configured gate and an overall [`GateVerdict`] with its exit code
//! ([`EXIT_PASS`], [`EXIT_FAIL`], [`EXIT_CANNOT_EVALUATE`]).
//!
//! # What each gate measures (first version)
//!
//! | gate | observed value | passes when |
//! | --- | --- | --- |
//! | `safety_invariant_failures` | `fail` verdicts of invariant graders (every grader except `recall`) in candidate trials | ≤ `max`; not evaluated when no invariant grader gave a pass/fail verdict, or one could not judge the system under test |
//! | `transcript_corruptions` | `fail` verdicts of `transcript-immutable` in candidate trials | ≤ `max`; not evaluated when that grader gave no verdict (no evidence is not a pass) |
//! | `unwarned_over_budget_requests` | candidate **turn** requests (`purpose = turn`) with `sent && over_budget && !warned` | ≤ `max` |
//! | `token_reduction_vs_off` | median over steps paired by (scenario, trial, step) of `1 − candidate/off`, on scenarios carrying `tag`, off-script trials left out; a step's size is its largest sent turn request, sized by provider input tokens, else the provider's overflow count, else the estimate | the **lower bound** of its seeded session-cluster bootstrap 95% interval ≥ `min`; not evaluated below `min_clusters` sessions |
//! | `pass_rate_regression_vs_warn` | pass rate(`warn`) − pass rate(candidate) over sessions ([`scenarios`]: a scenario's copies count once, each `vary:` instance apart) whose `warn` is expected to complete | **non-inferiority**: the upper bound of the Newcombe (method 10) 95% interval ≤ `max`; not evaluated below `min_units` sessions, or when even identical results could not show it and the candidate is not shown inferior |
//! | `completion_regression_vs_warn` | mean over the same sessions of turns completed ÷ scripted, `warn` − candidate | upper bound of the seeded bootstrap 95% interval ≤ `max`; not evaluated below `min_units` |
//! | `seeded_recall` | correct / probed facts of `kinds` (default durable constraints) in scenarios carrying `tag`, non-errored candidate trials; every kind reported beside | the **lower Wilson 95% bound** ≥ `min`; not evaluated below `min_probes`, or when even a perfect record could not reach `min` and the upper bound does |
//! | `estimator_p95_undercount` | p95 over counted candidate turn requests (answered, or overflowed with the provider's count) of the undercount share `max(0, −error)` of the estimate the system planned with, leaving out scenarios tagged with one of `exclude_tags` (default none) | ≤ `max_share_of_buffer` × min(buffer / window) |
//! | `errored_trials` | trials with status `errored` (ctxbench's or the provider's fault; a crash of the system under test is its failure), **all modes** | ≤ `max` |
//!
//! Summarization requests (`purpose = summary`) are compaction cost: they carry no engine
//! budget, so they are left out of every request-level gate above.
//!
//! A gate whose data is missing (e.g. the candidate mode is not in the run) is
//! `not_evaluated`, never silently passed; the verdict is then `INCOMPLETE` unless
//! another gate failed.
//!
//! # Pre-registration
//!
//! The run manifest may carry the gates file registered before the first trial. The
//! report compares its SHA-256 with that of the evaluated file and, when they differ (or
//! nothing was registered), sets [`GateReport::note`], which the verdict line, the HTML
//! banner and `gates.json` all show. Unregistered gates give no verdict (`INCOMPLETE`, exit
//! 3) unless the evaluation is declared exploratory (`--exploratory`), which stamps every
//! output. A run missing shards or trials of its matrix is `INCOMPLETE` as well, naming them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use ctxbench_harness::storage::schema::{OutcomeStatus, TrialRow, VerdictStatus};
use ctxbench_harness::Mode;
use polars::prelude::*;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

mod scenarios;
mod tokens;

pub(crate) use scenarios::completion;

pub(crate) use tokens::{
    instances, median_reduction, pair_steps, reduction_interval, tagged_scenarios,
};
use tokens::{token_reduction, undercount};

use crate::error::ReportError;
use crate::read::RunData;
use crate::stats::{wilson_demonstrable_n, Proportion};

/// The default gates file (also `reports/gates/default.yaml`).
pub const DEFAULT_GATES: &str = include_str!("../../gates/default.yaml");

/// Exit code when every gate passes.
pub const EXIT_PASS: i32 = 0;
/// Exit code when at least one gate fails.
pub const EXIT_FAIL: i32 = 1;
/// Exit code when no gate failed but some could not be evaluated (missing data,
/// candidate mode absent, mismatched runs).
pub const EXIT_CANNOT_EVALUATE: i32 = 3;

/// Grader whose verdicts are recall, not a safety invariant.
pub const RECALL_GRADER: &str = "recall";
/// Grader whose failures are transcript corruptions.
pub const TRANSCRIPT_GRADER: &str = "transcript-immutable";
/// How a grader's summary starts when the system under test, not the scenario, kept it
/// from judging (the graders' own wording).
pub const SUT_NOT_APPLICABLE: &str = "not-applicable: the system under test";

/// A parsed gates file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatesFile {
    /// Format version; only 1 exists.
    pub version: u32,
    /// The mode being judged.
    #[serde(default = "default_candidate")]
    pub candidate: Mode,
    /// Modes reported beside the candidate (and compared against by `_vs_<mode>` gates).
    #[serde(default = "default_baselines")]
    pub baselines: Vec<Mode>,
    /// The thresholds; an absent gate is not checked.
    pub gates: GateThresholds,
    /// Where the file came from (a path, or `builtin`).
    #[serde(skip)]
    pub source: String,
    /// Lowercase hex SHA-256 of the file's exact text (compared with the registration).
    #[serde(skip)]
    pub sha256: String,
    /// Evaluate even when these are not the gates registered before the run; every output
    /// is then stamped exploratory (`ctxbench gate --exploratory`). Without it, unregistered
    /// gates cannot give a verdict.
    #[serde(skip)]
    pub exploratory: bool,
}

fn default_candidate() -> Mode {
    Mode::Compact
}

fn default_baselines() -> Vec<Mode> {
    vec![Mode::Off, Mode::Warn]
}

/// The gate thresholds of a gates file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateThresholds {
    /// Failed invariant-grader verdicts in candidate trials.
    #[serde(default)]
    pub safety_invariant_failures: Option<MaxCount>,
    /// Failed `transcript-immutable` verdicts in candidate trials.
    #[serde(default)]
    pub transcript_corruptions: Option<MaxCount>,
    /// Candidate requests sent over budget without a warning.
    #[serde(default)]
    pub unwarned_over_budget_requests: Option<MaxCount>,
    /// Median per-step input-token reduction of the candidate against `off`.
    #[serde(default)]
    pub token_reduction_vs_off: Option<MinReduction>,
    /// Pass-rate drop of the candidate against `warn`, by scenario.
    #[serde(default)]
    pub pass_rate_regression_vs_warn: Option<NonInferiority>,
    /// Completion drop (turns completed ÷ scripted) of the candidate against `warn`, by
    /// scenario.
    #[serde(default)]
    pub completion_regression_vs_warn: Option<NonInferiority>,
    /// Recall of seeded facts in the candidate.
    #[serde(default)]
    pub seeded_recall: Option<RecallGate>,
    /// p95 estimator undercount against the safety buffer's share of the window.
    #[serde(default)]
    pub estimator_p95_undercount: Option<MaxShareOfBuffer>,
    /// Errored trials, all modes.
    #[serde(default)]
    pub errored_trials: Option<MaxCount>,
}

/// `{max: N}` on a count.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MaxCount {
    /// Largest acceptable count.
    pub max: u64,
}

/// `{max: x, min_units: n}`: a non-inferiority margin on a per-session difference, and the
/// fewest independent sessions (scenarios, or the instances `vary:` makes of one) it may be
/// judged on.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NonInferiority {
    /// Largest acceptable upper bound of the interval on baseline − candidate.
    pub max: f64,
    /// Fewest eligible sessions (below: `not_evaluated`, saying how many are needed).
    #[serde(default = "default_min_units")]
    pub min_units: u64,
}

fn default_min_units() -> u64 {
    DEFAULT_MIN_UNITS
}

/// Fewest independent sessions a per-session comparison is judged on, by default.
pub const DEFAULT_MIN_UNITS: u64 = 5;
/// Fewest session clusters the token-reduction interval is computed on, by default.
pub const DEFAULT_MIN_CLUSTERS: u64 = 3;
/// Fewest probes the recall gate is judged on, by default.
pub const DEFAULT_MIN_PROBES: u64 = 20;

/// `{min: x, tag: t, kinds: [..], min_probes: n}`: recall of seeded facts, judged on the lower
/// Wilson bound over the probes of `kinds` in scenarios carrying `tag`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecallGate {
    /// Smallest acceptable lower Wilson 95% bound.
    pub min: f64,
    /// Only scenarios carrying this tag count (seed 000: "in long sessions").
    #[serde(default)]
    pub tag: Option<String>,
    /// Fact kinds that count (default: durable constraints); the others are reported beside.
    #[serde(default = "default_recall_kinds")]
    pub kinds: Vec<String>,
    /// Fewest probes (below: `not_evaluated`).
    #[serde(default = "default_min_probes")]
    pub min_probes: u64,
}

fn default_recall_kinds() -> Vec<String> {
    vec!["constraint".to_string()]
}

fn default_min_probes() -> u64 {
    DEFAULT_MIN_PROBES
}

/// The fact kinds a recall gate may name.
pub const FACT_KINDS: &[&str] = &["constraint", "decision", "task", "detail", "abstention"];

/// `{min: x, tag: t, min_clusters: n}`: a reduction share, optionally restricted to
/// scenarios with a tag, judged on the lower bound of its interval.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MinReduction {
    /// Smallest acceptable lower bound of the median reduction's interval (0.30 = 30%
    /// fewer input tokens).
    pub min: f64,
    /// Only scenarios carrying this tag are paired.
    #[serde(default)]
    pub tag: Option<String>,
    /// Fewest scenarios (the interval's independent clusters); below: `not_evaluated`.
    #[serde(default = "default_min_clusters")]
    pub min_clusters: u64,
}

fn default_min_clusters() -> u64 {
    DEFAULT_MIN_CLUSTERS
}

/// `{max_share_of_buffer: k, exclude_tags: [..]}`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MaxShareOfBuffer {
    /// Multiple of the buffer's share of the window the p95 undercount may reach.
    pub max_share_of_buffer: f64,
    /// Scenarios carrying any of these tags are left out (default
    /// [`DEFAULT_UNDERCOUNT_EXCLUDED_TAGS`]: scenarios that undercount on purpose, e.g. a
    /// provider whose tokenizer the estimator does not match). `[]` keeps every scenario.
    #[serde(default = "default_undercount_excluded_tags")]
    pub exclude_tags: Vec<String>,
}

/// Tags the `estimator_p95_undercount` gate leaves out unless `exclude_tags` says otherwise:
/// none — every scenario is judged on the estimate the system planned with (calibrated).
pub const DEFAULT_UNDERCOUNT_EXCLUDED_TAGS: &[&str] = &[];

fn default_undercount_excluded_tags() -> Vec<String> {
    DEFAULT_UNDERCOUNT_EXCLUDED_TAGS
        .iter()
        .map(|s| s.to_string())
        .collect()
}

impl GatesFile {
    /// Parses and validates gates-file text. `source` names it in errors and reports; every
    /// error carries `line:column` (the parser's, or the offending key's).
    pub fn parse(text: &str, source: &str) -> Result<GatesFile, ReportError> {
        let err = |at: Option<(usize, usize)>, message: String| ReportError::Gates {
            source_name: match at {
                Some((line, col)) => format!("{source}:{line}:{col}"),
                None => source.to_string(),
            },
            message,
        };
        let mut file: GatesFile = serde_saphyr::from_str(text).map_err(|e| {
            let at = e
                .location()
                .map(|l| (l.line() as usize, l.column() as usize));
            err(at, e.to_string())
        })?;
        file.source = source.to_string();
        file.sha256 = sha256_hex(text);
        file.validate()
            .map_err(|(path, message)| err(locate(text, &path), message))?;
        Ok(file)
    }

    /// Validation; an error names the key path (e.g. `["gates", "seeded_recall", "min"]`).
    fn validate(&self) -> Result<(), (Vec<&'static str>, String)> {
        if self.version != 1 {
            return Err((
                vec!["version"],
                format!(
                    "version: unsupported gates file version {} (this ctxbench reads version 1)",
                    self.version
                ),
            ));
        }
        if self.baselines.contains(&self.candidate) {
            return Err((
                vec!["baselines"],
                format!(
                    "baselines: the candidate `{}` cannot also be a baseline",
                    self.candidate
                ),
            ));
        }
        let g = &self.gates;
        let needs = |gate: &'static str, mode: Mode| {
            if self.baselines.contains(&mode) {
                Ok(())
            } else {
                Err((
                    vec!["gates", gate],
                    format!(
                        "gates.{gate}: compares against `{mode}`, which is not among the \
                         baselines (hint: add `{mode}` to `baselines` or remove the gate)"
                    ),
                ))
            }
        };
        let range = |gate: &'static str, field: &'static str, v: f64, lo: f64, hi: f64| {
            if v.is_finite() && (lo..=hi).contains(&v) {
                Ok(())
            } else {
                Err((
                    vec!["gates", gate, field],
                    format!("gates.{gate}.{field}: {v} is out of range (expected {lo} to {hi})"),
                ))
            }
        };
        let at_least_one = |gate: &'static str, field: &'static str, n: u64| {
            if n >= 1 {
                Ok(())
            } else {
                Err((
                    vec!["gates", gate, field],
                    format!("gates.{gate}.{field}: 0 is out of range (expected at least 1)"),
                ))
            }
        };
        let tag = |gate: &'static str, t: &Option<String>| {
            if t.as_deref().is_some_and(|s| s.trim().is_empty()) {
                Err((
                    vec!["gates", gate, "tag"],
                    format!("gates.{gate}.tag: empty tag"),
                ))
            } else {
                Ok(())
            }
        };
        if let Some(t) = &g.token_reduction_vs_off {
            needs("token_reduction_vs_off", Mode::Off)?;
            range("token_reduction_vs_off", "min", t.min, -1.0, 1.0)?;
            tag("token_reduction_vs_off", &t.tag)?;
            at_least_one("token_reduction_vs_off", "min_clusters", t.min_clusters)?;
        }
        for (name, t) in [
            (
                "pass_rate_regression_vs_warn",
                g.pass_rate_regression_vs_warn,
            ),
            (
                "completion_regression_vs_warn",
                g.completion_regression_vs_warn,
            ),
        ] {
            if let Some(t) = t {
                needs(name, Mode::Warn)?;
                range(name, "max", t.max, 0.0, 1.0)?;
                at_least_one(name, "min_units", t.min_units)?;
            }
        }
        if let Some(t) = &g.seeded_recall {
            range("seeded_recall", "min", t.min, 0.0, 1.0)?;
            tag("seeded_recall", &t.tag)?;
            at_least_one("seeded_recall", "min_probes", t.min_probes)?;
            if t.kinds.is_empty() {
                return Err((
                    vec!["gates", "seeded_recall", "kinds"],
                    "gates.seeded_recall.kinds: empty (expected at least one kind)".into(),
                ));
            }
            if let Some(k) = t.kinds.iter().find(|k| !FACT_KINDS.contains(&k.as_str())) {
                return Err((
                    vec!["gates", "seeded_recall", "kinds"],
                    format!(
                        "gates.seeded_recall.kinds: unknown kind `{k}` (expected one of {})",
                        FACT_KINDS.join(", ")
                    ),
                ));
            }
        }
        if let Some(t) = &g.estimator_p95_undercount {
            range(
                "estimator_p95_undercount",
                "max_share_of_buffer",
                t.max_share_of_buffer,
                0.0,
                1000.0,
            )?;
            if t.exclude_tags.iter().any(|s| s.trim().is_empty()) {
                return Err((
                    vec!["gates", "estimator_p95_undercount", "exclude_tags"],
                    "gates.estimator_p95_undercount.exclude_tags: empty tag".into(),
                ));
            }
        }
        let configured = [
            g.safety_invariant_failures.is_some(),
            g.transcript_corruptions.is_some(),
            g.unwarned_over_budget_requests.is_some(),
            g.token_reduction_vs_off.is_some(),
            g.pass_rate_regression_vs_warn.is_some(),
            g.completion_regression_vs_warn.is_some(),
            g.seeded_recall.is_some(),
            g.estimator_p95_undercount.is_some(),
            g.errored_trials.is_some(),
        ];
        if !configured.contains(&true) {
            return Err((
                vec!["gates"],
                "gates: no gate configured (an empty gates file would always pass)".into(),
            ));
        }
        Ok(())
    }
}

/// `(line, column)` (1-based) of the last key of `path` in `text`, found in order: each key
/// is searched after the previous one (good enough for a gates file's shallow YAML).
fn locate(text: &str, path: &[&str]) -> Option<(usize, usize)> {
    let mut from = 0;
    let mut at = None;
    for key in path {
        let pattern = format!("{key}:");
        let rel = text[from..]
            .match_indices(&pattern)
            .map(|(i, _)| from + i)
            .find(|&i| {
                // A whole key: preceded by the start, whitespace, `{` or `,`.
                text[..i]
                    .chars()
                    .next_back()
                    .is_none_or(|c| c.is_whitespace() || c == '{' || c == ',')
            })?;
        at = Some(rel);
        from = rel + pattern.len();
    }
    let i = at?;
    let line = text[..i].matches('\n').count() + 1;
    let col = i - text[..i].rfind('\n').map_or(0, |n| n + 1) + 1;
    Some((line, col))
}

/// Loads a gates file from `path`, or the built-in [`DEFAULT_GATES`] when `None`.
pub fn load_gates(path: Option<&Path>) -> Result<GatesFile, ReportError> {
    match path {
        None => GatesFile::parse(DEFAULT_GATES, "builtin"),
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|e| ReportError::io(p, e))?;
            GatesFile::parse(&text, &p.display().to_string())
        }
    }
}

/// Lowercase hex SHA-256 of a text, as registered in the manifest.
pub fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// Outcome of one gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GateStatus {
    /// The observed value is within the threshold.
    Pass,
    /// The observed value is outside the threshold.
    Fail,
    /// The run lacks the data to judge this gate.
    NotEvaluated,
}

impl GateStatus {
    /// `pass` / `fail` / `not_evaluated`.
    pub fn as_str(self) -> &'static str {
        match self {
            GateStatus::Pass => "pass",
            GateStatus::Fail => "fail",
            GateStatus::NotEvaluated => "not_evaluated",
        }
    }
}

/// Which side of the threshold passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    /// observed ≤ threshold.
    Max,
    /// observed ≥ threshold.
    Min,
}

/// One gate's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GateResult {
    /// Gate name, as in the gates file.
    pub name: String,
    /// Status.
    pub status: GateStatus,
    /// Whether `threshold` is a maximum or a minimum.
    pub bound: Bound,
    /// The threshold applied (for `estimator_p95_undercount`, already scaled by the
    /// buffer's share of the window).
    pub threshold: f64,
    /// The observed value; `None` when not evaluated.
    pub observed: Option<f64>,
    /// How the value was obtained, or why it could not be.
    pub detail: String,
}

/// Overall verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GateVerdict {
    /// Every gate was evaluated and passed.
    Pass,
    /// At least one gate failed.
    Fail,
    /// None failed, but at least one could not be evaluated.
    Incomplete,
}

impl GateVerdict {
    /// `PASS` / `FAIL` / `INCOMPLETE`.
    pub fn label(self) -> &'static str {
        match self {
            GateVerdict::Pass => "PASS",
            GateVerdict::Fail => "FAIL",
            GateVerdict::Incomplete => "INCOMPLETE",
        }
    }

    /// The process exit code for this verdict.
    pub fn exit_code(self) -> i32 {
        match self {
            GateVerdict::Pass => EXIT_PASS,
            GateVerdict::Fail => EXIT_FAIL,
            GateVerdict::Incomplete => EXIT_CANNOT_EVALUATE,
        }
    }
}

/// Whether the evaluated gates are the ones registered before the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RegistrationStatus {
    /// Same SHA-256 as registered.
    Matches,
    /// A different gates file than registered.
    Differs,
    /// The run registered no gates.
    NotRegistered,
}

/// The gates registration check.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Registration {
    /// Result of the comparison.
    pub status: RegistrationStatus,
    /// Registered source (path or `builtin`).
    pub registered_source: Option<String>,
    /// Registered SHA-256.
    pub registered_sha256: Option<String>,
    /// Registration time.
    pub registered_at: Option<String>,
}

/// Everything `gates.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GateReport {
    /// Overall verdict.
    pub verdict: GateVerdict,
    /// Exit code for the verdict.
    pub exit_code: i32,
    /// One-line reason for the verdict.
    pub reason: String,
    /// Judged mode.
    pub candidate: Mode,
    /// Baseline modes.
    pub baselines: Vec<Mode>,
    /// The system under test the verdict is about, as the manifest records it:
    /// `reference`, or `exec:COMMAND ARGS` for an external agent (untrusted text).
    pub sut: String,
    /// Evaluated gates file (path or `builtin`).
    pub gates_source: String,
    /// Its SHA-256.
    pub gates_sha256: String,
    /// Comparison with the registration in the manifest.
    pub registration: Registration,
    /// Loud note when the evaluated gates are not the registered ones.
    pub note: Option<String>,
    /// Per-gate results, in gates-file field order.
    pub gates: Vec<GateResult>,
    /// Data-quality warnings (torn lines, orphan rows, missing trials).
    pub warnings: Vec<String>,
    /// Whether these gates were evaluated as exploratory (not the pre-registered ones).
    pub exploratory: bool,
    /// What part of the run's matrix is missing (shards, trials), if any: no verdict then.
    pub incomplete_run: Option<String>,
}

impl GateReport {
    /// The verdict as every output heads it: `PASS`, `FAIL`, `INCOMPLETE`, each prefixed
    /// `EXPLORATORY ` when the gates were not the pre-registered ones.
    pub fn headline(&self) -> String {
        if self.exploratory {
            format!("EXPLORATORY {}", self.verdict.label())
        } else {
            self.verdict.label().to_string()
        }
    }
}

/// Evaluates `gates` on `run`. Never fails: missing data makes a gate `not_evaluated`.
pub fn evaluate(run: &RunData, gates: &GatesFile) -> GateReport {
    // The requests frame only fails to build on a polars bug; then the two gates that
    // use it say so instead of aborting the report.
    let frame = crate::frames::requests_frame(run);
    evaluate_with(run, frame.as_ref().map_err(|e| e.to_string()), gates)
}

pub(crate) fn evaluate_with(
    run: &RunData,
    requests: Result<&DataFrame, String>,
    gates: &GatesFile,
) -> GateReport {
    let ctx = Ctx::new(run, gates.candidate);
    let g = &gates.gates;
    let mut results = Vec::new();
    if let Some(t) = g.safety_invariant_failures {
        results.push(ctx.safety(t));
    }
    if let Some(t) = g.transcript_corruptions {
        results.push(ctx.transcript(t));
    }
    if let Some(t) = g.unwarned_over_budget_requests {
        results.push(ctx.unwarned(t));
    }
    if let Some(t) = &g.token_reduction_vs_off {
        results.push(ctx.with_frame(
            &requests,
            "token_reduction_vs_off",
            Bound::Min,
            t.min,
            |df| token_reduction(&ctx, df, t),
        ));
    }
    if let Some(t) = g.pass_rate_regression_vs_warn {
        results.push(ctx.pass_rate_regression(t));
    }
    if let Some(t) = g.completion_regression_vs_warn {
        results.push(ctx.completion_regression(t));
    }
    if let Some(t) = &g.seeded_recall {
        results.push(ctx.recall(t));
    }
    if let Some(t) = &g.estimator_p95_undercount {
        results.push(ctx.with_frame(
            &requests,
            "estimator_p95_undercount",
            Bound::Max,
            t.max_share_of_buffer,
            |df| undercount(&ctx, df, t),
        ));
    }
    if let Some(t) = g.errored_trials {
        results.push(ctx.errored(t));
    }

    let failed: Vec<&str> = names_with(&results, GateStatus::Fail);
    let missing: Vec<&str> = names_with(&results, GateStatus::NotEvaluated);
    let (verdict, reason) = if !failed.is_empty() {
        (
            GateVerdict::Fail,
            format!(
                "{} of {} gates failed: {}",
                failed.len(),
                results.len(),
                failed.join(", ")
            ),
        )
    } else if !missing.is_empty() {
        // Say what each undecided gate lacks, so the reader knows what would decide it.
        let lacks: Vec<String> = results
            .iter()
            .filter(|r| r.status == GateStatus::NotEvaluated)
            .map(|r| {
                let why = r.detail.strip_prefix("inconclusive: ").unwrap_or(&r.detail);
                format!("{} — {why}", r.name)
            })
            .collect();
        (
            GateVerdict::Incomplete,
            format!(
                "{} of {} gates could not be evaluated: {}. To conclude: {}",
                missing.len(),
                results.len(),
                missing.join(", "),
                lacks.join("; ")
            ),
        )
    } else {
        (
            GateVerdict::Pass,
            format!(
                "all {} gates passed for candidate `{}`",
                results.len(),
                gates.candidate
            ),
        )
    };

    let (mut verdict, mut reason) = (verdict, reason);
    // Missing trials or shards: no verdict can stand on part of the matrix.
    let incomplete_run = missing_matrix(run);
    if let Some(missing) = &incomplete_run {
        reason = if verdict == GateVerdict::Fail {
            format!("{missing}; on the trials present, {reason}")
        } else {
            missing.clone()
        };
        verdict = GateVerdict::Incomplete;
    }
    let (registration, mut note) = registration(run, gates);
    // Pre-registration is enforced: other gates than the registered ones give no verdict
    // unless the evaluation is declared exploratory.
    let registered = registration.status == RegistrationStatus::Matches;
    if !registered && gates.exploratory {
        note = Some(format!(
            "EXPLORATORY: {}",
            note.unwrap_or_else(|| "gates evaluated after the run".into())
        ));
    } else if !registered {
        reason = format!(
            "{}; without pre-registered gates there is no verdict (evaluate the registered \
             gates, or pass --exploratory to evaluate these as exploratory); on these gates: \
             {} — {reason}",
            note.clone().unwrap_or_default(),
            verdict.label()
        );
        verdict = GateVerdict::Incomplete;
    }
    GateReport {
        verdict,
        exit_code: verdict.exit_code(),
        reason,
        candidate: gates.candidate,
        baselines: gates.baselines.clone(),
        sut: run.sut().to_string(),
        gates_source: gates.source.clone(),
        gates_sha256: gates.sha256.clone(),
        registration,
        note,
        gates: results,
        warnings: data_warnings(run),
        exploratory: gates.exploratory && !registered,
        incomplete_run,
    }
}

/// What part of the matrix the run lacks, if any: missing shards (the manifests know the
/// whole matrix) and missing trials.
fn missing_matrix(run: &RunData) -> Option<String> {
    let present = run.trials.len() as u64;
    let mut parts = Vec::new();
    let shards: Vec<_> = run.runs.iter().filter_map(|r| r.manifest.shard).collect();
    if let Some(count) = shards.first().map(|s| s.count) {
        let have: BTreeSet<u32> = shards.iter().map(|s| s.index).collect();
        let missing: Vec<String> = (1..=count)
            .filter(|k| !have.contains(k))
            .map(|k| format!("{k}/{count}"))
            .collect();
        if !missing.is_empty() {
            parts.push(format!("shard(s) {} missing", missing.join(", ")));
        }
    }
    let expected = run
        .manifest()
        .full_matrix_size
        .unwrap_or_else(|| run.matrix_size())
        .max(run.matrix_size());
    if present < expected {
        parts.push(format!(
            "{} of {expected} matrix trials missing",
            expected - present
        ));
    }
    (!parts.is_empty()).then(|| format!("INCOMPLETE RUN: {}", parts.join("; ")))
}

fn names_with(results: &[GateResult], status: GateStatus) -> Vec<&str> {
    results
        .iter()
        .filter(|r| r.status == status)
        .map(|r| r.name.as_str())
        .collect()
}

fn registration(run: &RunData, gates: &GatesFile) -> (Registration, Option<String>) {
    match &run.manifest().gates {
        None => (
            Registration {
                status: RegistrationStatus::NotRegistered,
                registered_source: None,
                registered_sha256: None,
                registered_at: None,
            },
            Some(format!(
                "the run registered no gates before it ran; the evaluated gates ({}, sha256 {}) \
                 were chosen afterwards",
                gates.source,
                short(&gates.sha256)
            )),
        ),
        Some(reg) => {
            let matches = reg.sha256.eq_ignore_ascii_case(&gates.sha256);
            let note = (!matches).then(|| {
                format!(
                    "evaluated gates differ from the gates registered before the run \
                     (registered sha256 {} from {} at {}, evaluated {} from {})",
                    short(&reg.sha256),
                    reg.source,
                    reg.registered_at,
                    short(&gates.sha256),
                    gates.source
                )
            });
            (
                Registration {
                    status: if matches {
                        RegistrationStatus::Matches
                    } else {
                        RegistrationStatus::Differs
                    },
                    registered_source: Some(reg.source.clone()),
                    registered_sha256: Some(reg.sha256.clone()),
                    registered_at: Some(reg.registered_at.clone()),
                },
                note,
            )
        }
    }
}

/// First 12 hex digits: enough to tell files apart in a one-line note.
fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

fn data_warnings(run: &RunData) -> Vec<String> {
    let mut w = Vec::new();
    if run.torn_lines > 0 {
        w.push(format!(
            "{} torn last line(s) skipped (a killed writer; `ctxbench run --resume` re-runs those trials)",
            run.torn_lines
        ));
    }
    if run.orphan_requests > 0 {
        w.push(format!(
            "{} request row(s) without a trial row dropped (trials that never finished)",
            run.orphan_requests
        ));
    }
    if run.duplicate_requests > 0 {
        w.push(format!(
            "{} duplicated request row(s) superseded by a later copy (resumed trials)",
            run.duplicate_requests
        ));
    }
    let present = run.trials.len() as u64;
    let expected = run.matrix_size();
    if present < expected {
        w.push(format!(
            "{present} of {expected} matrix trials present: the run is incomplete"
        ));
    }
    w
}

/// Shared view of the run for the gate computations.
struct Ctx<'a> {
    run: &'a RunData,
    candidate: Mode,
    cand: Vec<&'a TrialRow>,
}

impl<'a> Ctx<'a> {
    fn new(run: &'a RunData, candidate: Mode) -> Self {
        let cand = run.trials.iter().filter(|t| t.mode == candidate).collect();
        Ctx {
            run,
            candidate,
            cand,
        }
    }

    fn result(
        name: &str,
        bound: Bound,
        threshold: f64,
        observed: Option<f64>,
        detail: String,
    ) -> GateResult {
        let status = match observed {
            None => GateStatus::NotEvaluated,
            Some(v) => {
                let ok = match bound {
                    Bound::Max => v <= threshold,
                    Bound::Min => v >= threshold,
                };
                if ok {
                    GateStatus::Pass
                } else {
                    GateStatus::Fail
                }
            }
        };
        GateResult {
            name: name.to_string(),
            status,
            bound,
            threshold,
            observed,
            detail,
        }
    }

    fn no_candidate(&self) -> String {
        format!("candidate mode `{}` is not in the run", self.candidate)
    }

    fn safety(&self, t: MaxCount) -> GateResult {
        let name = "safety_invariant_failures";
        let max = t.max as f64;
        if self.cand.is_empty() {
            return Self::result(name, Bound::Max, max, None, self.no_candidate());
        }
        let mut judged = 0u64;
        let mut failed: BTreeMap<&str, u64> = BTreeMap::new();
        let mut not_applicable: BTreeSet<&str> = BTreeSet::new();
        for v in self.cand.iter().flat_map(|t| &t.verdicts) {
            if v.status == VerdictStatus::Skip && v.summary.starts_with(SUT_NOT_APPLICABLE) {
                not_applicable.insert(v.grader.as_str());
            }
            if v.grader == RECALL_GRADER || v.status == VerdictStatus::Skip {
                continue;
            }
            judged += 1;
            if v.status == VerdictStatus::Fail {
                *failed.entry(v.grader.as_str()).or_default() += 1;
            }
        }
        if judged == 0 {
            return Self::result(
                name,
                Bound::Max,
                max,
                None,
                "no invariant grader gave a pass/fail verdict on a candidate trial".into(),
            );
        }
        let total: u64 = failed.values().sum();
        if total == 0 && !not_applicable.is_empty() {
            // Missing evidence is never a pass: these invariants were not checked at all.
            return Self::result(
                name,
                Bound::Max,
                max,
                None,
                format!(
                    "0 failures in {judged} invariant verdicts, but {} could not judge this \
                     system under test (it reports no context events): {}",
                    not_applicable.len(),
                    not_applicable
                        .iter()
                        .copied()
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            );
        }
        let detail = if total == 0 {
            format!("0 failures in {judged} invariant verdicts")
        } else {
            format!(
                "{total} failed of {judged} invariant verdicts ({})",
                by_key(&failed)
            )
        };
        Self::result(name, Bound::Max, max, Some(total as f64), detail)
    }

    fn transcript(&self, t: MaxCount) -> GateResult {
        let name = "transcript_corruptions";
        let max = t.max as f64;
        if self.cand.is_empty() {
            return Self::result(name, Bound::Max, max, None, self.no_candidate());
        }
        let verdicts: Vec<_> = self
            .cand
            .iter()
            .flat_map(|t| t.verdicts.iter().map(move |v| (t, v)))
            .filter(|(_, v)| v.grader == TRANSCRIPT_GRADER && v.status != VerdictStatus::Skip)
            .collect();
        if verdicts.is_empty() {
            // No evidence is not zero corruptions.
            return Self::result(
                name,
                Bound::Max,
                max,
                None,
                format!(
                    "no evidence: grader `{TRANSCRIPT_GRADER}` gave no verdict on a candidate \
                     trial (a system that reports no transcript cannot be judged here)"
                ),
            );
        }
        let failed: Vec<&str> = verdicts
            .iter()
            .filter(|(_, v)| v.status == VerdictStatus::Fail)
            .map(|(t, _)| t.trial_id.as_str())
            .collect();
        let detail = format!(
            "{} of {} `{TRANSCRIPT_GRADER}` verdicts failed{}",
            failed.len(),
            verdicts.len(),
            examples(&failed)
        );
        Self::result(name, Bound::Max, max, Some(failed.len() as f64), detail)
    }

    fn unwarned(&self, t: MaxCount) -> GateResult {
        let name = "unwarned_over_budget_requests";
        let max = t.max as f64;
        if self.cand.is_empty() {
            return Self::result(name, Bound::Max, max, None, self.no_candidate());
        }
        self.with_frame(&Ok(&self.run.requests), name, Bound::Max, max, |df| {
            let (sent, over, unwarned) = unwarned_counts(df, self.candidate)?;
            Ok(self.unwarned_result(name, max, sent, over, unwarned))
        })
    }

    fn unwarned_result(
        &self,
        name: &str,
        max: f64,
        sent: usize,
        over: usize,
        unwarned: Vec<String>,
    ) -> GateResult {
        let unwarned: Vec<&str> = unwarned.iter().map(String::as_str).collect();
        let n = unwarned.len();
        let ids: Vec<&str> = unwarned
            .into_iter()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let detail = format!(
            "{over} of {sent} sent candidate turn requests over budget, {n} without a warning{}",
            examples(&ids)
        );
        Self::result(name, Bound::Max, max, Some(n as f64), detail)
    }

    fn recall(&self, t: &RecallGate) -> GateResult {
        let name = "seeded_recall";
        if self.cand.is_empty() {
            return Self::result(name, Bound::Min, t.min, None, self.no_candidate());
        }
        let tagged = t.tag.as_deref().map(|tag| tagged_scenarios(self.run, tag));
        let in_scope = |tr: &TrialRow| {
            tagged
                .as_ref()
                .is_none_or(|s| s.contains(tr.scenario.as_str()))
        };
        // Every probe of a non-errored candidate trial, by kind; only the gate's kinds, in
        // the gate's scenarios, count.
        let mut by_kind: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        let (mut correct, mut total) = (0u64, 0u64);
        for tr in self
            .cand
            .iter()
            .filter(|t| t.outcome.status != OutcomeStatus::Errored)
        {
            for p in &tr.recall {
                let kind = if p.kind.is_empty() {
                    "constraint"
                } else {
                    p.kind.as_str()
                };
                let e = by_kind.entry(kind.to_string()).or_default();
                e.0 += u64::from(p.correct);
                e.1 += 1;
                if in_scope(tr) && t.kinds.iter().any(|k| k == kind) {
                    correct += u64::from(p.correct);
                    total += 1;
                }
            }
        }
        let scope = format!(
            "{} probes{}",
            t.kinds.join("/"),
            t.tag
                .as_deref()
                .map(|tag| format!(" in scenarios tagged `{tag}`"))
                .unwrap_or_default()
        );
        let beside: Vec<String> = by_kind
            .iter()
            .map(|(k, (c, n))| format!("{k} {c}/{n}"))
            .collect();
        if total < t.min_probes {
            return Self::result(
                name,
                Bound::Min,
                t.min,
                None,
                format!(
                    "inconclusive: needs {} {scope}, has {total} (all kinds: {})",
                    t.min_probes,
                    beside.join(", ")
                ),
            );
        }
        let p = Proportion::wilson(correct, total).unwrap_or(Proportion {
            successes: 0,
            total: 0,
            value: 0.0,
            lo: 0.0,
            hi: 0.0,
        });
        // Too few probes for even a perfect record to reach the threshold: not shown below
        // it either (the upper bound clears it), so the run cannot decide.
        if let Some(need) = wilson_demonstrable_n(t.min) {
            if total < need && p.hi >= t.min {
                return Self::result(
                    name,
                    Bound::Min,
                    t.min,
                    None,
                    format!(
                        "inconclusive: {correct}/{total} {scope} correct, but even a perfect \
                         record needs {need} probes for a lower Wilson 95% bound of {:.1}%: run \
                         more trials of varied long sessions (all kinds: {})",
                        t.min * 100.0,
                        beside.join(", ")
                    ),
                );
            }
        }
        Self::result(
            name,
            Bound::Min,
            t.min,
            Some(p.lo),
            format!(
                "lower Wilson 95% bound {:.3} of {correct}/{total} {scope} correct ({:.1}%, \
                 [{:.3}, {:.3}]); all kinds: {}",
                p.lo,
                p.value * 100.0,
                p.lo,
                p.hi,
                beside.join(", ")
            ),
        )
    }

    fn errored(&self, t: MaxCount) -> GateResult {
        let name = "errored_trials";
        let max = t.max as f64;
        if self.run.trials.is_empty() {
            return Self::result(name, Bound::Max, max, None, "the run has no trials".into());
        }
        let mut by_mode: BTreeMap<Mode, u64> = BTreeMap::new();
        for tr in &self.run.trials {
            if tr.outcome.status == OutcomeStatus::Errored {
                *by_mode.entry(tr.mode).or_default() += 1;
            }
        }
        let total: u64 = by_mode.values().sum();
        let detail = if total == 0 {
            format!("0 of {} trials errored (all modes)", self.run.trials.len())
        } else {
            let parts: Vec<String> = by_mode.iter().map(|(m, n)| format!("{m}={n}")).collect();
            format!(
                "{total} of {} trials errored ({})",
                self.run.trials.len(),
                parts.join(", ")
            )
        };
        Self::result(name, Bound::Max, max, Some(total as f64), detail)
    }

    fn with_frame(
        &self,
        frame: &Result<&DataFrame, String>,
        name: &str,
        bound: Bound,
        threshold: f64,
        f: impl FnOnce(&DataFrame) -> PolarsResult<GateResult>,
    ) -> GateResult {
        if self.cand.is_empty() {
            return Self::result(name, bound, threshold, None, self.no_candidate());
        }
        let outcome = match frame {
            Ok(df) => f(df).map_err(|e| e.to_string()),
            Err(e) => Err(e.clone()),
        };
        outcome.unwrap_or_else(|e| {
            Self::result(
                name,
                bound,
                threshold,
                None,
                format!("aggregation failed: {e}"),
            )
        })
    }
}

fn by_key(m: &BTreeMap<&str, u64>) -> String {
    m.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// ": a, b, c (+N more)" — bounded so a detail stays one line.
fn examples(ids: &[&str]) -> String {
    const SHOWN: usize = 3;
    if ids.is_empty() {
        return String::new();
    }
    let head = ids
        .iter()
        .take(SHOWN)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    if ids.len() > SHOWN {
        format!(": {head} (+{} more)", ids.len() - SHOWN)
    } else {
        format!(": {head}")
    }
}

/// Over the sent turn requests of `mode`: how many were sent, how many over budget, and
/// the trial ids (one per request) of those sent over budget without a warning.
fn unwarned_counts(df: &DataFrame, mode: Mode) -> PolarsResult<(usize, usize, Vec<String>)> {
    let sel = df
        .clone()
        .lazy()
        .filter(
            col("mode")
                .eq(lit(mode.as_str()))
                .and(col("sent"))
                .and(crate::frames::is_turn()),
        )
        .select([col("trial_id"), col("over_budget"), col("warned")])
        .collect()?;
    let ids = sel.column("trial_id")?.str()?;
    let over = sel.column("over_budget")?.bool()?;
    let warned = sel.column("warned")?.bool()?;
    let mut n_over = 0;
    let mut unwarned = Vec::new();
    for ((id, o), w) in ids.iter().zip(over.iter()).zip(warned.iter()) {
        if o == Some(true) {
            n_over += 1;
            if w != Some(true) {
                unwarned.push(id.unwrap_or_default().to_string());
            }
        }
    }
    Ok((sel.height(), n_over, unwarned))
}
