//! A runtime no one on the ctxbench team wrote, driven through `ctxbench.agent/1` with a
//! thin adapter and graded: Simon Willison's `llm` CLI (PyPI `llm`, pinned in
//! `ci/adapters/llm-cli/install`) behind `ci/adapters/llm-cli/adapter.py`. It streams its
//! requests (SSE) to the loopback model and keeps its conversation in its own SQLite log.
//!
//! Needs `CTXBENCH_LLM_BIN` (printed by `ci/adapters/llm-cli/install`). `ci/test` installs
//! it and sets `CTXBENCH_REQUIRE_THIRD_PARTY=1`, so under CI a missing `llm` fails these
//! tests instead of skipping them.

mod support;

use std::path::{Path, PathBuf};

use support::{ctxbench, text};

fn adapter() -> Option<String> {
    if std::env::var_os("CTXBENCH_LLM_BIN").is_none() {
        assert!(
            std::env::var("CTXBENCH_REQUIRE_THIRD_PARTY").as_deref() != Ok("1"),
            "CTXBENCH_REQUIRE_THIRD_PARTY=1 but CTXBENCH_LLM_BIN is not set: \
             run ci/adapters/llm-cli/install"
        );
        eprintln!("skipped: CTXBENCH_LLM_BIN is not set (run ci/adapters/llm-cli/install)");
        return None;
    }
    let script: PathBuf =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("ci/adapters/llm-cli/adapter.py");
    Some(format!("exec:python3 {}", script.display()))
}

#[test]
fn the_llm_cli_adapter_passes_conformance() {
    let Some(sut) = adapter() else { return };
    let dir = tempfile::tempdir().unwrap();
    let o = ctxbench(dir.path(), &["conformance", "--sut", &sut]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("8/8 checks passed"), "{}", text(&o));
}

#[test]
fn the_llm_cli_is_graded_black_box_on_the_suite() {
    let Some(sut) = adapter() else { return };
    let dir = tempfile::tempdir().unwrap();
    let o = ctxbench(
        dir.path(),
        &[
            "run",
            "--sut",
            &sut,
            "--scenario",
            "instruction-change",
            "--scenario",
            "tool-pressure",
            "--trials",
            "1",
            "--out",
            "run",
            "--progress",
            "none",
        ],
    );
    // `llm` has no context management: the compact gates fail (exit 1), but the run works.
    // (A two-scenario run may also be too small to decide: exit 3.)
    assert!(matches!(o.status.code(), Some(0 | 1 | 3)), "{}", text(&o));
    let trials = std::fs::read_to_string(dir.path().join("run/trials.jsonl")).unwrap();
    let rows: Vec<serde_json::Value> = trials
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 6, "{trials}");
    for r in &rows {
        assert_ne!(r["outcome"]["status"], "errored", "{r}");
        // Black-box: graders that need the runtime's events say not-applicable, and the
        // ones decided from requests ran.
        let verdicts = r["verdicts"].as_array().unwrap();
        let status = |g: &str| {
            verdicts
                .iter()
                .find(|v| v["grader"] == g)
                .map(|v| v["status"].as_str().unwrap_or_default().to_string())
        };
        assert_eq!(status("typed-reason").as_deref(), Some("skip"), "{r}");
        let summary = verdicts
            .iter()
            .find(|v| v["grader"] == "typed-reason")
            .and_then(|v| v["summary"].as_str())
            .unwrap_or_default();
        assert!(summary.starts_with("not-applicable"), "{r}");
        // `budget` judges requests; only in `warn` does it need the runtime's warnings,
        // which a black box does not report.
        let budget = status("budget");
        if r["mode"] == "warn" {
            assert!(
                matches!(budget.as_deref(), Some("pass" | "fail" | "skip")),
                "{r}"
            );
        } else {
            assert!(matches!(budget.as_deref(), Some("pass" | "fail")), "{r}");
        }
    }
    // Every request the runtime streamed was recorded with the fake's usage.
    let requests = std::fs::read_to_string(dir.path().join("run/requests.jsonl")).unwrap();
    assert!(requests.lines().count() >= 6, "{requests}");
    assert!(
        requests.contains("\"provider_input_tokens\":"),
        "{requests}"
    );
}
