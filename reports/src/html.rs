//! `index.html`: one self-contained, script-free page.
//!
//! Security model (QUALITY.md §Security): the page loads nothing (no external resource,
//! no script of any kind) and ships a Content-Security-Policy that forbids both, so even a
//! missed escape could not run code. On top of that, **every** string that comes from run
//! storage — scenario ids and titles, grader summaries and evidence, model answers,
//! provider names, file paths — goes through `Html::text` (`html-escape`'s
//! `encode_safe`, which escapes `& < > " ' /`), after bidirectional controls (U+202E …) are
//! spelled out as `<U+202E>` ([`ctxbench_harness::visible`]). Only literals of this module go through
//! `Html::raw`. Data never lands in an attribute, a `<style>` or a URL. The one
//! exception to "literals only" in `raw` is a chart's SVG, which plotters wrote with every
//! text escaped and which [`crate::charts::is_inert`] checked (see [`crate::charts`]).
//!
//! The page stays usable on large runs: at most [`TRIALS_LISTED`] trials are listed (not
//! passing first), [`TRIALS_DRILLED`] of them with their first and last
//! [`REQUESTS_SHOWN`] requests; the CSVs, linked by relative name, hold everything.
//!
//! The page is streamed to a `Write` section by section: nothing holds the whole page.

use std::io::{self, Write};
use std::ops::Range;

use polars::prelude::{AnyValue, Column};

use ctxbench_harness::storage::schema::{Evidence, TrialRow, VerdictStatus};
use ctxbench_harness::Mode;

use crate::baseline::{Comparison, METRICS};
use crate::charts::Chart;
use crate::compaction::{TrialCompaction, COMPACTION_EVENTS_SHOWN};
use crate::error::ExportError;
use crate::export::{Exporter, ReportData};
use crate::frames::verdict_str;
use crate::gates::{Bound, GateReport, GateVerdict};
use crate::stats::Proportion;
use crate::summary::SummaryRow;

/// The Content-Security-Policy of the page: nothing may load or run, no base URL or form
/// target may be set; inline styles are the only exception. The charts are inline `<svg>`
/// elements — markup, not loaded resources — so they need no `img-src`.
pub const CSP: &str =
    "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'";

/// Trials listed in the trials table (not passing first); the rest are in `trials.csv`.
pub const TRIALS_LISTED: usize = 500;

/// Trials whose requests are drilled down (the first listed ones).
pub const TRIALS_DRILLED: usize = 20;

/// Requests shown at each end of a drilled-down trial.
pub const REQUESTS_SHOWN: usize = 10;

/// Scenario rows of the baseline comparison shown (changed rows only).
pub const BASELINE_ROWS_SHOWN: usize = 100;

/// Evidence items shown per verdict (the rest are counted).
pub const EVIDENCE_SHOWN: usize = 5;

/// Longest excerpt / answer shown, in characters (the rest is elided).
const TEXT_SHOWN: usize = 400;

/// Writes `index.html`.
#[derive(Debug, Clone, Copy)]
pub struct HtmlExporter;

impl Exporter for HtmlExporter {
    fn file_name(&self) -> &'static str {
        "index.html"
    }

    fn export(&self, data: &ReportData<'_>, out: &mut dyn Write) -> Result<(), ExportError> {
        render(data, out)
    }
}

/// Renders the whole page into `out`.
pub fn render(data: &ReportData<'_>, out: &mut dyn Write) -> Result<(), ExportError> {
    let charts = crate::charts::render_all(data)?;
    let mut h = Html { w: out };
    head(&mut h, data)?;
    banner(&mut h, &data.gates)?;
    gates_table(&mut h, &data.gates)?;
    modes_table(&mut h, data)?;
    if let Some(c) = &data.baseline {
        baseline_section(&mut h, c, data.gates.candidate)?;
    }
    if let Some(s) = &data.systems {
        systems_section(&mut h, s)?;
    }
    charts_section(&mut h, &charts)?;
    scenarios_table(&mut h, data)?;
    trials_table(&mut h, data)?;
    manifest(&mut h, data)?;
    h.raw("<footer>ctxbench-reports ")?;
    h.text(env!("CARGO_PKG_VERSION"))?;
    h.raw(" — generated offline from run storage.</footer>\n</body>\n</html>\n")?;
    Ok(())
}

/// A writer that keeps "trusted literal" and "untrusted text" apart.
struct Html<'w> {
    w: &'w mut dyn Write,
}

impl Html<'_> {
    /// Markup written verbatim: only string literals of this module.
    fn raw(&mut self, s: &str) -> io::Result<()> {
        self.w.write_all(s.as_bytes())
    }

    /// Untrusted text, escaped, with bidirectional and other invisible controls spelled
    /// out (`<U+202E>`) so a hostile title cannot display a misleading name.
    fn text(&mut self, s: &str) -> io::Result<()> {
        html_escape::encode_safe_to_writer(
            ctxbench_harness::visible::document_safe(s).as_ref(),
            &mut self.w,
        )
    }

    fn td(&mut self, s: &str) -> io::Result<()> {
        self.raw("<td>")?;
        self.text(s)?;
        self.raw("</td>")
    }

    fn td_num(&mut self, s: &str) -> io::Result<()> {
        self.raw("<td class=\"n\">")?;
        self.text(s)?;
        self.raw("</td>")
    }

    fn th(&mut self, s: &str) -> io::Result<()> {
        self.raw("<th>")?;
        self.text(s)?;
        self.raw("</th>")
    }

    fn header_row(&mut self, cols: &[&str]) -> io::Result<()> {
        self.raw("<thead><tr>")?;
        for c in cols {
            self.th(c)?;
        }
        self.raw("</tr></thead>\n")
    }
}

const STYLE: &str = "\
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:0 auto;max-width:1200px;padding:1em 2em;color:#1b1b1b}
h1{margin:.2em 0}h2{margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0;width:100%}
th,td{border:1px solid #ddd;padding:.25em .5em;vertical-align:top;text-align:left}
th{background:#f4f4f4}td.n{text-align:right;font-variant-numeric:tabular-nums}
.banner{padding:.8em 1.2em;border-radius:6px;margin:1em 0}
.banner.pass{background:#e6f4ea;border:2px solid #1e8e3e}
.banner.fail{background:#fce8e6;border:2px solid #d93025}
.banner.incomplete{background:#fef7e0;border:2px solid #f29900}
.note{font-weight:bold;color:#a50e0e}
.s-pass{color:#1e8e3e;font-weight:bold}.s-fail{color:#d93025;font-weight:bold}
.s-not_evaluated,.s-skip{color:#b06000;font-weight:bold}
.cand{background:#eef3fd}
ul.ev{margin:.2em 0;padding-left:1.2em}
tr.cx>td{background:#fafafa}table.sub{width:auto;font-size:12px;margin:.3em 0}
pre{background:#f7f7f7;padding:.5em;overflow:auto;white-space:pre-wrap}
figure{margin:1em 0}figure svg{max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-weight:bold}p.cn{color:#555;font-size:12px;margin:.2em 0}
.up{color:#1e8e3e}.down{color:#d93025}details>summary{cursor:pointer}
footer{margin-top:2em;color:#777;font-size:12px}
";

fn head(h: &mut Html<'_>, data: &ReportData<'_>) -> io::Result<()> {
    h.raw("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")?;
    h.raw("<meta http-equiv=\"Content-Security-Policy\" content=\"")?;
    h.raw(CSP)?;
    h.raw("\">\n<meta name=\"referrer\" content=\"no-referrer\">\n")?;
    h.raw("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")?;
    h.raw("<title>ctxbench report — ")?;
    h.text(&run_ids(data))?;
    h.raw("</title>\n<style>\n")?;
    h.raw(STYLE)?;
    h.raw("</style>\n</head>\n<body>\n")
}

fn run_ids(data: &ReportData<'_>) -> String {
    data.run
        .runs
        .iter()
        .map(|r| r.manifest.run_id.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn banner(h: &mut Html<'_>, g: &GateReport) -> io::Result<()> {
    let class = match g.verdict {
        GateVerdict::Pass => "pass",
        GateVerdict::Fail => "fail",
        GateVerdict::Incomplete => "incomplete",
    };
    h.raw("<header class=\"banner ")?;
    h.raw(class)?;
    h.raw("\">\n<h1>")?;
    h.text(&g.headline())?;
    h.raw("</h1>\n<p>")?;
    h.text(&g.reason)?;
    h.raw(" (candidate <b>")?;
    h.text(g.candidate.as_str())?;
    h.raw("</b>, exit code ")?;
    h.text(&g.exit_code.to_string())?;
    h.raw(")</p>\n<p>System under test: <b>")?;
    h.text(&g.sut)?;
    h.raw("</b></p>\n")?;
    if let Some(note) = &g.note {
        h.raw("<p class=\"note\">NOTE: ")?;
        h.text(note)?;
        h.raw("</p>\n")?;
    }
    if !g.warnings.is_empty() {
        h.raw("<ul>\n")?;
        for w in &g.warnings {
            h.raw("<li>")?;
            h.text(w)?;
            h.raw("</li>\n")?;
        }
        h.raw("</ul>\n")?;
    }
    h.raw("</header>\n")
}

fn gates_table(h: &mut Html<'_>, g: &GateReport) -> io::Result<()> {
    h.raw("<h2>Gates</h2>\n<p>Evaluated gates: ")?;
    h.text(&g.gates_source)?;
    h.raw(" (sha256 ")?;
    h.text(&g.gates_sha256)?;
    h.raw(")</p>\n<table>\n")?;
    h.header_row(&["gate", "status", "threshold", "observed", "detail"])?;
    h.raw("<tbody>\n")?;
    for r in &g.gates {
        h.raw("<tr>")?;
        h.td(&r.name)?;
        status_cell(h, r.status.as_str())?;
        let op = match r.bound {
            Bound::Max => "≤ ",
            Bound::Min => "≥ ",
        };
        h.td_num(&format!("{op}{}", num(r.threshold)))?;
        h.td_num(&r.observed.map(num).unwrap_or_else(|| "—".into()))?;
        h.td(&r.detail)?;
        h.raw("</tr>\n")?;
    }
    h.raw("</tbody>\n</table>\n")
}

/// `status` is one of a fixed set of literals (`pass`, `fail`, `skip`, `not_evaluated`),
/// so it can name a CSS class; it is still escaped as text.
fn status_cell(h: &mut Html<'_>, status: &'static str) -> io::Result<()> {
    h.raw("<td class=\"s-")?;
    h.raw(status)?;
    h.raw("\">")?;
    h.text(status)?;
    h.raw("</td>")
}

/// Compact number: integers without decimals, others with up to 4.
fn num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.4}")
    }
}

fn opt(v: Option<f64>, decimals: usize) -> String {
    v.map(|x| format!("{x:.decimals$}"))
        .unwrap_or_else(|| "—".into())
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

fn modes_table(h: &mut Html<'_>, data: &ReportData<'_>) -> io::Result<()> {
    let rows: Vec<&SummaryRow> = data.summary.iter().filter(|r| r.is_suite()).collect();
    h.raw("<h2>Modes</h2>\n")?;
    if rows.is_empty() {
        return h.raw("<p>No trials in the run.</p>\n");
    }
    h.raw("<table>\n<thead><tr><th>metric</th>")?;
    for r in &rows {
        if r.mode == data.gates.candidate {
            h.raw("<th class=\"cand\">")?;
            h.text(r.mode.as_str())?;
            h.raw(" (candidate)</th>")?;
        } else {
            h.th(r.mode.as_str())?;
        }
    }
    h.raw("</tr></thead>\n<tbody>\n")?;
    type Cell = fn(&SummaryRow) -> String;
    let metrics: [(&str, Cell); 23] = [
        ("trials", |r| r.trials.to_string()),
        ("errored", |r| r.errored.to_string()),
        // Infrastructure trouble the retry layer absorbed, apart from model failures.
        ("HTTP retries (calls given up)", |r| {
            format!("{} ({})", r.retries, r.retries_gave_up)
        }),
        ("pass rate [Wilson 95%]", |r| prop(r.pass_rate)),
        ("recall [Wilson 95%]", |r| prop(r.recall)),
        ("turns completed / scripted", |r| pct(r.completion)),
        ("median input tokens / request", |r| {
            opt(r.median_input_tokens, 0)
        }),
        ("p95 input tokens / request", |r| opt(r.p95_input_tokens, 0)),
        ("estimation error, mean |abs| (tokens)", |r| {
            opt(r.est_error_mean_abs, 1)
        }),
        ("estimation error, p50 |rel|", |r| pct(r.est_rel_error_p50)),
        ("estimation error, p95 |rel|", |r| pct(r.est_rel_error_p95)),
        ("estimation bias (mean signed rel)", |r| pct(r.est_bias)),
        ("over-budget requests sent", |r| {
            r.over_budget_sent.to_string()
        }),
        ("…without warning", |r| r.over_budget_unwarned.to_string()),
        ("provider overflows", |r| r.provider_overflows.to_string()),
        ("limit stops", |r| r.limit_stops.to_string()),
        ("compactions / trial", |r| opt(r.compactions_per_trial, 2)),
        ("compaction failures (by reason)", |r| {
            if r.compaction_failure_reasons.is_empty() {
                r.compaction_failures.to_string()
            } else {
                format!(
                    "{} ({})",
                    r.compaction_failures,
                    r.compaction_failure_reasons.replace(';', ", ")
                )
            }
        }),
        ("reclaimed tokens / compaction", |r| {
            opt(r.reclaimed_per_compaction, 0)
        }),
        ("summary tokens / compaction", |r| {
            opt(r.summary_tokens_mean, 0)
        }),
        ("summary requests (input tokens)", |r| {
            format!("{} ({})", r.summary_requests, r.summary_input_tokens)
        }),
        ("token reduction vs off (long-session, median)", |r| {
            pct(r.token_reduction_vs_off)
        }),
        ("token reduction vs warn (long-session, median)", |r| {
            pct(r.token_reduction_vs_warn)
        }),
    ];
    for (label, cell) in metrics {
        h.raw("<tr>")?;
        h.th(label)?;
        for r in &rows {
            h.td_num(&cell(r))?;
        }
        h.raw("</tr>\n")?;
    }
    h.raw("</tbody>\n</table>\n")
}

fn scenarios_table(h: &mut Html<'_>, data: &ReportData<'_>) -> io::Result<()> {
    h.raw("<h2>Scenarios</h2>\n<table>\n")?;
    h.header_row(&[
        "scenario",
        "mode",
        "trials",
        "errored",
        "pass rate",
        "recall",
        "completion",
        "median input",
        "p95 input",
        "over budget (unwarned)",
        "overflows",
        "limit stops",
        "compactions",
        "reduction vs off",
    ])?;
    h.raw("<tbody>\n")?;
    for r in data.summary.iter().filter(|r| !r.is_suite()) {
        h.raw(if r.mode == data.gates.candidate {
            "<tr class=\"cand\">"
        } else {
            "<tr>"
        })?;
        h.td(&r.scope)?;
        h.td(r.mode.as_str())?;
        h.td_num(&r.trials.to_string())?;
        h.td_num(&r.errored.to_string())?;
        h.td_num(&prop(r.pass_rate))?;
        h.td_num(&prop(r.recall))?;
        h.td_num(&pct(r.completion))?;
        h.td_num(&opt(r.median_input_tokens, 0))?;
        h.td_num(&opt(r.p95_input_tokens, 0))?;
        h.td_num(&format!(
            "{} ({})",
            r.over_budget_sent, r.over_budget_unwarned
        ))?;
        h.td_num(&r.provider_overflows.to_string())?;
        h.td_num(&r.limit_stops.to_string())?;
        h.td_num(&r.compactions.to_string())?;
        h.td_num(&pct(r.token_reduction_vs_off))?;
        h.raw("</tr>\n")?;
    }
    h.raw("</tbody>\n</table>\n")
}

/// Indices (into `run.trials`) of the trials listed: all when they fit in
/// [`TRIALS_LISTED`], else the ones that did not pass first, then the others, each group
/// in run order — and the list shown in run order.
fn listed_trials(trials: &[TrialRow]) -> Vec<usize> {
    if trials.len() <= TRIALS_LISTED {
        return (0..trials.len()).collect();
    }
    let mut pick: Vec<usize> = (0..trials.len())
        .filter(|&i| !trials[i].passed)
        .take(TRIALS_LISTED)
        .collect();
    let rest = TRIALS_LISTED - pick.len();
    pick.extend((0..trials.len()).filter(|&i| trials[i].passed).take(rest));
    pick.sort_unstable();
    pick
}

fn trials_table(h: &mut Html<'_>, data: &ReportData<'_>) -> io::Result<()> {
    let trials = &data.run.trials;
    let listed = listed_trials(trials);
    // Drill down the not-passing listed trials first, then the others, in list order.
    let mut drill: Vec<usize> = listed
        .iter()
        .copied()
        .filter(|&i| !trials[i].passed)
        .collect();
    drill.extend(listed.iter().copied().filter(|&i| trials[i].passed));
    drill.truncate(TRIALS_DRILLED);
    let drilled_ids: Vec<&str> = drill.iter().map(|&i| trials[i].trial_id.as_str()).collect();
    let excerpts = crate::excerpt::excerpts(data.run, &drilled_ids);
    h.raw("<h2>Trials</h2>\n<p>")?;
    h.text(&format!(
        "{} of {} trials listed{}; requests drilled down for {} of them (not passing first), \
         at most the first and last {} requests each. Every trial is in ",
        listed.len(),
        trials.len(),
        if listed.len() < trials.len() {
            " (not passing first)"
        } else {
            ""
        },
        drill.len(),
        REQUESTS_SHOWN
    ))?;
    h.raw("<a href=\"trials.csv\">trials.csv</a> and every request in <a href=\"requests.csv\">requests.csv</a>.</p>\n<table>\n")?;
    h.header_row(&[
        "trial",
        "mode",
        "outcome",
        "reason",
        "expected",
        "passed",
        "recall",
        "grader verdicts",
    ])?;
    h.raw("<tbody>\n")?;
    for &i in &listed {
        let t = &trials[i];
        trial_row(h, t, data.gates.candidate)?;
        compaction_events(h, data.compaction.get(&t.trial_id))?;
        if drill.contains(&i) {
            if let Some(rows) = data.trial_rows.get(i) {
                trial_requests(h, data, rows.clone())?;
            }
            if let Some(x) = excerpts.get(&t.trial_id) {
                transcript_excerpt(h, x)?;
            }
        }
    }
    h.raw("</tbody>\n</table>\n")?;
    if listed.len() < trials.len() {
        h.raw("<p>")?;
        h.text(&format!(
            "{} more trials not listed (all passed or beyond the first {TRIALS_LISTED}); see ",
            trials.len() - listed.len()
        ))?;
        h.raw("<a href=\"trials.csv\">trials.csv</a>.</p>\n")?;
    }
    Ok(())
}

/// Columns of a drilled-down trial's request table: (column of `requests.csv`, header).
const REQUEST_DRILL_COLUMNS: [(&str, &str); 21] = [
    ("seq", "seq"),
    ("step", "step"),
    ("round", "round"),
    ("attempt", "attempt"),
    ("purpose", "purpose"),
    ("sent", "sent"),
    ("est_instructions", "instr."),
    ("est_memory", "memory"),
    ("est_recent_tail", "tail"),
    ("est_current_request", "current"),
    ("est_tool_schemas", "tools"),
    ("est_continuation", "contin."),
    ("est_framing", "framing"),
    ("est_total", "est. total"),
    ("available_input", "budget"),
    ("provider_input_tokens", "provider in"),
    ("rel_error", "rel. error"),
    ("over_budget", "over"),
    ("warned", "warned"),
    ("error_kind", "error"),
    ("checkpoint_id", "checkpoint"),
];

/// A cell value of the requests frame as text (`—` for null).
fn any_text(v: AnyValue<'_>) -> String {
    match v {
        AnyValue::Null => "—".into(),
        AnyValue::String(s) => s.to_string(),
        AnyValue::StringOwned(s) => s.to_string(),
        AnyValue::Float64(f) => format!("{f:.4}"),
        AnyValue::Float32(f) => format!("{f:.4}"),
        other => other.to_string(),
    }
}

/// The budget breakdown of a trial's requests: the first and last [`REQUESTS_SHOWN`]
/// (a long session has thousands), in a collapsed `<details>` (no script needed).
fn trial_requests(h: &mut Html<'_>, data: &ReportData<'_>, rows: Range<usize>) -> io::Result<()> {
    let m = rows.len();
    if m == 0 {
        return Ok(());
    }
    let df = data.requests.slice(rows.start as i64, m);
    let cols: Vec<Option<&Column>> = REQUEST_DRILL_COLUMNS
        .iter()
        .map(|(c, _)| df.column(c).ok())
        .collect();
    let shown: Vec<usize> = if m <= 2 * REQUESTS_SHOWN {
        (0..m).collect()
    } else {
        (0..REQUESTS_SHOWN).chain(m - REQUESTS_SHOWN..m).collect()
    };
    h.raw("<tr class=\"cx\"><td colspan=\"")?;
    h.raw(TRIAL_TABLE_COLUMNS)?;
    h.raw("\"><details><summary>")?;
    h.text(&if m > shown.len() {
        format!(
            "requests: showing first {REQUESTS_SHOWN} and last {REQUESTS_SHOWN} of {m} (all in requests.csv)"
        )
    } else {
        format!("requests: all {m}")
    })?;
    h.raw("</summary>\n<table class=\"sub\">\n")?;
    h.header_row(&REQUEST_DRILL_COLUMNS.map(|(_, label)| label))?;
    h.raw("<tbody>\n")?;
    for (k, &i) in shown.iter().enumerate() {
        if k > 0 && i != shown[k - 1] + 1 {
            h.raw("<tr><td colspan=\"21\">")?;
            h.text(&format!("… {} requests not shown …", i - shown[k - 1] - 1))?;
            h.raw("</td></tr>\n")?;
        }
        h.raw("<tr>")?;
        for c in &cols {
            let v = c
                .and_then(|c| c.get(i).ok())
                .map(any_text)
                .unwrap_or_else(|| "—".into());
            h.td_num(&bounded(&v))?;
        }
        h.raw("</tr>\n")?;
    }
    h.raw("</tbody>\n</table></details></td></tr>\n")
}

/// The newest messages of a trial's last sent request (redacted in storage, escaped here).
fn transcript_excerpt(h: &mut Html<'_>, x: &crate::excerpt::Excerpt) -> io::Result<()> {
    if x.messages.is_empty() {
        return Ok(());
    }
    h.raw("<tr class=\"cx\"><td colspan=\"")?;
    h.raw(TRIAL_TABLE_COLUMNS)?;
    h.raw("\"><details><summary>")?;
    h.text(&format!(
        "transcript excerpt: the last {} of {} messages of the last request sent",
        x.messages.len(),
        x.request_messages
    ))?;
    h.raw("</summary>\n<table class=\"sub\">\n")?;
    h.header_row(&["role", "content (first 400 characters)"])?;
    h.raw("<tbody>\n")?;
    for m in &x.messages {
        h.raw("<tr>")?;
        h.td(&m.role)?;
        h.td(&m.text)?;
        h.raw("</tr>\n")?;
    }
    h.raw("</tbody>\n</table></details></td></tr>\n")
}

fn charts_section(h: &mut Html<'_>, charts: &[Chart]) -> io::Result<()> {
    h.raw("<h2>Charts</h2>\n")?;
    for c in charts {
        h.raw("<figure>\n<figcaption>")?;
        h.text(c.title)?;
        h.raw("</figcaption>\n")?;
        match &c.svg {
            // Drawn by plotters, which escapes every text it writes, and checked by
            // `charts::is_inert` in `render_all`.
            Some(svg) => h.raw(svg)?,
            None => h.raw("<p><i>no data</i></p>")?,
        }
        h.raw("\n<p class=\"cn\">")?;
        h.text(&c.note)?;
        h.raw("</p>\n</figure>\n")?;
    }
    Ok(())
}

fn delta_cell(
    h: &mut Html<'_>,
    d: Option<f64>,
    higher_better: bool,
    fmt: fn(f64) -> String,
) -> io::Result<()> {
    match d {
        None => h.td_num("—"),
        Some(d) if d.abs() < 1e-12 => h.td_num(&format!("±{}", fmt(0.0))),
        Some(d) => {
            let good = (d > 0.0) == higher_better;
            h.raw(if good {
                "<td class=\"n up\">"
            } else {
                "<td class=\"n down\">"
            })?;
            h.text(&format!(
                "{}{}",
                if d > 0.0 { "+" } else { "−" },
                fmt(d.abs())
            ))?;
            h.raw("</td>")
        }
    }
}

/// How a compared metric is printed: shares in percent (points for deltas), counts and
/// tokens as numbers.
fn metric_fmt(name: &str) -> fn(f64) -> String {
    match name {
        "pass_rate" | "recall" | "token_reduction_vs_off" | "est_rel_error_p95" => {
            |v| format!("{:.1}%", v * 100.0)
        }
        _ => |v| format!("{v:.0}"),
    }
}

/// Several systems under test, one column each (`systems.csv` has every value).
fn systems_section(h: &mut Html<'_>, s: &crate::systems::Systems) -> io::Result<()> {
    h.raw("<h2>Systems under test side by side</h2>\n<p>Each column is one run of the same suite, read, summarised and gated on its own; nothing is combined. Every value is in <a href=\"systems.csv\">systems.csv</a>.</p>\n<table>\n<thead><tr>")?;
    h.th("mode")?;
    h.th("metric")?;
    for c in &s.columns {
        h.th(&c.system)?;
    }
    h.raw("</tr></thead>\n<tr>")?;
    h.td("")?;
    h.td("verdict (run)")?;
    for c in &s.columns {
        h.td(&format!("{} ({})", c.verdict, c.run_id))?;
    }
    h.raw("</tr>\n<tr>")?;
    h.td("")?;
    h.td("safety-invariant failures (candidate)")?;
    for c in &s.columns {
        h.td_num(&c.invariant_failures.map(num).unwrap_or_else(|| "—".into()))?;
    }
    h.raw("</tr>\n")?;
    for mode in s.modes() {
        for (label, show) in crate::systems::SHOWN {
            h.raw("<tr>")?;
            h.td(mode.as_str())?;
            h.td(label)?;
            for c in &s.columns {
                let v = c.mode(mode).and_then(show).unwrap_or_else(|| "—".into());
                h.td_num(&v)?;
            }
            h.raw("</tr>\n")?;
        }
    }
    h.raw("</table>\n")
}

fn baseline_section(h: &mut Html<'_>, c: &Comparison, candidate: Mode) -> io::Result<()> {
    h.raw("<h2>Compared with baseline</h2>\n<p>Baseline: ")?;
    h.text(&c.baseline_runs.join(", "))?;
    h.raw(" (")?;
    h.text(&c.baseline_dirs.join(", "))?;
    h.raw("). Deltas are this run − baseline; green is better. Every row is in <a href=\"baseline.csv\">baseline.csv</a>.</p>\n<table>\n")?;
    h.header_row(&["mode", "metric", "baseline", "this run", "Δ"])?;
    h.raw("<tbody>\n")?;
    for r in c.rows.iter().filter(|r| r.is_suite()) {
        for m in &METRICS {
            let (b, v, d) = r.values(m);
            let fmt = metric_fmt(m.0);
            h.raw(if r.mode == candidate {
                "<tr class=\"cand\">"
            } else {
                "<tr>"
            })?;
            h.td(r.mode.as_str())?;
            h.td(m.1)?;
            h.td_num(&b.map(fmt).unwrap_or_else(|| "—".into()))?;
            h.td_num(&v.map(fmt).unwrap_or_else(|| "—".into()))?;
            delta_cell(h, d, m.3, fmt)?;
            h.raw("</tr>\n")?;
        }
    }
    h.raw("</tbody>\n</table>\n<h3>Scenarios that changed</h3>\n")?;
    let changed: Vec<_> = c
        .rows
        .iter()
        .filter(|r| !r.is_suite() && r.changed())
        .collect();
    if changed.is_empty() {
        return h.raw("<p>No scenario changed status, trial outcomes or recall.</p>\n");
    }
    h.raw("<table>\n")?;
    h.header_row(&[
        "scenario",
        "mode",
        "status (baseline → this run)",
        "change",
        "trials fixed",
        "trials regressed",
        "pass rate Δ",
        "recall Δ",
    ])?;
    h.raw("<tbody>\n")?;
    for r in changed.iter().take(BASELINE_ROWS_SHOWN) {
        h.raw("<tr>")?;
        h.td(&r.scope)?;
        h.td(r.mode.as_str())?;
        h.td(&format!(
            "{} → {}",
            if r.baseline_status.is_empty() {
                "—"
            } else {
                r.baseline_status
            },
            if r.candidate_status.is_empty() {
                "—"
            } else {
                r.candidate_status
            }
        ))?;
        let class = match r.status_change {
            "fixed" => "s-pass",
            "regressed" => "s-fail",
            _ => "s-skip",
        };
        h.raw("<td class=\"")?;
        h.raw(class)?;
        h.raw("\">")?;
        h.text(r.status_change)?;
        h.raw("</td>")?;
        h.td_num(&r.trials_fixed.to_string())?;
        h.td_num(&r.trials_regressed.to_string())?;
        delta_cell(h, r.values(&METRICS[0]).2, true, metric_fmt("pass_rate"))?;
        delta_cell(h, r.values(&METRICS[1]).2, true, metric_fmt("recall"))?;
        h.raw("</tr>\n")?;
    }
    h.raw("</tbody>\n</table>\n")?;
    if changed.len() > BASELINE_ROWS_SHOWN {
        h.raw("<p>")?;
        h.text(&format!(
            "{} more changed rows in baseline.csv.",
            changed.len() - BASELINE_ROWS_SHOWN
        ))?;
        h.raw("</p>\n")?;
    }
    Ok(())
}

fn trial_row(h: &mut Html<'_>, t: &TrialRow, candidate: Mode) -> io::Result<()> {
    h.raw(if t.mode == candidate {
        "<tr class=\"cand\">"
    } else {
        "<tr>"
    })?;
    h.td(&t.trial_id)?;
    h.td(t.mode.as_str())?;
    h.td(t.outcome.status.as_str())?;
    h.raw("<td>")?;
    h.text(&t.outcome.reason)?;
    if let Some(step) = t.outcome.step {
        h.raw(" (step ")?;
        h.text(&step.to_string())?;
        h.raw(")")?;
    }
    if !t.outcome.detail.is_empty() {
        h.raw("<br>")?;
        h.text(&bounded(&t.outcome.detail))?;
    }
    h.raw("</td>")?;
    h.td(&t.expected_outcome)?;
    status_cell(h, if t.passed { "pass" } else { "fail" })?;
    let correct = t.recall.iter().filter(|r| r.correct).count();
    h.td_num(&if t.recall.is_empty() {
        "—".to_string()
    } else {
        format!("{correct}/{}", t.recall.len())
    })?;
    h.raw("<td>")?;
    for v in &t.verdicts {
        h.raw("<div><b>")?;
        h.text(&v.grader)?;
        h.raw("</b>: <span class=\"s-")?;
        h.raw(verdict_str(v.status))?;
        h.raw("\">")?;
        h.text(verdict_str(v.status))?;
        h.raw("</span> — ")?;
        h.text(&v.summary)?;
        if !v.evidence.is_empty() && v.status != VerdictStatus::Pass {
            h.raw("<ul class=\"ev\">")?;
            for e in v.evidence.iter().take(EVIDENCE_SHOWN) {
                evidence(h, e)?;
            }
            if v.evidence.len() > EVIDENCE_SHOWN {
                h.raw("<li>… ")?;
                h.text(&(v.evidence.len() - EVIDENCE_SHOWN).to_string())?;
                h.raw(" more</li>")?;
            }
            h.raw("</ul>")?;
        }
        h.raw("</div>")?;
    }
    h.raw("</td></tr>\n")
}

/// Columns of a trial's drill-down row (the colspan of its compaction-events cell).
const TRIAL_TABLE_COLUMNS: &str = "8";

/// A row under the trial's row with a small table of its compaction and checkpoint events
/// (the first [`COMPACTION_EVENTS_SHOWN`], the rest counted); nothing when it had none.
fn compaction_events(h: &mut Html<'_>, c: &TrialCompaction) -> io::Result<()> {
    if c.events.is_empty() {
        return Ok(());
    }
    h.raw("<tr class=\"cx\"><td colspan=\"")?;
    h.raw(TRIAL_TABLE_COLUMNS)?;
    h.raw("\"><b>compaction events</b> (")?;
    h.text(&format!(
        "{} completed, {} failed, {} unchanged",
        c.completed, c.failed, c.unchanged
    ))?;
    h.raw(")\n<table class=\"sub\">\n")?;
    h.header_row(&[
        "step",
        "trigger",
        "outcome",
        "reason",
        "checkpoint id",
        "range",
        "reclaimed",
        "summary tokens",
    ])?;
    h.raw("<tbody>\n")?;
    let dash = || "—".to_string();
    for e in c.events.iter().take(COMPACTION_EVENTS_SHOWN) {
        h.raw("<tr>")?;
        h.td_num(&e.step.to_string())?;
        h.td(e.trigger.as_deref().unwrap_or("—"))?;
        h.td(e.outcome)?;
        h.td(&e.reason.as_deref().map(bounded).unwrap_or_else(dash))?;
        h.td(&e.checkpoint_id.as_deref().map(bounded).unwrap_or_else(dash))?;
        h.td_num(
            &e.range
                .map(|(a, b)| format!("{a}–{b}"))
                .unwrap_or_else(dash),
        )?;
        h.td_num(
            &e.reclaimed_tokens
                .map(|v| v.to_string())
                .unwrap_or_else(dash),
        )?;
        h.td_num(&e.summary_tokens.map(|v| v.to_string()).unwrap_or_else(dash))?;
        h.raw("</tr>\n")?;
    }
    if c.events.len() > COMPACTION_EVENTS_SHOWN {
        h.raw("<tr><td colspan=\"8\">… ")?;
        h.text(&(c.events.len() - COMPACTION_EVENTS_SHOWN).to_string())?;
        h.raw(" more (see events.jsonl)</td></tr>\n")?;
    }
    h.raw("</tbody>\n</table></td></tr>\n")
}

fn evidence(h: &mut Html<'_>, e: &Evidence) -> io::Result<()> {
    h.raw("<li>")?;
    let mut place = Vec::new();
    if let Some(r) = e.request {
        place.push(format!("request {r}"));
    }
    if let Some(s) = e.step {
        place.push(format!("step {s}"));
    }
    if !place.is_empty() {
        h.raw("[")?;
        h.text(&place.join(", "))?;
        h.raw("] ")?;
    }
    h.text(&bounded(&e.note))?;
    if let Some(x) = &e.expected {
        h.raw("<br>expected: <code>")?;
        h.text(&bounded(x))?;
        h.raw("</code>")?;
    }
    if let Some(x) = &e.seen {
        h.raw("<br>seen: <code>")?;
        h.text(&bounded(x))?;
        h.raw("</code>")?;
    }
    if let Some(x) = &e.excerpt {
        h.raw("<br>excerpt: <code>")?;
        h.text(&bounded(x))?;
        h.raw("</code>")?;
    }
    h.raw("</li>")
}

/// At most [`TEXT_SHOWN`] characters, cut on a character boundary.
fn bounded(s: &str) -> String {
    match s.char_indices().nth(TEXT_SHOWN) {
        None => s.to_string(),
        Some((i, _)) => format!("{}…", &s[..i]),
    }
}

fn manifest(h: &mut Html<'_>, data: &ReportData<'_>) -> io::Result<()> {
    let run = data.run;
    h.raw("<h2>Run manifest</h2>\n<table>\n")?;
    h.header_row(&[
        "run id",
        "directory",
        "created",
        "ctxbench",
        "seed",
        "system under test",
        "provider",
        "modes",
        "trials / cell",
        "concurrency",
        "suite",
        "matrix",
    ])?;
    h.raw("<tbody>\n")?;
    for r in &run.runs {
        let m = &r.manifest;
        h.raw("<tr>")?;
        h.td(&m.run_id)?;
        h.td(&r.dir.display().to_string())?;
        h.td(&m.created_at)?;
        h.td(&m.ctxbench_version)?;
        h.td_num(&m.seed.to_string())?;
        h.td(crate::read::sut_of(m))?;
        h.td(&m.provider)?;
        h.td(&modes(&m.modes))?;
        h.td_num(&crate::read::trials_text(m.trials))?;
        h.td_num(&m.concurrency.to_string())?;
        h.td(&m.suite_source)?;
        h.td_num(&m.matrix_size.to_string())?;
        h.raw("</tr>\n")?;
    }
    h.raw("</tbody>\n</table>\n<p>")?;
    h.text(&format!(
        "{} trials, {} requests and {} compaction-related events read; {} torn line(s), {} orphan and {} superseded request row(s), {} orphan and {} superseded event(s) skipped.",
        run.trials.len(),
        run.request_count(),
        run.events.len(),
        run.torn_lines,
        run.orphan_requests,
        run.duplicate_requests,
        run.orphan_events,
        run.duplicate_events
    ))?;
    h.raw("</p>\n<h3>Scenarios</h3>\n<table>\n")?;
    h.header_row(&["id", "title", "tags", "modes", "source", "sha256"])?;
    h.raw("<tbody>\n")?;
    for s in run.scenarios() {
        h.raw("<tr>")?;
        h.td(&s.id)?;
        h.td(&s.title)?;
        h.td(&s.tags.join(", "))?;
        h.td(&modes(&s.modes))?;
        h.td(&s.source)?;
        h.raw("<td><code>")?;
        h.text(&s.source_hash)?;
        h.raw("</code></td></tr>\n")?;
    }
    h.raw("</tbody>\n</table>\n<h3>Registered gates</h3>\n")?;
    match &run.manifest().gates {
        None => h.raw("<p>None: this run registered no gates before it ran.</p>\n")?,
        Some(g) => {
            h.raw("<p>")?;
            h.text(&format!(
                "{} — sha256 {} — registered {}",
                g.source, g.sha256, g.registered_at
            ))?;
            h.raw("</p>\n<pre>")?;
            h.text(&g.text)?;
            h.raw("</pre>\n")?;
        }
    }
    Ok(())
}

fn modes(m: &[Mode]) -> String {
    crate::read::modes_text(m, ", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_and_raw_is_not() {
        let mut out = Vec::new();
        let mut h = Html { w: &mut out };
        h.raw("<b>").expect("write");
        h.text("<script>alert(1)</script>\"><img src=x onerror=alert(1)>")
            .expect("write");
        let s = String::from_utf8(out).expect("utf8");
        assert!(s.starts_with("<b>"));
        assert!(!s[3..].contains('<') && !s.contains('"'), "{s}");
    }

    #[test]
    fn bidi_overrides_are_shown_not_obeyed() {
        let mut out = Vec::new();
        let mut h = Html { w: &mut out };
        h.text("invoice\u{202E}fdp.exe \u{2067}x\u{2069}")
            .expect("write");
        let s = String::from_utf8(out).expect("utf8");
        assert_eq!(
            s,
            "invoice&lt;U+202E&gt;fdp.exe &lt;U+2067&gt;x&lt;U+2069&gt;"
        );
    }

    #[test]
    fn bounded_cuts_on_char_boundary() {
        let long = "é".repeat(TEXT_SHOWN + 10);
        let b = bounded(&long);
        assert_eq!(b.chars().count(), TEXT_SHOWN + 1);
        assert!(b.ends_with('…'));
        assert_eq!(bounded("short"), "short");
    }
}
