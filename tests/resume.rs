//! `ctxbench run --resume`: after `kill -9` at any point, or a torn final record, the run
//! completes with every trial present exactly once and the same results as an
//! uninterrupted run.

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

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

/// The uninterrupted run of [`PLAN`], run once per test binary and shared: every test that
/// needs it reads it or copies it (see [`base_copy`]), none changes it.
struct Base {
    _dir: tempfile::TempDir,
    run: std::path::PathBuf,
    /// The run's verdict line.
    verdict: Option<String>,
}

fn shared_base() -> &'static Base {
    static BASE: OnceLock<Base> = OnceLock::new();
    BASE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let o = ctxbench(dir.path(), &run_args("base"));
        assert!(ran(&o), "{}", text(&o));
        Base {
            run: dir.path().join("base"),
            _dir: dir,
            verdict: verdict(&o),
        }
    })
}

fn base() -> &'static Path {
    &shared_base().run
}

fn verdict(o: &std::process::Output) -> Option<String> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .find(|l| l.starts_with("verdict: "))
        .map(str::to_string)
}

/// A private copy of the shared uninterrupted run at `dir/base`, to tamper with and resume.
fn base_copy(dir: &Path) -> std::path::PathBuf {
    let to = dir.join("base");
    copy_dir(base(), &to);
    to
}

/// `ctxbench run --resume base` in `dir`, on a copy from [`base_copy`]. The copies share
/// the shared run's id, and a resume sweeps the scratch workspaces that id left behind
/// (in the work directory and the temp directory): each resume gets its own, so that
/// concurrent tests never sweep each other's trials.
fn resume_copy(dir: &Path) -> std::process::Output {
    let scratch = dir.join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    Command::new(env!("CARGO_BIN_EXE_ctxbench"))
        .args(["run", "--resume", "base", "--progress", "none"])
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env("CTXBENCH_WORKDIR", &scratch)
        .env("TMPDIR", &scratch)
        .output()
        .unwrap()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

#[test]
fn resume_after_kill_9_runs_every_trial_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    // The workspace root, watched for what killed runs leave behind.
    let work = dir.path().join("workspaces");
    std::fs::create_dir_all(&work).unwrap();
    let expected = trial_counts(base());
    let total = expected.len();
    assert!(total >= 20, "{total}");

    // Kill at several points: after the manifest only, after the first trial, mid-run.
    for (n, kill_after) in [0usize, 1, total / 2].into_iter().enumerate() {
        let out = format!("killed{n}");
        let run = dir.path().join(&out);
        let mut child = Command::new(env!("CARGO_BIN_EXE_ctxbench"))
            .args(run_args(&out))
            .current_dir(dir.path())
            .env("CTXBENCH_WORKDIR", &work)
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

        let left_behind = std::fs::read_dir(&work).unwrap().count();
        // A report writer killed mid-write leaves its temporary file behind.
        std::fs::create_dir_all(run.join("report")).unwrap();
        std::fs::write(run.join("report/.trials.csv.tmp-4194305"), "half").unwrap();

        let resumed = Command::new(env!("CARGO_BIN_EXE_ctxbench"))
            .args(["run", "--resume", &out, "--progress", "none"])
            .current_dir(dir.path())
            .env("CTXBENCH_WORKDIR", &work)
            .output()
            .unwrap();
        assert!(ran(&resumed), "{}", text(&resumed));
        // No residue: no workspace in the root, no temporary file in the report folder.
        assert_eq!(std::fs::read_dir(&work).unwrap().count(), 0);
        let report: Vec<String> = std::fs::read_dir(run.join("report"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            report.iter().all(|n| !n.starts_with('.')),
            "temporary files left: {report:?}"
        );
        let counts = trial_counts(&run);
        assert_eq!(
            counts.keys().collect::<Vec<_>>(),
            expected.keys().collect::<Vec<_>>()
        );
        assert!(counts.values().all(|&c| c == 1), "{counts:?}");
        for csv in ["trials.csv", "requests.csv", "summary.csv"] {
            assert_eq!(
                stable_csv(&run, csv),
                stable_csv(base(), csv),
                "{csv} after kill at {kill_after}"
            );
        }
        let manifest: serde_json::Value =
            serde_json::from_slice(&std::fs::read(run.join("manifest.json")).unwrap()).unwrap();
        assert_eq!(manifest["resumes"].as_array().unwrap().len(), 1);
        assert_eq!(manifest["resumes"][0]["trials_done"], before);
        assert_eq!(
            manifest["resumes"][0]["workspaces_removed"]
                .as_u64()
                .unwrap_or(0),
            left_behind as u64
        );
    }
}

/// A run whose storage is tampered with by `tamper`, then resumed: the resumed run's
/// report equals the untouched run's, and the resume's manifest record is returned with
/// the resume's output.
fn resume_tampered(
    tamper: impl FnOnce(&Path),
) -> (std::process::Output, serde_json::Value, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let run = base_copy(dir.path());
    let expected_requests = stable_csv(&run, "requests.csv");
    let expected_trials = stable_csv(&run, "trials.csv");
    tamper(&run);
    let resumed = resume_copy(dir.path());
    assert!(ran(&resumed), "{}", text(&resumed));
    assert!(trial_counts(&run).values().all(|&c| c == 1));
    assert_eq!(stable_csv(&run, "trials.csv"), expected_trials);
    assert_eq!(stable_csv(&run, "requests.csv"), expected_requests);
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("manifest.json")).unwrap()).unwrap();
    let trials = std::fs::read_to_string(run.join("trials.jsonl")).unwrap();
    let last_id = serde_json::from_str::<serde_json::Value>(trials.lines().last().unwrap())
        .unwrap()["trial_id"]
        .as_str()
        .unwrap()
        .to_string();
    (resumed, manifest["resumes"][0].clone(), trials, last_id)
}

/// A power cut after the last trial row reached the disk but before the end of its
/// request rows did (appends were never synced before): the finished trial's request row
/// is not dropped — the trial runs again, and the report equals the uninterrupted run.
#[test]
fn a_torn_request_row_of_a_complete_trial_reruns_that_trial() {
    let mut victim = String::new();
    let (resumed, record, trials, last) = resume_tampered(|run| {
        let path = run.join("requests.jsonl");
        let text = std::fs::read_to_string(&path).unwrap();
        let last = text.trim_end().rsplit('\n').next().unwrap();
        victim = serde_json::from_str::<serde_json::Value>(last).unwrap()["trial_id"]
            .as_str()
            .unwrap()
            .to_string();
        // Keep half of the last request row.
        let cut = text.len() - 1 - last.len() / 2;
        std::fs::write(&path, &text[..cut]).unwrap();
    });
    assert!(
        String::from_utf8_lossy(&resumed.stdout).contains("ran 1 trials"),
        "{}",
        text(&resumed)
    );
    assert_eq!(record["rerun"], serde_json::json!([victim]), "{record}");
    assert!(
        record["torn"].to_string().contains("requests.jsonl"),
        "{record}"
    );
    // The re-run trial's row is the last one, from the resume's segment.
    assert_eq!(last, victim);
    let row: serde_json::Value = serde_json::from_str(trials.lines().last().unwrap()).unwrap();
    assert_eq!(row["segment"], 1);
}

/// A power cut between a whole row and its newline: the row is completed, not cut, and
/// nothing runs again.
#[test]
fn a_whole_final_row_without_its_newline_is_kept() {
    let (resumed, record, _, _) = resume_tampered(|run| {
        for name in ["requests.jsonl", "trials.jsonl"] {
            let path = run.join(name);
            let text = std::fs::read_to_string(&path).unwrap();
            std::fs::write(&path, text.trim_end_matches('\n')).unwrap();
        }
    });
    assert!(
        String::from_utf8_lossy(&resumed.stdout).contains("ran 0 trials"),
        "{}",
        text(&resumed)
    );
    let repaired = record["repaired"].to_string();
    assert!(
        repaired.contains("requests.jsonl") && repaired.contains("trials.jsonl"),
        "{record}"
    );
    assert!(record.get("torn").is_none(), "{record}");
}

/// Two complete rows of one trial are found before anything runs: the resume is refused
/// with both line numbers and changes nothing.
#[test]
fn a_duplicated_trial_row_is_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = run_args("dup");
    args.extend_from_slice(&["--max-tokens", "1"]);
    let capped = ctxbench(dir.path(), &args);
    assert_eq!(capped.status.code(), Some(4), "{}", text(&capped));
    let run = dir.path().join("dup");
    let trials = std::fs::read_to_string(run.join("trials.jsonl")).unwrap();
    std::fs::write(run.join("trials.jsonl"), format!("{trials}{trials}")).unwrap();
    // A torn request tail that a resume would cut.
    let mut requests = std::fs::read(run.join("requests.jsonl")).unwrap();
    requests.extend_from_slice(b"{\"schema\":\"ctxb");
    std::fs::write(run.join("requests.jsonl"), &requests).unwrap();
    let manifest = std::fs::read(run.join("manifest.json")).unwrap();

    let o = ctxbench(
        dir.path(),
        &["run", "--resume", "dup", "--progress", "none"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("trials.jsonl")
            && err.contains("line 2")
            && err.contains("complete row at line 1"),
        "{err}"
    );
    // Nothing ran and nothing was changed.
    assert_eq!(std::fs::read(run.join("manifest.json")).unwrap(), manifest);
    assert_eq!(std::fs::read(run.join("requests.jsonl")).unwrap(), requests);
    assert_eq!(trial_counts(&run).values().sum::<usize>(), 2);
}

#[test]
fn torn_final_records_are_cut_and_their_trials_rerun() {
    let dir = tempfile::tempdir().unwrap();
    let run = base_copy(dir.path());
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

    let resumed = resume_copy(dir.path());
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
    assert_eq!(trial_counts(&run).len(), trial_counts(base()).len());
}

#[test]
fn shards_merged_equal_the_unsharded_run() {
    let dir = tempfile::tempdir().unwrap();
    let whole = base();
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
    assert!(ran(&merged), "{}", text(&merged));
    assert!(shared_base().verdict.is_some());
    assert_eq!(verdict(&merged), shared_base().verdict, "{}", text(&merged));
    for csv in ["trials.csv", "requests.csv", "summary.csv"] {
        assert_eq!(
            without_timing(&std::fs::read_to_string(dir.path().join("merged").join(csv)).unwrap()),
            stable_csv(whole, csv),
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
