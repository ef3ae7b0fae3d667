//! Several systems under test side by side: `ctxbench report RUN_DIR --system OTHER_RUN …`.
//!
//! Each run directory is one system under test (its manifest's `sut`, `reference` when
//! absent) run on the same suite; every run is read, summarised and gated exactly as its
//! own report would be, and only the per-mode rows and the verdict are kept. The report
//! shows one column per system (`index.html`, `summary.md`) and writes every value to
//! `systems.csv` (columns [`SYSTEMS_COLUMNS`]).
//!
//! Nothing is ranked or combined across systems: the columns are the systems' own
//! numbers, each with its own verdict, so a reader compares like with like (same mode,
//! same metric).

use polars::prelude::*;
use serde::Serialize;

use crate::error::ReportError;
use crate::export::ReportData;
use crate::gates::GateReport;
use crate::read::RunData;
use crate::summary::SummaryRow;
use ctxbench_harness::Mode;

/// Columns of `systems.csv`, in order.
pub const SYSTEMS_COLUMNS: [&str; 16] = [
    "system",
    "run_id",
    "verdict",
    "mode",
    "trials",
    "passed",
    "errored",
    "pass_rate",
    "completion",
    "recall",
    "median_input_tokens",
    "token_reduction_vs_off",
    "over_budget_unwarned",
    "provider_overflows",
    "compactions",
    "invariant_failures",
];

/// One system under test: its identity, verdict and per-mode rows.
#[derive(Debug, Clone, Serialize)]
pub struct SystemColumn {
    /// The system under test as run (`reference`, `exec:…`).
    pub system: String,
    /// Run id(s) the column was read from.
    pub run_id: String,
    /// The gates' verdict for this run (`PASS`, `FAIL`, `INCOMPLETE`, …).
    pub verdict: String,
    /// Failed safety-invariant verdicts in the candidate mode (the gate's observation), if
    /// the gate was evaluated.
    pub invariant_failures: Option<f64>,
    /// Per-mode (suite) summary rows.
    pub modes: Vec<SummaryRow>,
}

impl SystemColumn {
    /// The column of one run's report data.
    pub fn of(data: &ReportData<'_>) -> Self {
        let manifest = data.run.manifest();
        SystemColumn {
            system: crate::read::sut_of(manifest).to_string(),
            run_id: manifest.run_id.clone(),
            verdict: data.gates.headline(),
            invariant_failures: invariant_failures(&data.gates),
            modes: data
                .summary
                .iter()
                .filter(|r| r.is_suite())
                .cloned()
                .collect(),
        }
    }

    /// The suite row of `mode`, if the run has it.
    pub fn mode(&self, mode: Mode) -> Option<&SummaryRow> {
        self.modes.iter().find(|r| r.mode == mode)
    }
}

fn invariant_failures(g: &GateReport) -> Option<f64> {
    g.gates
        .iter()
        .find(|r| r.name == "safety_invariant_failures")
        .and_then(|r| r.observed)
}

/// The systems of a report: this run first, then each `--system` run in the given order.
#[derive(Debug, Clone, Serialize)]
pub struct Systems {
    /// One column per system.
    pub columns: Vec<SystemColumn>,
}

impl Systems {
    /// This run's column followed by one column per other run (each read, summarised and
    /// gated with `gates`).
    pub fn build(
        this: &ReportData<'_>,
        others: &[RunData],
        gates: &crate::GatesFile,
    ) -> Result<Self, ReportError> {
        let mut columns = vec![SystemColumn::of(this)];
        for run in others {
            let data = ReportData::build(run, gates)?;
            columns.push(SystemColumn::of(&data));
        }
        Ok(Systems { columns })
    }

    /// Modes present in any column, in mode order.
    pub fn modes(&self) -> Vec<Mode> {
        let mut modes: Vec<Mode> = self
            .columns
            .iter()
            .flat_map(|c| c.modes.iter().map(|r| r.mode))
            .collect();
        modes.sort();
        modes.dedup();
        modes
    }
}

/// A shown metric: label and how to format it from a row (`None` when absent).
pub type ShownMetric = (&'static str, fn(&SummaryRow) -> Option<String>);

fn pct(v: Option<f64>) -> Option<String> {
    v.map(|x| format!("{:.1}%", x * 100.0))
}

/// The per-mode metrics shown side by side, in row order.
pub const SHOWN: [ShownMetric; 9] = [
    ("trials (errored)", |r| {
        Some(format!("{} ({})", r.trials, r.errored))
    }),
    ("pass rate", |r| {
        r.pass_rate
            .map(|p| format!("{:.1}% ({}/{})", p.value * 100.0, p.successes, p.total))
    }),
    ("turns completed / scripted", |r| pct(r.completion)),
    ("recall", |r| {
        r.recall
            .map(|p| format!("{:.1}% ({}/{})", p.value * 100.0, p.successes, p.total))
    }),
    ("median input tokens / request", |r| {
        r.median_input_tokens.map(|v| format!("{v:.0}"))
    }),
    ("token reduction vs off", |r| pct(r.token_reduction_vs_off)),
    ("over-budget requests without warning", |r| {
        Some(r.over_budget_unwarned.to_string())
    }),
    ("provider overflows", |r| {
        Some(r.provider_overflows.to_string())
    }),
    ("completed compactions", |r| Some(r.compactions.to_string())),
];

/// `systems.csv`: one row per system × mode.
pub fn systems_frame(s: &Systems) -> PolarsResult<DataFrame> {
    let mut system = Vec::new();
    let mut run_id = Vec::new();
    let mut verdict = Vec::new();
    let mut mode = Vec::new();
    let mut trials = Vec::new();
    let mut passed = Vec::new();
    let mut errored = Vec::new();
    let mut pass_rate = Vec::new();
    let mut completion = Vec::new();
    let mut recall = Vec::new();
    let mut median = Vec::new();
    let mut reduction = Vec::new();
    let mut unwarned = Vec::new();
    let mut overflows = Vec::new();
    let mut compactions = Vec::new();
    let mut invariants = Vec::new();
    for c in &s.columns {
        for r in &c.modes {
            system.push(c.system.clone());
            run_id.push(c.run_id.clone());
            verdict.push(c.verdict.clone());
            mode.push(r.mode.as_str().to_string());
            trials.push(r.trials);
            passed.push(r.passed);
            errored.push(r.errored);
            pass_rate.push(r.pass_rate.map(|p| p.value));
            completion.push(r.completion);
            recall.push(r.recall.map(|p| p.value));
            median.push(r.median_input_tokens);
            reduction.push(r.token_reduction_vs_off);
            unwarned.push(r.over_budget_unwarned);
            overflows.push(r.provider_overflows);
            compactions.push(r.compactions);
            invariants.push(c.invariant_failures);
        }
    }
    let columns: Vec<Column> = vec![
        Column::new("system".into(), system),
        Column::new("run_id".into(), run_id),
        Column::new("verdict".into(), verdict),
        Column::new("mode".into(), mode),
        Column::new("trials".into(), trials),
        Column::new("passed".into(), passed),
        Column::new("errored".into(), errored),
        Column::new("pass_rate".into(), pass_rate),
        Column::new("completion".into(), completion),
        Column::new("recall".into(), recall),
        Column::new("median_input_tokens".into(), median),
        Column::new("token_reduction_vs_off".into(), reduction),
        Column::new("over_budget_unwarned".into(), unwarned),
        Column::new("provider_overflows".into(), overflows),
        Column::new("compactions".into(), compactions),
        Column::new("invariant_failures".into(), invariants),
    ];
    debug_assert_eq!(columns.len(), SYSTEMS_COLUMNS.len());
    let height = columns.first().map_or(0, |c| c.len());
    DataFrame::new(height, columns)
}
