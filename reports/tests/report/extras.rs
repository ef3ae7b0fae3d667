//! Parquet export, inline SVG charts, baseline comparison, systems side by side and the bounded drill-down.

use std::path::{Path, PathBuf};

use ctxbench_harness::storage::schema::OutcomeStatus;
use ctxbench_harness::Mode;
use ctxbench_reports::baseline::BASELINE_COLUMNS;
use ctxbench_reports::frames::REQUEST_COLUMNS;
use ctxbench_reports::html::{REQUESTS_SHOWN, TRIALS_DRILLED, TRIALS_LISTED};
use ctxbench_reports::systems::SYSTEMS_COLUMNS;
use ctxbench_reports::{load_gates, write_report, write_report_with, ReportOptions};
use polars::prelude::*;

use crate::fixture::{request, trial, Fx};

fn report(fx: &Fx, root: &Path, name: &str) -> PathBuf {
    let run_dir = root.join(format!("run-{name}"));
    fx.write(&run_dir);
    let out = root.join(format!("report-{name}"));
    write_report(&[run_dir], &out, &load_gates(None).expect("gates")).expect("report");
    out
}

#[test]
fn requests_parquet_is_written_and_reads_back() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = report(&Fx::good("r1"), tmp.path(), "p");
    let path = out.join("requests.parquet");
    let bytes = std::fs::read(&path).expect("requests.parquet");
    assert!(bytes.len() > 8);
    assert_eq!(&bytes[..4], b"PAR1", "leading magic");
    assert_eq!(&bytes[bytes.len() - 4..], b"PAR1", "trailing magic");
    let df = ParquetReader::new(std::fs::File::open(&path).expect("open"))
        .finish()
        .expect("parquet reads back");
    assert_eq!(df.height(), 12);
    let names: Vec<String> = df
        .get_column_names()
        .iter()
        .map(|n| n.to_string())
        .collect();
    assert_eq!(names, REQUEST_COLUMNS);
    // Typed, not neutralised: rel_error is a float column, -0.1 for compact/0 step 1.
    let rel = df
        .column("rel_error")
        .expect("rel_error")
        .f64()
        .expect("f64");
    assert!(rel.iter().flatten().any(|v| (v + 0.1).abs() < 1e-9));
}

#[test]
fn charts_are_inline_svg_without_external_references_and_escape_labels() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let hostile = "<script>alert(1)</script>";
    let mut fx = Fx::good("r1");
    for t in &mut fx.trials {
        t.trial_id = format!("{}{hostile}", t.trial_id);
    }
    for r in &mut fx.requests {
        r.trial_id = format!("{}{hostile}", r.trial_id);
    }
    let out = report(&fx, tmp.path(), "c");
    let html = std::fs::read_to_string(out.join("index.html")).expect("html");
    let svgs = html.matches("<svg").count();
    assert!(svgs >= 4, "{svgs} inline charts");
    // No network reference anywhere, except the SVG namespace name.
    let urls = html.matches("http://").count() + html.matches("https://").count();
    let xmlns = html.matches("xmlns=\"http://www.w3.org/2000/svg\"").count();
    assert_eq!(urls, xmlns, "only the SVG namespace may be a URL");
    assert_eq!(xmlns, svgs);
    // The hostile trial id is only ever escaped: in the page and inside the charts.
    let lower = html.to_ascii_lowercase();
    assert!(!lower.contains("<script"), "raw <script in the report");
    let first_svg = html.find("<svg").expect("svg");
    let svg_end = html[first_svg..].find("</svg>").expect("end") + first_svg;
    assert!(
        html[first_svg..svg_end].contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "the session chart's legend shows the trial id escaped"
    );
    // The CSP still forbids everything but inline styles.
    assert!(html.contains(&format!(
        "<meta http-equiv=\"Content-Security-Policy\" content=\"{}\">",
        ctxbench_reports::html::CSP
    )));
    assert!(ctxbench_reports::html::CSP.starts_with("default-src 'none';"));
    for title in [
        "Input tokens per request",
        "Budget categories",
        "Estimate vs provider-reported",
        "Relative estimation error",
        "Pass rate and recall",
    ] {
        assert!(html.contains(title), "missing chart {title}");
    }
}

#[test]
fn baseline_comparison_shows_metric_and_scenario_changes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // Baseline: warn fails everywhere. Candidate: warn passes, compact/1 regresses and
    // loses one recall probe; compact input tokens halve at step 1.
    let mut base = Fx::good("base-run");
    base.warn_fails();
    let mut cand = Fx::good("cand-run");
    let c = cand.trial_mut("s1/compact/1");
    c.passed = false;
    c.outcome.status = OutcomeStatus::Failed;
    c.recall[0].correct = false;
    let (base_dir, cand_dir) = (tmp.path().join("base"), tmp.path().join("cand"));
    base.write(&base_dir);
    cand.write(&cand_dir);
    let out = tmp.path().join("report");
    let summary = write_report_with(
        &[cand_dir],
        &out,
        &load_gates(None).expect("gates"),
        &ReportOptions {
            baseline: vec![base_dir],
            ..ReportOptions::default()
        },
    )
    .expect("report");
    assert!(summary.files.iter().any(|f| f.ends_with("baseline.csv")));

    let csv = std::fs::read_to_string(out.join("baseline.csv")).expect("baseline.csv");
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some(BASELINE_COLUMNS.join(",").as_str()));
    let col = |name: &str| {
        BASELINE_COLUMNS
            .iter()
            .position(|c| *c == name)
            .expect("column")
    };
    let row = |scope: &str, mode: &str| -> Vec<String> {
        csv.lines()
            .find(|l| l.starts_with(&format!("{scope},{mode},")))
            .unwrap_or_else(|| panic!("row {scope},{mode}"))
            .split(',')
            .map(str::to_string)
            .collect()
    };
    let compact = row("s1", "compact");
    assert_eq!(compact[col("status_change")], "regressed");
    assert_eq!(compact[col("trials_regressed")], "1");
    assert_eq!(compact[col("pass_rate_delta")], "-0.500000");
    assert_eq!(compact[col("recall_delta")], "-0.250000");
    let warn = row("s1", "warn");
    assert_eq!(warn[col("status_change")], "fixed");
    assert_eq!(warn[col("trials_fixed")], "2");
    assert_eq!(warn[col("pass_rate_delta")], "1.000000");
    let suite = row("suite", "off");
    assert_eq!(suite[col("status_change")], "unchanged");
    assert_eq!(suite[col("median_input_tokens_delta")], "0.000000");

    let html = std::fs::read_to_string(out.join("index.html")).expect("html");
    assert!(html.contains("<h2>Compared with baseline</h2>"));
    assert!(html.contains("base-run"));
    assert!(html.contains(">regressed</td>") && html.contains(">fixed</td>"));
    let md = std::fs::read_to_string(out.join("summary.md")).expect("md");
    assert!(md.contains("### Compared with baseline"), "{md}");
    assert!(
        md.contains("| s1 | `compact` | pass → fail | regressed | 0 / 1 | -25.0 pp |"),
        "{md}"
    );
    assert!(
        md.contains("| `warn` | pass rate | 0.0% | 100.0% | +100.0 pp |"),
        "{md}"
    );

    // Without --baseline there is no comparison and no baseline.csv.
    let plain = report(&cand, tmp.path(), "plain");
    assert!(!plain.join("baseline.csv").exists());
    let html = std::fs::read_to_string(plain.join("index.html")).expect("html");
    assert!(!html.contains("Compared with baseline"));
}

#[test]
fn systems_side_by_side_each_with_its_own_numbers_and_verdict() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let a = Fx::good("run-a");
    let mut b = Fx::good("run-b");
    b.warn_fails();
    b.manifest.sut = Some("exec:<script>alert(1)</script> agent".into());
    let (a_dir, b_dir) = (tmp.path().join("a"), tmp.path().join("b"));
    a.write(&a_dir);
    b.write(&b_dir);
    let out = tmp.path().join("report");
    let summary = write_report_with(
        &[a_dir],
        &out,
        &load_gates(None).expect("gates"),
        &ReportOptions {
            systems: vec![b_dir],
            ..ReportOptions::default()
        },
    )
    .expect("report");
    assert!(summary.files.iter().any(|f| f.ends_with("systems.csv")));
    let csv = std::fs::read_to_string(out.join("systems.csv")).expect("systems.csv");
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some(SYSTEMS_COLUMNS.join(",").as_str()));
    let col = |name: &str| {
        SYSTEMS_COLUMNS
            .iter()
            .position(|c| *c == name)
            .expect("column")
    };
    let row = |system: &str, mode: &str| -> Vec<String> {
        csv.lines()
            .map(|l| l.split(',').map(str::to_string).collect::<Vec<_>>())
            .find(|r| r[col("system")].starts_with(system) && r[col("mode")] == mode)
            .unwrap_or_else(|| panic!("row {system} {mode}: {csv}"))
    };
    // Each column is its own run's numbers: b's warn failed, a's did not.
    assert_eq!(row("reference", "warn")[col("pass_rate")], "1.000000");
    assert_eq!(row("exec:", "warn")[col("pass_rate")], "0.000000");
    assert_eq!(row("exec:", "warn")[col("run_id")], "run-b");
    assert_eq!(csv.lines().count(), 1 + 2 * 3);
    let html = std::fs::read_to_string(out.join("index.html")).expect("html");
    assert!(html.contains("<h2>Systems under test side by side</h2>"));
    assert!(!html.contains("<script>"), "the system name is escaped");
    assert!(html.contains("&lt;script&gt;alert(1)"));
    let md = std::fs::read_to_string(out.join("summary.md")).expect("md");
    assert!(md.contains("### Systems under test side by side"), "{md}");
    assert!(
        md.contains("| `warn` | pass rate | 100.0% (2/2) | 0.0% (0/2) |"),
        "{md}"
    );
    // Without --system: no section and no systems.csv.
    let plain = report(&a, tmp.path(), "plain");
    assert!(!plain.join("systems.csv").exists());
}

#[test]
fn trial_drill_down_is_bounded() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut fx = Fx::good("big");
    fx.trials.clear();
    fx.requests.clear();
    let per_trial = 3 * REQUESTS_SHOWN as u64;
    let n_trials = TRIALS_LISTED as u32 + 40;
    for t in 0..n_trials {
        let mut tr = trial("s1", Mode::Compact, t);
        // A few failing trials: they are listed and drilled down first.
        if t % 100 == 7 {
            tr.passed = false;
            tr.outcome.status = OutcomeStatus::Failed;
        }
        for i in 0..per_trial {
            fx.requests
                .push(request(&tr, i + 1, i, 100 + i, Some(100 + i)));
        }
        fx.trials.push(tr);
    }
    fx.manifest.trials = Some(n_trials);
    fx.manifest.matrix_size = u64::from(n_trials);
    let out = report(&fx, tmp.path(), "big");
    let html = std::fs::read_to_string(out.join("index.html")).expect("html");
    assert_eq!(html.matches("<details>").count(), TRIALS_DRILLED);
    assert!(html.contains(&format!(
        "showing first {REQUESTS_SHOWN} and last {REQUESTS_SHOWN} of {per_trial}"
    )));
    assert!(html.contains(&format!(
        "{TRIALS_LISTED} of {n_trials} trials listed (not passing first)"
    )));
    assert!(html.contains("40 more trials not listed"));
    assert!(html.contains("<a href=\"trials.csv\">trials.csv</a>"));
    // The failing trial 507 is beyond the first 500 in order but still listed.
    assert!(html.contains("s1&#x2F;compact&#x2F;507"));
    // Everything is still in the CSV.
    let csv = std::fs::read_to_string(out.join("requests.csv")).expect("csv");
    assert_eq!(
        csv.lines().count() as u64,
        1 + per_trial * u64::from(n_trials)
    );
}

/// `requests.parquet` holds exactly `requests.csv`: the same columns in the same order, and
/// in every cell the same value — typed in Parquet, written by the CSV conventions in the
/// CSV (6-decimal floats, empty cell for null, formulas neutralised with a leading `'`).
#[test]
fn requests_parquet_columns_and_values_equal_the_csv() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut fx = Fx::good("r1");
    // Text a spreadsheet would evaluate, an empty string and non-ASCII text in string
    // columns, next to nulls in the same columns.
    let hostile = ["=1+1", " \u{FF1D}SUM(A1)", "", "naïve ✓ \u{202E}x", "-3"];
    for (r, text) in fx.requests.iter_mut().zip(hostile.iter().cycle()) {
        r.retry_reason = Some(text.to_string());
        r.model = format!("m{text}");
    }
    fx.requests[1].error_kind = Some("rate_limited".into());
    let out = report(&fx, tmp.path(), "pq");
    let parquet =
        ParquetReader::new(std::fs::File::open(out.join("requests.parquet")).expect("open"))
            .finish()
            .expect("parquet");
    let csv = CsvReadOptions::default()
        .with_has_header(true)
        .with_infer_schema_length(Some(0))
        .try_into_reader_with_file_path(Some(out.join("requests.csv")))
        .expect("csv options")
        .finish()
        .expect("csv");
    let names = |df: &DataFrame| -> Vec<String> {
        df.get_column_names()
            .iter()
            .map(|n| n.to_string())
            .collect()
    };
    assert_eq!(names(&parquet), names(&csv));
    assert_eq!(names(&parquet), REQUEST_COLUMNS);
    assert_eq!(parquet.height(), csv.height());
    assert!(parquet.height() >= 12);
    let mut compared = 0;
    for name in names(&parquet) {
        let typed = parquet.column(&name).expect("parquet column");
        let text = csv
            .column(&name)
            .expect("csv column")
            .str()
            .expect("text")
            .clone();
        for i in 0..parquet.height() {
            let want: Option<String> = match typed.get(i).expect("cell") {
                AnyValue::Null => None,
                AnyValue::String(s) => {
                    Some(ctxbench_reports::export::neutralise_cell(s).into_owned())
                }
                AnyValue::StringOwned(s) => {
                    Some(ctxbench_reports::export::neutralise_cell(s.as_str()).into_owned())
                }
                AnyValue::Float64(v) => Some(format!("{v:.6}")),
                AnyValue::Float32(v) => Some(format!("{v:.6}")),
                AnyValue::Boolean(b) => Some(b.to_string()),
                AnyValue::Int64(v) => Some(v.to_string()),
                AnyValue::Int32(v) => Some(v.to_string()),
                AnyValue::UInt64(v) => Some(v.to_string()),
                AnyValue::UInt32(v) => Some(v.to_string()),
                other => panic!("{name}: unexpected Parquet type {other:?}"),
            };
            assert_eq!(
                text.get(i).map(str::to_string),
                want,
                "{name}, row {i}: CSV and Parquet differ"
            );
            compared += 1;
        }
    }
    assert_eq!(compared, parquet.height() * REQUEST_COLUMNS.len());
    // The hostile text made it through both, neutralised only in the CSV.
    let reasons = csv
        .column("retry_reason")
        .expect("col")
        .str()
        .expect("str")
        .clone();
    assert!(reasons.iter().any(|v| v == Some("'=1+1")));
    assert!(reasons.iter().any(|v| v == Some("' \u{FF1D}SUM(A1)")));
}
