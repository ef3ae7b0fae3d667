//! Comparison of a run (the *candidate*) with a baseline run: `ctxbench report RUN_DIR
//! --baseline BASE_RUN_DIR`.
//!
//! Why: a change to the engine (or to a model) is judged by what it changed, not by two
//! reports side by side. The comparison pairs the `summary.csv` rows of both runs by
//! (scope, mode) — per mode (`suite`) and per scenario × mode — and, within a row, the
//! trials by their index (same run seed ⇒ same trial seed), so status changes are named.
//! It is written to `baseline.csv` (columns [`BASELINE_COLUMNS`]) and shown in
//! `index.html` and `summary.md`.
//!
//! Definitions:
//! - a row's **status** is `pass` when every non-errored trial passed, `fail` when one did
//!   not, `errored` when every trial errored, empty when the row is absent from that run;
//! - `status_change`: `fixed` (fail → pass), `regressed` (pass → fail), `unchanged`,
//!   `added` (only in the candidate), `removed` (only in the baseline), `other`;
//! - `trials_fixed` / `trials_regressed`: trials with the same index that failed in the
//!   baseline and pass in the candidate, or the reverse (errored trials are neither);
//! - deltas are candidate − baseline (null when either side has no value).

use std::collections::{BTreeMap, BTreeSet};

use ctxbench_harness::storage::schema::{OutcomeStatus, TrialRow};
use ctxbench_harness::Mode;
use polars::prelude::*;

use crate::read::RunData;
use crate::summary::SummaryRow;

/// Columns of `baseline.csv`, in order.
pub const BASELINE_COLUMNS: &[&str] = &[
    "scope",
    "mode",
    "baseline_trials",
    "candidate_trials",
    "baseline_status",
    "candidate_status",
    "status_change",
    "trials_fixed",
    "trials_regressed",
    "baseline_pass_rate",
    "candidate_pass_rate",
    "pass_rate_delta",
    "baseline_recall",
    "candidate_recall",
    "recall_delta",
    "baseline_median_input_tokens",
    "candidate_median_input_tokens",
    "median_input_tokens_delta",
    "baseline_token_reduction_vs_off",
    "candidate_token_reduction_vs_off",
    "token_reduction_vs_off_delta",
    "baseline_est_rel_error_p95",
    "candidate_est_rel_error_p95",
    "est_rel_error_p95_delta",
    "baseline_provider_overflows",
    "candidate_provider_overflows",
    "provider_overflows_delta",
    "baseline_errored",
    "candidate_errored",
    "errored_delta",
];

/// The compared metrics: (name in the columns, label, selector, higher is better).
pub type Metric = (
    &'static str,
    &'static str,
    fn(&SummaryRow) -> Option<f64>,
    bool,
);

/// The per-mode metrics compared, in column order.
pub const METRICS: [Metric; 7] = [
    (
        "pass_rate",
        "pass rate",
        |r| r.pass_rate.map(|p| p.value),
        true,
    ),
    ("recall", "recall", |r| r.recall.map(|p| p.value), true),
    (
        "median_input_tokens",
        "median input tokens / request",
        |r| r.median_input_tokens,
        false,
    ),
    (
        "token_reduction_vs_off",
        "token reduction vs off",
        |r| r.token_reduction_vs_off,
        true,
    ),
    (
        "est_rel_error_p95",
        "estimation error, p95 |rel|",
        |r| r.est_rel_error_p95,
        false,
    ),
    (
        "provider_overflows",
        "provider overflows",
        |r| Some(r.provider_overflows as f64),
        false,
    ),
    (
        "errored",
        "errored trials",
        |r| Some(r.errored as f64),
        false,
    ),
];

/// One (scope, mode) row of the comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct ComparisonRow {
    /// `suite` or a scenario id.
    pub scope: String,
    /// Mode.
    pub mode: Mode,
    /// The baseline's summary row, if it has one.
    pub baseline: Option<SummaryRow>,
    /// The candidate's summary row, if it has one.
    pub candidate: Option<SummaryRow>,
    /// Status in the baseline (empty when absent).
    pub baseline_status: &'static str,
    /// Status in the candidate (empty when absent).
    pub candidate_status: &'static str,
    /// `fixed`, `regressed`, `unchanged`, `added`, `removed` or `other`.
    pub status_change: &'static str,
    /// Trials (same index) failed in the baseline and passed in the candidate.
    pub trials_fixed: u64,
    /// Trials (same index) passed in the baseline and failed in the candidate.
    pub trials_regressed: u64,
}

impl ComparisonRow {
    /// Whether this is a per-mode row.
    pub fn is_suite(&self) -> bool {
        self.scope == crate::summary::SUITE_SCOPE
    }

    /// (baseline, candidate, candidate − baseline) of a metric.
    pub fn values(&self, m: &Metric) -> (Option<f64>, Option<f64>, Option<f64>) {
        let b = self.baseline.as_ref().and_then(m.2);
        let c = self.candidate.as_ref().and_then(m.2);
        let d = match (b, c) {
            (Some(b), Some(c)) => Some(c - b),
            _ => None,
        };
        (b, c, d)
    }

    /// Whether anything a reader should look at changed: the status, a trial's outcome,
    /// or the recall.
    pub fn changed(&self) -> bool {
        self.status_change != "unchanged"
            || self.trials_fixed > 0
            || self.trials_regressed > 0
            || self.values(&METRICS[1]).2.is_some_and(|d| d.abs() > 1e-12)
    }
}

/// The comparison of a candidate run with its baseline.
#[derive(Debug, Clone)]
pub struct Comparison {
    /// Run ids of the baseline run directories.
    pub baseline_runs: Vec<String>,
    /// Directories of the baseline runs.
    pub baseline_dirs: Vec<String>,
    /// Rows: per mode first (mode order), then per scenario × mode.
    pub rows: Vec<ComparisonRow>,
}

/// Status of a (scope, mode) group of trials.
fn status(trials: &[&TrialRow]) -> &'static str {
    if trials.is_empty() {
        return "";
    }
    let graded: Vec<&&TrialRow> = trials
        .iter()
        .filter(|t| t.outcome.status != OutcomeStatus::Errored)
        .collect();
    if graded.is_empty() {
        "errored"
    } else if graded.iter().all(|t| t.passed) {
        "pass"
    } else {
        "fail"
    }
}

fn change(base: &str, cand: &str) -> &'static str {
    match (base, cand) {
        ("", "") => "unchanged",
        ("", _) => "added",
        (_, "") => "removed",
        (b, c) if b == c => "unchanged",
        ("fail", "pass") => "fixed",
        ("pass", "fail") => "regressed",
        _ => "other",
    }
}

/// Compares `candidate` (its summary rows `cand_summary`) with `baseline`
/// (`base_summary`).
pub fn compare(
    candidate: &RunData,
    cand_summary: &[SummaryRow],
    baseline: &RunData,
    base_summary: &[SummaryRow],
) -> Comparison {
    type Key = (bool, String, usize);
    let mode_pos = |m: Mode| Mode::ALL.iter().position(|&x| x == m).unwrap_or(usize::MAX);
    let key = |r: &SummaryRow| -> Key { (!r.is_suite(), r.scope.clone(), mode_pos(r.mode)) };
    let mut keys: BTreeMap<Key, (String, Mode)> = BTreeMap::new();
    for r in cand_summary.iter().chain(base_summary) {
        keys.insert(key(r), (r.scope.clone(), r.mode));
    }
    fn group(run: &RunData) -> BTreeMap<(String, Mode), Vec<&TrialRow>> {
        let mut m: BTreeMap<(String, Mode), Vec<&TrialRow>> = BTreeMap::new();
        for t in &run.trials {
            for scope in [crate::summary::SUITE_SCOPE, t.scenario.as_str()] {
                m.entry((scope.to_string(), t.mode)).or_default().push(t);
            }
        }
        m
    }
    let (cg, bg) = (group(candidate), group(baseline));
    let empty: Vec<&TrialRow> = Vec::new();
    let rows = keys
        .into_values()
        .map(|(scope, mode)| {
            let find = |rows: &[SummaryRow]| {
                rows.iter()
                    .find(|r| r.scope == scope && r.mode == mode)
                    .cloned()
            };
            let ct = cg.get(&(scope.clone(), mode)).unwrap_or(&empty);
            let bt = bg.get(&(scope.clone(), mode)).unwrap_or(&empty);
            let (bs, cs) = (status(bt), status(ct));
            let graded = |t: &TrialRow| t.outcome.status != OutcomeStatus::Errored;
            let base_by: BTreeMap<(&str, u32), &TrialRow> = bt
                .iter()
                .map(|t| ((t.scenario.as_str(), t.trial), *t))
                .collect();
            let (mut fixed, mut regressed) = (0, 0);
            for c in ct {
                if let Some(b) = base_by.get(&(c.scenario.as_str(), c.trial)) {
                    if graded(c) && graded(b) {
                        match (b.passed, c.passed) {
                            (false, true) => fixed += 1,
                            (true, false) => regressed += 1,
                            _ => {}
                        }
                    }
                }
            }
            ComparisonRow {
                baseline: find(base_summary),
                candidate: find(cand_summary),
                baseline_status: bs,
                candidate_status: cs,
                status_change: change(bs, cs),
                trials_fixed: fixed,
                trials_regressed: regressed,
                scope,
                mode,
            }
        })
        .collect();
    Comparison {
        baseline_runs: baseline
            .runs
            .iter()
            .map(|r| r.manifest.run_id.clone())
            .collect(),
        baseline_dirs: baseline
            .runs
            .iter()
            .map(|r| r.dir.display().to_string())
            .collect(),
        rows,
    }
}

/// Scenario ids that appear in only one of the two runs (for a note).
pub fn unmatched_scenarios(c: &Comparison) -> BTreeSet<String> {
    c.rows
        .iter()
        .filter(|r| !r.is_suite() && matches!(r.status_change, "added" | "removed"))
        .map(|r| r.scope.clone())
        .collect()
}

/// The `baseline.csv` frame, columns [`BASELINE_COLUMNS`].
pub fn comparison_frame(c: &Comparison) -> PolarsResult<DataFrame> {
    let rows = &c.rows;
    let text = |f: &dyn Fn(&ComparisonRow) -> String| rows.iter().map(f).collect::<Vec<String>>();
    let count = |f: &dyn Fn(&ComparisonRow) -> Option<u64>| {
        rows.iter().map(f).collect::<Vec<Option<u64>>>()
    };
    let mut cols = vec![
        Column::new("scope".into(), text(&|r| r.scope.clone())),
        Column::new("mode".into(), text(&|r| r.mode.as_str().to_string())),
        Column::new(
            "baseline_trials".into(),
            count(&|r| r.baseline.as_ref().map(|s| s.trials)),
        ),
        Column::new(
            "candidate_trials".into(),
            count(&|r| r.candidate.as_ref().map(|s| s.trials)),
        ),
        Column::new(
            "baseline_status".into(),
            text(&|r| r.baseline_status.into()),
        ),
        Column::new(
            "candidate_status".into(),
            text(&|r| r.candidate_status.into()),
        ),
        Column::new("status_change".into(), text(&|r| r.status_change.into())),
        Column::new(
            "trials_fixed".into(),
            rows.iter().map(|r| r.trials_fixed).collect::<Vec<u64>>(),
        ),
        Column::new(
            "trials_regressed".into(),
            rows.iter()
                .map(|r| r.trials_regressed)
                .collect::<Vec<u64>>(),
        ),
    ];
    for m in &METRICS {
        let vals: Vec<_> = rows.iter().map(|r| r.values(m)).collect();
        cols.push(Column::new(
            format!("baseline_{}", m.0).into(),
            vals.iter().map(|v| v.0).collect::<Vec<_>>(),
        ));
        cols.push(Column::new(
            format!("candidate_{}", m.0).into(),
            vals.iter().map(|v| v.1).collect::<Vec<_>>(),
        ));
        cols.push(Column::new(
            format!("{}_delta", m.0).into(),
            vals.iter().map(|v| v.2).collect::<Vec<_>>(),
        ));
    }
    DataFrame::new(rows.len(), cols)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_changes() {
        assert_eq!(change("fail", "pass"), "fixed");
        assert_eq!(change("pass", "fail"), "regressed");
        assert_eq!(change("pass", "pass"), "unchanged");
        assert_eq!(change("", "pass"), "added");
        assert_eq!(change("fail", ""), "removed");
        assert_eq!(change("errored", "pass"), "other");
    }

    #[test]
    fn columns_follow_the_metrics() {
        let names: Vec<String> = METRICS
            .iter()
            .flat_map(|m| {
                [
                    format!("baseline_{}", m.0),
                    format!("candidate_{}", m.0),
                    format!("{}_delta", m.0),
                ]
            })
            .collect();
        assert_eq!(&BASELINE_COLUMNS[9..], names.as_slice());
    }
}
