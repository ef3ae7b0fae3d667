//! Aggregates per mode (`scope = suite`) and per scenario × mode, computed with polars
//! from the trial and request frames.
//!
//! Definitions (also in `docs/report-columns.md`):
//!
//! - **errored trials are counted apart**: `pass_rate` = passed / (trials − errored), and
//!   recall counts fact-probes of non-errored trials only. An infrastructure failure is
//!   neither a pass nor a model failure (QUALITY.md §Reliability); the `errored` column
//!   and the `errored_trials` gate keep it visible.
//! - intervals are Wilson 95% ([`crate::stats`]);
//! - input-token percentiles are over **answered requests** (provider reported an input
//!   count), per request, linear interpolation;
//! - `est_error_mean_abs` is the mean of `abs_error`; `est_rel_error_p50/p95` are
//!   percentiles of |`rel_error`|; `est_bias` is the mean signed `rel_error` (negative =
//!   the estimator undercounts) — all over **turn** requests only (`purpose = turn`), as
//!   are `over_budget_sent` / `over_budget_unwarned`: a summarization request carries no
//!   engine budget and is compaction cost (`summary_requests`, `summary_input_tokens`);
//! - compaction columns are sums of the trial columns, with `compactions_per_trial` the
//!   mean over the group's trials and `reclaimed_per_compaction` / `summary_tokens_mean`
//!   per completed compaction;
//! - `token_reduction_vs_off` / `_vs_warn` is the median over (scenario, trial, step)
//!   pairs of 1 − mode/baseline, paired exactly as the `token_reduction_vs_off` gate pairs
//!   ([`crate::gates`]); suite rows use the scenarios tagged [`LONG_SESSION_TAG`], scenario
//!   rows every step of that scenario. Suite rows add `token_reduction_vs_off_lo/_hi`, the
//!   seeded cluster-bootstrap 95% interval of the gate ([`crate::stats`]).

use std::collections::{BTreeMap, HashMap};

use ctxbench_harness::storage::schema::OutcomeStatus;
use ctxbench_harness::Mode;
use polars::prelude::*;
use serde::Serialize;

use crate::compaction::{reason_counts, CompactionIndex};
use crate::error::ReportError;
use crate::frames::is_turn;
use crate::gates::{instances, median_reduction, pair_steps, reduction_interval, tagged_scenarios};
use crate::read::RunData;
use crate::stats::{Proportion, QUANTILE_METHOD};

/// `scope` value of the per-mode rows.
pub const SUITE_SCOPE: &str = "suite";

/// Tag of the scenarios the suite rows' token-reduction columns are computed on.
pub const LONG_SESSION_TAG: &str = "long-session";

/// Baselines of the `token_reduction_vs_<mode>` columns.
pub const REDUCTION_BASELINES: [Mode; 2] = [Mode::Off, Mode::Warn];

/// Columns of `summary.csv`, in order.
pub const SUMMARY_COLUMNS: &[&str] = &[
    "scope",
    "mode",
    "trials",
    "passed",
    "errored",
    "pass_rate",
    "pass_rate_lo",
    "pass_rate_hi",
    "recall",
    "recall_lo",
    "recall_hi",
    "completion",
    "median_input_tokens",
    "p95_input_tokens",
    "est_error_mean_abs",
    "est_rel_error_p50",
    "est_rel_error_p95",
    "est_bias",
    "over_budget_sent",
    "over_budget_unwarned",
    "provider_overflows",
    "limit_stops",
    "compactions",
    "compactions_per_trial",
    "compaction_failures",
    "compaction_failure_reasons",
    "compaction_unchanged",
    "reclaimed_tokens",
    "reclaimed_per_compaction",
    "summary_tokens",
    "summary_tokens_mean",
    "summarizer_calls",
    "summary_requests",
    "summary_input_tokens",
    "checkpoint_rejections",
    "checkpoint_reuses",
    "tool_output_projections",
    "overflow_recoveries",
    "no_progress_stops",
    "retries",
    "retries_gave_up",
    "token_reduction_vs_off",
    "token_reduction_vs_warn",
    "token_reduction_vs_off_lo",
    "token_reduction_vs_off_hi",
];

/// Trial columns summed into the summary row of the same name.
const SUMMED_TRIAL_COLUMNS: [&str; 17] = [
    "provider_overflows",
    "limit_stops",
    "compactions",
    "compaction_failures",
    "compaction_unchanged",
    "reclaimed_tokens",
    "summary_tokens",
    "summarizer_calls",
    "summary_requests",
    "summary_input_tokens",
    "checkpoint_rejections",
    "checkpoint_reuses",
    "tool_output_projections",
    "overflow_recoveries",
    "no_progress_stops",
    "retries",
    "retries_gave_up",
];

/// One row of `summary.csv`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SummaryRow {
    /// [`SUITE_SCOPE`] or a scenario id.
    pub scope: String,
    /// Mode.
    pub mode: Mode,
    /// Trials present (including errored).
    pub trials: u64,
    /// Trials that passed (never errored ones).
    pub passed: u64,
    /// Trials errored by infrastructure.
    pub errored: u64,
    /// passed / (trials − errored) with its Wilson interval; `None` without graded trials.
    pub pass_rate: Option<Proportion>,
    /// Correct fact-probes / fact-probes (non-errored trials) with its Wilson interval.
    pub recall: Option<Proportion>,
    /// Mean over non-errored trials of turns completed ÷ turns scripted; `None` without
    /// graded trials. A mode that stops early passes fewer turns than it was given.
    pub completion: Option<f64>,
    /// Median provider input tokens per answered request.
    pub median_input_tokens: Option<f64>,
    /// 95th percentile of provider input tokens per answered request.
    pub p95_input_tokens: Option<f64>,
    /// Mean |est_total − provider input| over answered requests.
    pub est_error_mean_abs: Option<f64>,
    /// Median |rel_error|.
    pub est_rel_error_p50: Option<f64>,
    /// 95th percentile of |rel_error|.
    pub est_rel_error_p95: Option<f64>,
    /// Mean signed rel_error (negative = undercount).
    pub est_bias: Option<f64>,
    /// Requests sent over their declared input budget.
    pub over_budget_sent: u64,
    /// …of which no warning preceded.
    pub over_budget_unwarned: u64,
    /// Provider context-overflow errors (sum of trial counters).
    pub provider_overflows: u64,
    /// Context-limit stops (sum of trial counters).
    pub limit_stops: u64,
    /// Completed compactions.
    pub compactions: u64,
    /// Mean completed compactions per trial.
    pub compactions_per_trial: Option<f64>,
    /// Failed compactions.
    pub compaction_failures: u64,
    /// Failed compactions by reason: `reason=count` sorted by reason, `;`-joined.
    pub compaction_failure_reasons: String,
    /// Compactions that changed nothing.
    pub compaction_unchanged: u64,
    /// Tokens reclaimed by completed compactions.
    pub reclaimed_tokens: u64,
    /// reclaimed_tokens / compactions; `None` without a completed compaction.
    pub reclaimed_per_compaction: Option<f64>,
    /// Memory-message tokens of completed compactions.
    pub summary_tokens: u64,
    /// summary_tokens / compactions; `None` without a completed compaction.
    pub summary_tokens_mean: Option<f64>,
    /// Summarizer model calls (completed and failed compactions).
    pub summarizer_calls: u64,
    /// Summarization requests sent (`purpose = summary`).
    pub summary_requests: u64,
    /// Their provider input tokens.
    pub summary_input_tokens: u64,
    /// Stored checkpoints rejected on load.
    pub checkpoint_rejections: u64,
    /// Stored checkpoints reused after a restart.
    pub checkpoint_reuses: u64,
    /// Requests with older tool outputs projected.
    pub tool_output_projections: u64,
    /// Retries sent after a provider overflow.
    pub overflow_recoveries: u64,
    /// Limit stops by the no-progress guard.
    pub no_progress_stops: u64,
    /// HTTP retries the retry layer made (every kind; 0 for the in-process fake).
    pub retries: u64,
    /// Calls that still failed after the last attempt.
    pub retries_gave_up: u64,
    /// Median paired per-step reduction of input tokens against `off`.
    pub token_reduction_vs_off: Option<f64>,
    /// Median paired per-step reduction of input tokens against `warn`.
    pub token_reduction_vs_warn: Option<f64>,
    /// Lower bound of the seeded cluster-bootstrap 95% interval of
    /// `token_reduction_vs_off` (suite rows only).
    pub token_reduction_vs_off_lo: Option<f64>,
    /// Upper bound of that interval (suite rows only).
    pub token_reduction_vs_off_hi: Option<f64>,
}

impl SummaryRow {
    /// Whether this is a per-mode (suite-wide) row.
    pub fn is_suite(&self) -> bool {
        self.scope == SUITE_SCOPE
    }
}

/// Computes the summary rows: first one per mode (in [`Mode::ALL`] order), then one per
/// scenario × mode (scenario id order). `trials` and `requests` are the frames of
/// [`crate::frames`]; failure reasons are counted from `compaction`, and the token
/// reductions paired from `requests` (scenario tags from `run`).
pub fn summarize(
    run: &RunData,
    trials: &DataFrame,
    requests: &DataFrame,
    compaction: &CompactionIndex,
) -> Result<Vec<SummaryRow>, ReportError> {
    let mut rows = aggregate(trials, requests, &["mode"])?;
    rows.extend(aggregate(trials, requests, &["scenario", "mode"])?);

    // Failure reasons with their counts, per (scope, mode); completion per (scope, mode).
    let mut reasons: HashMap<(&str, Mode), BTreeMap<String, u64>> = HashMap::new();
    let mut completion: HashMap<(&str, Mode), (f64, u64)> = HashMap::new();
    for t in &run.trials {
        if t.outcome.status != OutcomeStatus::Errored {
            for scope in [SUITE_SCOPE, t.scenario.as_str()] {
                let e = completion.entry((scope, t.mode)).or_default();
                e.0 += crate::gates::completion(t);
                e.1 += 1;
            }
        }
        let c = compaction.get(&t.trial_id);
        for scope in [SUITE_SCOPE, t.scenario.as_str()] {
            let m = reasons.entry((scope, t.mode)).or_default();
            for (reason, n) in &c.failure_reasons {
                *m.entry(reason.clone()).or_default() += n;
            }
        }
    }
    for r in &mut rows {
        if let Some(m) = reasons.get(&(r.scope.as_str(), r.mode)) {
            r.compaction_failure_reasons = reason_counts(m);
        }
        if let Some(&(sum, n)) = completion.get(&(r.scope.as_str(), r.mode)) {
            r.completion = (n > 0).then(|| sum / n as f64);
        }
    }

    // Token reductions against each baseline.
    let long = tagged_scenarios(run, LONG_SESSION_TAG);
    let modes: Vec<Mode> = Mode::ALL
        .iter()
        .copied()
        .filter(|m| rows.iter().any(|r| r.mode == *m))
        .collect();
    for base in REDUCTION_BASELINES {
        for &mode in modes.iter().filter(|&&m| m != base) {
            let (suite, interval) = if long.is_empty() {
                (None, None)
            } else {
                let pairing = pair_steps(requests, Some(&long), mode, base)?;
                let interval = match base {
                    Mode::Off => reduction_interval(&pairing, &instances(run))?,
                    _ => None,
                };
                (median_reduction(&pairing)?, interval)
            };
            let per_scenario = scenario_medians(requests, mode, base)?;
            for r in rows.iter_mut().filter(|r| r.mode == mode) {
                let v = if r.is_suite() {
                    suite
                } else {
                    per_scenario.get(&r.scope).copied()
                };
                match base {
                    Mode::Off => {
                        r.token_reduction_vs_off = v;
                        if r.is_suite() {
                            r.token_reduction_vs_off_lo = interval.map(|i| i.lo);
                            r.token_reduction_vs_off_hi = interval.map(|i| i.hi);
                        }
                    }
                    _ => r.token_reduction_vs_warn = v,
                }
            }
        }
    }

    let mode_pos = |m: Mode| Mode::ALL.iter().position(|&x| x == m).unwrap_or(usize::MAX);
    rows.sort_by(|a, b| {
        (!a.is_suite(), &a.scope, mode_pos(a.mode)).cmp(&(
            !b.is_suite(),
            &b.scope,
            mode_pos(b.mode),
        ))
    });
    Ok(rows)
}

/// Median paired reduction of `mode` against `base`, per scenario.
fn scenario_medians(
    requests: &DataFrame,
    mode: Mode,
    base: Mode,
) -> Result<HashMap<String, f64>, ReportError> {
    let pairing = pair_steps(requests, None, mode, base)?;
    let df = pairing
        .paired
        .lazy()
        .group_by([col("scenario")])
        .agg([col("reduction")
            .quantile(lit(0.5), QUANTILE_METHOD)
            .alias("median")])
        .collect()?;
    let ids = df
        .column("scenario")?
        .as_materialized_series()
        .str()?
        .clone();
    let med = df.column("median")?.as_materialized_series().f64()?.clone();
    Ok(ids
        .iter()
        .zip(med.iter())
        .filter_map(|(id, m)| Some((id?.to_string(), m.filter(|v| v.is_finite())?)))
        .collect())
}

fn aggregate(
    trials: &DataFrame,
    requests: &DataFrame,
    keys: &[&str],
) -> Result<Vec<SummaryRow>, ReportError> {
    let key_exprs: Vec<Expr> = keys.iter().map(|k| col(*k)).collect();
    let errored = col("status").eq(lit("errored"));
    let graded = errored.clone().not();
    let by_trial = trials.clone().lazy().group_by(key_exprs.clone()).agg(
        [
            len().cast(DataType::UInt64).alias("trials"),
            col("passed")
                .and(graded.clone())
                .cast(DataType::UInt64)
                .sum()
                .alias("passed"),
            errored.cast(DataType::UInt64).sum().alias("errored"),
            col("recall_correct")
                .filter(graded.clone())
                .sum()
                .cast(DataType::UInt64)
                .alias("recall_correct"),
            col("recall_total")
                .filter(graded)
                .sum()
                .cast(DataType::UInt64)
                .alias("recall_total"),
            col("compactions")
                .cast(DataType::Float64)
                .mean()
                .alias("compactions_per_trial"),
        ]
        .into_iter()
        .chain(SUMMED_TRIAL_COLUMNS.map(|c| col(c).sum().cast(DataType::UInt64).alias(c)))
        .collect::<Vec<_>>(),
    );

    let input = col("provider_input_tokens").cast(DataType::Float64);
    let rel = col("rel_error");
    let abs_rel = when(rel.clone().lt(lit(0.0)))
        .then(lit(0.0) - rel.clone())
        .otherwise(rel.clone());
    let turn = is_turn();
    let over = col("sent").and(col("over_budget")).and(turn.clone());
    let by_request = requests.clone().lazy().group_by(key_exprs.clone()).agg([
        input
            .clone()
            .quantile(lit(0.5), QUANTILE_METHOD)
            .alias("median_input_tokens"),
        input
            .quantile(lit(0.95), QUANTILE_METHOD)
            .alias("p95_input_tokens"),
        col("abs_error")
            .filter(turn.clone())
            .cast(DataType::Float64)
            .mean()
            .alias("est_error_mean_abs"),
        abs_rel
            .clone()
            .filter(turn.clone())
            .quantile(lit(0.5), QUANTILE_METHOD)
            .alias("est_rel_error_p50"),
        abs_rel
            .filter(turn.clone())
            .quantile(lit(0.95), QUANTILE_METHOD)
            .alias("est_rel_error_p95"),
        rel.filter(turn).mean().alias("est_bias"),
        over.clone()
            .cast(DataType::UInt64)
            .sum()
            .alias("over_budget_sent"),
        over.and(col("warned").not())
            .cast(DataType::UInt64)
            .sum()
            .alias("over_budget_unwarned"),
    ]);

    let df = by_trial
        .join(
            by_request,
            key_exprs.clone(),
            key_exprs,
            JoinArgs::new(JoinType::Left),
        )
        .collect()?;

    let u = |name: &str| -> Result<Vec<Option<u64>>, ReportError> {
        Ok(df
            .column(name)?
            .as_materialized_series()
            .cast(&DataType::UInt64)?
            .u64()?
            .iter()
            .collect())
    };
    let f = |name: &str| -> Result<Vec<Option<f64>>, ReportError> {
        Ok(df
            .column(name)?
            .as_materialized_series()
            .cast(&DataType::Float64)?
            .f64()?
            .iter()
            .collect())
    };
    let s = |name: &str| -> Result<Vec<Option<String>>, ReportError> {
        Ok(df
            .column(name)?
            .as_materialized_series()
            .str()?
            .iter()
            .map(|o| o.map(str::to_string))
            .collect())
    };
    let modes = s("mode")?;
    let scopes = if keys.contains(&"scenario") {
        s("scenario")?
    } else {
        vec![Some(SUITE_SCOPE.to_string()); df.height()]
    };
    let (trials_n, passed, errored) = (u("trials")?, u("passed")?, u("errored")?);
    let (rc, rt) = (u("recall_correct")?, u("recall_total")?);
    let sums: HashMap<&str, Vec<Option<u64>>> = SUMMED_TRIAL_COLUMNS
        .iter()
        .map(|&c| Ok((c, u(c)?)))
        .collect::<Result<_, ReportError>>()?;
    let per_trial = f("compactions_per_trial")?;
    let (med, p95, mae) = (
        f("median_input_tokens")?,
        f("p95_input_tokens")?,
        f("est_error_mean_abs")?,
    );
    let (p50r, p95r, bias) = (
        f("est_rel_error_p50")?,
        f("est_rel_error_p95")?,
        f("est_bias")?,
    );
    let (obs, obu) = (u("over_budget_sent")?, u("over_budget_unwarned")?);

    let mut rows = Vec::with_capacity(df.height());
    for i in 0..df.height() {
        let mode_text = modes[i].clone().unwrap_or_default();
        let mode: Mode = mode_text
            .parse()
            .map_err(|e: String| PolarsError::ComputeError(format!("summary: {e}").into()))?;
        let trials = trials_n[i].unwrap_or(0);
        let passed = passed[i].unwrap_or(0);
        let errored = errored[i].unwrap_or(0);
        let sum = |c: &str| sums.get(c).and_then(|v| v[i]).unwrap_or(0);
        let compactions = sum("compactions");
        let per_compaction =
            |total: u64| (compactions > 0).then(|| total as f64 / compactions as f64);
        rows.push(SummaryRow {
            scope: scopes[i].clone().unwrap_or_default(),
            mode,
            trials,
            passed,
            errored,
            pass_rate: Proportion::wilson(passed, trials.saturating_sub(errored)),
            recall: Proportion::wilson(rc[i].unwrap_or(0), rt[i].unwrap_or(0)),
            completion: None,
            median_input_tokens: finite(med[i]),
            p95_input_tokens: finite(p95[i]),
            est_error_mean_abs: finite(mae[i]),
            est_rel_error_p50: finite(p50r[i]),
            est_rel_error_p95: finite(p95r[i]),
            est_bias: finite(bias[i]),
            over_budget_sent: obs[i].unwrap_or(0),
            over_budget_unwarned: obu[i].unwrap_or(0),
            provider_overflows: sum("provider_overflows"),
            limit_stops: sum("limit_stops"),
            compactions,
            compactions_per_trial: finite(per_trial[i]),
            compaction_failures: sum("compaction_failures"),
            compaction_failure_reasons: String::new(),
            compaction_unchanged: sum("compaction_unchanged"),
            reclaimed_tokens: sum("reclaimed_tokens"),
            reclaimed_per_compaction: per_compaction(sum("reclaimed_tokens")),
            summary_tokens: sum("summary_tokens"),
            summary_tokens_mean: per_compaction(sum("summary_tokens")),
            summarizer_calls: sum("summarizer_calls"),
            summary_requests: sum("summary_requests"),
            summary_input_tokens: sum("summary_input_tokens"),
            checkpoint_rejections: sum("checkpoint_rejections"),
            checkpoint_reuses: sum("checkpoint_reuses"),
            tool_output_projections: sum("tool_output_projections"),
            overflow_recoveries: sum("overflow_recoveries"),
            no_progress_stops: sum("no_progress_stops"),
            retries: sum("retries"),
            retries_gave_up: sum("retries_gave_up"),
            token_reduction_vs_off: None,
            token_reduction_vs_warn: None,
            token_reduction_vs_off_lo: None,
            token_reduction_vs_off_hi: None,
        });
    }
    Ok(rows)
}

/// NaN (mean of nothing) is "no value", not a number to print.
fn finite(v: Option<f64>) -> Option<f64> {
    v.filter(|x| x.is_finite())
}

/// The `summary.csv` frame, columns [`SUMMARY_COLUMNS`].
pub fn summary_frame(rows: &[SummaryRow]) -> Result<DataFrame, ReportError> {
    let c = |name: &str, v: Vec<Option<f64>>| Column::new(name.into(), v);
    let n = |name: &str, v: Vec<u64>| Column::new(name.into(), v);
    let prop = |f: fn(&Proportion) -> f64, sel: fn(&SummaryRow) -> Option<Proportion>| {
        rows.iter()
            .map(|r| sel(r).map(|p| f(&p)))
            .collect::<Vec<Option<f64>>>()
    };
    let opt = |sel: fn(&SummaryRow) -> Option<f64>| rows.iter().map(sel).collect::<Vec<_>>();
    let cnt = |sel: fn(&SummaryRow) -> u64| rows.iter().map(sel).collect::<Vec<_>>();
    let cols = vec![
        Column::new(
            "scope".into(),
            rows.iter().map(|r| r.scope.as_str()).collect::<Vec<_>>(),
        ),
        Column::new(
            "mode".into(),
            rows.iter().map(|r| r.mode.as_str()).collect::<Vec<_>>(),
        ),
        n("trials", cnt(|r| r.trials)),
        n("passed", cnt(|r| r.passed)),
        n("errored", cnt(|r| r.errored)),
        c("pass_rate", prop(|p| p.value, |r| r.pass_rate)),
        c("pass_rate_lo", prop(|p| p.lo, |r| r.pass_rate)),
        c("pass_rate_hi", prop(|p| p.hi, |r| r.pass_rate)),
        c("recall", prop(|p| p.value, |r| r.recall)),
        c("recall_lo", prop(|p| p.lo, |r| r.recall)),
        c("recall_hi", prop(|p| p.hi, |r| r.recall)),
        c("completion", opt(|r| r.completion)),
        c("median_input_tokens", opt(|r| r.median_input_tokens)),
        c("p95_input_tokens", opt(|r| r.p95_input_tokens)),
        c("est_error_mean_abs", opt(|r| r.est_error_mean_abs)),
        c("est_rel_error_p50", opt(|r| r.est_rel_error_p50)),
        c("est_rel_error_p95", opt(|r| r.est_rel_error_p95)),
        c("est_bias", opt(|r| r.est_bias)),
        n("over_budget_sent", cnt(|r| r.over_budget_sent)),
        n("over_budget_unwarned", cnt(|r| r.over_budget_unwarned)),
        n("provider_overflows", cnt(|r| r.provider_overflows)),
        n("limit_stops", cnt(|r| r.limit_stops)),
        n("compactions", cnt(|r| r.compactions)),
        c("compactions_per_trial", opt(|r| r.compactions_per_trial)),
        n("compaction_failures", cnt(|r| r.compaction_failures)),
        Column::new(
            "compaction_failure_reasons".into(),
            rows.iter()
                .map(|r| r.compaction_failure_reasons.as_str())
                .collect::<Vec<_>>(),
        ),
        n("compaction_unchanged", cnt(|r| r.compaction_unchanged)),
        n("reclaimed_tokens", cnt(|r| r.reclaimed_tokens)),
        c(
            "reclaimed_per_compaction",
            opt(|r| r.reclaimed_per_compaction),
        ),
        n("summary_tokens", cnt(|r| r.summary_tokens)),
        c("summary_tokens_mean", opt(|r| r.summary_tokens_mean)),
        n("summarizer_calls", cnt(|r| r.summarizer_calls)),
        n("summary_requests", cnt(|r| r.summary_requests)),
        n("summary_input_tokens", cnt(|r| r.summary_input_tokens)),
        n("checkpoint_rejections", cnt(|r| r.checkpoint_rejections)),
        n("checkpoint_reuses", cnt(|r| r.checkpoint_reuses)),
        n(
            "tool_output_projections",
            cnt(|r| r.tool_output_projections),
        ),
        n("overflow_recoveries", cnt(|r| r.overflow_recoveries)),
        n("no_progress_stops", cnt(|r| r.no_progress_stops)),
        n("retries", cnt(|r| r.retries)),
        n("retries_gave_up", cnt(|r| r.retries_gave_up)),
        c("token_reduction_vs_off", opt(|r| r.token_reduction_vs_off)),
        c(
            "token_reduction_vs_warn",
            opt(|r| r.token_reduction_vs_warn),
        ),
        c(
            "token_reduction_vs_off_lo",
            opt(|r| r.token_reduction_vs_off_lo),
        ),
        c(
            "token_reduction_vs_off_hi",
            opt(|r| r.token_reduction_vs_off_hi),
        ),
    ];
    Ok(DataFrame::new(rows.len(), cols)?)
}
