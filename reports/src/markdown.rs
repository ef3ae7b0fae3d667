//! `summary.md`: the report as GitHub-flavoured Markdown for a CI job summary (e.g.
//! `cat report/summary.md >> "$GITHUB_STEP_SUMMARY"`).
//!
//! Sections: the verdict line (with the pre-registration note and data warnings), the
//! gates table, the modes side by side (pass rate and recall with their Wilson intervals,
//! median input tokens, token reduction against `off` with its bootstrap interval,
//! over-budget requests sent, provider overflows), and the scenarios whose trials did not
//! all pass — candidate first, at most [`FAILED_ROWS_SHOWN`] rows.
//!
//! # Escaping
//!
//! Every string from run storage or a gates file (scenario ids, grader names, gate
//! details, reasons, notes) goes through [`escape_md`], so it renders as the text it is:
//! `` \ | ` * _ [ ] ~ `` are backslash-escaped (no table break, code span, emphasis, link or
//! strike-through), `& < >` become entities (no raw HTML — GitHub strips most of it, the
//! escape makes that moot), line breaks become spaces (a row stays one row), and a leading
//! `#`, `-`, `+`, `=` or `!` is escaped (no heading, list, setext underline or image), and
//! bidirectional and other invisible controls are spelled out (`<U+202E>`, shown as text).
//! Only
//! this module's own literals and mode/gate names (fixed identifiers) are written raw.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Write};

use ctxbench_harness::storage::schema::{OutcomeStatus, TrialRow, VerdictStatus};
use ctxbench_harness::Mode;

use crate::error::ExportError;
use crate::export::{Exporter, ReportData};
use crate::gates::{Bound, GateReport, GateStatus, GateVerdict};
use crate::stats::Proportion;
use crate::summary::SummaryRow;

/// Rows of the failed-scenarios table (the rest are counted).
pub const FAILED_ROWS_SHOWN: usize = 50;

/// Longest cell, in characters (the rest is elided).
const CELL_CHARS: usize = 300;

/// Writes `summary.md`.
#[derive(Debug, Clone, Copy)]
pub struct MarkdownExporter;

impl Exporter for MarkdownExporter {
    fn file_name(&self) -> &'static str {
        "summary.md"
    }

    fn export(&self, data: &ReportData<'_>, out: &mut dyn Write) -> Result<(), ExportError> {
        render(data, out)?;
        Ok(())
    }
}

/// Renders `summary.md` into `out`.
pub fn render(data: &ReportData<'_>, out: &mut dyn Write) -> io::Result<()> {
    let mut md = String::new();
    verdict(&mut md, &data.gates);
    gates(&mut md, &data.gates);
    modes(&mut md, data);
    if let Some(c) = &data.baseline {
        baseline(&mut md, c);
    }
    if let Some(s) = &data.systems {
        systems(&mut md, s);
    }
    failed(&mut md, &data.run.trials, data.gates.candidate);
    out.write_all(md.as_bytes())
}

/// Escapes `s` for Markdown inline text and table cells (see the module docs).
pub fn escape_md(s: &str) -> String {
    let s = ctxbench_harness::visible::document_safe(s);
    let mut out = String::with_capacity(s.len() + 8);
    for (i, ch) in s.chars().enumerate() {
        match ch {
            '\\' | '|' | '`' | '*' | '_' | '[' | ']' | '~' => {
                out.push('\\');
                out.push(ch);
            }
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\r' | '\n' => out.push(' '),
            '#' | '-' | '+' | '=' | '!' if i == 0 => {
                out.push('\\');
                out.push(ch);
            }
            c => out.push(c),
        }
    }
    out
}

/// A code span for a fixed identifier (`[a-z0-9_-]`), else the escaped text.
fn ident(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if plain {
        format!("`{s}`")
    } else {
        cell(s)
    }
}

/// [`escape_md`] of at most [`CELL_CHARS`] characters.
fn cell(s: &str) -> String {
    match s.char_indices().nth(CELL_CHARS) {
        None => escape_md(s),
        Some((i, _)) => format!("{}…", escape_md(&s[..i])),
    }
}

fn verdict(md: &mut String, g: &GateReport) {
    let icon = match g.verdict {
        GateVerdict::Pass => "✅",
        GateVerdict::Fail => "❌",
        GateVerdict::Incomplete => "⚠️",
    };
    let _ = writeln!(md, "## {icon} ctxbench: {}\n", g.headline());
    let _ = writeln!(
        md,
        "**{}**: {} (candidate `{}`, exit code {})\n",
        g.headline(),
        escape_md(&g.reason),
        g.candidate.as_str(),
        g.exit_code
    );
    let _ = writeln!(md, "System under test: **{}**\n", cell(&g.sut));
    if let Some(note) = &g.note {
        let _ = writeln!(md, "> **NOTE:** {}\n", escape_md(note));
    }
    if !g.warnings.is_empty() {
        for w in &g.warnings {
            let _ = writeln!(md, "- {}", escape_md(w));
        }
        md.push('\n');
    }
    let _ = writeln!(
        md,
        "Gates: {} (sha256 `{}`)\n",
        escape_md(&g.gates_source),
        // A SHA-256 in hex is `[0-9a-f]`; anything else is left out of the code span.
        g.gates_sha256
            .chars()
            .filter(char::is_ascii_hexdigit)
            .take(12)
            .collect::<String>()
    );
}

/// Compact number: integers without decimals, others with up to 4.
fn num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.4}")
    }
}

fn gates(md: &mut String, g: &GateReport) {
    md.push_str("### Gates\n\n");
    if g.gates.is_empty() {
        md.push_str("No gate configured.\n\n");
        return;
    }
    md.push_str("| gate | status | observed | threshold | detail |\n");
    md.push_str("| --- | --- | ---: | ---: | --- |\n");
    for r in &g.gates {
        let status = match r.status {
            GateStatus::Pass => "✅ pass",
            GateStatus::Fail => "❌ fail",
            GateStatus::NotEvaluated => "⚠️ not evaluated",
        };
        let op = match r.bound {
            Bound::Max => "≤",
            Bound::Min => "≥",
        };
        let _ = writeln!(
            md,
            "| {} | {status} | {} | {op} {} | {} |",
            ident(&r.name),
            r.observed.map(num).unwrap_or_else(|| "—".into()),
            num(r.threshold),
            cell(&r.detail)
        );
    }
    md.push('\n');
}

/// Several systems under test, one column each.
fn systems(md: &mut String, s: &crate::systems::Systems) {
    md.push_str("\n### Systems under test side by side\n\nEach column is one run of the same suite, gated on its own (all values in `systems.csv`).\n\n| mode | metric |");
    for c in &s.columns {
        md.push_str(&format!(" {} |", cell(&c.system)));
    }
    md.push_str("\n| --- | --- |");
    for _ in &s.columns {
        md.push_str(" ---: |");
    }
    md.push_str("\n|  | verdict |");
    for c in &s.columns {
        md.push_str(&format!(" {} |", cell(&c.verdict)));
    }
    md.push_str("\n|  | safety-invariant failures |");
    for c in &s.columns {
        md.push_str(&format!(
            " {} |",
            c.invariant_failures.map(num).unwrap_or_else(|| "—".into())
        ));
    }
    md.push('\n');
    for mode in s.modes() {
        for (label, show) in crate::systems::SHOWN {
            md.push_str(&format!("| `{}` | {label} |", mode.as_str()));
            for c in &s.columns {
                let v = c.mode(mode).and_then(show).unwrap_or_else(|| "—".into());
                md.push_str(&format!(" {} |", cell(&v)));
            }
            md.push('\n');
        }
    }
}

/// Changed scenario rows listed in the baseline comparison (the rest are counted).
pub const BASELINE_ROWS_SHOWN: usize = 50;

fn baseline(md: &mut String, c: &crate::baseline::Comparison) {
    use crate::baseline::METRICS;
    let _ = writeln!(
        md,
        "### Compared with baseline\n\nBaseline run {}; Δ = this run − baseline (all rows in `baseline.csv`).\n",
        cell(&c.baseline_runs.join(", "))
    );
    md.push_str(
        "| mode | metric | baseline | this run | Δ |\n| --- | --- | ---: | ---: | ---: |\n",
    );
    let share = |name: &str| {
        matches!(
            name,
            "pass_rate" | "recall" | "token_reduction_vs_off" | "est_rel_error_p95"
        )
    };
    for r in c.rows.iter().filter(|r| r.is_suite()) {
        for m in &METRICS {
            let (b, v, d) = r.values(m);
            let f = |x: Option<f64>| match x {
                None => "—".to_string(),
                Some(x) if share(m.0) => format!("{:.1}%", x * 100.0),
                Some(x) => format!("{x:.0}"),
            };
            let delta = match d {
                None => "—".to_string(),
                Some(d) if share(m.0) => format!("{:+.1} pp", d * 100.0),
                Some(d) => format!("{d:+.0}"),
            };
            let _ = writeln!(
                md,
                "| `{}` | {} | {} | {} | {delta} |",
                r.mode.as_str(),
                m.1,
                f(b),
                f(v)
            );
        }
    }
    md.push('\n');
    let changed: Vec<_> = c
        .rows
        .iter()
        .filter(|r| !r.is_suite() && r.changed())
        .collect();
    if changed.is_empty() {
        md.push_str("No scenario changed status, trial outcomes or recall.\n\n");
        return;
    }
    md.push_str("| scenario | mode | status | change | trials fixed / regressed | recall Δ |\n");
    md.push_str("| --- | --- | --- | --- | ---: | ---: |\n");
    for r in changed.iter().take(BASELINE_ROWS_SHOWN) {
        let dash = |s: &'static str| if s.is_empty() { "—" } else { s };
        let recall = r.values(&METRICS[1]).2;
        let _ = writeln!(
            md,
            "| {} | `{}` | {} → {} | {} | {} / {} | {} |",
            cell(&r.scope),
            r.mode.as_str(),
            dash(r.baseline_status),
            dash(r.candidate_status),
            r.status_change,
            r.trials_fixed,
            r.trials_regressed,
            recall
                .map(|d| format!("{:+.1} pp", d * 100.0))
                .unwrap_or_else(|| "—".into())
        );
    }
    if changed.len() > BASELINE_ROWS_SHOWN {
        let _ = writeln!(
            md,
            "\n… {} more in `baseline.csv`.",
            changed.len() - BASELINE_ROWS_SHOWN
        );
    }
    md.push('\n');
}

fn pct(v: Option<f64>) -> String {
    v.map(|x| format!("{:.1}%", x * 100.0))
        .unwrap_or_else(|| "—".into())
}

fn prop(p: Option<Proportion>) -> String {
    match p {
        None => "—".into(),
        Some(p) => format!(
            "{:.1}% [{:.1}, {:.1}] ({}/{})",
            p.value * 100.0,
            p.lo * 100.0,
            p.hi * 100.0,
            p.successes,
            p.total
        ),
    }
}

fn reduction(r: &SummaryRow) -> String {
    match (
        r.token_reduction_vs_off,
        r.token_reduction_vs_off_lo,
        r.token_reduction_vs_off_hi,
    ) {
        (None, ..) => "—".into(),
        (Some(v), Some(lo), Some(hi)) => {
            format!("{:.1}% [{:.1}, {:.1}]", v * 100.0, lo * 100.0, hi * 100.0)
        }
        (Some(v), ..) => pct(Some(v)),
    }
}

fn modes(md: &mut String, data: &ReportData<'_>) {
    md.push_str("### Modes\n\n");
    let rows: Vec<&SummaryRow> = data.summary.iter().filter(|r| r.is_suite()).collect();
    if rows.is_empty() {
        md.push_str("No trials in the run.\n\n");
        return;
    }
    md.push_str("| metric |");
    for r in &rows {
        if r.mode == data.gates.candidate {
            let _ = write!(md, " `{}` (candidate) |", r.mode.as_str());
        } else {
            let _ = write!(md, " `{}` |", r.mode.as_str());
        }
    }
    md.push_str("\n| --- |");
    for _ in &rows {
        md.push_str(" ---: |");
    }
    md.push('\n');
    type Cell = fn(&SummaryRow) -> String;
    let metrics: [(&str, Cell); 9] = [
        ("trials (errored)", |r| {
            format!("{} ({})", r.trials, r.errored)
        }),
        ("pass rate [Wilson 95%]", |r| prop(r.pass_rate)),
        ("recall [Wilson 95%]", |r| prop(r.recall)),
        ("turns completed / scripted", |r| {
            r.completion
                .map(|v| format!("{:.0}%", v * 100.0))
                .unwrap_or_else(|| "—".into())
        }),
        ("median input tokens / request", |r| {
            r.median_input_tokens
                .map(|v| format!("{v:.0}"))
                .unwrap_or_else(|| "—".into())
        }),
        (
            "token reduction vs `off`, long-session median [bootstrap 95%]",
            reduction,
        ),
        ("over-budget requests sent", |r| {
            r.over_budget_sent.to_string()
        }),
        ("…without warning", |r| r.over_budget_unwarned.to_string()),
        ("provider overflows", |r| r.provider_overflows.to_string()),
    ];
    for (label, f) in metrics {
        let _ = write!(md, "| {label} |");
        for r in &rows {
            let _ = write!(md, " {} |", cell(&f(r)));
        }
        md.push('\n');
    }
    md.push('\n');
}

/// Why a trial did not pass: its failed graders, else its outcome.
fn why(t: &TrialRow) -> String {
    let failed: Vec<&str> = t
        .verdicts
        .iter()
        .filter(|v| v.status == VerdictStatus::Fail)
        .map(|v| v.grader.as_str())
        .collect();
    if t.outcome.status == OutcomeStatus::Errored || failed.is_empty() {
        let mut s = format!("outcome {}", t.outcome.status.as_str());
        if !t.outcome.reason.is_empty() {
            let _ = write!(s, " ({})", t.outcome.reason);
        }
        if t.outcome.status != OutcomeStatus::Errored {
            let _ = write!(s, ", expected {}", t.expected_outcome);
        }
        s
    } else {
        format!("failed: {}", failed.join(", "))
    }
}

fn failed(md: &mut String, trials: &[TrialRow], candidate: Mode) {
    md.push_str("### Failed scenarios\n\n");
    // (candidate first, mode order, scenario) → trials that did not pass.
    let mode_pos = |m: Mode| Mode::ALL.iter().position(|&x| x == m).unwrap_or(usize::MAX);
    let mut groups: BTreeMap<(bool, usize, &str), (Vec<&TrialRow>, usize)> = BTreeMap::new();
    for t in trials {
        let key = (t.mode != candidate, mode_pos(t.mode), t.scenario.as_str());
        let entry = groups.entry(key).or_default();
        entry.1 += 1;
        if !t.passed || t.outcome.status == OutcomeStatus::Errored {
            entry.0.push(t);
        }
    }
    groups.retain(|_, (bad, _)| !bad.is_empty());
    if groups.is_empty() {
        md.push_str("Every trial passed.\n");
        return;
    }
    md.push_str("| scenario | mode | not passed | errored | first |\n");
    md.push_str("| --- | --- | ---: | ---: | --- |\n");
    let total = groups.len();
    for ((_, _, scenario), (mut bad, n)) in groups.into_iter().take(FAILED_ROWS_SHOWN) {
        bad.sort_by(|a, b| (a.trial, &a.trial_id).cmp(&(b.trial, &b.trial_id)));
        let errored = bad
            .iter()
            .filter(|t| t.outcome.status == OutcomeStatus::Errored)
            .count();
        let first = bad[0];
        let _ = writeln!(
            md,
            "| {} | `{}` | {}/{n} | {errored} | {} |",
            cell(scenario),
            first.mode.as_str(),
            bad.len(),
            cell(&format!("trial {}: {}", first.trial, why(first)))
        );
    }
    if total > FAILED_ROWS_SHOWN {
        let _ = writeln!(
            md,
            "\n… {} more scenario × mode row(s) in `index.html`.",
            total - FAILED_ROWS_SHOWN
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_table_breakers_code_html_and_block_starts() {
        assert_eq!(escape_md("a|b"), "a\\|b");
        assert_eq!(escape_md("`rm -rf`"), "\\`rm -rf\\`");
        assert_eq!(
            escape_md("<script>alert(1)</script>"),
            "&lt;script&gt;alert(1)&lt;/script&gt;"
        );
        assert_eq!(escape_md("# h"), "\\# h");
        assert_eq!(escape_md("- item"), "\\- item");
        assert_eq!(escape_md("a-b#c"), "a-b#c");
        assert_eq!(escape_md("[x](javascript:y)"), "\\[x\\](javascript:y)");
        assert_eq!(escape_md("**b** _i_ ~s~"), "\\*\\*b\\*\\* \\_i\\_ \\~s\\~");
        assert_eq!(escape_md("a\\|b"), "a\\\\\\|b");
        assert_eq!(escape_md("l1\nl2\r\n"), "l1 l2  ");
        assert_eq!(escape_md("&lt;"), "&amp;lt;");
        assert_eq!(escape_md("!img"), "\\!img");
        // A right-to-left override is shown, not obeyed.
        assert_eq!(
            escape_md("evil\u{202E}txt.exe"),
            "evil&lt;U+202E&gt;txt.exe"
        );
    }

    #[test]
    fn cells_are_bounded_and_escaped() {
        let long = format!("|{}", "é".repeat(CELL_CHARS + 5));
        let c = cell(&long);
        assert!(c.starts_with("\\|") && c.ends_with('…'));
        assert_eq!(c.chars().filter(|&ch| ch == 'é').count(), CELL_CHARS - 1);
    }
}
