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
//! | `token_reduction_vs_off` | median over steps paired by (scenario, trial, step) of `1 − candidate/off`, on scenarios carrying `tag`, off-script trials left out; a step's size is its largest sent turn request, sized by provider input tokens, else the provider's overflow count, else the estimate | the **lower bound** of its seeded session-cluster bootstrap 95% interval ≥ `min`; not evaluated below `min_clusters` sessions or `min_scenarios` scenarios |
//! | `pass_rate_regression_vs_warn` | pass rate(`warn`) − pass rate(candidate) over sessions ([`scenarios`]: a scenario's copies count once, each `vary:` instance apart) whose `warn` is expected to complete and did | **non-inferiority**: the upper bound of the Newcombe (method 10) 95% interval ≤ `max`; not evaluated below `min_units` sessions or `min_scenarios` scenarios, when `warn` itself missed its expected outcome in more than `max_baseline_misses` of the eligible sessions, or when even identical results could not show it and the candidate is not shown inferior |
//! | `completion_regression_vs_warn` | mean over the same sessions of turns completed ÷ scripted, `warn` − candidate | upper bound of the seeded bootstrap 95% interval ≤ `max`; not evaluated as above |
//! | `candidate_pass_rate` | sessions of the candidate whose expected candidate outcome is not `any`, passed / all | the **lower Wilson 95% bound** ≥ `min`; not evaluated below `min_units` sessions or `min_scenarios` scenarios, or when even all passing could not reach `min` and the upper bound does |
//! | `seeded_recall` | correct / probed facts of `kinds` (default durable constraints) in scenarios carrying `tag`, non-errored candidate trials; every kind reported beside | the **lower Wilson 95% bound** ≥ `min`; not evaluated below `min_probes` or `min_scenarios`, or when even a perfect record could not reach `min` and the upper bound does |
//! | `probe_recall` | every probe of every kind in every scenario, once per session (all copies correct) | lower Wilson 95% bound of the pool ≥ `min` and of each kind with enough probes ≥ `min_per_kind`; not evaluated below `min_probes` or `min_scenarios` |
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

use ctxbench_harness::storage::schema::{OutcomeStatus, TrialRow, VerdictStatus};
use ctxbench_harness::Mode;
use polars::prelude::*;
use serde::Serialize;

mod config;
mod recall;
mod scenarios;
mod tokens;

pub use config::*;

pub(crate) use scenarios::completion;

pub(crate) use tokens::{
    instances, median_reduction, pair_steps, reduction_interval, tagged_scenarios,
};
use tokens::{token_reduction, undercount};

use crate::read::RunData;

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
    if let Some(t) = g.candidate_pass_rate {
        results.push(ctx.candidate_pass_rate(t));
    }
    if let Some(t) = &g.seeded_recall {
        results.push(ctx.recall(t));
    }
    if let Some(t) = &g.probe_recall {
        results.push(ctx.probe_recall(t));
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
