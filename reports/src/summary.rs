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
//!   the estimator undercounts).

use ctxbench_harness::mode::Mode;
use polars::prelude::*;
use serde::Serialize;

use crate::error::ReportError;
use crate::stats::{Proportion, QUANTILE_METHOD};

/// `scope` value of the per-mode rows.
pub const SUITE_SCOPE: &str = "suite";

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
}

impl SummaryRow {
    /// Whether this is a per-mode (suite-wide) row.
    pub fn is_suite(&self) -> bool {
        self.scope == SUITE_SCOPE
    }
}

/// Computes the summary rows: first one per mode (in [`Mode::ALL`] order), then one per
/// scenario × mode (scenario id order).
pub fn summarize(trials: &DataFrame, requests: &DataFrame) -> Result<Vec<SummaryRow>, ReportError> {
    let mut rows = aggregate(trials, requests, &["mode"])?;
    rows.extend(aggregate(trials, requests, &["scenario", "mode"])?);
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

fn aggregate(
    trials: &DataFrame,
    requests: &DataFrame,
    keys: &[&str],
) -> Result<Vec<SummaryRow>, ReportError> {
    let key_exprs: Vec<Expr> = keys.iter().map(|k| col(*k)).collect();
    let errored = col("status").eq(lit("errored"));
    let graded = errored.clone().not();
    let by_trial = trials.clone().lazy().group_by(key_exprs.clone()).agg([
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
        col("provider_overflows")
            .sum()
            .cast(DataType::UInt64)
            .alias("provider_overflows"),
        col("limit_stops")
            .sum()
            .cast(DataType::UInt64)
            .alias("limit_stops"),
    ]);

    let input = col("provider_input_tokens").cast(DataType::Float64);
    let rel = col("rel_error");
    let abs_rel = when(rel.clone().lt(lit(0.0)))
        .then(lit(0.0) - rel.clone())
        .otherwise(rel.clone());
    let over = col("sent").and(col("over_budget"));
    let by_request = requests.clone().lazy().group_by(key_exprs.clone()).agg([
        input
            .clone()
            .quantile(lit(0.5), QUANTILE_METHOD)
            .alias("median_input_tokens"),
        input
            .quantile(lit(0.95), QUANTILE_METHOD)
            .alias("p95_input_tokens"),
        col("abs_error")
            .cast(DataType::Float64)
            .mean()
            .alias("est_error_mean_abs"),
        abs_rel
            .clone()
            .quantile(lit(0.5), QUANTILE_METHOD)
            .alias("est_rel_error_p50"),
        abs_rel
            .quantile(lit(0.95), QUANTILE_METHOD)
            .alias("est_rel_error_p95"),
        rel.mean().alias("est_bias"),
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
    let (overflows, stops) = (u("provider_overflows")?, u("limit_stops")?);
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
        rows.push(SummaryRow {
            scope: scopes[i].clone().unwrap_or_default(),
            mode,
            trials,
            passed,
            errored,
            pass_rate: Proportion::wilson(passed, trials.saturating_sub(errored)),
            recall: Proportion::wilson(rc[i].unwrap_or(0), rt[i].unwrap_or(0)),
            median_input_tokens: finite(med[i]),
            p95_input_tokens: finite(p95[i]),
            est_error_mean_abs: finite(mae[i]),
            est_rel_error_p50: finite(p50r[i]),
            est_rel_error_p95: finite(p95r[i]),
            est_bias: finite(bias[i]),
            over_budget_sent: obs[i].unwrap_or(0),
            over_budget_unwarned: obu[i].unwrap_or(0),
            provider_overflows: overflows[i].unwrap_or(0),
            limit_stops: stops[i].unwrap_or(0),
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
    ];
    Ok(DataFrame::new(rows.len(), cols)?)
}
