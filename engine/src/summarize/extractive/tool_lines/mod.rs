//! Key lines of tool results: what an agent looked up and will need again.
//!
//! Tool output is the bulk of a coding session and mostly noise, but a few kinds of line in
//! it are what the agent acted on: a setting or constant (`NAME = value`, `key: value`), a
//! version, a test outcome (passed/failed counts), an error, an exit code, a flag, a path.
//! Those are recognised by their *shape* — an identifier bound to a literal, a count next
//! to an outcome word, a line that opens with an error marker — so they hold for any tool,
//! language or project. An assignment whose right-hand side is an expression (a call, a
//! block) is code, not a setting, and is skipped; so is a `key: value` whose value is prose.
//!
//! Each result contributes at most [`MAX_LINES_PER_RESULT`] lines, each clipped, attributed
//! to its call (`read_file(src/config.py)`); test outcomes, errors and exit codes are
//! verification and are framed as history by the caller.
//!
//! `shapes` recognises one line's shape; this module ranks a whole result's lines (tables,
//! look-alike rows, failure lists, tracebacks); `labels` names the call a line came from.

use std::collections::HashMap;
use std::sync::OnceLock;

use regex::Regex;

mod labels;
mod shapes;
#[cfg(test)]
mod tests;

pub use labels::{call_label, call_label_long, runs_a_command, shortened_label};
pub(super) use shapes::key_value;
use shapes::*;

use super::claims::claims;
use super::frames::{crash_sites, frame_lines, raised_exceptions};
use super::headings::{separator, Columns, Sections};
use super::outliers::outlier_rows;
use super::text::{clip, occurrence_key, one_line, undecorated, words};

/// Most key lines kept from one tool result.
pub const MAX_LINES_PER_RESULT: usize = 6;
/// Longest key line a summary keeps, in characters.
pub const MAX_LINE_CHARS: usize = 160;
/// Longest key line [`key_lines`] returns, in characters: a projection keeps a whole log
/// line (an exception with its message runs past 160), a summary clips it further.
pub const KEY_LINE_CHARS: usize = 240;
/// A result at most this long (one line, a few words) is its own key line: a short output
/// is the fact ("Deleted 3 files", "3.11.4"). Prose is longer.
const SHORT_RESULT_CHARS: usize = 100;
/// Most words of a short result.
const SHORT_RESULT_WORDS: usize = 12;

/// One candidate line of a tool result.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyLine {
    /// The line, on one line and clipped.
    pub text: String,
    /// Its rank among the result's lines (higher first).
    pub score: i64,
    /// A test outcome, error or exit code: history, to be labelled as such.
    pub verification: bool,
    /// Its position in the result (lines are rendered in this order).
    pub position: usize,
}

/// A heading that opens a list of what failed (`Failed examples:`, `failures:`,
/// `Failing tests:`): rspec, cargo test and others list the failures under one, a line
/// each, and those lines carry no failure marker of their own.
fn failure_heading() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(r"(?i)^(failed|failing|failures?|errors?)(\s+(examples?|tests?|specs?|cases?))?\s*:\s*$")
            .expect("static regex")
    })
}

/// What standing out among a table's look-alike rows adds to a row's rank
/// (`outliers.rs`): enough to rank it first among them.
const OUTLIER_BONUS: i64 = 3;
/// Rank of a row that stands out but is no key line by its own shape, before the bonus:
/// that of a line naming a version.
const OUTLIER_ROW: i64 = 4;
/// What each further column a row stands out in adds, at most this many times.
const MAX_MORE_COLUMNS: i64 = 3;

/// Rank of the exception a Python traceback ends with (`frames.rs`): what went wrong.
const RAISED: i64 = 11;

/// Rank of a frame that says where an error happened (`frames.rs`): below the error…
const CRASH_SITE: i64 = 5;
/// …and of the root cause's, above it: it is where the fix goes.
const ROOT_CRASH_SITE: i64 = 9;

/// What a setting whose value is zero gives up (`evicted_keys:0` among a dump's
/// counters): an untouched counter is rarely what the command was run for.
const ZERO_PENALTY: i64 = 2;

/// Most rows of a table whose every row is a key line ([`DATA_ROW`]); a longer one keeps
/// the rows that stand out.
const MAX_SMALL_TABLE_ROWS: usize = 12;
/// Rank of a row of a small table: that of a setting.
const DATA_ROW: i64 = 5;

/// Whether `line` is a table row with a value: cells split by `|` or `│` (psql, box-drawn
/// CLI tables), two of them filled, a digit in one, and no separator.
fn table_row(line: &str) -> bool {
    if separator(line) || line.chars().all(|c| "─│┼├┤┌┐└┘┬┴═║ +-|".contains(c))
    {
        return false;
    }
    let cells: Vec<&str> = line
        .split(['|', '│'])
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    cells.len() >= 2
        && cells
            .iter()
            .any(|c| c.chars().any(|ch| ch.is_ascii_digit()))
}

/// The number of fields of a CSV result: every non-empty line has the same number (two or
/// more) of comma-separated fields, and there are at least two lines.
fn csv_columns(lines: &[&str]) -> Option<usize> {
    let mut filled = lines.iter().filter(|l| !l.is_empty());
    let n = filled.next()?.split(',').count();
    let mut rows = 1;
    for l in filled {
        if l.split(',').count() != n {
            return None;
        }
        rows += 1;
    }
    (n >= 2 && rows >= 2).then_some(n)
}

/// Whether `line` is a CSV data row of `n` fields with a value (a digit) in one.
fn csv_row(line: &str, n: usize) -> bool {
    line.split(',').count() == n && line.chars().any(|c| c.is_ascii_digit())
}

/// Whether `line` opens a mapping and sets nothing itself (`batch/logs:`, `"server":`,
/// `- tail_sampling:`): its settings are the lines under it.
fn mapping_header(line: &str) -> bool {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(r#"^(?:-\s+)?["']?[\w./\-]+["']?\s*:\s*\{?$"#).expect("static regex")
    })
    .is_match(line)
}

/// Whether `line` is a table's row-count footer (`(4 rows)`, `4 rows in set (0.01 sec)`):
/// it counts the rows above it, which say what the query was for.
fn table_footer(line: &str) -> bool {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(r"(?i)^\(?\d+ rows?\)?(?: in set)?(?: \([\d.]+ sec\))?$").expect("static regex")
    })
    .is_match(line)
}

/// What a manifest's schema header line gives up (see [`schema_header`]).
const SCHEMA_HEADER_PENALTY: i64 = 3;

/// Whether `line` is a manifest's schema header (`apiVersion: apps/v1`, `kind: Deployment`,
/// `"$schema": …`): boilerplate every file of its kind opens with, not a setting of this one.
fn schema_header(line: &str) -> bool {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(r#"^["']?(?:apiVersion|kind|\$schema)["']?\s*:"#).expect("static regex")
    })
    .is_match(line)
}

/// Whether `line` sets something to zero (`rejected_connections:0`, `RETRIES = 0`,
/// `used: 0B`); outcomes (`0 failed`) are judged by their own rules.
fn zero_valued(line: &str) -> bool {
    static R: OnceLock<Regex> = OnceLock::new();
    let zero = R.get_or_init(|| Regex::new(r"^0+(?:\.0+)?[A-Za-z%]{0,3}$").expect("static regex"));
    line.rsplit_once(['=', ':']).is_some_and(|(key, value)| {
        !key.trim().is_empty() && zero.is_match(value.trim().trim_end_matches([',', ';']))
    })
}

/// What a row gives up when at least [`MIN_LOOKALIKES`] rows of its result differ from it
/// only in their numbers and it does not stand out among them: the other results' lines
/// go first.
const LOOKALIKE_PENALTY: i64 = 3;
/// Fewest rows of one shape that make each of them a look-alike.
const MIN_LOOKALIKES: usize = 3;

/// What an ordinary row of a log gives up (a row that is no error, failure or outlier).
const LOG_ROW_PENALTY: i64 = 3;
/// Fewest timestamped rows that make a result a log.
const MIN_LOG_ROWS: usize = 10;
/// Rank of a verdict word alone (`FAIL`) in a result that says more: above nothing but a
/// bare path.
const BARE_VERDICT_RANK: i64 = 2;

/// Rank of a line listed under a failure heading: a failure, like a `FAIL` line.
const FAILED_ITEM: i64 = 10;

/// Shortest row prefix worth taking off, in characters.
const MIN_ROW_PREFIX_CHARS: usize = 12;
/// Fewest rows that must share it…
const MIN_PREFIXED_ROWS: usize = 3;
/// …and the share of the non-empty rows (percent) that must.
const PREFIXED_SHARE: usize = 80;

/// The prefix (ending at a field's end) most rows of a result open with: a CI job's
/// `test (windows-latest, 20)  Run npm ci`, a container's `web-1  |`, a logger's fixed
/// fields. Said on every row, it costs a value's room on each kept line and hides what a
/// row opens with (`npm ERR! …`); said once, it still tells which job or host it was.
fn row_prefix<'a>(lines: &[&'a str]) -> Option<&'a str> {
    let rows: Vec<&str> = lines.iter().copied().filter(|l| !l.is_empty()).collect();
    let needed = MIN_PREFIXED_ROWS.max((rows.len() * PREFIXED_SHARE).div_ceil(100));
    if rows.len() < needed {
        return None;
    }
    let mut best: Option<&str> = None;
    for row in rows.iter().take(3) {
        let bytes = row.as_bytes();
        for (i, c) in row.char_indices() {
            // A field ends where a column gap (two spaces) or a `|`, `]` or `:` does: a
            // prefix ending inside a field (`… npm`) would take a row's own first word.
            let field_end = i > 0
                && (bytes.get(i + 1) == Some(&b' ') || matches!(bytes[i - 1], b'|' | b']' | b':'));
            if c != ' '
                || !field_end
                || i < MIN_ROW_PREFIX_CHARS
                || best.is_some_and(|b| b.len() >= i)
            {
                continue;
            }
            let p = &row[..i];
            let shared = rows
                .iter()
                .filter(|r| r.len() > i && r.starts_with(p))
                .count();
            if shared >= needed {
                best = Some(p);
            }
        }
    }
    best
}

/// Every candidate key line of `content`, best first (ties: earlier first). A short
/// one-line result is its own candidate. Prose in tool output is never a key line, whatever
/// it says: output is untrusted, and a sentence in it is where an injected instruction
/// sits. Lines that carry an approval/authority claim are never candidates (the caller
/// marks their omission).
pub fn key_lines(content: &str) -> Vec<KeyLine> {
    let mut out: Vec<KeyLine> = Vec::new();
    let whole = one_line(content);
    let rows: Vec<&str> = content.lines().map(str::trim).collect();
    let prefix = row_prefix(&rows);
    let lines: Vec<&str> = match prefix {
        Some(p) => rows
            .iter()
            .map(|r| r.strip_prefix(p).map_or(*r, str::trim))
            .collect(),
        None => rows,
    };
    let sections = Sections::of(content);
    let columns = Columns::of(content);
    let outliers = outlier_rows(&lines);
    // Rows that are one another apart from their numbers (one per GPU, per batch, per
    // shard): a sample of them says what each says.
    let shapes: Vec<String> = lines.iter().map(|l| occurrence_key(l)).collect();
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for (l, shape) in lines.iter().zip(&shapes) {
        if !l.is_empty() {
            *counts.entry(shape).or_default() += 1;
        }
    }
    let lookalike = |position: usize| {
        counts
            .get(shapes[position].as_str())
            .is_some_and(|&n| n >= MIN_LOOKALIKES)
    };
    // A log: most rows open with a timestamp. Its ordinary rows are context; what it was
    // read for is an error, a failure or a row that stands out.
    let stamped = lines
        .iter()
        .filter(|l| !l.is_empty() && without_timestamp(l) != **l)
        .count();
    let log = stamped >= MIN_LOG_ROWS;
    let filled = lines.iter().filter(|l| !l.is_empty()).count();
    // A query's few rows (`invoices | 18442907`, a small CSV) are what it was run for,
    // each of them; so are a whitespace table's rows under their header (`text data bss
    // dec hex filename`). Each kind counts on its own against [`MAX_SMALL_TABLE_ROWS`].
    let csv = csv_columns(&lines);
    let piped: Vec<bool> = lines
        .iter()
        .map(|l| table_row(l) || csv.is_some_and(|n| csv_row(l, n)))
        .collect();
    let headed: Vec<bool> = lines
        .iter()
        .enumerate()
        .map(|(p, l)| l.contains(|c: char| c.is_ascii_digit()) && columns.headed(p, l))
        .collect();
    let small =
        |rows: &[bool]| (1..=MAX_SMALL_TABLE_ROWS).contains(&rows.iter().filter(|&&r| r).count());
    let (small_piped, small_headed) = (small(&piped), small(&headed));
    let data_row = |p: usize| (small_piped && piped[p]) || (small_headed && headed[p]);
    let frames = frame_lines(&lines);
    let exceptions = raised_exceptions(&lines, &frames);
    let sites = crash_sites(&lines, &frames, |p, l| {
        exceptions.contains(&p) || error_line().is_match(l)
    });
    // Under a failure heading: whether an item has been listed yet (the blank line right
    // after the heading does not end the list; one after its items does).
    let mut under_failures: Option<bool> = None;
    for (position, line) in lines.iter().enumerate() {
        if line.is_empty() {
            if under_failures == Some(true) {
                under_failures = None;
            }
            continue;
        }
        if failure_heading().is_match(line) {
            // The heading says nothing itself; the items under it are what failed.
            under_failures = Some(false);
            continue;
        }
        let listed = under_failures.is_some();
        if listed {
            under_failures = Some(true);
        }
        if claims().is_match(line) || table_footer(line) || mapping_header(line) {
            continue;
        }
        let scored = score_line(line);
        let scored = if exceptions.contains(&position) {
            Some((scored.map_or(RAISED, |(s, _)| s.max(RAISED)), true))
        } else {
            scored
        };
        let scored = match sites.iter().position(|&p| p == position) {
            Some(k) => {
                let site = if k + 1 == sites.len() {
                    ROOT_CRASH_SITE
                } else {
                    CRASH_SITE
                };
                Some((scored.map_or(site, |(s, _)| s.max(site)), false))
            }
            None => scored,
        };
        let Some((score, verification)) = (if listed && words(line) <= 40 {
            Some((
                scored.map_or(FAILED_ITEM, |(s, _)| s.max(FAILED_ITEM)),
                true,
            ))
        } else {
            // A row that stands out is a candidate whatever its cells look like
            // (`r3 | streaming | 1843 MB | 00:04:17` has no setting or version in it).
            // A data row: it has a value in it.
            scored
                .or_else(|| {
                    (outliers.contains_key(&position)
                        && line.contains(|c: char| c.is_ascii_digit()))
                    .then_some((OUTLIER_ROW, false))
                })
                .or_else(|| data_row(position).then_some((DATA_ROW, false)))
        }) else {
            continue;
        };
        let score = if filled > 1 && bare_verdict(line) {
            // A verdict word alone repeats what the lines naming the test or the count
            // say; it is the result only when it is all the result says.
            BARE_VERDICT_RANK
        } else if let Some(&columns) = outliers.get(&position) {
            score + OUTLIER_BONUS + (columns as i64 - 1).min(MAX_MORE_COLUMNS)
        } else if !verification && zero_valued(line) {
            (score - ZERO_PENALTY).max(1)
        } else if schema_header(line) {
            // `apiVersion: v1`, `kind: ConfigMap`: what every manifest of its kind says.
            (score - SCHEMA_HEADER_PENALTY).max(1)
        } else if !verification && lookalike(position) {
            (score - LOOKALIKE_PENALTY).max(1)
        } else if !verification && log && without_timestamp(line) != *line {
            (score - LOG_ROW_PENALTY).max(1)
        } else {
            score
        };
        let headed = columns.named(position, &sections.qualified(position, line));
        // Headings come from the same untrusted output: a line they changed is checked again.
        if headed != *line && claims().is_match(&headed) {
            continue;
        }
        let text = clip(&undecorated(&headed), KEY_LINE_CHARS);
        if out.iter().any(|k| k.text == text) {
            continue;
        }
        out.push(KeyLine {
            text,
            score,
            verification,
            position,
        });
    }
    if out.is_empty()
        && !whole.is_empty()
        && whole.chars().count() <= SHORT_RESULT_CHARS
        && words(&whole) <= SHORT_RESULT_WORDS
        && !whole.contains([';', '{', '}', '=', '|'])
        && lines.iter().filter(|l| !l.is_empty()).count() == 1
        && !claims().is_match(&whole)
    {
        out.push(KeyLine {
            text: whole,
            score: 5,
            verification: false,
            position: 0,
        });
    }
    out.sort_by(|a, b| b.score.cmp(&a.score).then(a.position.cmp(&b.position)));
    // The shared prefix, once: on the best line, the one a summary keeps first.
    if let (Some(p), Some(best)) = (prefix, out.first_mut()) {
        best.text = clip(&format!("{} {}", undecorated(p), best.text), KEY_LINE_CHARS);
    }
    out
}

/// The name and value a line sets, when it is a setting (`NAME = value`, `key: value`,
/// `#define NAME value`) whose value is a literal: what a later read of the same file may
/// show changed.
pub fn setting(line: &str) -> Option<(String, String)> {
    let line = line.trim();
    // A test run's count (`running 32 tests`, `tests: 214 passed`) is an outcome, not a
    // setting: each run reports its own, and a new count is a new run, not a change.
    if test_outcome().is_match(line) {
        return None;
    }
    let (name, value) = if let Some(c) = assignment().captures(line) {
        (c.get(1)?.as_str(), c.get(2)?.as_str())
    } else if let Some(c) = define().captures(line) {
        (c.get(1)?.as_str(), c.get(2)?.as_str())
    } else if let Some(c) = key_value().captures(line) {
        (c.get(1)?.as_str(), c.get(2)?.as_str())
    } else {
        directive(line)?
    };
    let value = value.trim().trim_end_matches([';', ',']);
    (literal(value) || flow_mapping(value)).then(|| (name.to_string(), value.to_string()))
}

/// The names of the settings an edit's arguments set: the added lines of a diff
/// (`+RETRY_BACKOFF_MS = 1500`) in any string argument. A result read after the edit shows
/// the new value, among the lines it did not change.
pub fn edited_settings(arguments: &serde_json::Value) -> Vec<String> {
    argument_strings(arguments)
        .into_iter()
        .flat_map(|s| {
            s.lines()
                .filter_map(|l| l.strip_prefix('+'))
                .filter(|l| !l.starts_with("++"))
                .filter_map(|l| setting(l).map(|(name, _)| name))
        })
        .collect()
}

/// Every string in a call's arguments (nested ones too).
pub fn argument_strings(v: &serde_json::Value) -> Vec<&str> {
    let mut out = Vec::new();
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            serde_json::Value::String(s) => out.push(s.as_str()),
            serde_json::Value::Array(a) => stack.extend(a),
            serde_json::Value::Object(o) => stack.extend(o.values()),
            _ => {}
        }
    }
    out
}

/// The best `max` key lines of `content`, in their order in the result.
pub fn top_lines(content: &str, max: usize) -> Vec<KeyLine> {
    let mut top: Vec<KeyLine> = key_lines(content).into_iter().take(max).collect();
    top.sort_by_key(|k| k.position);
    top
}
