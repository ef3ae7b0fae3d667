//! Real coding agents that manage their own context, driven through `ctxbench.agent/1` by
//! the adapters in `ci/adapters/<agent>/` (each installed at a pinned version by its
//! `install` script, which prints the variable named below): conformance of every adapter
//! and one short scenario per agent, live against the loopback fake model.
//!
//! An agent whose variable is unset is skipped with the reason printed. `ci/test` installs
//! them and sets `CTXBENCH_REQUIRE_RUNTIMES=1`, so under CI a missing agent fails these
//! tests instead of skipping them. The whole suite for every agent is `ci/runtimes/compare`
//! (docs/runtimes.md).

mod support;

use std::path::Path;

use support::{ctxbench, text};

/// (adapter directory, the variable its install script prints)
const AGENTS: [(&str, &str); 3] = [
    ("qwen-code", "CTXBENCH_QWEN_BIN"),
    ("opencode", "CTXBENCH_OPENCODE_BIN"),
    ("claude-code", "CTXBENCH_CLAUDE_BIN"),
];

fn installed() -> Vec<(&'static str, String)> {
    let require = std::env::var("CTXBENCH_REQUIRE_RUNTIMES").as_deref() == Ok("1");
    let mut out = Vec::new();
    for (agent, var) in AGENTS {
        if std::env::var_os(var).is_none() {
            assert!(
                !require,
                "CTXBENCH_REQUIRE_RUNTIMES=1 but {var} is not set: run ci/adapters/{agent}/install"
            );
            eprintln!("skipped {agent}: {var} is not set (run ci/adapters/{agent}/install)");
            continue;
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("ci/adapters")
            .join(agent)
            .join("adapter.py");
        out.push((agent, format!("exec:python3 {}", script.display())));
    }
    out
}

#[test]
fn every_agent_adapter_passes_conformance() {
    for (agent, sut) in installed() {
        let dir = tempfile::tempdir().unwrap();
        // A Node agent's cold start on a loaded 2-core machine can pass conformance's 30 s default.
        let o = ctxbench(
            dir.path(),
            &["conformance", "--sut", &sut, "--agent-timeout", "120"],
        );
        assert_eq!(o.status.code(), Some(0), "{agent}: {}", text(&o));
        assert!(
            text(&o).contains("8/8 checks passed"),
            "{agent}: {}",
            text(&o)
        );
    }
}

#[test]
fn every_agent_runs_a_short_scenario_live() {
    for (agent, sut) in installed() {
        let dir = tempfile::tempdir().unwrap();
        let o = ctxbench(
            dir.path(),
            &[
                "run",
                "--sut",
                &sut,
                "--scenario",
                "fits-window",
                "--modes",
                "off,compact",
                "--trials",
                "1",
                "--agent-timeout",
                "120",
                "--out",
                "run",
                "--progress",
                "none",
            ],
        );
        // One scenario cannot decide the gates (exit 3) and may fail one (exit 1); the run
        // itself must work.
        assert!(
            matches!(o.status.code(), Some(0 | 1 | 3)),
            "{agent}: {}",
            text(&o)
        );
        let trials = std::fs::read_to_string(dir.path().join("run/trials.jsonl")).unwrap();
        let rows: Vec<serde_json::Value> = trials
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(rows.len(), 2, "{agent}: {trials}");
        for r in &rows {
            let mode = r["mode"].as_str().unwrap_or_default();
            assert_eq!(r["outcome"]["status"], "success", "{agent} {mode}: {r}");
            let status = |g: &str| {
                r["verdicts"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|v| v["grader"] == g)
                    .map(|v| v["status"].as_str().unwrap_or_default().to_string())
            };
            // The agent delivered every scripted user message and tool result to the model.
            assert_eq!(
                status("script-adherence").as_deref(),
                Some("pass"),
                "{agent} {mode}: {r}"
            );
            // Without its compaction the session fits, so every probe is answered from what
            // the agent sent: the adapter loses nothing. With it, what the agent's own
            // compaction keeps is its result, not the adapter's (docs/runtimes.md): graded,
            // either way.
            let recall = status("recall");
            if mode == "off" {
                assert_eq!(recall.as_deref(), Some("pass"), "{agent} {mode}: {r}");
            } else {
                assert!(
                    matches!(recall.as_deref(), Some("pass" | "fail")),
                    "{agent} {mode}: {r}"
                );
            }
            // Black box: no events, so the event graders say not-applicable.
            assert_eq!(
                status("typed-reason").as_deref(),
                Some("skip"),
                "{agent} {mode}: {r}"
            );
        }
        let requests = std::fs::read_to_string(dir.path().join("run/requests.jsonl")).unwrap();
        assert!(
            requests.contains("\"provider_input_tokens\":"),
            "{agent}: {requests}"
        );
    }
}

/// An adapter dies with ctxbench even mid-turn (issue #16): `kill -9` of the parent takes
/// the adapter and everything its agent started down with it, through
/// `ci/adapters/common/lifeline.py`, which every adapter starts first.
#[test]
fn adapters_die_with_a_killed_parent() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("ci/adapters");
    let out = std::process::Command::new("python3")
        .arg(root.join("common/lifeline.py"))
        .arg("--selftest")
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "{}", text(&out));
    for entry in std::fs::read_dir(&root).expect("adapters") {
        let adapter = entry.expect("entry").path().join("adapter.py");
        if adapter.exists() {
            let source = std::fs::read_to_string(&adapter).expect("readable");
            assert!(
                source.contains("lifeline.watch()"),
                "{} does not start the lifeline",
                adapter.display()
            );
        }
    }
}
