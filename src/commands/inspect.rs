//! `ctxbench inspect`: one run, or one trial of it, in the terminal.
//!
//! It reads run storage only, line by line (a torn last line of a run still being written
//! is skipped, not an error), and keeps in memory only the rows of the trial it shows and
//! the messages those rows name. Every string from the run is made terminal-safe.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::path::Path;

use anyhow::Context;
use ctxbench_harness::storage::files;
use ctxbench_harness::storage::schema::{
    EventRow, MessageRow, OutcomeStatus, RequestRow, TrialRow, VerdictStatus,
};
use ctxbench_harness::visible::terminal_safe;

use crate::cli::InspectArgs;
use crate::exit;

/// Characters of a message excerpt.
const EXCERPT_CHARS: usize = 90;
/// Evidence items shown per failing grader.
const EVIDENCE_SHOWN: usize = 5;

pub fn inspect(args: InspectArgs) -> anyhow::Result<i32> {
    let colour = match args.color.as_str() {
        "always" => true,
        "never" => false,
        "auto" => std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        other => {
            return Err(exit::usage(format!(
                "--color {other}: expected `auto`, `always` or `never`"
            )))
        }
    };
    let p = Paint(colour);
    let dir = &args.run;
    if !dir.join(files::TRIALS).is_file() {
        return Err(exit::usage(format!(
            "{}: no {} (not a run directory, or no trial has finished yet)",
            dir.display(),
            files::TRIALS
        )));
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match &args.trial {
        None => list(dir, &p, &mut out)?,
        Some(id) => trial(dir, id, args.request, &p, &mut out)?,
    }
    Ok(exit::OK)
}

/// Colour when enabled (ANSI), plain otherwise.
struct Paint(bool);

impl Paint {
    fn wrap(&self, code: &str, s: &str) -> String {
        if self.0 {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }
    fn bold(&self, s: &str) -> String {
        self.wrap("1", s)
    }
    fn red(&self, s: &str) -> String {
        self.wrap("31", s)
    }
    fn green(&self, s: &str) -> String {
        self.wrap("32", s)
    }
    fn yellow(&self, s: &str) -> String {
        self.wrap("33", s)
    }
    fn dim(&self, s: &str) -> String {
        self.wrap("2", s)
    }
}

/// Every row of a JSONL file that parses as `T`, in order; unreadable lines are counted (a
/// run being written may end in a torn line).
fn rows<T: serde::de::DeserializeOwned>(
    path: &Path,
    mut keep: impl FnMut(T),
) -> anyhow::Result<usize> {
    let Ok(file) = File::open(path) else {
        return Ok(0);
    };
    let mut skipped = 0;
    for line in BufReader::new(file).lines() {
        let line = line.with_context(|| format!("reading {}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<T>(&line) {
            Ok(row) => keep(row),
            Err(_) => skipped += 1,
        }
    }
    Ok(skipped)
}

fn safe(s: &str) -> String {
    terminal_safe(s).into_owned()
}

/// One line of at most `n` characters.
fn excerpt(s: &str, n: usize) -> String {
    let flat: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut e: String = flat.chars().take(n).collect();
    if flat.chars().count() > n {
        e.push('…');
    }
    safe(&e)
}

fn status_text(p: &Paint, t: &TrialRow) -> String {
    let s = t.outcome.status.as_str();
    let s = if t.outcome.reason.is_empty() {
        s.to_string()
    } else {
        format!("{s} ({})", safe(&t.outcome.reason))
    };
    match t.outcome.status {
        OutcomeStatus::Success => p.green(&s),
        OutcomeStatus::Errored => p.yellow(&s),
        _ => p.red(&s),
    }
}

fn failing(t: &TrialRow) -> Vec<&str> {
    t.verdicts
        .iter()
        .filter(|v| v.status == VerdictStatus::Fail)
        .map(|v| v.grader.as_str())
        .collect()
}

/// The run's trials, failed ones first.
fn list(dir: &Path, p: &Paint, out: &mut impl Write) -> anyhow::Result<()> {
    let mut trials: Vec<TrialRow> = Vec::new();
    let skipped = rows(&dir.join(files::TRIALS), |t: TrialRow| trials.push(t))?;
    // A resumed trial keeps its newest row.
    let mut by_id: BTreeMap<String, TrialRow> = BTreeMap::new();
    for t in trials {
        by_id.insert(t.trial_id.clone(), t);
    }
    let (failed, passed): (Vec<&TrialRow>, Vec<&TrialRow>) =
        by_id.values().partition(|t| !t.passed);
    writeln!(
        out,
        "{} {} trial(s): {} failed, {} passed",
        p.bold("run"),
        by_id.len(),
        failed.len(),
        passed.len()
    )?;
    if skipped > 0 {
        writeln!(
            out,
            "{}",
            p.yellow(&format!(
                "({skipped} unreadable line(s) in {} skipped: a run still being written?)",
                files::TRIALS
            ))
        )?;
    }
    if !failed.is_empty() {
        writeln!(out, "\n{}", p.bold("failed"))?;
        for t in &failed {
            let graders = failing(t);
            writeln!(
                out,
                "  {:<40} {}{}",
                safe(&t.trial_id),
                status_text(p, t),
                if graders.is_empty() {
                    String::new()
                } else {
                    format!("  {}", p.red(&safe(&graders.join(", "))))
                }
            )?;
        }
    }
    if !passed.is_empty() {
        writeln!(out, "\n{}", p.bold("passed"))?;
        for t in &passed {
            writeln!(out, "  {:<40} {}", safe(&t.trial_id), status_text(p, t))?;
        }
    }
    if let Some(first) = failed.first() {
        writeln!(
            out,
            "\n{}",
            p.dim(&format!(
                "next: ctxbench inspect {} --trial {}",
                safe(&dir.display().to_string()),
                safe(&first.trial_id)
            ))
        )?;
    }
    Ok(())
}

/// One trial: header, failing graders, then its requests step by step.
fn trial(
    dir: &Path,
    id: &str,
    only: Option<u64>,
    p: &Paint,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let mut found: Option<TrialRow> = None;
    rows(&dir.join(files::TRIALS), |t: TrialRow| {
        if t.trial_id == id {
            found = Some(t);
        }
    })?;
    let Some(t) = found else {
        return Err(exit::usage(format!(
            "{}: no finished trial `{}` (run `ctxbench inspect {}` for the list)",
            dir.display(),
            safe(id),
            dir.display()
        )));
    };
    // Rows in file order: a trial's rows are appended in the order they happened.
    let mut requests: Vec<RequestRow> = Vec::new();
    rows(&dir.join(files::REQUESTS), |r: RequestRow| {
        if r.trial_id == t.trial_id && r.segment == t.segment {
            requests.push(r);
        }
    })?;
    // Only the events shown (compaction, checkpoint) and those that place requests among
    // them (budgeted, limit reached).
    let mut events: Vec<EventRow> = Vec::new();
    rows(&dir.join(files::EVENTS), |e: EventRow| {
        if e.trial_id == t.trial_id
            && e.segment == t.segment
            && (shown_event(&e) || e.kind == BUDGETED || e.kind == LIMIT_REACHED)
        {
            events.push(e);
        }
    })?;
    let sent: Vec<&RequestRow> = requests.iter().filter(|r| r.sent).collect();
    let stops = requests.len() - sent.len();
    if let Some(n) = only {
        let found = if n == STOPS {
            stops > 0
        } else {
            sent.iter().any(|r| r.seq == n)
        };
        if !found {
            return Err(exit::usage(format!(
                "trial `{}` has no {} (it has {}{})",
                safe(id),
                if n == STOPS {
                    "request stopped before sending".to_string()
                } else {
                    format!("request {n}")
                },
                counts_text(&sent, stops),
                if stops > 0 && n != STOPS {
                    format!("; --request {STOPS} shows those stopped before sending")
                } else {
                    String::new()
                }
            )));
        }
    }
    // Only the messages these requests name.
    let wanted: HashSet<&str> = requests
        .iter()
        .flat_map(|r| r.message_hashes.iter().map(String::as_str))
        .collect();
    let mut messages: HashMap<String, MessageRow> = HashMap::new();
    rows(&dir.join(files::MESSAGES), |m: MessageRow| {
        if wanted.contains(m.hash.as_str()) {
            messages.insert(m.hash.clone(), m);
        }
    })?;

    header(&t, p, out)?;
    if only.is_none() {
        verdicts(&t, p, out)?;
    }
    let items = timeline(&requests, &events);
    let compactions = items.iter().filter(|i| matches!(i, Item::Event(_))).count();
    writeln!(
        out,
        "\n{} {}; {} compaction and checkpoint event(s), step by step",
        p.bold("requests"),
        counts_text(&sent, stops),
        compactions
    )?;
    if stops > 0 {
        writeln!(
            out,
            "  {}",
            p.dim(&format!(
                "a request stopped before sending has no number (seq {STOPS} in {}): it is shown as `stop` with its step; --request {STOPS} shows them all",
                files::REQUESTS
            ))
        )?;
    }
    let selected = |r: &RequestRow| match only {
        None => true,
        Some(STOPS) => !r.sent,
        Some(n) => r.sent && r.seq == n,
    };
    // With --request, the compaction events of the selected requests' steps.
    let steps: HashSet<u64> = requests
        .iter()
        .filter(|r| selected(r))
        .map(|r| r.step)
        .collect();
    let mut previous: Option<&RequestRow> = None;
    for item in &items {
        match *item {
            Item::Event(e) => {
                if only.is_none() || steps.contains(&e.step) {
                    writeln!(
                        out,
                        "  {} {}",
                        p.dim(&format!("step {}", e.step)),
                        event_line(e, p)
                    )?;
                }
            }
            Item::Request(r, limit) => {
                if selected(r) {
                    request(r, limit, previous, &messages, only.is_some(), p, out)?;
                }
                if r.sent {
                    previous = Some(r);
                }
            }
        }
    }
    Ok(())
}

/// `--request` value that selects the requests stopped before sending (their `seq`).
const STOPS: u64 = 0;
const BUDGETED: &str = "context.budgeted";
const LIMIT_REACHED: &str = "context.limit_reached";

/// A compaction or checkpoint event: shown in a trial's timeline.
fn shown_event(e: &EventRow) -> bool {
    e.kind.starts_with("context.compaction") || e.kind.starts_with("context.checkpoint")
}

/// "75 sent (#1–#75), 28 stopped before sending".
fn counts_text(sent: &[&RequestRow], stops: usize) -> String {
    let mut s = format!("{} sent", sent.len());
    let first = sent.iter().map(|r| r.seq).min();
    let last = sent.iter().map(|r| r.seq).max();
    match (first, last) {
        (Some(a), Some(b)) if a == b => s.push_str(&format!(" (#{a})")),
        (Some(a), Some(b)) => s.push_str(&format!(" (#{a}–#{b})")),
        _ => {}
    }
    if stops > 0 {
        s.push_str(&format!(", {stops} stopped before sending"));
    }
    s
}

/// One line of a trial's timeline.
enum Item<'a> {
    /// A compaction or checkpoint event.
    Event(&'a EventRow),
    /// A request row, and for a stop before sending its `context.limit_reached` event.
    Request(&'a RequestRow, Option<&'a EventRow>),
}

/// A trial's requests and compaction events in the order they happened: by step, and
/// within a step each request placed after the event that announced it — a sent turn
/// request after its `context.budgeted`, a stop after its `context.limit_reached`, a
/// summarization request after the `context.compaction.started` it serves. Every request
/// and every shown event appears exactly once.
fn timeline<'a>(requests: &'a [RequestRow], events: &'a [EventRow]) -> Vec<Item<'a>> {
    type Step<'a> = (Vec<&'a RequestRow>, Vec<&'a EventRow>);
    let mut by_step: BTreeMap<u64, Step<'a>> = BTreeMap::new();
    for r in requests {
        by_step.entry(r.step).or_default().0.push(r);
    }
    for e in events {
        by_step.entry(e.step).or_default().1.push(e);
    }
    let mut items = Vec::new();
    for (_, (reqs, mut evs)) in by_step {
        evs.sort_by_key(|e| e.seq);
        // The budget announcements of sent turn requests: a `context.budgeted` followed by
        // a `context.limit_reached` announced a stop instead.
        let mut turns: Vec<u64> = Vec::new();
        let mut pending: Option<u64> = None;
        for e in &evs {
            if e.kind == BUDGETED {
                turns.extend(pending.replace(e.seq));
            } else if e.kind == LIMIT_REACHED {
                pending = None;
            }
        }
        turns.extend(pending);
        let mut limits = evs.iter().filter(|e| e.kind == LIMIT_REACHED).copied();
        let starts: Vec<u64> = evs
            .iter()
            .filter(|e| e.kind == "context.compaction.started")
            .map(|e| e.seq)
            .collect();
        let mut turns = turns.into_iter();
        // Each request's place: after the event with this seq (never before the previous
        // request's, so file order is kept within the step).
        let mut placed: Vec<(u64, &RequestRow, Option<&EventRow>)> = Vec::new();
        let (mut last, mut last_turn) = (0u64, 0u64);
        for r in reqs {
            let (at, limit) = if !r.sent {
                let limit = limits.next();
                let at = limit.map_or(last, |e| e.seq);
                last_turn = at;
                (at, limit)
            } else if r.purpose == "summary" {
                let at = starts.iter().copied().find(|&s| s > last_turn);
                (at.unwrap_or(last), None)
            } else {
                let at = turns.next().unwrap_or(last);
                last_turn = at;
                (at, None)
            };
            last = last.max(at);
            placed.push((last, r, limit));
        }
        let mut placed = placed.into_iter().peekable();
        for e in evs.into_iter().filter(|e| shown_event(e)) {
            while let Some((_, r, limit)) = placed.next_if(|(at, _, _)| *at < e.seq) {
                items.push(Item::Request(r, limit));
            }
            items.push(Item::Event(e));
        }
        items.extend(placed.map(|(_, r, limit)| Item::Request(r, limit)));
    }
    items
}

fn header(t: &TrialRow, p: &Paint, out: &mut impl Write) -> anyhow::Result<()> {
    writeln!(
        out,
        "{} {}  scenario {}  mode {}  seed {}  {}",
        p.bold("trial"),
        safe(&t.trial_id),
        safe(&t.scenario),
        t.mode.as_str(),
        t.seed,
        safe(&t.instance)
    )?;
    writeln!(
        out,
        "outcome {} (expected {})  {}  turns {}/{}  requests {} sent{}",
        status_text(p, t),
        safe(&t.expected_outcome),
        if t.passed {
            p.green("passed")
        } else {
            p.red("not passed")
        },
        t.stats.turns_completed,
        t.stats.turns_scripted,
        t.stats.requests,
        if t.stats.limit_stops > 0 {
            format!(", {} stopped before sending", t.stats.limit_stops)
        } else {
            String::new()
        }
    )?;
    if !t.outcome.detail.is_empty() {
        writeln!(out, "  {}", p.dim(&excerpt(&t.outcome.detail, 200)))?;
    }
    Ok(())
}

fn verdicts(t: &TrialRow, p: &Paint, out: &mut impl Write) -> anyhow::Result<()> {
    let failed: Vec<_> = t
        .verdicts
        .iter()
        .filter(|v| v.status == VerdictStatus::Fail)
        .collect();
    if failed.is_empty() {
        return Ok(());
    }
    writeln!(out, "\n{}", p.bold("failing graders"))?;
    for v in failed {
        writeln!(
            out,
            "  {} — {}",
            p.red(&safe(&v.grader)),
            excerpt(&v.summary, 160)
        )?;
        for e in v.evidence.iter().take(EVIDENCE_SHOWN) {
            let mut at = Vec::new();
            if let Some(s) = e.step {
                at.push(format!("step {s}"));
            }
            if let Some(r) = e.request {
                at.push(format!("request {r}"));
            }
            writeln!(out, "    - {}: {}", at.join(", "), excerpt(&e.note, 160))?;
            if let (Some(x), Some(s)) = (&e.expected, &e.seen) {
                writeln!(
                    out,
                    "      {} {}  {} {}",
                    p.dim("expected"),
                    excerpt(x, 70),
                    p.dim("seen"),
                    excerpt(s, 70)
                )?;
            }
        }
        if v.evidence.len() > EVIDENCE_SHOWN {
            writeln!(
                out,
                "    {}",
                p.dim(&format!("… {} more", v.evidence.len() - EVIDENCE_SHOWN))
            )?;
        }
    }
    Ok(())
}

fn event_line(e: &EventRow, p: &Paint) -> String {
    let field = |k: &str| {
        e.data
            .get(k)
            .map(|v| match v {
                serde_json::Value::String(s) => safe(s),
                other => safe(&other.to_string()),
            })
            .unwrap_or_default()
    };
    let kind = e.kind.trim_start_matches("context.");
    let text = match kind {
        "compaction.completed" => format!(
            "compaction completed (trigger {}, reclaimed {} tokens, checkpoint {})",
            field("trigger"),
            field("reclaimed_tokens"),
            short(&field("checkpoint_id"))
        ),
        "compaction.failed" => format!(
            "compaction failed: {} ({}; trigger {})",
            field("reason"),
            excerpt(&field("detail"), 80),
            field("trigger")
        ),
        "compaction.unchanged" => format!(
            "compaction unchanged: {} (trigger {})",
            field("reason"),
            field("trigger")
        ),
        "compaction.preview" => format!(
            "compaction preview: messages {}..{} would be summarized, estimate {} → {} of {} available",
            field("from"),
            field("to"),
            field("current_total"),
            field("projected_total"),
            field("available_input")
        ),
        "compaction.started" => format!(
            "compaction started (trigger {}, strategy {})",
            field("trigger"),
            field("strategy")
        ),
        "checkpoint.reused" => format!(
            "checkpoint reused: {}",
            short(&field("checkpoint_id"))
        ),
        "checkpoint.rejected" => format!(
            "checkpoint rejected: {}",
            excerpt(&field("reason"), 100)
        ),
        other => format!("{} {}", other, excerpt(&e.data.to_string(), 80)),
    };
    if kind == "compaction.failed" || kind == "checkpoint.rejected" {
        p.red(&text)
    } else {
        p.yellow(&text)
    }
}

fn short(s: &str) -> String {
    s.chars().take(12).collect()
}

fn request(
    r: &RequestRow,
    limit: Option<&EventRow>,
    previous: Option<&RequestRow>,
    messages: &HashMap<String, MessageRow>,
    full: bool,
    p: &Paint,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let b = &r.budget;
    let not_sent = if r.sent {
        String::new()
    } else {
        let reason = limit
            .and_then(|e| e.data.get("reason"))
            .and_then(|v| v.as_str())
            .filter(|s| !s.is_empty())
            .map(|s| format!(" ({})", safe(s)))
            .unwrap_or_default();
        format!(
            "  {}",
            p.red(&format!("not sent: stopped before sending{reason}"))
        )
    };
    writeln!(
        out,
        "  {} step {} round {} attempt {}  {}{}",
        p.bold(&if r.sent {
            format!("#{}", r.seq)
        } else {
            "stop".to_string()
        }),
        r.step,
        r.round,
        r.attempt,
        safe(&r.purpose),
        not_sent
    )?;
    if b.available_input > 0 {
        let total = format!("{} / {} available", b.total, b.available_input);
        writeln!(
            out,
            "     budget {}: instructions {} · memory {} · tail {} · current {} · tools {} · continuation {} · framing {}",
            if b.total > b.available_input {
                p.red(&total)
            } else {
                total
            },
            b.instructions,
            b.memory,
            b.recent_tail,
            b.current_request,
            b.tool_schemas,
            b.continuation,
            b.framing
        )?;
    }
    if !r.sent {
        let mut flags = Vec::new();
        if r.over_budget {
            flags.push(p.red("OVER BUDGET"));
        }
        if r.warned {
            flags.push(p.yellow("warned"));
        }
        writeln!(
            out,
            "     estimate {} → not sent{}",
            b.total,
            if flags.is_empty() {
                String::new()
            } else {
                format!("  {}", flags.join(", "))
            }
        )?;
        if let Some(detail) = limit
            .and_then(|e| e.data.get("detail"))
            .and_then(|v| v.as_str())
            .filter(|s| !s.is_empty())
        {
            writeln!(out, "     {}", p.dim(&excerpt(detail, 160)))?;
        }
        return Ok(());
    }
    let provider = r
        .provider_input_tokens
        .map(|n| n.to_string())
        .or_else(|| r.overflow_input_tokens.map(|n| format!("{n} (overflow)")))
        .unwrap_or_else(|| "—".into());
    let error = match (r.provider_input_tokens.or(r.overflow_input_tokens), b.total) {
        (Some(prov), est) if prov > 0 && est > 0 => {
            format!(
                " ({:+.1}%)",
                (est as f64 - prov as f64) / prov as f64 * 100.0
            )
        }
        _ => String::new(),
    };
    let mut flags = Vec::new();
    if r.over_budget {
        flags.push(p.red("OVER BUDGET"));
    }
    if r.warned {
        flags.push(p.yellow("warned"));
    }
    if let Some(k) = &r.error_kind {
        flags.push(p.red(&safe(k)));
    }
    if let Some(reason) = &r.retry_reason {
        flags.push(p.yellow(&format!("retry: {}", safe(reason))));
    }
    writeln!(
        out,
        "     estimate {} (ctxbench {}) → provider {}{}{}{}",
        b.total,
        r.observed_estimate,
        provider,
        error,
        if flags.is_empty() {
            String::new()
        } else {
            format!("  {}", flags.join(", "))
        },
        r.checkpoint_id
            .as_deref()
            .map(|c| format!("  checkpoint {}", safe(&short(c))))
            .unwrap_or_default()
    )?;
    // What changed since the previous request: messages added and dropped, by hash.
    let before: HashSet<&str> = previous
        .map(|q| q.message_hashes.iter().map(String::as_str).collect())
        .unwrap_or_default();
    let now: HashSet<&str> = r.message_hashes.iter().map(String::as_str).collect();
    let added: Vec<&String> = r
        .message_hashes
        .iter()
        .filter(|h| full || !before.contains(h.as_str()))
        .collect();
    let dropped = before.iter().filter(|h| !now.contains(*h)).count();
    writeln!(
        out,
        "     {}",
        p.dim(&format!(
            "{} message(s){}{}",
            r.message_hashes.len(),
            if full {
                String::new()
            } else {
                format!(", +{} new", added.len())
            },
            if dropped > 0 {
                format!(", −{dropped} dropped since the previous request")
            } else {
                String::new()
            }
        ))
    )?;
    for h in added.iter().take(if full { usize::MAX } else { 3 }) {
        let line = match messages.get(h.as_str()) {
            Some(m) if m.message.content.trim().is_empty() && !m.message.tool_calls.is_empty() => {
                let calls: Vec<String> = m
                    .message
                    .tool_calls
                    .iter()
                    .map(|c| format!("{}({})", c.name, c.arguments))
                    .collect();
                format!(
                    "{:<9} calls {}",
                    m.message.role.as_str(),
                    excerpt(&calls.join(", "), EXCERPT_CHARS)
                )
            }
            Some(m) => format!(
                "{:<9} {}",
                m.message.role.as_str(),
                excerpt(&m.message.content, EXCERPT_CHARS)
            ),
            None => format!("(message {} not stored)", short(h)),
        };
        writeln!(out, "       {}", p.dim(&line))?;
    }
    if !full && added.len() > 3 {
        writeln!(
            out,
            "       {}",
            p.dim(&format!("… {} more", added.len() - 3))
        )?;
    }
    Ok(())
}
