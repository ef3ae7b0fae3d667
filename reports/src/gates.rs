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
//! | `safety_invariant_failures` | `fail` verdicts of invariant graders (every grader except `recall`) in candidate trials | ≤ `max`; not evaluated when no invariant grader gave a pass/fail verdict |
//! | `transcript_corruptions` | `fail` verdicts of `transcript-immutable` in candidate trials; 0 with "no evidence" when that grader did not run | ≤ `max` |
//! | `unwarned_over_budget_requests` | candidate **turn** requests (`purpose = turn`) with `sent && over_budget && !warned` | ≤ `max` |
//! | `token_reduction_vs_off` | median over steps paired by (scenario, trial, step) of `1 − candidate/off`, on scenarios carrying `tag` (all when no tag); a step's size is its largest sent turn request, sized by provider input tokens, else the provider's overflow count, else the estimate; the detail adds a seeded cluster-bootstrap 95% interval ([`crate::stats`]) | ≥ `min`; not evaluated without pairs |
//! | `pass_rate_regression_vs_warn` | pass rate(`warn`) − pass rate(candidate) over (scenario, trial) pairs present in both modes, neither errored (point value); the detail gives the Newcombe (method 10) 95% interval, the paired counts and McNemar's exact p ([`crate::stats`]) | **non-inferiority**: the interval's upper bound ≤ `max` (not the point value) |
//! | `seeded_recall` | correct / probed facts over non-errored candidate trials | ≥ `min` |
//! | `estimator_p95_undercount` | p95 over answered candidate turn requests of the undercount share `max(0, −rel_error)`, leaving out scenarios tagged with one of `exclude_tags` (default `[estimator]`: scenarios that undercount on purpose) | ≤ `max_share_of_buffer` × min(buffer / window) |
//! | `errored_trials` | trials with status `errored`, **all modes** (an errored baseline breaks the pairing the candidate is judged on) | ≤ `max` |
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
//! banner and `gates.json` all show. The verdict itself is not changed by the note.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use ctxbench_harness::storage::schema::{OutcomeStatus, TrialRow, VerdictStatus};
use ctxbench_harness::Mode;
use polars::prelude::*;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::ReportError;
use crate::read::RunData;
use crate::stats::{
    bootstrap_median, mcnemar_exact, newcombe_paired_difference, BootstrapInterval, PairedTable,
    Proportion, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, QUANTILE_METHOD, Z_95,
};

/// The default gates file (also `reports/gates/default.yaml`).
pub const DEFAULT_GATES: &str = include_str!("../gates/default.yaml");

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
    /// Pass-rate drop of the candidate against `warn`.
    #[serde(default)]
    pub pass_rate_regression_vs_warn: Option<MaxShare>,
    /// Recall of seeded facts in the candidate.
    #[serde(default)]
    pub seeded_recall: Option<MinShare>,
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

/// `{max: x}` on a share in [0, 1].
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MaxShare {
    /// Largest acceptable value.
    pub max: f64,
}

/// `{min: x}` on a share in [0, 1].
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MinShare {
    /// Smallest acceptable value.
    pub min: f64,
}

/// `{min: x, tag: t}`: a reduction share, optionally restricted to scenarios with a tag.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MinReduction {
    /// Smallest acceptable median reduction (0.30 = 30% fewer input tokens).
    pub min: f64,
    /// Only scenarios carrying this tag are paired.
    #[serde(default)]
    pub tag: Option<String>,
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

/// Tags the `estimator_p95_undercount` gate leaves out unless `exclude_tags` says otherwise.
pub const DEFAULT_UNDERCOUNT_EXCLUDED_TAGS: &[&str] = &["estimator"];

fn default_undercount_excluded_tags() -> Vec<String> {
    DEFAULT_UNDERCOUNT_EXCLUDED_TAGS
        .iter()
        .map(|s| s.to_string())
        .collect()
}

impl GatesFile {
    /// Parses and validates gates-file text. `source` names it in errors and reports.
    pub fn parse(text: &str, source: &str) -> Result<GatesFile, ReportError> {
        let err = |message: String| ReportError::Gates {
            source_name: source.to_string(),
            message,
        };
        let mut file: GatesFile = serde_saphyr::from_str(text).map_err(|e| err(e.to_string()))?;
        file.source = source.to_string();
        file.sha256 = sha256_hex(text);
        file.validate().map_err(err)?;
        Ok(file)
    }

    fn validate(&self) -> Result<(), String> {
        if self.version != 1 {
            return Err(format!(
                "version: unsupported gates file version {} (this ctxbench reads version 1)",
                self.version
            ));
        }
        if self.baselines.contains(&self.candidate) {
            return Err(format!(
                "baselines: the candidate `{}` cannot also be a baseline",
                self.candidate
            ));
        }
        let g = &self.gates;
        let needs = |gate: &str, mode: Mode| -> Result<(), String> {
            if self.baselines.contains(&mode) {
                Ok(())
            } else {
                Err(format!(
                    "gates.{gate}: compares against `{mode}`, which is not among the baselines \
                     (hint: add `{mode}` to `baselines` or remove the gate)"
                ))
            }
        };
        let share = |gate: &str, field: &str, v: f64, lo: f64, hi: f64| -> Result<(), String> {
            if v.is_finite() && (lo..=hi).contains(&v) {
                Ok(())
            } else {
                Err(format!("gates.{gate}.{field}: {v} is outside [{lo}, {hi}]"))
            }
        };
        if let Some(t) = &g.token_reduction_vs_off {
            needs("token_reduction_vs_off", Mode::Off)?;
            share("token_reduction_vs_off", "min", t.min, -1.0, 1.0)?;
            if t.tag.as_deref().is_some_and(|s| s.trim().is_empty()) {
                return Err("gates.token_reduction_vs_off.tag: empty tag".to_string());
            }
        }
        if let Some(t) = g.pass_rate_regression_vs_warn {
            needs("pass_rate_regression_vs_warn", Mode::Warn)?;
            share("pass_rate_regression_vs_warn", "max", t.max, -1.0, 1.0)?;
        }
        if let Some(t) = g.seeded_recall {
            share("seeded_recall", "min", t.min, 0.0, 1.0)?;
        }
        if let Some(t) = &g.estimator_p95_undercount {
            share(
                "estimator_p95_undercount",
                "max_share_of_buffer",
                t.max_share_of_buffer,
                0.0,
                f64::MAX,
            )?;
            if t.exclude_tags.iter().any(|s| s.trim().is_empty()) {
                return Err("gates.estimator_p95_undercount.exclude_tags: empty tag".to_string());
            }
        }
        let configured = [
            g.safety_invariant_failures.is_some(),
            g.transcript_corruptions.is_some(),
            g.unwarned_over_budget_requests.is_some(),
            g.token_reduction_vs_off.is_some(),
            g.pass_rate_regression_vs_warn.is_some(),
            g.seeded_recall.is_some(),
            g.estimator_p95_undercount.is_some(),
            g.errored_trials.is_some(),
        ];
        if !configured.contains(&true) {
            return Err("gates: no gate configured (an empty gates file would always pass)".into());
        }
        Ok(())
    }
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
    if let Some(t) = g.seeded_recall {
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
        (
            GateVerdict::Incomplete,
            format!(
                "{} of {} gates could not be evaluated: {}",
                missing.len(),
                results.len(),
                missing.join(", ")
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

    let (registration, note) = registration(run, gates);
    GateReport {
        verdict,
        exit_code: verdict.exit_code(),
        reason,
        candidate: gates.candidate,
        baselines: gates.baselines.clone(),
        gates_source: gates.source.clone(),
        gates_sha256: gates.sha256.clone(),
        registration,
        note,
        gates: results,
        warnings: data_warnings(run),
    }
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
        for v in self.cand.iter().flat_map(|t| &t.verdicts) {
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
            return Self::result(
                name,
                Bound::Max,
                max,
                Some(0.0),
                format!("no evidence: grader `{TRANSCRIPT_GRADER}` gave no verdict on a candidate trial"),
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

    fn pass_rate_regression(&self, t: MaxShare) -> GateResult {
        let name = "pass_rate_regression_vs_warn";
        if self.cand.is_empty() {
            return Self::result(name, Bound::Max, t.max, None, self.no_candidate());
        }
        let warn: BTreeMap<(&str, u32), &TrialRow> = self
            .run
            .trials
            .iter()
            .filter(|t| t.mode == Mode::Warn)
            .map(|t| ((t.scenario.as_str(), t.trial), t))
            .collect();
        let mut pairs = Vec::new();
        let mut dropped = 0u64;
        for c in &self.cand {
            let Some(w) = warn.get(&(c.scenario.as_str(), c.trial)) else {
                continue;
            };
            if c.outcome.status == OutcomeStatus::Errored
                || w.outcome.status == OutcomeStatus::Errored
            {
                dropped += 1;
                continue;
            }
            pairs.push((w.passed, c.passed));
        }
        // First = warn, second = candidate: the difference is warn − candidate.
        let table = PairedTable::from_pairs(pairs);
        let Some(ci) = newcombe_paired_difference(&table, Z_95) else {
            return Self::result(
                name,
                Bound::Max,
                t.max,
                None,
                format!(
                    "no (scenario, trial) ran without error in both `warn` and `{}`",
                    self.candidate
                ),
            );
        };
        let n = table.n();
        let (pw, pc) = (table.first_passed(), table.second_passed());
        let non_inferior = ci.non_inferior(t.max);
        let pp = |v: f64| format!("{:+.1}", v * 100.0);
        let detail = format!(
            "warn {pw}/{n} ({:.1}%) vs {cand} {pc}/{n} ({:.1}%) on {n} paired trials; \
             warn − {cand} {} pp, Newcombe 95% [{}, {}] pp: {} (upper bound {} the {:.1} pp \
             margin); discordant pairs: {} pass only in warn, {} only in {cand}; McNemar \
             exact p = {:.4}{}",
            pw as f64 / n as f64 * 100.0,
            pc as f64 / n as f64 * 100.0,
            pp(ci.value),
            pp(ci.lo),
            pp(ci.hi),
            if non_inferior {
                "non-inferior"
            } else {
                "non-inferiority not shown"
            },
            if non_inferior { "within" } else { "above" },
            t.max * 100.0,
            table.first_only,
            table.second_only,
            mcnemar_exact(table.first_only, table.second_only),
            if dropped > 0 {
                format!("; {dropped} pair(s) with an errored trial left out")
            } else {
                String::new()
            },
            cand = self.candidate,
        );
        // Observed is the point difference; the gate passes only when the interval's upper
        // bound is within the margin (non-inferiority), so a small sample cannot pass on
        // its point estimate alone.
        let mut result = Self::result(name, Bound::Max, t.max, Some(ci.value), detail);
        result.status = if non_inferior {
            GateStatus::Pass
        } else {
            GateStatus::Fail
        };
        result
    }

    fn recall(&self, t: MinShare) -> GateResult {
        let name = "seeded_recall";
        if self.cand.is_empty() {
            return Self::result(name, Bound::Min, t.min, None, self.no_candidate());
        }
        let probes = self
            .cand
            .iter()
            .filter(|t| t.outcome.status != OutcomeStatus::Errored)
            .flat_map(|t| &t.recall);
        let (mut correct, mut total) = (0u64, 0u64);
        for p in probes {
            total += 1;
            correct += u64::from(p.correct);
        }
        match Proportion::wilson(correct, total) {
            None => Self::result(
                name,
                Bound::Min,
                t.min,
                None,
                "no fact probes in non-errored candidate trials".into(),
            ),
            Some(p) => Self::result(
                name,
                Bound::Min,
                t.min,
                Some(p.value),
                format!(
                    "{correct}/{total} probes correct (Wilson 95% [{:.3}, {:.3}])",
                    p.lo, p.hi
                ),
            ),
        }
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

/// Scenarios carrying `tag`, by the trials' tags or the manifests' scenario list.
pub(crate) fn tagged_scenarios<'a>(run: &'a RunData, tag: &str) -> BTreeSet<&'a str> {
    let mut tagged: BTreeSet<&str> = run
        .trials
        .iter()
        .filter(|tr| tr.tags.iter().any(|x| x == tag))
        .map(|tr| tr.scenario.as_str())
        .collect();
    for s in run.scenarios() {
        if s.tags.iter().any(|x| x == tag) {
            tagged.insert(s.id.as_str());
        }
    }
    tagged
}

/// Steps of two modes paired by (scenario, trial, step): see [`pair_steps`].
pub(crate) struct Pairing {
    /// Columns `scenario`, `trial`, `step`, `cand`, `base` (step sizes), `cand_est`,
    /// `base_est` (1 when sized by the estimate) and `reduction` = 1 − cand/base.
    pub paired: DataFrame,
    /// Steps the candidate has.
    pub cand_steps: usize,
    /// Steps the baseline has.
    pub base_steps: usize,
}

impl Pairing {
    /// Steps of either side without a partner.
    pub fn unpaired(&self) -> usize {
        (self.cand_steps + self.base_steps).saturating_sub(2 * self.paired.height())
    }
}

/// Pairs the **sent turn** requests (`purpose = turn`; summarization requests are
/// compaction cost, not a step's size) of `cand` and `base` by (scenario, trial, step),
/// restricted to `scenarios` when given. A step's size is its largest request, sized by
/// provider input tokens, else the provider's overflow count, else the estimate (flagged).
/// Pairs whose baseline size is 0 are left out (no reduction is defined).
pub(crate) fn pair_steps(
    requests: &DataFrame,
    scenarios: Option<&BTreeSet<&str>>,
    cand: Mode,
    base: Mode,
) -> PolarsResult<Pairing> {
    let mut lf = requests
        .clone()
        .lazy()
        .filter(col("sent").and(crate::frames::is_turn()));
    if let Some(ids) = scenarios {
        let ids: Vec<&str> = ids.iter().copied().collect();
        let frame = DataFrame::new(ids.len(), vec![Column::new("scenario".into(), ids)])?;
        lf = lf.join(
            frame.lazy(),
            [col("scenario")],
            [col("scenario")],
            JoinArgs::new(JoinType::Inner),
        );
    }
    let size = col("provider_input_tokens")
        .fill_null(col("overflow_input_tokens"))
        .fill_null(col("est_total"))
        .cast(DataType::Float64);
    let estimated = col("provider_input_tokens")
        .is_null()
        .and(col("overflow_input_tokens").is_null());
    let keys = [col("scenario"), col("trial"), col("step")];
    let per_step = |mode: Mode, size_name: &str, est_name: &str| {
        lf.clone()
            .filter(col("mode").eq(lit(mode.as_str())))
            .group_by(keys.clone())
            .agg([
                size.clone().max().alias(size_name),
                estimated
                    .clone()
                    .cast(DataType::UInt32)
                    .max()
                    .alias(est_name),
            ])
    };
    let c = per_step(cand, "cand", "cand_est").collect()?;
    let b = per_step(base, "base", "base_est").collect()?;
    let (cand_steps, base_steps) = (c.height(), b.height());
    let paired = c
        .lazy()
        .join(b.lazy(), keys.clone(), keys, JoinArgs::new(JoinType::Inner))
        .filter(col("base").gt(lit(0.0)))
        .with_column((lit(1.0) - col("cand") / col("base")).alias("reduction"))
        .sort(
            ["scenario", "trial", "step"],
            SortMultipleOptions::default(),
        )
        .collect()?;
    Ok(Pairing {
        paired,
        cand_steps,
        base_steps,
    })
}

/// Median of the `reduction` column of a [`Pairing`] (linear interpolation); `None` when
/// nothing is paired.
pub(crate) fn median_reduction(p: &Pairing) -> PolarsResult<Option<f64>> {
    if p.paired.height() == 0 {
        return Ok(None);
    }
    let m = p
        .paired
        .clone()
        .lazy()
        .select([col("reduction")
            .quantile(lit(0.5), QUANTILE_METHOD)
            .alias("median")])
        .collect()?;
    Ok(m.column("median")?
        .as_materialized_series()
        .f64()?
        .get(0)
        .filter(|v| v.is_finite()))
}

/// Seeded cluster-bootstrap 95% interval ([`crate::stats::bootstrap_median`]) of the
/// median `reduction` of a [`Pairing`], resampling its (scenario, trial) clusters of steps;
/// `None` with fewer than two clusters.
pub(crate) fn reduction_interval(p: &Pairing) -> PolarsResult<Option<BootstrapInterval>> {
    let df = &p.paired;
    if df.height() == 0 {
        return Ok(None);
    }
    let scenario = df
        .column("scenario")?
        .as_materialized_series()
        .str()?
        .clone();
    let trial = df
        .column("trial")?
        .as_materialized_series()
        .cast(&DataType::UInt64)?;
    let trial = trial.u64()?;
    let reduction = df
        .column("reduction")?
        .as_materialized_series()
        .f64()?
        .clone();
    // The frame is sorted by (scenario, trial, step), so a cluster is a run of rows.
    let mut clusters: Vec<Vec<f64>> = Vec::new();
    let mut key: Option<(Option<&str>, Option<u64>)> = None;
    for ((s, t), r) in scenario.iter().zip(trial.iter()).zip(reduction.iter()) {
        if key != Some((s, t)) {
            key = Some((s, t));
            clusters.push(Vec::new());
        }
        if let (Some(r), Some(last)) = (r, clusters.last_mut()) {
            last.push(r);
        }
    }
    Ok(bootstrap_median(
        &clusters,
        BOOTSTRAP_RESAMPLES,
        BOOTSTRAP_SEED,
        0.95,
    ))
}

/// Median per-step reduction, paired by (scenario, trial, step).
fn token_reduction(
    ctx: &Ctx<'_>,
    requests: &DataFrame,
    t: &MinReduction,
) -> PolarsResult<GateResult> {
    let name = "token_reduction_vs_off";
    let result = |observed, detail| Ctx::result(name, Bound::Min, t.min, observed, detail);

    let (tagged, scope) = match &t.tag {
        Some(tag) => {
            let tagged = tagged_scenarios(ctx.run, tag);
            if tagged.is_empty() {
                return Ok(result(
                    None,
                    format!("no scenario in the run is tagged `{tag}`"),
                ));
            }
            let scope = format!("{} scenario(s) tagged `{tag}`", tagged.len());
            (Some(tagged), scope)
        }
        None => (None, "all scenarios".to_string()),
    };
    let pairing = pair_steps(requests, tagged.as_ref(), ctx.candidate, Mode::Off)?;
    let pairs = pairing.paired.height();
    if pairs == 0 {
        return Ok(result(
            None,
            format!(
                "no step of {scope} ran in both `{}` ({} steps) and `off` ({} steps)",
                ctx.candidate, pairing.cand_steps, pairing.base_steps
            ),
        ));
    }
    let median = median_reduction(&pairing)?;
    let estimated = pairing
        .paired
        .clone()
        .lazy()
        .select([(col("cand_est") + col("base_est"))
            .gt(lit(0u32))
            .cast(DataType::UInt64)
            .sum()
            .alias("estimated")])
        .collect()?;
    let estimated_pairs = estimated
        .column("estimated")?
        .as_materialized_series()
        .u64()?
        .get(0)
        .unwrap_or(0);
    let unpaired = pairing.unpaired();
    let mut detail = format!(
        "median of 1 − {}/off over {pairs} paired steps of {scope}",
        ctx.candidate
    );
    match reduction_interval(&pairing)? {
        Some(ci) => detail.push_str(&format!(
            "; bootstrap 95% [{:.1}%, {:.1}%] ({} resamples of {} (scenario, trial) clusters, \
             seed {:#x})",
            ci.lo * 100.0,
            ci.hi * 100.0,
            ci.resamples,
            ci.clusters,
            ci.seed
        )),
        None => {
            detail.push_str("; no bootstrap interval (fewer than 2 (scenario, trial) clusters)")
        }
    }
    if unpaired > 0 {
        detail.push_str(&format!("; {unpaired} step(s) without a partner left out"));
    }
    if estimated_pairs > 0 {
        detail.push_str(&format!(
            "; {estimated_pairs} pair(s) sized by the estimate (no provider count)"
        ));
    }
    Ok(result(median, detail))
}

/// p95 undercount share against the buffer's share of the window.
fn undercount(
    ctx: &Ctx<'_>,
    requests: &DataFrame,
    t: &MaxShareOfBuffer,
) -> PolarsResult<GateResult> {
    let name = "estimator_p95_undercount";
    let excluded: BTreeSet<&str> = t
        .exclude_tags
        .iter()
        .flat_map(|tag| tagged_scenarios(ctx.run, tag))
        .collect();
    let mut keep = col("mode")
        .eq(lit(ctx.candidate.as_str()))
        .and(crate::frames::is_turn())
        .and(col("rel_error").is_not_null())
        .and(col("window").gt(lit(0u64)));
    for s in &excluded {
        keep = keep.and(col("scenario").neq(lit(*s)));
    }
    let answered = requests.clone().lazy().filter(keep);
    let rel = col("rel_error");
    let stats = answered
        .select([
            when(rel.clone().lt(lit(0.0)))
                .then(lit(0.0) - rel)
                .otherwise(lit(0.0))
                .quantile(lit(0.95), QUANTILE_METHOD)
                .alias("p95"),
            (col("buffer").cast(DataType::Float64) / col("window").cast(DataType::Float64))
                .min()
                .alias("share"),
            len().cast(DataType::UInt64).alias("n"),
        ])
        .collect()?;
    let get_f = |c: &str| -> PolarsResult<Option<f64>> {
        Ok(stats
            .column(c)?
            .as_materialized_series()
            .cast(&DataType::Float64)?
            .f64()?
            .get(0))
    };
    let n = get_f("n")?.unwrap_or(0.0) as u64;
    let (p95, share) = (get_f("p95")?, get_f("share")?);
    let left_out = if excluded.is_empty() {
        String::new()
    } else {
        format!(
            "; {} scenario(s) tagged {} left out",
            excluded.len(),
            t.exclude_tags
                .iter()
                .map(|x| format!("`{x}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let (Some(p95), Some(share), true) = (p95, share, n > 0) else {
        return Ok(Ctx::result(
            name,
            Bound::Max,
            t.max_share_of_buffer,
            None,
            format!("no answered candidate turn request with a provider input count{left_out}"),
        ));
    };
    let threshold = t.max_share_of_buffer * share;
    let detail = format!(
        "p95 undercount {:.2}% of provider input over {n} answered turn requests; limit {} × \
         smallest buffer/window share {:.2}%{left_out}",
        p95 * 100.0,
        t.max_share_of_buffer,
        share * 100.0
    );
    Ok(Ctx::result(name, Bound::Max, threshold, Some(p95), detail))
}
