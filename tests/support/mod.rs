//! Helpers shared by the end-to-end tests.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

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

/// A `ctxbench serve-fake` child, killed on drop.
pub struct FakeServer {
    child: Child,
    /// The OpenAI-compatible base URL (`…/v1`).
    pub url: String,
    /// The same fake in the Anthropic Messages wire (no `/v1`: the client adds it).
    pub anthropic_url: String,
}

impl FakeServer {
    /// Start `ctxbench serve-fake EXTRA…` in `dir` and read the URLs it prints.
    pub fn start(dir: &Path, extra: &[&str]) -> FakeServer {
        let stderr = dir.join(format!("serve-fake-{}.log", extra.len()));
        let mut child = Command::new(env!("CARGO_BIN_EXE_ctxbench"))
            .arg("serve-fake")
            .args(extra)
            .current_dir(dir)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut read = |prefix: &str| {
            let mut line = String::new();
            out.read_line(&mut line).unwrap();
            line.trim()
                .strip_prefix(prefix)
                .unwrap_or_else(|| panic!("serve-fake printed {line:?}"))
                .to_string()
        };
        let url = read("CTXBENCH_FAKE_URL=");
        let anthropic_url = read("CTXBENCH_FAKE_ANTHROPIC_URL=");
        FakeServer {
            child,
            url,
            anthropic_url,
        }
    }
}

impl FakeServer {
    /// The server process's id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
