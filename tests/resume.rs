//! `ctxbench run --resume`: after `kill -9` at any point, or a torn final record, the run
//! completes with every trial present exactly once and the same results as an
//! uninterrupted run.

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

use std::time::{Duration, Instant};
use support::{ctxbench, text, without_timing};

/// Complete trial rows per trial id.
fn trial_counts(run: &Path) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    let text = std::fs::read_to_string(run.join("trials.jsonl")).unwrap_or_default();
    for line in text.lines() {
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(line) {
            *out.entry(v["trial_id"].as_str().unwrap().to_string())
                .or_default() += 1;
        }
    }
    out
}

/// `report/<name>` without its timing columns.
fn stable_csv(run: &Path, name: &str) -> String {
    without_timing(&std::fs::read_to_string(run.join("report").join(name)).unwrap())
}

const PLAN: &[&str] = &[
    "--trials",
    "2",
    "--seed",
    "11",
    "--concurrency",
    "1",
    "--progress",
    "none",
    "--scenario",
    "long-recall",
    "--scenario",
    "overflow-retry",
    "--scenario",
    "tool-pressure",
    "--scenario",
    "instruction-change",
    "--scenario",
    "hostile-history",
];

fn run_args(out: &str) -> Vec<&str> {
    let mut a = vec!["run", "--out", out];
    a.extend_from_slice(PLAN);
    a
}

#[test]
fn resume_after_kill_9_runs_every_trial_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let base = ctxbench(dir.path(), &run_args("base"));
    assert!(ran(&base), "{}", text(&base));
    let expected = trial_counts(&dir.path().join("base"));
    let total = expected.len();
    assert!(total >= 20, "{total}");

    // Kill at several points: after the manifest only, after the first trial, mid-run.
    for (n, kill_after) in [0usize, 1, total / 2].into_iter().enumerate() {
        let out = format!("killed{n}");
        let run = dir.path().join(&out);
        let mut child = Command::new(env!("CARGO_BIN_EXE_ctxbench"))
            .args(run_args(&out))
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let ready = if kill_after == 0 {
                run.join("manifest.json").exists()
            } else {
                trial_counts(&run).len() >= kill_after
            };
            if ready || Instant::now() > deadline {
                break;
            }
            if child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let before = trial_counts(&run).len();
        assert!(
            before < total,
            "kill point {kill_after}: the run finished before it was killed"
        );

        let resumed = ctxbench(dir.path(), &["run", "--resume", &out, "--progress", "none"]);
        assert!(ran(&resumed), "{}", text(&resumed));
        let counts = trial_counts(&run);
        assert_eq!(
            counts.keys().collect::<Vec<_>>(),
            expected.keys().collect::<Vec<_>>()
        );
        assert!(counts.values().all(|&c| c == 1), "{counts:?}");
        for csv in ["trials.csv", "requests.csv", "summary.csv"] {
            assert_eq!(
                stable_csv(&run, csv),
                stable_csv(&dir.path().join("base"), csv),
                "{csv} after kill at {kill_after}"
            );
        }
        let manifest: serde_json::Value =
            serde_json::from_slice(&std::fs::read(run.join("manifest.json")).unwrap()).unwrap();
        assert_eq!(manifest["resumes"].as_array().unwrap().len(), 1);
        assert_eq!(manifest["resumes"][0]["trials_done"], before);
    }
}

#[test]
fn torn_final_records_are_cut_and_their_trials_rerun() {
    let dir = tempfile::tempdir().unwrap();
    let base = ctxbench(dir.path(), &run_args("base"));
    assert!(ran(&base), "{}", text(&base));
    let run = dir.path().join("base");
    let expected_requests = stable_csv(&run, "requests.csv");
    let expected_trials = stable_csv(&run, "trials.csv");

    // Forge a writer killed mid-append: the last three trial rows never completed and the
    // third-to-last was cut half-way; requests of those trials stay behind as orphans,
    // with a torn request line at the very end.
    let trials = std::fs::read_to_string(run.join("trials.jsonl")).unwrap();
    let lines: Vec<&str> = trials.lines().collect();
    let keep = lines.len() - 3;
    let mut forged = lines[..keep].join("\n");
    forged.push('\n');
    forged.push_str(&lines[keep][..lines[keep].len() / 2]);
    std::fs::write(run.join("trials.jsonl"), forged).unwrap();
    let mut requests = std::fs::read_to_string(run.join("requests.jsonl")).unwrap();
    requests.push_str("{\"schema\":\"ctxbench.request/1\",\"trial_id\":\"tor");
    std::fs::write(run.join("requests.jsonl"), requests).unwrap();

    let resumed = ctxbench(
        dir.path(),
        &["run", "--resume", "base", "--progress", "none"],
    );
    assert!(ran(&resumed), "{}", text(&resumed));
    assert!(
        String::from_utf8_lossy(&resumed.stdout).contains("ran 3 trials"),
        "{}",
        text(&resumed)
    );
    let counts = trial_counts(&run);
    assert_eq!(counts.len(), lines.len());
    assert!(counts.values().all(|&c| c == 1));
    assert_eq!(stable_csv(&run, "trials.csv"), expected_trials);
    assert_eq!(stable_csv(&run, "requests.csv"), expected_requests);
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["sut"], "reference");
    let torn = manifest["resumes"][0]["torn"].to_string();
    assert!(
        torn.contains("trials.jsonl") && torn.contains("requests.jsonl"),
        "{torn}"
    );
}

#[test]
fn resume_refuses_plan_flags_and_missing_runs() {
    let dir = tempfile::tempdir().unwrap();
    let o = ctxbench(
        dir.path(),
        &["run", "--resume", "nowhere", "--progress", "none"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let o = ctxbench(dir.path(), &["run", "--resume", "x", "--trials", "3"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

#[test]
fn token_cap_stops_cleanly_and_resume_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = run_args("capped");
    args.extend_from_slice(&["--max-tokens", "1"]);
    let o = ctxbench(dir.path(), &args);
    // One trial (the cap check happens before each start) ran; the run says it stopped.
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("token_cap"),
        "{}",
        text(&o)
    );
    let run = dir.path().join("capped");
    assert_eq!(trial_counts(&run).len(), 1);
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["stopped"]["reason"], "token_cap");

    let o = ctxbench(
        dir.path(),
        &[
            "run",
            "--resume",
            "capped",
            "--progress",
            "none",
            "--max-tokens",
            "100000000000",
        ],
    );
    assert!(ran(&o), "{}", text(&o));
    let base = ctxbench(dir.path(), &run_args("base"));
    assert!(ran(&base));
    assert_eq!(
        trial_counts(&run).len(),
        trial_counts(&dir.path().join("base")).len()
    );
}

#[test]
fn shards_merged_equal_the_unsharded_run() {
    let dir = tempfile::tempdir().unwrap();
    let whole = ctxbench(dir.path(), &run_args("whole"));
    assert!(ran(&whole), "{}", text(&whole));
    for (k, out) in [("1/2", "s1"), ("2/2", "s2")] {
        let mut args = run_args(out);
        args.extend_from_slice(&["--shard", k]);
        let o = ctxbench(dir.path(), &args);
        // A shard alone may fail gates (too few pairs); it must run.
        assert!(ran(&o), "{}", text(&o));
    }
    let s1 = trial_counts(&dir.path().join("s1"));
    let s2 = trial_counts(&dir.path().join("s2"));
    assert!(!s1.is_empty() && !s2.is_empty());
    assert!(s1.keys().all(|k| !s2.contains_key(k)), "shards overlap");
    let merged = ctxbench(dir.path(), &["report", "s1", "s2", "--out", "merged"]);
    // The merge is the whole matrix: the same verdict as the unsharded run.
    assert_eq!(merged.status.code(), Some(0), "{}", text(&merged));
    let verdict = |o: &std::process::Output| {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .find(|l| l.starts_with("verdict: "))
            .map(str::to_string)
    };
    assert_eq!(verdict(&merged), verdict(&whole), "{}", text(&merged));
    for csv in ["trials.csv", "requests.csv", "summary.csv"] {
        assert_eq!(
            without_timing(&std::fs::read_to_string(dir.path().join("merged").join(csv)).unwrap()),
            stable_csv(&dir.path().join("whole"), csv),
            "{csv}: merged shards differ from the unsharded run"
        );
    }
    let bad = ctxbench(dir.path(), &["run", "--shard", "3/2", "--out", "x"]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
}

/// The run itself finished (a verdict of pass, fail or "cannot decide": a subset of the suite
/// is too small for some gates), as opposed to bad input (2) or a failed run (4).
fn ran(o: &std::process::Output) -> bool {
    matches!(o.status.code(), Some(0 | 1 | 3))
}
