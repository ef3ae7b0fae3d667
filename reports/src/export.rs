//! One exporter per output file (hyperfine's `Exporter` habit) and the atomic writer that
//! drives them.
//!
//! An [`Exporter`] serializes the prepared [`ReportData`] into any `std::io::Write`, so
//! large outputs stream straight to disk (no whole-file `String`) and tests can render
//! into a `Vec<u8>`. [`write_all_atomically`] writes every file to a temporary name in
//! the output directory and starts renaming only once all were written and synced, so a
//! failed report never leaves a half-written file behind, and each file appears whole.

use std::borrow::Cow;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};

use polars::prelude::*;

use crate::baseline::Comparison;
use crate::compaction::CompactionIndex;
use crate::error::{ExportError, ReportError};
use crate::gates::GateReport;
use crate::read::RunData;
use crate::summary::SummaryRow;

/// Everything an exporter may need, computed once.
#[derive(Debug)]
pub struct ReportData<'a> {
    /// The run(s) read from storage.
    pub run: &'a RunData,
    /// `requests.csv` frame.
    pub requests: DataFrame,
    /// `trials.csv` frame.
    pub trials: DataFrame,
    /// Summary rows (per mode, then per scenario × mode).
    pub summary: Vec<SummaryRow>,
    /// `summary.csv` frame.
    pub summary_frame: DataFrame,
    /// Gate results.
    pub gates: GateReport,
    /// Per-trial compaction counters and events (from `events.jsonl`).
    pub compaction: CompactionIndex,
    /// Rows of each trial in `requests` (aligned with `run.trials`): requests are sorted
    /// by trial, so a trial's rows are one contiguous range.
    pub trial_rows: Vec<Range<usize>>,
    /// The comparison with a baseline run, when the report has one.
    pub baseline: Option<Comparison>,
    /// Other systems under test side by side, when the report has them.
    pub systems: Option<crate::systems::Systems>,
}

impl<'a> ReportData<'a> {
    /// Builds every frame and aggregate of the report from `run`.
    pub fn build(run: &'a RunData, gates: &crate::GatesFile) -> Result<Self, ReportError> {
        let compaction = CompactionIndex::build(run);
        let requests = crate::frames::requests_frame(run)?;
        let trials = crate::frames::trials_frame(run, &requests, &compaction)?;
        let summary = crate::summary::summarize(run, &trials, &requests, &compaction)?;
        let summary_frame = crate::summary::summary_frame(&summary)?;
        let gates = crate::gates::evaluate_with(run, Ok(&requests), gates);
        let trial_rows = trial_ranges(run, &requests)?;
        Ok(ReportData {
            run,
            requests,
            trials,
            summary,
            summary_frame,
            gates,
            compaction,
            trial_rows,
            baseline: None,
            systems: None,
        })
    }

    /// Adds the comparison with `baseline` (a run read and summarised the same way).
    pub fn with_baseline(
        mut self,
        baseline: &RunData,
        gates: &crate::GatesFile,
    ) -> Result<Self, ReportError> {
        let base = ReportData::build(baseline, gates)?;
        self.baseline = Some(crate::baseline::compare(
            self.run,
            &self.summary,
            baseline,
            &base.summary,
        ));
        Ok(self)
    }
}

/// The row range of each trial (in `run.trials` order) in the sorted `requests` frame.
fn trial_ranges(run: &RunData, requests: &DataFrame) -> Result<Vec<Range<usize>>, ReportError> {
    let ids = requests.column("trial_id")?.str()?;
    let mut ranges = Vec::with_capacity(run.trials.len());
    let mut iter = ids.iter().peekable();
    let mut at = 0usize;
    for t in &run.trials {
        let start = at;
        while iter
            .next_if(|id| *id == Some(t.trial_id.as_str()))
            .is_some()
        {
            at += 1;
        }
        ranges.push(start..at);
    }
    Ok(ranges)
}

/// One output format.
/// `Send + Sync`: the report runs its exporters on threads at once.
pub trait Exporter: Send + Sync {
    /// File name inside the report directory, e.g. `trials.csv`.
    fn file_name(&self) -> &'static str;
    /// Writes the file's content to `out`.
    fn export(&self, data: &ReportData<'_>, out: &mut dyn Write) -> Result<(), ExportError>;
}

/// The CSV tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CsvTable {
    /// `trials.csv`.
    Trials,
    /// `requests.csv`.
    Requests,
    /// `summary.csv`.
    Summary,
}

/// Writes one of the CSV tables: header row, `,` separator, `\n` line ends, floats with
/// [`FLOAT_DECIMALS`] fixed decimals, empty cell for null, and spreadsheet formulas
/// neutralised ([`neutralise_cell`]).
#[derive(Debug, Clone, Copy)]
pub struct CsvExporter(pub CsvTable);

/// Decimals of every float in the CSVs (fixed, so equal runs give equal bytes).
pub const FLOAT_DECIMALS: usize = 6;

impl Exporter for CsvExporter {
    fn file_name(&self) -> &'static str {
        match self.0 {
            CsvTable::Trials => "trials.csv",
            CsvTable::Requests => "requests.csv",
            CsvTable::Summary => "summary.csv",
        }
    }

    fn export(&self, data: &ReportData<'_>, out: &mut dyn Write) -> Result<(), ExportError> {
        let frame = match self.0 {
            CsvTable::Trials => &data.trials,
            CsvTable::Requests => &data.requests,
            CsvTable::Summary => &data.summary_frame,
        };
        write_csv(frame, out)
    }
}

/// Writes `frame` as CSV with the report's conventions (see [`CsvExporter`]).
pub fn write_csv(frame: &DataFrame, out: &mut dyn Write) -> Result<(), ExportError> {
    let mut safe = neutralise_frame(frame)?;
    CsvWriter::new(out)
        .include_header(true)
        .with_float_precision(Some(FLOAT_DECIMALS))
        .finish(&mut safe)?;
    Ok(())
}

/// Characters that make a spreadsheet treat a cell as a formula (or, for tab and CR,
/// that Excel strips before looking for one), OWASP "CSV Injection", plus their full-width
/// and small-form variants (`＝ ＋ － ＠`, `﹦ ﹢ ﹣ ﹫`), which spreadsheets with East Asian
/// input normalise to the ASCII ones.
const FORMULA_TRIGGERS: [char; 14] = [
    '=', '+', '-', '@', '\t', '\r', '\u{FF1D}', '\u{FF0B}', '\u{FF0D}', '\u{FF20}', '\u{FE66}',
    '\u{FE62}', '\u{FE63}', '\u{FE6B}',
];

/// Whether a spreadsheet would evaluate `cell`: a trigger first, or after leading
/// whitespace (spreadsheets skip it before looking for a formula).
fn is_formula(cell: &str) -> bool {
    cell.trim_start_matches(|c: char| c.is_whitespace() && !FORMULA_TRIGGERS.contains(&c))
        .starts_with(FORMULA_TRIGGERS)
}

/// Prefixes a string cell that a spreadsheet would evaluate with `'`, which spreadsheets
/// show as text. Scenario text, model answers and provider messages reach the CSVs, so
/// any of them could carry `=HYPERLINK(...)`. Numbers are typed columns and never pass
/// through here, so `-0.25` in `rel_error` stays a number.
pub fn neutralise_cell(cell: &str) -> Cow<'_, str> {
    if is_formula(cell) {
        Cow::Owned(format!("'{cell}"))
    } else {
        Cow::Borrowed(cell)
    }
}

/// Applies [`neutralise_cell`] to every string column of `frame`.
pub fn neutralise_frame(frame: &DataFrame) -> PolarsResult<DataFrame> {
    let cols = frame
        .columns()
        .iter()
        .map(|c| {
            if c.dtype() != &DataType::String {
                return Ok(c.clone());
            }
            let ca = c.as_materialized_series().str()?;
            // Most columns need nothing: then the column is shared, not copied (a
            // million-row `requests.csv` would otherwise double its text in memory).
            if !ca.iter().any(|o| o.is_some_and(is_formula)) {
                return Ok(c.clone());
            }
            let out: StringChunked = ca.iter().map(|o| o.map(neutralise_cell)).collect();
            Ok(out.with_name(c.name().clone()).into_series().into_column())
        })
        .collect::<PolarsResult<Vec<_>>>()?;
    DataFrame::new(frame.height(), cols)
}

/// `gates.json`: the [`GateReport`], pretty-printed.
#[derive(Debug, Clone, Copy)]
pub struct GatesJsonExporter;

impl Exporter for GatesJsonExporter {
    fn file_name(&self) -> &'static str {
        "gates.json"
    }

    fn export(&self, data: &ReportData<'_>, out: &mut dyn Write) -> Result<(), ExportError> {
        serde_json::to_writer_pretty(&mut *out, &data.gates)?;
        out.write_all(b"\n")?;
        Ok(())
    }
}

/// `requests.parquet`: the `requests.csv` frame as typed Parquet (zstd), for tools that
/// would rather not parse a large CSV. Not formula-neutralised: Parquet cells are typed
/// values, never evaluated by a spreadsheet.
#[derive(Debug, Clone, Copy)]
pub struct ParquetExporter;

/// Rows per Parquet row group (bounded writer memory on large runs).
pub const PARQUET_ROW_GROUP: usize = 128 * 1024;

impl Exporter for ParquetExporter {
    fn file_name(&self) -> &'static str {
        "requests.parquet"
    }

    fn export(&self, data: &ReportData<'_>, out: &mut dyn Write) -> Result<(), ExportError> {
        let mut df = data.requests.clone();
        ParquetWriter::new(out)
            .with_row_group_size(Some(PARQUET_ROW_GROUP))
            .finish(&mut df)?;
        Ok(())
    }
}

/// `baseline.csv`: the comparison with the baseline run (only written with a baseline).
#[derive(Debug, Clone, Copy)]
pub struct BaselineCsvExporter;

impl Exporter for BaselineCsvExporter {
    fn file_name(&self) -> &'static str {
        "baseline.csv"
    }

    fn export(&self, data: &ReportData<'_>, out: &mut dyn Write) -> Result<(), ExportError> {
        let Some(c) = &data.baseline else {
            return Ok(());
        };
        write_csv(&crate::baseline::comparison_frame(c)?, out)
    }
}

/// `systems.csv`: several systems under test side by side (only written with `--system`).
#[derive(Debug, Clone, Copy)]
pub struct SystemsCsvExporter;

impl Exporter for SystemsCsvExporter {
    fn file_name(&self) -> &'static str {
        "systems.csv"
    }

    fn export(&self, data: &ReportData<'_>, out: &mut dyn Write) -> Result<(), ExportError> {
        let Some(s) = &data.systems else {
            return Ok(());
        };
        write_csv(&crate::systems::systems_frame(s)?, out)
    }
}

/// The exporters `write_report` runs, in order (`baseline.csv` is added when the report
/// has a baseline).
pub fn default_exporters() -> Vec<Box<dyn Exporter>> {
    vec![
        Box::new(CsvExporter(CsvTable::Trials)),
        Box::new(CsvExporter(CsvTable::Requests)),
        Box::new(ParquetExporter),
        Box::new(CsvExporter(CsvTable::Summary)),
        Box::new(GatesJsonExporter),
        Box::new(crate::html::HtmlExporter),
        Box::new(crate::junit::JunitExporter),
        Box::new(crate::markdown::MarkdownExporter),
    ]
}

/// Runs every exporter into a temporary file in `out_dir`, then renames them all into
/// place. Returns the final paths. On failure, temporary files are removed and nothing
/// already in `out_dir` is touched.
///
/// The exporters are independent readers of `data`, so they run on scoped threads at once:
/// the HTML page (charts, transcript excerpts read back from storage) no longer waits for
/// the CSV and Parquet writers, and each file's `fsync` overlaps the others' work. The
/// renames happen only after every exporter has finished, in exporter order; the first
/// failure (in exporter order) is the one reported.
pub fn write_all_atomically(
    exporters: &[Box<dyn Exporter>],
    data: &ReportData<'_>,
    out_dir: &Path,
) -> Result<Vec<PathBuf>, ReportError> {
    std::fs::create_dir_all(out_dir).map_err(|e| ReportError::io(out_dir, e))?;
    let staged: Vec<(PathBuf, PathBuf)> = exporters
        .iter()
        .map(|ex| {
            let target = out_dir.join(ex.file_name());
            let tmp = out_dir.join(format!(".{}.tmp-{}", ex.file_name(), std::process::id()));
            (tmp, target)
        })
        .collect();
    let written: Vec<Result<(), ExportError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = exporters
            .iter()
            .zip(&staged)
            .map(|(ex, (tmp, _))| scope.spawn(move || write_one(ex.as_ref(), data, tmp)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(ExportError::Io(std::io::Error::other(
                        "a report writer panicked",
                    )))
                })
            })
            .collect()
    });
    let result = written
        .into_iter()
        .zip(&staged)
        .try_for_each(|(r, (_, target))| {
            r.map_err(|source| ReportError::Export {
                path: target.clone(),
                source,
            })
        })
        .and_then(|()| {
            staged.iter().try_for_each(|(tmp, target)| {
                std::fs::rename(tmp, target).map_err(|e| ReportError::io(target, e))
            })
        });
    if let Err(e) = result {
        for (tmp, _) in &staged {
            // Best effort: the file may not exist (never created, or already renamed).
            let _ = std::fs::remove_file(tmp);
        }
        return Err(e);
    }
    remove_stale_temporaries(out_dir);
    Ok(staged.into_iter().map(|(_, target)| target).collect())
}

/// Remove the temporary files (`.<file>.tmp-<pid>`) a report writer that was killed left
/// in `out_dir`: only those of processes that no longer run (`/proc/<pid>` is gone), so a
/// concurrent writer's files are left alone. Best effort; without `/proc` nothing is
/// removed.
pub fn remove_stale_temporaries(out_dir: &Path) {
    let proc_dir = Path::new("/proc");
    if !proc_dir.join("self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(out_dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(pid) = name
            .strip_prefix('.')
            .and_then(|n| n.rsplit_once(".tmp-"))
            .and_then(|(_, pid)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !proc_dir.join(pid.to_string()).exists() {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

fn write_one(ex: &dyn Exporter, data: &ReportData<'_>, tmp: &Path) -> Result<(), ExportError> {
    let file = File::create(tmp)?;
    let mut w = BufWriter::with_capacity(1 << 16, file);
    ex.export(data, &mut w)?;
    let file = w.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formula_cells_are_neutralised() {
        for bad in [
            "=1+1",
            "+1",
            "-1",
            "@SUM(A1)",
            "\tx",
            "\rx",
            "=HYPERLINK(\"x\")",
            " =1+1",
            "  \u{3000}@SUM(A1)",
            "\n=x",
            "\u{FF1D}HYPERLINK(\"x\")",
            "\u{FF0B}1",
            "\u{FF0D}1",
            "\u{FF20}SUM(A1)",
            " \u{FF1D}1",
            "\u{FE66}1",
        ] {
            assert_eq!(neutralise_cell(bad), format!("'{bad}"), "{bad:?}");
        }
        for ok in ["", "ok", "1", "a=b", "a \u{FF1D}b", "'=x", "  ", " x=1"] {
            assert_eq!(neutralise_cell(ok), ok);
        }
    }

    #[test]
    fn temporaries_of_dead_writers_are_removed_and_live_ones_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        // A pid no process has (above the kernel's pid_max of 2^22).
        let dead = dir.path().join(".trials.csv.tmp-4194305");
        let live = dir
            .path()
            .join(format!(".trials.csv.tmp-{}", std::process::id()));
        let other = dir.path().join(".notes.tmp-x");
        for f in [&dead, &live, &other] {
            std::fs::write(f, "x").expect("write");
        }
        remove_stale_temporaries(dir.path());
        assert!(!dead.exists());
        assert!(live.exists() && other.exists());
    }

    #[test]
    fn csv_keeps_numbers_and_quotes_strings() {
        let df = DataFrame::new(
            2,
            vec![
                Column::new("s".into(), vec![Some("=cmd|' /C calc'!A0"), None]),
                Column::new("f".into(), vec![-0.25f64, 1.0 / 3.0]),
                Column::new("i".into(), vec![-3i64, 4]),
            ],
        )
        .expect("frame");
        let mut out = Vec::new();
        write_csv(&df, &mut out).expect("csv");
        let text = String::from_utf8(out).expect("utf8");
        assert_eq!(
            text, "s,f,i\n'=cmd|' /C calc'!A0,-0.250000,-3\n,0.333333,4\n",
            "{text}"
        );
    }
}
