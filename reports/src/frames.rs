//! polars DataFrames built from run storage rows: one row per request, one per trial.
//!
//! These frames are the single source of the CSV files and of every aggregate (summary,
//! gates), so a number in the HTML report can always be recomputed from the CSVs. Column
//! names and order are part of the public contract and documented in
//! `docs/report-columns.md`; [`REQUEST_COLUMNS`] and [`trial_columns`] are the code side
//! of that document (a test keeps the two in step).

use std::collections::BTreeSet;

use polars::prelude::*;

use crate::compaction::{CompactionIndex, TrialCompaction};
use crate::error::ReportError;
use crate::read::RunData;
use crate::stats::QUANTILE_METHOD;

/// Columns of `requests.csv`, in order. `run_id` and `latency_ms` are timing/identity
/// columns that differ between otherwise identical runs.
pub const REQUEST_COLUMNS: &[&str] = &[
    "run_id",
    "trial_id",
    "scenario",
    "mode",
    "provider",
    "model",
    "trial",
    "seq",
    "step",
    "round",
    "attempt",
    "sent",
    "purpose",
    "window",
    "requested_output",
    "buffer",
    "reserve",
    "available_input",
    "est_instructions",
    "est_memory",
    "est_recent_tail",
    "est_current_request",
    "est_tool_schemas",
    "est_continuation",
    "est_framing",
    "est_total",
    "observed_estimate",
    "estimator",
    "estimation_method",
    "confidence",
    "over_budget",
    "warned",
    "provider_input_tokens",
    "provider_output_tokens",
    "overflow_input_tokens",
    "abs_error",
    "rel_error",
    "error_kind",
    "retry_reason",
    "instruction_hash",
    "checkpoint_id",
    "latency_ms",
];

/// Columns of `trials.csv` before the per-grader columns.
pub const TRIAL_COLUMNS_HEAD: &[&str] = &[
    "run_id",
    "trial_id",
    "scenario",
    "tags",
    "mode",
    "provider",
    "model",
    "trial",
    "seed",
    "instance",
    "status",
    "reason",
    "expected_outcome",
    "passed",
    "recall_correct",
    "recall_total",
    "recall",
];

/// Columns of `trials.csv` after the per-grader columns (`started_at` and `elapsed_ms`
/// are timing columns, last).
pub const TRIAL_COLUMNS_TAIL: &[&str] = &[
    "requests",
    "provider_overflows",
    "provider_errors",
    "warnings",
    "limit_stops",
    "over_budget_requests",
    "total_input_tokens",
    "peak_input_tokens",
    "median_input_tokens",
    "tool_schema_tokens",
    "transcript_hash",
    "compactions",
    "compaction_failures",
    "compaction_unchanged",
    "compaction_failure_reasons",
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
    "http_attempts",
    "retries",
    "retries_rate_limited",
    "retries_server",
    "retries_timeout",
    "retries_malformed",
    "retries_unavailable",
    "retries_gave_up",
    "retries_wait_ms",
    "retries_retry_after_capped",
    "started_at",
    "elapsed_ms",
];

/// `purpose` of a request of the conversation. Only these rows enter the estimation-error,
/// over-budget and token-reduction statistics.
pub const PURPOSE_TURN: &str = "turn";

/// `purpose` of a summarization request made by a compaction (compaction cost).
pub const PURPOSE_SUMMARY: &str = "summary";

/// `retry_reason` of a retry after a provider context overflow.
pub const RETRY_PROVIDER_OVERFLOW: &str = "provider_overflow";

/// Expression: the request row is a turn request (`purpose == "turn"`).
pub fn is_turn() -> Expr {
    col("purpose").eq(lit(PURPOSE_TURN))
}

/// Columns whose values legitimately differ between two runs with the same seed.
pub const TIMING_COLUMNS: &[&str] = &["run_id", "started_at", "elapsed_ms", "latency_ms"];

/// Prefix of the per-grader verdict columns of `trials.csv`.
pub const GRADER_COLUMN_PREFIX: &str = "grader_";

/// Grader names seen in any trial of the run, sorted (one `grader_<name>` column each).
pub fn grader_names(run: &RunData) -> Vec<String> {
    let names: BTreeSet<&str> = run
        .trials
        .iter()
        .flat_map(|t| t.verdicts.iter().map(|v| v.grader.as_str()))
        .collect();
    names.into_iter().map(str::to_string).collect()
}

/// All columns of `trials.csv` for this run, in order.
pub fn trial_columns(graders: &[String]) -> Vec<String> {
    TRIAL_COLUMNS_HEAD
        .iter()
        .map(|c| c.to_string())
        .chain(graders.iter().map(|g| format!("{GRADER_COLUMN_PREFIX}{g}")))
        .chain(TRIAL_COLUMNS_TAIL.iter().map(|c| c.to_string()))
        .collect()
}

fn column<T, P: ?Sized>(name: &str, values: T) -> Column
where
    Series: NamedFrom<T, P>,
{
    Column::new(name.into(), values)
}

/// One row per request row, columns [`REQUEST_COLUMNS`], in [`RunData`] order.
///
/// `abs_error` = |est_total − provider_input_tokens| and `rel_error` =
/// (est_total − provider_input_tokens) / provider_input_tokens (signed; negative is an
/// undercount) are derived here with polars expressions; both are null when the provider
/// reported no input count (unanswered request or preflight stop) or reported 0.
pub fn requests_frame(run: &RunData) -> Result<DataFrame, ReportError> {
    // The read frame already holds every stored column (see `read`); cloning it shares
    // the column buffers, so this adds only the two derived columns.
    let df = run.requests.clone();
    let provider = col("provider_input_tokens").cast(DataType::Int64);
    let diff = col("est_total").cast(DataType::Int64) - provider.clone();
    let known = provider.clone().gt(lit(0i64));
    let out = df
        .lazy()
        .with_columns([
            when(known.clone())
                .then(
                    when(diff.clone().lt(lit(0i64)))
                        .then(lit(0i64) - diff.clone())
                        .otherwise(diff.clone()),
                )
                .otherwise(lit(NULL).cast(DataType::Int64))
                .alias("abs_error"),
            when(known)
                .then(diff.cast(DataType::Float64) / provider.cast(DataType::Float64))
                .otherwise(lit(NULL).cast(DataType::Float64))
                .alias("rel_error"),
        ])
        .select(REQUEST_COLUMNS.iter().map(|c| col(*c)).collect::<Vec<_>>())
        .collect()?;
    Ok(out)
}

/// One row per trial, columns [`trial_columns`], in [`RunData`] order.
///
/// `median_input_tokens` is the median provider-reported input over the trial's answered
/// requests, and `summary_requests`, `summary_input_tokens` and `overflow_recoveries` are
/// counted, all with polars from `requests` (the frame of [`requests_frame`]). The other
/// compaction columns come from the trial's events ([`CompactionIndex`]).
pub fn trials_frame(
    run: &RunData,
    requests: &DataFrame,
    compaction: &CompactionIndex,
) -> Result<DataFrame, ReportError> {
    let ts = &run.trials;
    let cs: Vec<&TrialCompaction> = ts.iter().map(|t| compaction.get(&t.trial_id)).collect();
    let cu = |f: fn(&TrialCompaction) -> u64| cs.iter().map(|c| f(c)).collect::<Vec<u64>>();
    let graders = grader_names(run);
    let st = |f: fn(&ctxbench_harness::storage::schema::TrialStats) -> u64| {
        ts.iter().map(|t| f(&t.stats)).collect::<Vec<u64>>()
    };
    // Retry-layer counters: empty for the in-process fake (no transport to retry).
    let inf = |f: fn(&ctxbench_harness::ResilienceStats) -> u64| {
        ts.iter()
            .map(|t| t.stats.infrastructure.as_ref().map(f))
            .collect::<Vec<Option<u64>>>()
    };
    let recall_correct: Vec<u64> = ts
        .iter()
        .map(|t| t.recall.iter().filter(|r| r.correct).count() as u64)
        .collect();
    let recall_total: Vec<u64> = ts.iter().map(|t| t.recall.len() as u64).collect();
    let recall: Vec<Option<f64>> = recall_correct
        .iter()
        .zip(&recall_total)
        .map(|(&c, &n)| (n > 0).then(|| c as f64 / n as f64))
        .collect();

    let mut cols = vec![
        column("_row", (0..ts.len() as u64).collect::<Vec<u64>>()),
        column(
            "run_id",
            ts.iter()
                .map(|t| run.run_id_of(&t.trial_id))
                .collect::<Vec<&str>>(),
        ),
        column(
            "trial_id",
            ts.iter().map(|t| t.trial_id.as_str()).collect::<Vec<_>>(),
        ),
        column(
            "scenario",
            ts.iter().map(|t| t.scenario.as_str()).collect::<Vec<_>>(),
        ),
        column(
            "tags",
            ts.iter().map(|t| t.tags.join(";")).collect::<Vec<String>>(),
        ),
        column(
            "mode",
            ts.iter().map(|t| t.mode.as_str()).collect::<Vec<_>>(),
        ),
        column(
            "provider",
            ts.iter().map(|t| t.provider.as_str()).collect::<Vec<_>>(),
        ),
        column(
            "model",
            ts.iter().map(|t| t.model.as_str()).collect::<Vec<_>>(),
        ),
        column("trial", ts.iter().map(|t| t.trial).collect::<Vec<u32>>()),
        column("seed", ts.iter().map(|t| t.seed).collect::<Vec<u64>>()),
        column(
            "instance",
            ts.iter().map(|t| t.instance.as_str()).collect::<Vec<_>>(),
        ),
        column(
            "status",
            ts.iter()
                .map(|t| t.outcome.status.as_str())
                .collect::<Vec<_>>(),
        ),
        column(
            "reason",
            ts.iter()
                .map(|t| t.outcome.reason.as_str())
                .collect::<Vec<_>>(),
        ),
        column(
            "expected_outcome",
            ts.iter()
                .map(|t| t.expected_outcome.as_str())
                .collect::<Vec<_>>(),
        ),
        column("passed", ts.iter().map(|t| t.passed).collect::<Vec<bool>>()),
        column("recall_correct", recall_correct),
        column("recall_total", recall_total),
        column("recall", recall),
    ];
    for g in &graders {
        let values: Vec<Option<&str>> = ts
            .iter()
            .map(|t| {
                t.verdicts
                    .iter()
                    .find(|v| &v.grader == g)
                    .map(|v| verdict_str(v.status))
            })
            .collect();
        cols.push(column(&format!("{GRADER_COLUMN_PREFIX}{g}"), values));
    }
    cols.extend([
        column("requests", st(|s| s.requests)),
        column("provider_overflows", st(|s| s.provider_overflows)),
        column("provider_errors", st(|s| s.provider_errors)),
        column("warnings", st(|s| s.warnings)),
        column("limit_stops", st(|s| s.limit_stops)),
        column("over_budget_requests", st(|s| s.over_budget_requests)),
        column("total_input_tokens", st(|s| s.total_input_tokens)),
        column("peak_input_tokens", st(|s| s.peak_input_tokens)),
        column("tool_schema_tokens", st(|s| s.tool_schema_tokens)),
        column(
            "transcript_hash",
            ts.iter()
                .map(|t| t.stats.transcript_hash.as_str())
                .collect::<Vec<_>>(),
        ),
        column("compactions", cu(|c| c.completed)),
        column("compaction_failures", cu(|c| c.failed)),
        column("compaction_unchanged", cu(|c| c.unchanged)),
        column(
            "compaction_failure_reasons",
            cs.iter()
                .map(|c| c.reasons_joined())
                .collect::<Vec<String>>(),
        ),
        column("reclaimed_tokens", cu(|c| c.reclaimed_tokens)),
        column("summary_tokens", cu(|c| c.summary_tokens)),
        column("summarizer_calls", cu(|c| c.summarizer_calls)),
        column("checkpoint_rejections", cu(|c| c.checkpoint_rejections)),
        column("checkpoint_reuses", cu(|c| c.checkpoint_reuses)),
        column("tool_output_projections", cu(|c| c.tool_output_projections)),
        column("no_progress_stops", cu(|c| c.no_progress_stops)),
        column("http_attempts", inf(|s| s.attempts)),
        column("retries", inf(|s| s.retries())),
        column("retries_rate_limited", inf(|s| s.retries_rate_limited)),
        column("retries_server", inf(|s| s.retries_server)),
        column("retries_timeout", inf(|s| s.retries_timeout)),
        column("retries_malformed", inf(|s| s.retries_malformed)),
        column("retries_unavailable", inf(|s| s.retries_unavailable)),
        column("retries_gave_up", inf(|s| s.gave_up)),
        column("retries_wait_ms", inf(|s| s.backoff_ms)),
        column("retries_retry_after_capped", inf(|s| s.retry_after_capped)),
        column(
            "started_at",
            ts.iter().map(|t| t.started_at.as_str()).collect::<Vec<_>>(),
        ),
        column(
            "elapsed_ms",
            ts.iter().map(|t| t.elapsed_ms).collect::<Vec<u64>>(),
        ),
    ]);
    let df = DataFrame::new(ts.len(), cols)?;

    let medians = requests
        .clone()
        .lazy()
        .filter(col("provider_input_tokens").is_not_null())
        .group_by([col("trial_id")])
        .agg([col("provider_input_tokens")
            .cast(DataType::Float64)
            .quantile(lit(0.5), QUANTILE_METHOD)
            .alias("median_input_tokens")]);
    let summary = col("sent").and(col("purpose").eq(lit(PURPOSE_SUMMARY)));
    let recovery = col("sent")
        .and(col("attempt").gt_eq(lit(2u32)))
        .and(col("retry_reason").eq(lit(RETRY_PROVIDER_OVERFLOW)))
        .fill_null(lit(false));
    let counts = requests.clone().lazy().group_by([col("trial_id")]).agg([
        summary
            .clone()
            .cast(DataType::UInt64)
            .sum()
            .alias("summary_requests"),
        col("provider_input_tokens")
            .filter(summary)
            .sum()
            .cast(DataType::UInt64)
            .alias("summary_input_tokens"),
        recovery
            .cast(DataType::UInt64)
            .sum()
            .alias("overflow_recoveries"),
    ]);
    let order = trial_columns(&graders);
    let out = df
        .lazy()
        .join(
            medians,
            [col("trial_id")],
            [col("trial_id")],
            JoinArgs::new(JoinType::Left),
        )
        .join(
            counts,
            [col("trial_id")],
            [col("trial_id")],
            JoinArgs::new(JoinType::Left),
        )
        .with_columns(
            [
                "summary_requests",
                "summary_input_tokens",
                "overflow_recoveries",
            ]
            .map(|c| col(c).fill_null(lit(0u64)).cast(DataType::UInt64)),
        )
        .sort(["_row"], SortMultipleOptions::default())
        .select(order.iter().map(|c| col(c.as_str())).collect::<Vec<_>>())
        .collect()?;
    Ok(out)
}

/// `pass` / `fail` / `skip`.
pub fn verdict_str(s: ctxbench_harness::storage::schema::VerdictStatus) -> &'static str {
    use ctxbench_harness::storage::schema::VerdictStatus;
    match s {
        VerdictStatus::Pass => "pass",
        VerdictStatus::Fail => "fail",
        VerdictStatus::Skip => "skip",
    }
}
