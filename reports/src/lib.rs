//! # ctxbench-reports — from run storage to CSVs, gates and an HTML report
//!
//! This crate turns one or more run directories written by `ctxbench-harness` (the
//! contract is `ctxbench_harness::storage::schema`) into a report directory:
//!
//! | file | content |
//! | --- | --- |
//! | `trials.csv` | one row per trial ([`frames::trials_frame`]) |
//! | `requests.csv` | one row per physical request or preflight stop ([`frames::requests_frame`]) |
//! | `requests.parquet` | the same rows and columns, typed ([`export::ParquetExporter`]) |
//! | `summary.csv` | per mode and per scenario × mode, with Wilson intervals ([`summary`]) |
//! | `gates.json` | the [`GateReport`]: per-gate results and the verdict ([`gates`]) |
//! | `index.html` | one self-contained, script-free page ([`html`]) |
//! | `junit.xml` | one test suite per scenario × mode and one for the gates ([`junit`]) |
//! | `summary.md` | verdict, gates, modes and failed scenarios for a CI job summary ([`markdown`]) |
//! | `baseline.csv` | with a baseline run: differences per mode and scenario ([`baseline`]) |
//! | `systems.csv` | with `--system` runs: several systems under test side by side ([`systems`]) |
//!
//! Columns are documented in `docs/report-columns.md`.
//!
//! **What it is not.** It never runs trials, calls a provider or grades: it only *reads*
//! run storage, offline, and is safe to point at a directory another process is still
//! appending to (a torn last line is skipped and counted). It never writes into a run
//! directory.
//!
//! Main entry points: [`load_runs`] → [`RunData`]; [`load_gates`] → [`GatesFile`];
//! [`evaluate`] → [`GateReport`]; [`write_report`] does all of it and writes the files,
//! each through an [`Exporter`]; [`verdict_line`] is the one-line terminal summary.
//!
//! ```no_run
//! use std::path::{Path, PathBuf};
//! let gates = ctxbench_reports::load_gates(None)?; // the built-in defaults
//! let summary = ctxbench_reports::write_report(
//!     &[PathBuf::from("runs/2024-01-01T00-00-00Z")],
//!     Path::new("report"),
//!     &gates,
//! )?;
//! println!("{}", ctxbench_reports::verdict_line(&summary.gates));
//! std::process::exit(summary.gates.exit_code);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

pub mod baseline;
pub mod charts;
pub mod compaction;
pub mod error;
pub mod excerpt;
pub mod export;
pub mod frames;
pub mod gates;
pub mod html;
pub mod junit;
pub mod markdown;
pub mod read;
pub mod stats;
pub mod summary;
pub mod systems;

use std::path::{Path, PathBuf};

pub use error::{ExportError, ReportError};
pub use export::{default_exporters, Exporter, ReportData};
pub use gates::{
    evaluate, load_gates, GateReport, GateResult, GateStatus, GateVerdict, GatesFile,
    DEFAULT_GATES, EXIT_CANNOT_EVALUATE, EXIT_FAIL, EXIT_PASS,
};
pub use junit::JunitExporter;
pub use markdown::MarkdownExporter;
pub use read::{load_run, load_runs, RunData, RunSource};
pub use stats::{
    bootstrap_median, mcnemar_exact, newcombe_paired_difference, BootstrapInterval,
    PairedDifference, PairedTable,
};
pub use summary::SummaryRow;

/// What [`write_report`] hands back to the CLI.
#[derive(Debug, Clone)]
pub struct ReportSummary {
    /// The gate results and verdict (also in `gates.json`).
    pub gates: GateReport,
    /// One row per mode present (`scope = suite` rows of `summary.csv`).
    pub modes: Vec<SummaryRow>,
    /// The files written, in order.
    pub files: Vec<PathBuf>,
    /// Trials read.
    pub trials: usize,
    /// Request rows read.
    pub requests: usize,
    /// Torn last lines skipped.
    pub torn_lines: usize,
}

impl ReportSummary {
    /// One line per mode, e.g.
    /// `compact  10 trials  pass 80.0% [49.0, 94.3]  recall 95.0% [83.5, 98.6]  median input 5120  errored 0`.
    pub fn mode_lines(&self) -> Vec<String> {
        self.modes
            .iter()
            .map(|r| {
                let p = |v: Option<stats::Proportion>| match v {
                    Some(p) => format!(
                        "{:.1}% [{:.1}, {:.1}]",
                        p.value * 100.0,
                        p.lo * 100.0,
                        p.hi * 100.0
                    ),
                    None => "—".to_string(),
                };
                format!(
                    "{:<8} {} trials  pass {}  recall {}  completion {}  median input {}  errored {}",
                    r.mode.as_str(),
                    r.trials,
                    p(r.pass_rate),
                    p(r.recall),
                    r.completion
                        .map(|v| format!("{:.0}%", v * 100.0))
                        .unwrap_or_else(|| "—".to_string()),
                    r.median_input_tokens
                        .map(|v| format!("{v:.0}"))
                        .unwrap_or_else(|| "—".to_string()),
                    r.errored
                )
            })
            .collect()
    }
}

/// Options of [`write_report_with`].
#[derive(Debug, Clone, Default)]
pub struct ReportOptions {
    /// Baseline run directories (shards of one run) to compare with; empty for none.
    pub baseline: Vec<PathBuf>,
    /// Runs of other systems under test (one directory each) shown side by side.
    pub systems: Vec<PathBuf>,
}

/// Reads `run_dirs` (merged as shards), evaluates `gates` and writes `trials.csv`,
/// `requests.csv`, `requests.parquet`, `summary.csv`, `gates.json`, `index.html`,
/// `junit.xml` and `summary.md` into `out_dir` (created if needed). Files are written
/// under temporary names and renamed into place once all are complete.
pub fn write_report(
    run_dirs: &[PathBuf],
    out_dir: &Path,
    gates: &GatesFile,
) -> Result<ReportSummary, ReportError> {
    write_report_with(run_dirs, out_dir, gates, &ReportOptions::default())
}

/// [`write_report`] with options: with a baseline, the report also compares the run with
/// it ([`baseline`]) and writes `baseline.csv`.
pub fn write_report_with(
    run_dirs: &[PathBuf],
    out_dir: &Path,
    gates: &GatesFile,
    options: &ReportOptions,
) -> Result<ReportSummary, ReportError> {
    let run = load_runs(run_dirs)?;
    let mut data = ReportData::build(&run, gates)?;
    let mut exporters = default_exporters();
    if !options.baseline.is_empty() {
        // Read, summarised and dropped again before the files are written.
        let base = load_runs(&options.baseline)?;
        data = data.with_baseline(&base, gates)?;
        exporters.push(Box::new(export::BaselineCsvExporter));
    }
    if !options.systems.is_empty() {
        let others = options
            .systems
            .iter()
            .map(|d| load_run(d))
            .collect::<Result<Vec<_>, _>>()?;
        data.systems = Some(systems::Systems::build(&data, &others, gates)?);
        exporters.push(Box::new(export::SystemsCsvExporter));
    }
    let files = export::write_all_atomically(&exporters, &data, out_dir)?;
    Ok(ReportSummary {
        modes: data
            .summary
            .iter()
            .filter(|r| r.is_suite())
            .cloned()
            .collect(),
        gates: data.gates,
        files,
        trials: run.trials.len(),
        requests: run.request_count(),
        torn_lines: run.torn_lines,
    })
}

/// One line for the terminal: `PASS: all 8 gates passed for candidate `compact``, with the
/// pre-registration note appended when the evaluated gates are not the registered ones.
pub fn verdict_line(report: &GateReport) -> String {
    let mut line = format!("{}: {}", report.headline(), report.reason);
    if let Some(note) = &report.note {
        line.push_str(" — NOTE: ");
        line.push_str(note);
    }
    line
}
