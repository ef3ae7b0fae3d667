//! Typed errors of the report stage.
//!
//! Every variant that concerns a file carries its path (and line, when there is one), so
//! the CLI can print a one-line cause such as `runs/a/trials.jsonl:17: expected value` and
//! exit non-zero — never a panic or a backtrace (QUALITY.md §Reliability).

use std::path::PathBuf;

/// Why reading run storage, evaluating gates or writing a report failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    /// `load_runs` was called with no run directory.
    #[error("no run directory given (hint: pass at least one RUN_DIR)")]
    NoRuns,

    /// A file could not be opened, read, created or renamed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory concerned.
        path: PathBuf,
        /// The underlying I/O error.
        source: std::io::Error,
    },

    /// `manifest.json` is not a valid manifest.
    #[error("{}: invalid manifest: {source}", path.display())]
    BadManifest {
        /// Path of `manifest.json`.
        path: PathBuf,
        /// The JSON error (with its line and column).
        source: serde_json::Error,
    },

    /// A JSONL line that is not the (torn) last line could not be parsed.
    #[error("{}:{line}: {message}", path.display())]
    BadLine {
        /// The JSONL file.
        path: PathBuf,
        /// 1-based line number.
        line: u64,
        /// What is wrong with it.
        message: String,
    },

    /// A row (or the manifest) carries a `schema` tag this version does not understand.
    #[error(
        "{}:{line}: unknown schema `{found}` (this ctxbench reads `{expected}`; \
         hint: report the run with the ctxbench version that wrote it)",
        path.display()
    )]
    UnknownSchema {
        /// The file.
        path: PathBuf,
        /// 1-based line number (1 for `manifest.json`).
        line: u64,
        /// The tag found.
        found: String,
        /// The tag this reader understands.
        expected: &'static str,
    },

    /// The same trial appears twice inside one run directory, which append-only storage
    /// never produces.
    #[error(
        "{}: trial `{trial_id}` appears twice (lines {first_line} and {second_line})",
        path.display()
    )]
    DuplicateTrialInRun {
        /// `trials.jsonl` of the run.
        path: PathBuf,
        /// The trial id.
        trial_id: String,
        /// Line of the first occurrence.
        first_line: u64,
        /// Line of the second occurrence.
        second_line: u64,
    },

    /// The same trial appears in two run directories that were merged as shards.
    #[error(
        "trial `{trial_id}` appears in both {} and {} (hint: shards must partition the \
         matrix; pass each shard's run dir once)",
        first.display(),
        second.display()
    )]
    DuplicateTrial {
        /// The trial id.
        trial_id: String,
        /// First run directory holding it.
        first: PathBuf,
        /// Second run directory holding it.
        second: PathBuf,
    },

    /// Two run directories cannot be merged because their manifests disagree.
    #[error(
        "mismatched shards: {} and {} differ in {what}: {left:?} vs {right:?}; they are not \
         shards of one run, so they are not merged",
        first.display(),
        second.display()
    )]
    MismatchedShards {
        /// First run directory.
        first: PathBuf,
        /// Second run directory.
        second: PathBuf,
        /// Which manifest field differs.
        what: String,
        /// Its value in `first`.
        left: String,
        /// Its value in `second`.
        right: String,
    },

    /// The gates file is malformed or inconsistent.
    #[error("{source_name}: {message}")]
    Gates {
        /// Path of the gates file, or `builtin`.
        source_name: String,
        /// What is wrong, with its location when the YAML parser gives one.
        message: String,
    },

    /// polars failed while building or aggregating a frame.
    #[error("aggregation failed: {0}")]
    Polars(#[from] polars::error::PolarsError),

    /// Writing one report file failed.
    #[error("{}: {source}", path.display())]
    Export {
        /// The report file being written.
        path: PathBuf,
        /// What failed.
        source: ExportError,
    },
}

/// Failure of one [`crate::Exporter`] while serializing into its writer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// The writer failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// polars failed (CSV writing).
    #[error(transparent)]
    Polars(#[from] polars::error::PolarsError),
    /// JSON serialization failed.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// Drawing a chart failed.
    #[error("chart: {0}")]
    Chart(String),
}

impl ReportError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ReportError::Io {
            path: path.into(),
            source,
        }
    }
}
