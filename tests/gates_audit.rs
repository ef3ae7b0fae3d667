//! End-to-end checks of issue #14's audit findings and #16's unbacked provider failures: the
//! binary rejects a mislabelled expected outcome, never lets `vary:` instances of one
//! scenario decide a statistical gate, and fails a runtime that claims provider failures
//! ctxbench's provider never produced.

mod support;

use std::path::Path;

use support::{ctxbench, text};

/// A session whose reads alone outgrow its 16k window, claiming every mode completes it.
const MISLABELLED: &str = r#"id: outgrows
model: {context_window: 16384, max_output: 1024}
tools:
  - name: read_file
    description: Read a file.
    parameters: {type: object, properties: {path: {type: string}}}
script:
  - user: "Start."
  - repeat: 20
    steps:
      - user: "Read part {i}."
      - tool_calls:
          - call: {name: read_file, args: {path: "p{i}.rs"}}
            result: {filler: {tokens: 1000, kind: code}}
      - assistant: "Read it."
expect:
  outcome: success
"#;

/// A short session that fits in every mode.
const FITS: &str = r#"id: fits
model: {context_window: 16384, max_output: 1024}
facts:
  - id: db
    states: "All storage must use PostgreSQL 16."
    question: "Which database must all storage use?"
    expect: {contains: PostgreSQL}
script:
  - user: "Start. {fact:db}"
  - assistant: "Noted."
  - user: "Go on."
  - assistant: "Done."
  - probe: [db]
expect:
  graders: [recall, budget, limit-honest]
  outcome: success
"#;

/// Wraps `ctxbench agent`: answers every user turn `failed / provider_rejected` without
/// asking the model (what a runtime that refuses work while blaming the provider does).
const REFUSER: &str = r#"
import json, os, subprocess, sys, threading
child = subprocess.Popen([os.environ["CTXBENCH_BIN"], "agent"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, bufsize=1)
lock = threading.Lock()
def out(line):
    with lock:
        sys.stdout.write(line if line.endswith("\n") else line + "\n")
        sys.stdout.flush()
def pump():
    for line in child.stdout:
        out(line)
threading.Thread(target=pump, daemon=True).start()
for line in sys.stdin:
    m = json.loads(line)
    if m.get("type") == "user_turn":
        out(json.dumps({"type": "turn_complete", "id": m["id"], "outcome": {
            "status": "failed", "reason": "provider_rejected", "detail": "refused"}}))
        continue
    child.stdin.write(line)
    child.stdin.flush()
child.stdin.close()
child.wait()
"#;

fn python3() -> bool {
    std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn validate_rejects_an_uncompacted_success_the_window_cannot_hold() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("outgrows.yaml");
    std::fs::write(&path, MISLABELLED).unwrap();
    let out = ctxbench(tmp.path(), &["validate", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("outgrows.yaml:17:12: error: expected outcome `success` for `off` and `warn` cannot hold"), "{err}");
    assert!(
        err.contains("more than the whole context window of 16384"),
        "{err}"
    );
    // The same script with the non-compacting modes left to the graders is valid.
    let fixed = MISLABELLED.replace(
        "outcome: success",
        "outcome: {off: any, warn: any, compact: success}",
    );
    std::fs::write(&path, fixed).unwrap();
    let out = ctxbench(tmp.path(), &["validate", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}

fn gates_json(run: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(run.join("report/gates.json")).expect("gates.json");
    serde_json::from_str(&text).expect("gates.json parses")
}

fn gate<'a>(gates: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    gates["gates"]
        .as_array()
        .and_then(|a| a.iter().find(|g| g["name"] == name))
        .unwrap_or_else(|| panic!("gate {name} missing"))
}

#[test]
fn vary_instances_of_one_scenario_leave_the_comparison_inconclusive() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    let out = ctxbench(
        tmp.path(),
        &[
            "run",
            "--scenario",
            "fits-window",
            "--trials",
            "12",
            "--modes",
            "warn,compact",
            "--progress",
            "none",
            "--out",
            run.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let gates = gates_json(&run);
    for name in [
        "pass_rate_regression_vs_warn",
        "completion_regression_vs_warn",
    ] {
        let g = gate(&gates, name);
        assert_eq!(g["status"], "not_evaluated", "{g}");
        let detail = g["detail"].as_str().unwrap_or_default();
        assert!(
            detail.starts_with("inconclusive: needs 3 distinct scenario(s)")
                && detail.contains("has 1 (12 session(s))"),
            "{detail}"
        );
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("To conclude:"), "{stdout}");
}

#[test]
fn a_runtime_blaming_the_provider_without_asking_it_fails_its_trials() {
    if !python3() {
        eprintln!("skipped: no python3");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let suite = tmp.path().join("suite");
    std::fs::create_dir_all(&suite).unwrap();
    std::fs::write(suite.join("fits.yaml"), FITS).unwrap();
    let script = tmp.path().join("refuser.py");
    std::fs::write(&script, REFUSER).unwrap();
    let run = tmp.path().join("run");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ctxbench"))
        .args([
            "run",
            "--suite",
            suite.to_str().unwrap(),
            "--sut",
            &format!("exec:python3 {}", script.display()),
            "--modes",
            "warn,compact",
            "--trials",
            "1",
            "--progress",
            "none",
            "--out",
            run.to_str().unwrap(),
        ])
        .current_dir(tmp.path())
        .env("NO_COLOR", "1")
        .env("CTXBENCH_BIN", env!("CARGO_BIN_EXE_ctxbench"))
        .output()
        .expect("run ctxbench");
    assert_ne!(out.status.code(), Some(0), "{}", text(&out));
    let trials = std::fs::read_to_string(run.join("trials.jsonl")).expect("trials.jsonl");
    let mut seen = 0;
    for line in trials.lines() {
        let t: serde_json::Value = serde_json::from_str(line).expect("trial row");
        seen += 1;
        assert_eq!(t["passed"], false, "{t}");
        let v = t["verdicts"]
            .as_array()
            .and_then(|a| a.iter().find(|v| v["grader"] == "limit-honest"))
            .expect("limit-honest verdict");
        assert_eq!(v["status"], "fail", "{v}");
        let summary = v["summary"].as_str().unwrap_or_default();
        assert!(summary.contains("`provider_rejected`"), "{summary}");
        let evidence = v["evidence"][0]["seen"].as_str().unwrap_or_default();
        assert_eq!(
            evidence, "no request was sent to the provider in the turn",
            "{v}"
        );
    }
    assert_eq!(seen, 2, "{trials}");
}
