//! The scenario suite: built in (embedded at build time) or loaded from a path.

use std::path::Path;

use ctxbench_harness::scenario::{self, Diagnostics, Scenario};

include!(concat!(env!("OUT_DIR"), "/suite.rs"));

/// Load the embedded suite. Every file's problems are collected; duplicate ids are errors.
pub fn builtin() -> Result<Vec<Scenario>, Diagnostics> {
    let mut out: Vec<Scenario> = Vec::new();
    let mut problems = Vec::new();
    for (name, text) in BUILTIN_SUITE {
        match scenario::load_str(&format!("builtin:{name}"), text) {
            Ok(s) => {
                if let Some(prev) = out.iter().find(|p| p.id == s.id) {
                    problems.push(scenario::Diagnostic {
                        file: format!("builtin:{name}"),
                        line: None,
                        column: None,
                        message: format!(
                            "duplicate scenario id `{}` (also in {})",
                            s.id, prev.source
                        ),
                        expected: Some("scenario ids unique within a suite".into()),
                        snippet: None,
                    });
                } else {
                    out.push(s);
                }
            }
            Err(d) => problems.extend(d.0),
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(Diagnostics(problems))
    }
}

/// Load a suite from `path` (a file or directory), or the built-in suite.
pub fn load(path: Option<&Path>) -> Result<Vec<Scenario>, Diagnostics> {
    match path {
        Some(p) => scenario::load_suite(p),
        None => builtin(),
    }
}
