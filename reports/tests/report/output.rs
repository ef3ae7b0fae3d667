//! The written report: numbers, determinism, CSV injection, HTML escaping, docs.

use std::path::{Path, PathBuf};

use ctxbench_harness::storage::schema::{Evidence, OutcomeStatus, VerdictStatus};
use ctxbench_harness::Mode;
use ctxbench_reports::frames::{trial_columns, REQUEST_COLUMNS, TIMING_COLUMNS};
use ctxbench_reports::summary::SUMMARY_COLUMNS;
use ctxbench_reports::{load_gates, load_run, write_report, ReportData};

use crate::fixture::Fx;

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() < 5e-4)
}

fn report(fx: &Fx, root: &Path, name: &str) -> PathBuf {
    let run_dir = root.join(format!("run-{name}"));
    fx.write(&run_dir);
    let out = root.join(format!("report-{name}"));
    write_report(&[run_dir], &out, &load_gates(None).expect("gates")).expect("report");
    out
}

#[test]
fn summary_matches_hand_computed_values() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut fx = Fx::good("r1");
    // warn/1 fails with one of two probes wrong; off/1 errored (counted apart).
    let w = fx.trial_mut("s1/warn/1");
    w.passed = false;
    w.outcome.status = OutcomeStatus::Failed;
    w.recall[1].correct = false;
    fx.trial_mut("s1/off/1").outcome.status = OutcomeStatus::Errored;
    fx.trial_mut("s1/off/1").passed = false;
    fx.write(tmp.path());
    let run = load_run(tmp.path()).expect("load");
    let data = ReportData::build(&run, &load_gates(None).expect("gates")).expect("build");

    let row = |scope: &str, mode: Mode| {
        data.summary
            .iter()
            .find(|r| r.scope == scope && r.mode == mode)
            .unwrap_or_else(|| panic!("{scope}/{mode}"))
    };
    let c = row("suite", Mode::Compact);
    assert_eq!((c.trials, c.passed, c.errored), (2, 2, 0));
    let pr = c.pass_rate.expect("pass rate");
    assert_eq!(pr.value, 1.0);
    assert!(close(Some(pr.lo), 0.3424), "{pr:?}"); // Wilson 2/2
    let rc = c.recall.expect("recall");
    assert!(close(Some(rc.lo), 0.5101) && rc.value == 1.0, "{rc:?}"); // Wilson 4/4
                                                                      // Provider inputs {100, 100, 100, 200}: median 100, p95 (linear) 185.
    assert!(close(c.median_input_tokens, 100.0));
    assert!(close(c.p95_input_tokens, 185.0));
    // |est − provider| {0, 10, 10, 0}; rel {0, −.1, +.1, 0}.
    assert!(close(c.est_error_mean_abs, 5.0));
    assert!(close(c.est_rel_error_p50, 0.05));
    assert!(close(c.est_rel_error_p95, 0.1));
    assert!(close(c.est_bias, 0.0));

    let w = row("suite", Mode::Warn);
    assert_eq!((w.trials, w.passed), (2, 1));
    let wr = w.pass_rate.expect("pass rate");
    assert!(close(Some(wr.value), 0.5) && close(Some(wr.lo), 0.0945) && close(Some(wr.hi), 0.9055));
    assert_eq!(w.recall.map(|p| (p.successes, p.total)), Some((3, 4)));

    // Errored trials are out of the pass-rate and recall denominators but still counted.
    let o = row("suite", Mode::Off);
    assert_eq!((o.trials, o.passed, o.errored), (2, 1, 1));
    assert_eq!(o.pass_rate.map(|p| (p.successes, p.total)), Some((1, 1)));
    assert_eq!(o.recall.map(|p| (p.successes, p.total)), Some((2, 2)));

    // Per-scenario rows exist too, after the suite rows, in mode order.
    let scopes: Vec<(&str, Mode)> = data
        .summary
        .iter()
        .map(|r| (r.scope.as_str(), r.mode))
        .collect();
    assert_eq!(
        scopes,
        [
            ("suite", Mode::Off),
            ("suite", Mode::Warn),
            ("suite", Mode::Compact),
            ("s1", Mode::Off),
            ("s1", Mode::Warn),
            ("s1", Mode::Compact)
        ]
    );

    // The per-trial median of answered requests: compact/1 has {100, 200} → 150.
    let med = data
        .trials
        .column("median_input_tokens")
        .expect("column")
        .as_materialized_series()
        .f64()
        .expect("f64")
        .get(5);
    assert_eq!(med, Some(150.0));
}

#[test]
fn writes_all_files_with_documented_headers() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut fx = Fx::good("r1");
    fx.warn_fails();
    let run_dir = tmp.path().join("run");
    fx.write(&run_dir);
    let out = tmp.path().join("report");
    let summary =
        write_report(&[run_dir], &out, &load_gates(None).expect("gates")).expect("report");
    let names: Vec<String> = summary
        .files
        .iter()
        .map(|p| p.file_name().expect("name").to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "trials.csv",
            "requests.csv",
            "requests.parquet",
            "summary.csv",
            "gates.json",
            "index.html",
            "junit.xml",
            "summary.md"
        ]
    );
    // No temporary files left behind.
    let leftovers: Vec<_> = std::fs::read_dir(&out)
        .expect("read dir")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    let header = |f: &str| {
        std::fs::read_to_string(out.join(f))
            .expect("csv")
            .lines()
            .next()
            .expect("header")
            .to_string()
    };
    assert_eq!(header("requests.csv"), REQUEST_COLUMNS.join(","));
    assert_eq!(header("summary.csv"), SUMMARY_COLUMNS.join(","));
    let graders: Vec<String> = ["budget-respected", "recall", "transcript-immutable"]
        .map(String::from)
        .to_vec();
    assert_eq!(header("trials.csv"), trial_columns(&graders).join(","));

    // requests.csv values: compact/0 step 1 is est 90 vs provider 100.
    let requests = std::fs::read_to_string(out.join("requests.csv")).expect("csv");
    let line = requests
        .lines()
        .find(|l| l.contains(",s1/compact/0,") && l.contains(",2,1,0,1,"))
        .expect("compact/0 seq 2");
    let cells: Vec<&str> = line.split(',').collect();
    let at = |name: &str| {
        cells[REQUEST_COLUMNS
            .iter()
            .position(|c| *c == name)
            .expect("col")]
    };
    assert_eq!(at("abs_error"), "10");
    assert_eq!(at("rel_error"), "-0.100000");
    assert_eq!(at("error_kind"), "");

    // summary.csv: the bootstrap interval of the suite reduction (the gate's, see
    // gates.rs), empty on scenario rows and on `off` itself.
    let summary_csv = std::fs::read_to_string(out.join("summary.csv")).expect("csv");
    let col = |name: &str| {
        SUMMARY_COLUMNS
            .iter()
            .position(|c| *c == name)
            .expect("col")
    };
    let interval = |scope: &str, mode: &str| {
        let line = summary_csv
            .lines()
            .find(|l| l.starts_with(&format!("{scope},{mode},")))
            .expect("row");
        let cells: Vec<&str> = line.split(',').collect();
        (
            cells[col("token_reduction_vs_off_lo")].to_string(),
            cells[col("token_reduction_vs_off_hi")].to_string(),
        )
    };
    // One session (the two trials are copies of it) is a single cluster: no interval.
    assert_eq!(interval("suite", "compact"), (String::new(), String::new()));
    assert_eq!(interval("suite", "warn"), (String::new(), String::new()));
    assert_eq!(interval("suite", "off"), (String::new(), String::new()));
    assert_eq!(interval("s1", "compact"), (String::new(), String::new()));

    let gates: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("gates.json")).expect("json"))
            .expect("gates.json parses");
    // One session decides no statistical gate, and the gates were not registered.
    assert_eq!(gates["verdict"], "incomplete");
    assert_eq!(gates["exit_code"], 3);
    assert_eq!(gates["exploratory"], false);
    assert_eq!(gates["gates"].as_array().map(Vec::len), Some(11));
    assert_eq!(summary.modes.len(), 3);
    assert_eq!(summary.mode_lines().len(), 3);
}

/// Drops the timing columns (by header name) from a CSV text.
fn without_timing(csv: &str) -> Vec<Vec<String>> {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().expect("header").split(',').collect();
    let keep: Vec<usize> = (0..header.len())
        .filter(|&i| !TIMING_COLUMNS.contains(&header[i]))
        .collect();
    std::iter::once(header.join(","))
        .chain(lines.map(str::to_string))
        .map(|l| {
            let cells: Vec<&str> = l.split(',').collect();
            keep.iter().map(|&i| cells[i].to_string()).collect()
        })
        .collect()
}

#[test]
fn reports_are_deterministic() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let fx = Fx::good("r1");
    let a = report(&fx, tmp.path(), "a");
    let run_dir = tmp.path().join("run-a");
    let again = tmp.path().join("again");
    write_report(&[run_dir], &again, &load_gates(None).expect("gates")).expect("report");
    for f in [
        "trials.csv",
        "requests.csv",
        "requests.parquet",
        "summary.csv",
        "gates.json",
        "index.html",
        "junit.xml",
        "summary.md",
    ] {
        let x = std::fs::read(a.join(f)).expect("a");
        let y = std::fs::read(again.join(f)).expect("again");
        assert!(x == y, "{f} differs between two writes of the same run");
    }

    // Another run with the same seed: only run id and timing differ.
    let mut other = Fx::good("r2");
    for t in &mut other.trials {
        t.started_at = "2025-06-01T12:00:00Z".into();
        t.elapsed_ms = 4321;
    }
    for r in &mut other.requests {
        r.latency_ms = 77;
    }
    let b = report(&other, tmp.path(), "b");
    for f in ["trials.csv", "requests.csv", "summary.csv"] {
        let x = std::fs::read_to_string(a.join(f)).expect("a");
        let y = std::fs::read_to_string(b.join(f)).expect("b");
        if f != "summary.csv" {
            assert_ne!(x, y, "{f}: the timing columns should differ");
        }
        assert_eq!(without_timing(&x), without_timing(&y), "{f}");
    }
    // The bootstrap is seeded: the CI summary of another run with the same seed is equal.
    let md = |d: &Path| std::fs::read(d.join("summary.md")).expect("summary.md");
    assert!(
        md(&a) == md(&b),
        "summary.md differs between runs with the same seed"
    );
}

#[test]
fn spreadsheet_formulas_are_neutralised() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut fx = Fx::good("r1");
    let t = fx.trial_mut("s1/compact/0");
    t.outcome.reason = "=1+2".into();
    t.model = "@SUM(A1)".into();
    t.tags = vec!["+x".into(), "-y".into()];
    t.expected_outcome = "\tsuccess".into();
    let r = fx
        .requests
        .iter_mut()
        .find(|r| r.trial_id == "s1/compact/0")
        .expect("request");
    r.retry_reason = Some("-1".into());
    let out = report(&fx, tmp.path(), "x");
    let trials = std::fs::read_to_string(out.join("trials.csv")).expect("csv");
    let line = trials
        .lines()
        .find(|l| l.contains("s1/compact/0"))
        .expect("row");
    assert!(line.contains(",'+x;-y,"), "{line}");
    assert!(line.contains(",'@SUM(A1),"), "{line}");
    assert!(line.contains(",'=1+2,"), "{line}");
    assert!(line.contains("'\tsuccess"), "{line}");
    assert!(
        !line.contains(",=") && !line.contains(",@") && !line.contains(",+"),
        "{line}"
    );
    let requests = std::fs::read_to_string(out.join("requests.csv")).expect("csv");
    assert!(requests.contains(",'-1,"), "retry_reason neutralised");
    // Numbers are not strings: a negative rel_error stays a number.
    assert!(requests.contains(",-0.100000,"), "{requests}");
}

#[test]
fn html_escapes_every_untrusted_string() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let script = "<script>alert(1)</script>";
    let img = "\"><img src=x onerror=alert(1)>";
    let mut fx = Fx::good(&format!("run{script}"));
    fx.manifest.scenarios[0].title = script.into();
    fx.manifest.suite_source = img.into();
    fx.manifest.scenarios[0].tags.push(img.into());
    fx.register(&format!("# {script}\nversion: 1\n"));
    for t in &mut fx.trials {
        t.verdicts[0].summary = img.into();
        t.verdicts[0].status = VerdictStatus::Fail;
        t.verdicts[0].evidence = vec![
            Evidence {
                note: img.into(),
                seen: Some(script.into()),
                excerpt: Some(format!("{img}{script}")),
                ..Evidence::default()
            };
            7
        ];
        t.outcome.detail = script.into();
        t.outcome.reason = img.into();
        t.verdicts[2].grader = format!("recall{script}");
    }
    let out = report(&fx, tmp.path(), "h");
    let html = std::fs::read_to_string(out.join("index.html")).expect("html");
    let lower = html.to_ascii_lowercase();
    assert!(!lower.contains("<script"), "raw <script in report");
    assert!(!lower.contains("<img"), "raw <img in report");
    // The handler survives only as inert text inside an escaped tag.
    assert!(html.contains("&quot;&gt;&lt;img src=x onerror=alert(1)&gt;"));
    assert!(html.contains("&lt;script&gt;alert(1)&lt;&#x2F;script&gt;"));
    assert!(html.contains(
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'\">"
    ));
    // Bounded evidence: 5 shown, the rest counted.
    assert!(html.contains("… 2 more"), "evidence not bounded");
    // The banner carries verdict and the pre-registration note (unregistered gates give no
    // verdict).
    assert!(html.contains("<h1>INCOMPLETE</h1>"));
    assert!(html.contains("NOTE: evaluated gates differ"));
}

#[test]
fn docs_describe_every_column() {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/report-columns.md"
    ))
    .expect("docs/report-columns.md");
    let graders: Vec<String> = vec![];
    for c in REQUEST_COLUMNS
        .iter()
        .map(|c| c.to_string())
        .chain(trial_columns(&graders))
        .chain(SUMMARY_COLUMNS.iter().map(|c| c.to_string()))
        .chain(
            ctxbench_reports::systems::SYSTEMS_COLUMNS
                .iter()
                .map(|c| c.to_string()),
        )
        .chain(std::iter::once("grader_<name>".to_string()))
    {
        assert!(doc.contains(&format!("`{c}`")), "{c} undocumented");
    }
}
