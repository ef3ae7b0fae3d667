//! Helpers shared by the end-to-end tests.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

/// Run the `ctxbench` binary in `dir`.
pub fn ctxbench(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ctxbench"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .output()
        .expect("run ctxbench")
}

/// Status, stdout and stderr for assertion messages.
pub fn text(o: &Output) -> String {
    format!(
        "status: {:?}\n--- stdout\n{}\n--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Drop the timing columns (documented in docs/report-columns.md) from a CSV.
pub fn without_timing(csv: &str) -> String {
    let timing = ["run_id", "started_at", "elapsed_ms", "latency_ms"];
    let rows = csv_split(csv);
    let header = rows.first().cloned().unwrap_or_default();
    let keep: Vec<usize> = (0..header.len())
        .filter(|&i| !timing.contains(&header[i].as_str()))
        .collect();
    let mut out = String::new();
    for row in &rows {
        let cells: Vec<&str> = keep
            .iter()
            .filter_map(|&i| row.get(i).map(|s| s.as_str()))
            .collect();
        out.push_str(&cells.join("\u{1f}"));
        out.push('\n');
    }
    out
}

/// Minimal CSV splitter that honours quotes (test-only; the report writes RFC 4180).
pub fn csv_split(csv: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut cell = String::new();
    let mut quoted = false;
    let mut chars = csv.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cell.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => row.push(std::mem::take(&mut cell)),
            ('\n', false) => {
                row.push(std::mem::take(&mut cell));
                rows.push(std::mem::take(&mut row));
            }
            (c, _) => cell.push(c),
        }
    }
    if !cell.is_empty() || !row.is_empty() {
        row.push(cell);
        rows.push(row);
    }
    rows
}
