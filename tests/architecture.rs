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
    let mut dirs = vec![root];
    let mut sources = Vec::new();
    while let Some(p) = dirs.pop() {
        if p.is_dir() {
            dirs.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        } else {
            let text = std::fs::read_to_string(&p).unwrap();
            sources.push((p, text));
        }
    }
    // Module files declared under `#[cfg(test)]` (`#[cfg(test)] mod tests;`) are test code.
    let mut test_only = std::collections::BTreeSet::new();
    for (p, text) in &sources {
        let dir = match p.file_name().and_then(|n| n.to_str()) {
            Some("lib.rs" | "mod.rs") => p.parent().unwrap().to_path_buf(),
            _ => p.with_extension(""),
        };
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        for pair in lines.windows(2) {
            let declared = pair[1]
                .trim_start_matches("pub(super) ")
                .trim_start_matches("pub(crate) ")
                .strip_prefix("mod ")
                .and_then(|m| m.strip_suffix(';'));
            if let (true, Some(m)) = (pair[0] == "#[cfg(test)]", declared) {
                test_only.insert(dir.join(format!("{m}.rs")));
                test_only.insert(dir.join(m).join("mod.rs"));
            }
        }
    }
    assert!(!test_only.is_empty(), "no test-only module files found");
    let mut offenders = Vec::new();
    for (p, text) in sources.iter().filter(|(p, _)| !test_only.contains(p)) {
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
