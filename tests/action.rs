//! The GitHub action's steps (`ci/action/run`, called by `action.yml`) run outside GitHub:
//! against the stdlib example adapter, they propagate ctxbench's own exit code, append the
//! Markdown summary to `$GITHUB_STEP_SUMMARY` and record the outputs in `$GITHUB_OUTPUT`;
//! a missing `sut` input or ctxbench binary is bad input (exit 2) before anything runs.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn action(dir: &Path, env: &[(&str, String)]) -> Output {
    let mut cmd = Command::new("bash");
    cmd.arg(root().join("ci/action/run"))
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("CTXBENCH_SUT")
        .env_remove("GITHUB_STEP_SUMMARY")
        .env_remove("GITHUB_OUTPUT");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run ci/action/run")
}

#[test]
fn the_action_gates_an_adapter_and_reports_to_github() {
    let dir = tempfile::tempdir().expect("tempdir");
    let summary = dir.path().join("step-summary.md");
    let outputs = dir.path().join("github-output");
    std::fs::write(&summary, "earlier step\n").expect("seed summary");
    let adapter = root().join("ci/examples/adapter/minimal_adapter.py");
    let o = action(
        dir.path(),
        &[
            ("CTXBENCH_BIN", env!("CARGO_BIN_EXE_ctxbench").to_string()),
            (
                "CTXBENCH_SUT",
                format!("exec:python3 {}", adapter.display()),
            ),
            (
                "CTXBENCH_SCENARIOS",
                "instruction-change fits-window".into(),
            ),
            (
                "CTXBENCH_ARGS",
                "--modes warn,compact --agent-timeout 60".into(),
            ),
            ("CTXBENCH_OUT", "gate-run".into()),
            ("GITHUB_STEP_SUMMARY", summary.display().to_string()),
            ("GITHUB_OUTPUT", outputs.display().to_string()),
        ],
    );
    let code = o.status.code().expect("exit code");
    // Two scenarios cannot meet the gates' evidence rules: INCOMPLETE (3) or, should a gate
    // fail outright, FAIL (1) — never a pass, never a crash.
    assert!(matches!(code, 1 | 3), "{}", support::text(&o));
    let out = std::fs::read_to_string(&outputs).expect("GITHUB_OUTPUT written");
    assert!(out.contains(&format!("exit-code={code}\n")), "{out}");
    assert!(out.contains("run-dir=gate-run\n"), "{out}");
    assert!(out.contains("junit=gate-run/report/junit.xml"), "{out}");
    assert!(dir.path().join("gate-run/report/junit.xml").is_file());
    let md = std::fs::read_to_string(&summary).expect("summary");
    assert!(
        md.starts_with("earlier step\n"),
        "appended, not replaced: {md}"
    );
    assert!(md.contains("ctxbench:"), "{md}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("ctxbench: INCOMPLETE") || stdout.contains("ctxbench: FAIL"),
        "{stdout}"
    );
}

#[test]
fn missing_inputs_are_bad_input_before_anything_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = action(
        dir.path(),
        &[("CTXBENCH_BIN", env!("CARGO_BIN_EXE_ctxbench").to_string())],
    );
    assert_eq!(o.status.code(), Some(2), "{}", support::text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("`sut` input is required"));
    let o = action(
        dir.path(),
        &[
            ("CTXBENCH_BIN", "/nonexistent/ctxbench".into()),
            ("CTXBENCH_SUT", "reference".into()),
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", support::text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not found"));
    assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 0);
}
