//! Reading run storage: torn lines, corruption, schema tags, shards.

use ctxbench_harness::Mode;
use ctxbench_reports::{load_run, load_runs, ReportError};

use crate::fixture::{append, request, trial, Fx};

#[test]
fn reads_a_run_without_events_jsonl() {
    let tmp = tempfile::tempdir().expect("tempdir");
    Fx::good("r1").write(tmp.path());
    let run = load_run(tmp.path()).expect("load");
    assert_eq!(run.trials.len(), 6);
    assert_eq!(run.request_count(), 12);
    assert_eq!(run.torn_lines, 0);
    assert!(!run.runs[0].has_events);
    // Deterministic order: scenario, then mode (off, warn, compact), then trial.
    let ids: Vec<&str> = run.trials.iter().map(|t| t.trial_id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "s1/off/0",
            "s1/off/1",
            "s1/warn/0",
            "s1/warn/1",
            "s1/compact/0",
            "s1/compact/1"
        ]
    );
    let ids = run.requests.column("trial_id").expect("trial_id");
    assert_eq!(ids.str().expect("str").get(0), Some("s1/off/0"));
    let seq = run.requests.column("seq").expect("seq").u64().expect("u64");
    assert_eq!((seq.get(0), seq.get(1)), (Some(1), Some(2)));
}

#[test]
fn torn_last_line_without_newline_is_skipped_and_counted() {
    let tmp = tempfile::tempdir().expect("tempdir");
    Fx::good("r1").write(tmp.path());
    append(
        &tmp.path().join("trials.jsonl"),
        br#"{"schema":"ctxbench.trial/1","trial_id":"s1/compact/"#,
    );
    // A complete row whose newline never made it is torn too.
    let extra = request(&trial("s1", Mode::Compact, 0), 3, 2, 10, Some(10));
    append(
        &tmp.path().join("requests.jsonl"),
        serde_json::to_string(&extra).expect("json").as_bytes(),
    );
    let run = load_run(tmp.path()).expect("load");
    assert_eq!(run.trials.len(), 6);
    assert_eq!(run.request_count(), 12);
    assert_eq!(run.torn_lines, 2);
}

#[test]
fn unparsable_final_line_with_newline_is_torn() {
    let tmp = tempfile::tempdir().expect("tempdir");
    Fx::good("r1").write(tmp.path());
    append(&tmp.path().join("requests.jsonl"), b"{\"schema\": \"ctxb\n");
    let run = load_run(tmp.path()).expect("load");
    assert_eq!(run.torn_lines, 1);
}

#[test]
fn bad_line_in_the_middle_names_file_and_line() {
    let tmp = tempfile::tempdir().expect("tempdir");
    Fx::good("r1").write(tmp.path());
    let path = tmp.path().join("trials.jsonl");
    let text = std::fs::read_to_string(&path).expect("read");
    let mut lines: Vec<&str> = text.lines().collect();
    lines.insert(1, "{not json");
    std::fs::write(&path, lines.join("\n") + "\n").expect("write");
    let err = load_run(tmp.path()).expect_err("corrupt line");
    assert!(
        matches!(err, ReportError::BadLine { line: 2, .. }),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(msg.contains("trials.jsonl:2:"), "{msg}");
}

#[test]
fn complete_json_of_the_wrong_shape_at_the_end_is_an_error_not_torn() {
    let tmp = tempfile::tempdir().expect("tempdir");
    Fx::good("r1").write(tmp.path());
    append(
        &tmp.path().join("trials.jsonl"),
        b"{\"schema\":\"ctxbench.trial/1\",\"trial_id\":3}\n",
    );
    let err = load_run(tmp.path()).expect_err("wrong shape");
    assert!(
        matches!(err, ReportError::BadLine { line: 7, .. }),
        "{err:?}"
    );
}

#[test]
fn unknown_schema_tag_is_an_error() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut fx = Fx::good("r1");
    fx.requests[3].schema = "ctxbench.request/2".into();
    fx.write(tmp.path());
    let err = load_run(tmp.path()).expect_err("unknown schema");
    match &err {
        ReportError::UnknownSchema { line, found, .. } => {
            assert_eq!(*line, 4);
            assert_eq!(found, "ctxbench.request/2");
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("requests.jsonl:4"), "{err}");

    // Also for a manifest from the future.
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut fx = Fx::good("r1");
    fx.manifest.schema = "ctxbench.manifest/9".into();
    fx.write(tmp.path());
    let err = load_run(tmp.path()).expect_err("unknown manifest schema");
    assert!(matches!(err, ReportError::UnknownSchema { .. }), "{err:?}");
}

#[test]
fn missing_run_files_are_errors_with_the_path() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let err = load_run(tmp.path()).expect_err("empty dir");
    assert!(err.to_string().contains("manifest.json"), "{err}");
    Fx::good("r1").write(tmp.path());
    std::fs::remove_file(tmp.path().join("requests.jsonl")).expect("rm");
    let err = load_run(tmp.path()).expect_err("no requests");
    assert!(err.to_string().contains("requests.jsonl"), "{err}");
}

#[test]
fn orphan_and_duplicate_requests_are_dropped_and_counted() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut fx = Fx::good("r1");
    // Requests of a trial that never finished (no trial row).
    let ghost = trial("s1", Mode::Compact, 9);
    fx.requests.push(request(&ghost, 1, 0, 5, Some(5)));
    // A resumed trial re-appended its requests: the later copy wins.
    let mut again = fx.requests[0].clone();
    again.latency_ms = 99;
    fx.requests.push(again);
    fx.write(tmp.path());
    let run = load_run(tmp.path()).expect("load");
    assert_eq!(run.orphan_requests, 1);
    assert_eq!(run.duplicate_requests, 1);
    assert_eq!(run.request_count(), 12);
    let latency = run.requests.column("latency_ms").expect("latency");
    assert_eq!(latency.u64().expect("u64").get(0), Some(99));
}

#[test]
fn rows_of_a_killed_attempt_are_orphans_of_the_resumed_trial() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut fx = Fx::good("r1");
    // Trial 0 was killed in segment 0 after sending an extra request the resumed attempt
    // (segment 1) never sent; only the segment-1 rows belong to it.
    let id = fx.trials[0].trial_id.clone();
    let before = fx.requests.iter().filter(|r| r.trial_id == id).count();
    fx.trial_mut(&id).segment = 1;
    for r in fx.requests.iter_mut().filter(|r| r.trial_id == id) {
        r.segment = 1;
    }
    let mut stale = fx
        .requests
        .iter()
        .find(|r| r.trial_id == id)
        .cloned()
        .expect("row");
    stale.segment = 0;
    stale.seq = 999;
    fx.requests.insert(0, stale);
    fx.write(tmp.path());
    let run = load_run(tmp.path()).expect("load");
    assert_eq!(run.orphan_requests, 1);
    assert_eq!(run.request_count(), 12);
    assert!(before > 0);
}

#[test]
fn duplicate_trial_inside_one_run_is_an_error() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut fx = Fx::good("r1");
    let dup = fx.trials[0].clone();
    fx.trials.push(dup);
    fx.write(tmp.path());
    let err = load_run(tmp.path()).expect_err("duplicate");
    assert!(
        matches!(
            err,
            ReportError::DuplicateTrialInRun {
                first_line: 1,
                second_line: 7,
                ..
            }
        ),
        "{err:?}"
    );
}

/// Splits the good fixture into two shards: `off` in one, `warn` + `compact` in the other.
fn shards(a: &std::path::Path, b: &std::path::Path) -> (Fx, Fx) {
    let full = Fx::good("r1");
    let split = |keep: &dyn Fn(Mode) -> bool, run_id: &str| Fx {
        manifest: {
            let mut m = full.manifest.clone();
            m.run_id = run_id.into();
            m.matrix_size = if keep(Mode::Off) { 2 } else { 4 };
            m
        },
        trials: full
            .trials
            .iter()
            .filter(|t| keep(t.mode))
            .cloned()
            .collect(),
        requests: full
            .requests
            .iter()
            .filter(|r| keep(r.mode))
            .cloned()
            .collect(),
        events: vec![],
    };
    let one = split(&|m| m == Mode::Off, "shard-1");
    let two = split(&|m| m != Mode::Off, "shard-2");
    one.write(a);
    two.write(b);
    (one, two)
}

#[test]
fn shards_merge_and_keep_their_run_ids() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    shards(&a, &b);
    let run = load_runs(&[a, b]).expect("merge");
    assert_eq!(run.trials.len(), 6);
    assert_eq!(run.request_count(), 12);
    assert_eq!(run.run_id_of("s1/off/0"), "shard-1");
    assert_eq!(run.run_id_of("s1/compact/1"), "shard-2");
    assert_eq!(run.matrix_size(), 6);
}

#[test]
fn same_trial_in_two_shards_names_both_dirs() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    shards(&a, &b);
    // Shard b also ran off/0.
    let mut extra = Fx::good("shard-2");
    extra.trials.retain(|t| t.mode != Mode::Warn);
    extra.requests.retain(|r| r.mode != Mode::Warn);
    extra.write(&b);
    let err = load_runs(&[a.clone(), b.clone()]).expect_err("duplicate");
    let msg = err.to_string();
    assert!(matches!(err, ReportError::DuplicateTrial { .. }), "{err:?}");
    assert!(msg.contains("s1/off/0"), "{msg}");
    assert!(
        msg.contains(&a.display().to_string()) && msg.contains(&b.display().to_string()),
        "{msg}"
    );
}

#[test]
fn shards_of_different_experiments_are_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let (_, mut two) = shards(&a, &b);
    two.manifest.seed = 8;
    two.write(&b);
    let err = load_runs(&[a, b]).expect_err("mismatch");
    assert!(
        matches!(err, ReportError::MismatchedShards { ref what, .. } if what == "seed"),
        "{err:?}"
    );
    assert!(matches!(load_runs(&[]), Err(ReportError::NoRuns)));
}
