//! The first rule, kept by the build: code that judges cannot name the code it judges.
//!
//! The graders, the fake model (in `ctxbench-adapters`) and the harness do not depend on the
//! reference engine, even indirectly; the engine does not depend on the harness or the
//! graders (it never sees scenarios, facts or verdicts); and the engine's shipped code does
//! not use the fake model. Checked on the resolved dependency graph (`cargo metadata`), so a
//! later change cannot quietly bring a dependency back.

use std::collections::{BTreeMap, BTreeSet};

/// Normal (non-dev) dependency edges between workspace packages, as declared in their
/// manifests (`cargo metadata --no-deps`: no registry access needed).
fn workspace_graph() -> BTreeMap<String, BTreeSet<String>> {
    let out = std::process::Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata is JSON");
    let packages = meta["packages"].as_array().unwrap();
    let names: BTreeSet<String> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    packages
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].is_null() || d["kind"] == "build")
                .map(|d| d["name"].as_str().unwrap().to_string())
                .filter(|n| names.contains(n))
                .collect();
            (p["name"].as_str().unwrap().to_string(), deps)
        })
        .collect()
}

fn closure(graph: &BTreeMap<String, BTreeSet<String>>, from: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![from.to_string()];
    while let Some(p) = todo.pop() {
        for d in graph.get(&p).into_iter().flatten() {
            if seen.insert(d.clone()) {
                todo.push(d.clone());
            }
        }
    }
    seen
}

#[test]
fn code_that_judges_cannot_reach_the_engine() {
    let graph = workspace_graph();
    assert!(graph.contains_key("ctxbench-engine"), "{graph:?}");
    for (judge, forbidden) in [
        ("ctxbench-graders", &["ctxbench-engine"][..]),
        (
            "ctxbench-adapters",
            &["ctxbench-engine", "ctxbench-harness", "ctxbench-sut"][..],
        ),
        (
            "ctxbench-harness",
            &["ctxbench-engine", "ctxbench-graders"][..],
        ),
        ("ctxbench-reports", &["ctxbench-engine"][..]),
        (
            "ctxbench-sut",
            &["ctxbench-engine", "ctxbench-harness", "ctxbench-graders"][..],
        ),
        // The engine sees what a runtime sees: no scenarios, facts, graders or verdicts.
        (
            "ctxbench-engine",
            &["ctxbench-harness", "ctxbench-graders", "ctxbench-reports"][..],
        ),
    ] {
        let reach = closure(&graph, judge);
        for f in forbidden {
            assert!(!reach.contains(*f), "{judge} depends on {f}: {reach:?}");
        }
    }
}

#[test]
fn the_engine_ships_no_use_of_the_fake_model() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("engine/src");
    let mut files = vec![root];
    let mut offenders = Vec::new();
    while let Some(p) = files.pop() {
        if p.is_dir() {
            files.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        if test_only_file(&p) {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap();
        // Shipped code only: everything above the first test module.
        let shipped = text.split("#[cfg(test)]").next().unwrap_or("");
        for (n, line) in shipped.lines().enumerate() {
            if line.contains("fake::") || line.contains("FakeProvider") {
                offenders.push(format!("{}:{}: {line}", p.display(), n + 1));
            }
        }
    }
    assert!(offenders.is_empty(), "{offenders:#?}");
}

/// Whether `path` is a `tests.rs` (or a file of a `tests/` directory) its parent module
/// includes only under `#[cfg(test)]`.
fn test_only_file(path: &std::path::Path) -> bool {
    // `tests.rs`, or any file of a `tests/` module directory.
    let in_tests_dir = path
        .parent()
        .and_then(|d| d.file_name())
        .and_then(|n| n.to_str())
        == Some("tests");
    if path.file_name().and_then(|n| n.to_str()) != Some("tests.rs") && !in_tests_dir {
        return false;
    }
    let dir = if in_tests_dir {
        path.parent().unwrap().parent().unwrap()
    } else {
        path.parent().unwrap()
    };
    ["mod.rs", "lib.rs"].iter().any(|parent| {
        let Ok(text) = std::fs::read_to_string(dir.join(parent)) else {
            return false;
        };
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        lines.windows(2).any(|w| {
            w[0] == "#[cfg(test)]" && w[1].starts_with(['m', 'p']) && w[1].ends_with("mod tests;")
        })
    })
}
