//! The shapes a key line of tool output can have, each recognised on its own: a setting
//! (`NAME = value`, `key: value`, a directive), a version, a flag, a path, a test outcome,
//! an error, an exit code, a measurement, a planned change. `score_line` ranks one line by
//! the shapes it has; what a whole result keeps is decided in the parent module.

use std::sync::OnceLock;

use regex::Regex;

use super::super::headings::separator;
use super::super::text::{specifics, words};

pub(super) fn assignment() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(
            r"^(?:(?:export|const|let|var|static|final|readonly|public|private|protected|val|mut|pub(?:\([a-z]+\))?)\s+)*([A-Za-z_$][\w$.\-]*)\s*(?::\s*[^=:]{1,40}?)?\s*(?::=|=)\s*([^=>].*?)\s*[;,]?$",
        )
        .expect("static regex")
    })
}

pub(super) fn define() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| Regex::new(r"^#\s*define\s+([A-Za-z_]\w*)\s+(.+)$").expect("static regex"))
}

pub(in crate::summarize::extractive) fn key_value() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(
            r#"^(?:[-*]\s+)?["']?([A-Za-z_][\w.\-/]*(?: [\w.\-/]+){0,2})["']?\s*:\s+(.+?)\s*,?$"#,
        )
        .expect("static regex")
    })
}

/// A YAML block scalar's indicator (`query: |`, `script: >-`): the value is on the lines
/// below, the line itself sets nothing.
fn block_indicator(value: &str) -> bool {
    matches!(value.trim(), "|" | ">" | "|-" | ">-" | "|+" | ">+")
}

/// A comparison with a number (`< 0.015`, `>= 99.5`): a threshold.
fn threshold() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| Regex::new(r"(?:[<>]=?|==|!=)\s*-?\d").expect("static regex"))
}

/// A state word that says something is not done or not well: pending, missing, out of
/// sync, degraded, not ready, stale.
fn unfinished_state() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(r"(?i)\b(pending|missing|not applied|unapplied|out[ -]?of[ -]?sync|outdated|degraded|unhealthy|not ?ready|unavailable|stale|expired|drifted)\b")
            .expect("static regex")
    })
}

/// An XML element on one line with text only: `<name attr="…">value</name>`.
fn xml_element() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(r"^<[A-Za-z][\w.\-:]*(?:\s[^<>]*)?>([^<>]{1,80})</[A-Za-z][\w.\-:]*>$")
            .expect("static regex")
    })
}

/// A measurement under a label of a few words, a parenthesis allowed (`p99 latency (first
/// run, 64 concurrent): 412ms`, `Total Blocking Time: 910 ms`): a benchmark's or a
/// profiler's result line.
pub(super) fn labelled_measure() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(
            r"^[A-Za-z][\w.\-/ ]{0,40}(?:\([^()]{1,40}\))?[\w.\-/ ]{0,20}:\s+[-+]?\d[\d.,]*\s?[A-Za-zµ%/]{0,6}\s*$",
        )
        .expect("static regex")
    })
}

/// A commit as `git log --oneline` prints it: an abbreviated hash, then the subject.
pub(super) fn commit_line() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| Regex::new(r"^[0-9a-f]{7,40}\s+\S").expect("static regex"))
}

/// `name:value` with nothing between (Redis `INFO`, `key:value` dumps):
/// `evicted_keys:1849302`, `maxmemory_policy:volatile-lru`.
pub(super) fn compact_setting() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(r"^([A-Za-z_][\w.\-]*):([^\s:/][^\s]{0,80})$").expect("static regex")
    })
}

pub(super) fn test_outcome() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(
            r"(?i)(\b\d+\s+(passed|failed|failures?|errors?|ok|skipped|ignored|pending|succeeded|tests?|examples?|specs?)\b|\btest result\b|^(PASS|FAIL|FAILED|ok)\b\s+\S|\btests?\b.*\b(passed|failed|passing|failing)\b)",
        )
        .expect("static regex")
    })
}

/// What went wrong, said as the failure itself (`/usr/bin/ld: cannot find -lsqlite3`,
/// `no such file or directory`, `no method named `x` found`, `permission denied`): the line
/// a build or a run failed on, which often carries no `error` marker — and the generic
/// `error: could not compile …` lines around it say only that something did.
pub(super) fn failure_cause() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(
            r"(?i)\b(cannot|can't|could not|couldn't|unable to|failed to) (find|open|read|write|load|resolve|import|connect|bind|locate|access|allocate|parse|create|execute)\b|\b(no such file or directory|not found|undefined (reference|symbol|variable|method)|unresolved (import|reference|symbol|external)|permission denied|access denied|connection (refused|reset)|timed out|segmentation fault|out of memory|no method named|no (field|function|module|member) named|mismatched types|is not defined|has no attribute|index out of (bounds|range)|null pointer|division by zero|address already in use|disk full|no space left|will not fit in|overflowed by|exceeds the (?:maximum|limit)|is too large|too many open files)\b",
        )
        .expect("static regex")
    })
}

pub(super) fn error_line() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(
            r"(?i)(^\s*(error|fatal|panic|exception|traceback)\b|\berror(\[\w+\])?:|\bpanicked at\b|\b[A-Z]\w*(Error|Exception)\b|^\s*(\[!\]|\[(error|fatal|critical)\]|[✗✖❌]))|(?-i:\b(ERROR|FATAL|CRITICAL|SEVERE)\b|\bERR!|\bE(?:ACCES|ADDRINUSE|AGAIN|BUSY|CONNREFUSED|CONNRESET|EXIST|ISDIR|MFILE|NOENT|NOSPC|NOTDIR|NOTEMPTY|PERM|PIPE|TIMEDOUT)\b)|(?-i:^\s*(?:[a-z_]\w*\.)+[A-Z]\w+: \S)",
        )
        .expect("static regex")
    })
}

/// A run's verdict with its duration: `passed in 14m 52s`, `Finished … in 32.5s`, or a
/// duration before an upper-case verdict (`Building 408.7s (19/19) FINISHED`). Not a
/// duration near any verdict word: `BackOff 2m … restarting failed container` is an event.
pub(super) fn run_summary() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        let duration = r"\d+(?:\.\d+)?\s?(?:ms|s|sec|secs|seconds|m|min|mins|minutes|h)\b(?:\s?\d+(?:\.\d+)?\s?s\b)?";
        Regex::new(&format!(
            r"(?i:\b(?:passed|failed|finished|succeeded|completed|done|built)\b.{{0,60}}?\b(?:in|after)\s+{duration})|\b{duration}[^a-z]{{0,20}}\b(?:FINISHED|DONE|PASSED|FAILED|SUCCEEDED)\b"
        ))
        .expect("static regex")
    })
}

/// An exit code (`exit status 1`, `returned code 2`, `status=1`). A bare `status` takes one
/// or two digits: `status=200` in an access log is an HTTP status, not a verification.
pub(super) fn exit_code() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(r"(?i)\b(exit(ed)?( with)?( code| status)?[:= ]+-?\d+|return(ed)? code[:= ]+-?\d+|status[:=] ?-?\d{1,2})\b")
            .expect("static regex")
    })
}

/// A server error in an access log (`"GET /export/9931.pdf HTTP/1.1" 504 562`): the request
/// line, then a 5xx status. Among a log's 200s these rows are what it was grepped for.
pub(super) fn server_error_row() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| Regex::new(r#"\bHTTP/\d(?:\.\d)?"?\s+5\d\d\b"#).expect("static regex"))
}

/// An inline mapping of literals (`{requests_per_minute: 600, burst: 90}`, `{"rpm": 600}`):
/// YAML's flow style and JSON's objects write a row of settings on one line.
pub(super) fn flow_mapping(value: &str) -> bool {
    let v = value.trim().trim_end_matches(',');
    let Some(inner) = v.strip_prefix('{').and_then(|r| r.strip_suffix('}')) else {
        return false;
    };
    let pairs: Vec<&str> = inner.split(',').map(str::trim).collect();
    pairs.len() <= 8
        && pairs.iter().any(|p| p.chars().any(|c| c.is_ascii_digit()))
        && pairs.iter().all(|p| {
            p.split_once(':').is_some_and(|(k, val)| {
                let k = k.trim().trim_matches(['"', '\'']);
                !k.is_empty()
                    && k.chars()
                        .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.'))
                    && literal(val)
                    && !val.contains(['{', '}', '(', '['])
            })
        })
}

/// Keywords that open a statement of code or a shell command, not a directive.
const NOT_DIRECTIVES: [&str; 24] = [
    "return", "import", "from", "use", "goto", "break", "continue", "throw", "raise", "yield",
    "print", "echo", "assert", "del", "delete", "new", "case", "else", "elif", "if", "for",
    "while", "exit", "await",
];

/// A directive: a name, then one to three value words, one of them with a digit (or one
/// or two under a joined name), and an optional `;` (`proxy_read_timeout 17s;`,
/// `listen 443 ssl http2;`, `maxmemory 2gb`, `Port 2222`, `timeout connect 5s`,
/// `maxmemory-policy volatile-ttl`). nginx, Apache, Redis, sshd and HAProxy write their
/// settings this way, without `=` or `:`. The value it returns is the value words.
pub(super) fn directive(line: &str) -> Option<(&str, &str)> {
    let t = line.trim();
    let t = t.strip_suffix(';').unwrap_or(t).trim_end();
    let mut tokens = t.split_whitespace();
    let name = tokens.next()?;
    let values: Vec<&str> = tokens.collect();
    let named = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        && !NOT_DIRECTIVES.iter().any(|k| k.eq_ignore_ascii_case(name));
    // A value without a digit (`maxmemory-policy volatile-ttl`, `proxy_pass http://app`)
    // counts under a name no sentence opens with: one joined by `_`, `-` or `.`.
    let joined = name.contains(['_', '-', '.']);
    let valued = (1..=3).contains(&values.len())
        && (values.iter().any(|v| v.chars().any(|c| c.is_ascii_digit()))
            || (joined
                && values.len() <= 2
                // `belongs_to :product` is a call with a symbol, not a setting.
                && !values.iter().any(|v| v.starts_with([':', '@', '&', '*', '$']))))
        && values.iter().all(|v| {
            v.chars().any(|c| c.is_ascii_alphanumeric())
                && !v.contains(['(', ')', '{', '}', ';', '"', '\'', '`', '<', '>', '|', '&'])
        });
    if !named || !valued || t.ends_with(['.', ',', ':', '!', '?']) {
        return None;
    }
    Some((name, t[name.len()..].trim()))
}

/// A planned change stated as an outcome (`… must be replaced`, `… will be destroyed`):
/// what a plan or a dry run says it is about to do.
pub(super) fn planned_outcome() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(r"(?i)\b(will|must|would) be (created|destroyed|deleted|replaced|recreated|updated in-place|updated|removed|modified|changed|read)\b")
            .expect("static regex")
    })
}

pub(super) fn warning_line() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| Regex::new(r"(?i)^\s*warn(ing)?\b|\bwarning:").expect("static regex"))
}

pub(super) fn version() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(r"\bv?\d+\.\d+(\.\d+)?([-+][0-9A-Za-z.]+)?\b").expect("static regex")
    })
}

pub(super) fn flag() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| Regex::new(r"(^|\s)--?[A-Za-z][\w-]*(=\S+)?").expect("static regex"))
}

/// Whether a line names a file or directory: a whitespace-separated token that is a path
/// (`src/lib.rs`, `./a/b`) or a file name (`Cargo.toml`), not a method call (`a.iter()`).
pub(super) fn names_path(line: &str) -> bool {
    static R: OnceLock<Regex> = OnceLock::new();
    let r = R.get_or_init(|| {
        Regex::new(r"^(?:[\w.\-]*\w/[\w.\-/]+|[\w\-]+\.[A-Za-z0-9]{1,4})$").expect("static regex")
    });
    line.split_whitespace().any(|t| {
        if t.contains('(') {
            return false; // a call, not a path
        }
        let t = t.trim_matches(|c: char| "\"'`,;()[]".contains(c));
        let t = t.split(':').next().unwrap_or(t);
        r.is_match(t)
    })
}

/// Whether a `key` opens with a declaration keyword of a programming language (`let x: T`
/// is a typed declaration in code, not a `key: value` setting).
pub(super) fn declaration(key: &str) -> bool {
    const KEYWORDS: [&str; 16] = [
        "let",
        "var",
        "val",
        "const",
        "static",
        "mut",
        "pub",
        "def",
        "fn",
        "func",
        "function",
        "private",
        "public",
        "protected",
        "readonly",
        "final",
    ];
    let mut words = key.split_whitespace();
    matches!((words.next(), words.next()), (Some(first), Some(_)) if KEYWORDS.contains(&first))
}

/// A planned or applied change of a setting (`~ allocated_storage = 200 -> 400` in a
/// Terraform plan, `replicas: 3 → 5`, `timeout_ms = "1500" => "3000"`): the name and both
/// values, literals. What a plan or a migration will set is what an agent is asked later.
pub(super) fn change() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(r#"^[~+\-/!\s]*["']?([A-Za-z_][\w.\-\[\]"']{0,60}?)["']?\s*(?:=|:)\s*(\S.{0,60}?)\s*(?:->|→|=>)\s*(\S.{0,60}?)\s*(?:#.*)?$"#)
            .expect("static regex")
    })
}

/// Whether a right-hand side or value is a literal (number, quoted string, boolean, version,
/// path, constant name) rather than an expression or prose.
pub(super) fn literal(value: &str) -> bool {
    let v = value.trim().trim_end_matches([';', ',']).trim();
    if v.is_empty() || v.chars().count() > 100 {
        return false;
    }
    let quoted = v.len() >= 2
        && ((v.starts_with('"') && v.ends_with('"'))
            || (v.starts_with('\'') && v.ends_with('\''))
            || (v.starts_with('`') && v.ends_with('`')));
    if quoted {
        return true;
    }
    if v.contains(['(', '{', '[', ' ']) {
        // A number with a unit (`30 s`) is still a literal.
        let mut parts = v.split_whitespace();
        return matches!((parts.next(), parts.next(), parts.next()),
            (Some(n), Some(unit), None) if n.parse::<f64>().is_ok() && unit.chars().count() <= 8 && unit.chars().all(char::is_alphabetic));
    }
    true
}

/// A constant's name: capitals, digits and underscores.
pub(super) fn constant_name(name: &str) -> bool {
    name.chars().any(|c| c.is_ascii_uppercase())
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

pub(super) fn numeric(value: &str) -> bool {
    value
        .trim()
        .trim_matches(['"', '\'', ';', ','])
        .starts_with(|c: char| c.is_ascii_digit() || c == '-')
}

/// A short line of prose that binds a value to its subject: `billing-api listens on port
/// 8443; its timeout is 2500 ms`, `- worker pool: 16 threads on node-b`. An inventory, a
/// status page or a README lists facts this way rather than as `key = value`. The shape: a
/// number (with its unit or not) and a second concrete token (another number, an
/// identifier joined by `-`, `_`, `.` or `/`, a one-digit index), few words, and nothing
/// of code (calls,
/// blocks, assignments, a statement ending in `;`).
pub(super) fn statement(line: &str, n: usize) -> Option<i64> {
    // A table row (`| eu-west-3 | 12 replicas |`) is a statement whose cells are its words;
    // a separator row (`|---|:--|`) says nothing.
    let row = line.trim();
    let cells;
    let line = if row.len() > 2 && row.starts_with('|') && row.ends_with('|') {
        if separator(row) {
            return None;
        }
        cells = row.trim_matches('|').replace('|', " ; ");
        cells.as_str()
    } else {
        line
    };
    let body = line.trim_start_matches(['-', '*', '+', ' ', '\t']);
    if !(3..=30).contains(&n)
        || body.contains(['{', '}', '=', '(', '<', '>', '|'])
        || body.contains("::")
        || body.contains("->")
        || body.trim_end().ends_with([';', ','])
        || body.starts_with(['#', '/'])
    {
        return None;
    }
    let tokens: Vec<&str> = body
        .split_whitespace()
        .map(|t| t.trim_matches(|c: char| ",;:()[]\"'`!?".contains(c)))
        .map(|t| t.strip_suffix('.').unwrap_or(t))
        .filter(|t| !t.is_empty())
        .collect();
    let numbers = tokens
        .iter()
        .filter(|t| t.chars().filter(char::is_ascii_digit).count() >= 2)
        .count();
    let joined = tokens
        .iter()
        .filter(|t| {
            !t.chars().all(|c| c.is_ascii_digit())
                && t.chars().next().is_some_and(char::is_alphanumeric)
                && t.char_indices()
                    .nth(1)
                    .is_some_and(|(i, _)| t[i..].contains(['-', '_', '.', '/']))
        })
        .count();
    // A one-digit number names which one ("chunk 3", "replica 2") rather than a value,
    // but still ties the value to its subject.
    let ordinals = tokens
        .iter()
        .filter(|t| t.len() == 1 && t.chars().all(|c| c.is_ascii_digit()))
        .count();
    (numbers >= 1 && numbers + joined + ordinals >= 2).then(|| 4 + i64::from(numbers >= 2))
}

/// A failure marker anywhere in a line: a test runner's `FAIL` / `FAILED` (in capitals: the
/// word in prose, "restarting failed container", is not a verdict), a cross, `not ok`, an
/// assertion error, a count of failures.
///
/// What an agent acts on in a test or CI log is what failed; the passing lines around it
/// are context.
pub(super) fn failure() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(
            r"(\b(FAIL|FAILED|FAILURE)\b|[✗✕✘×❌]|(?i:\bnot ok\b|\bassertion ?error\b|\b[1-9]\d* (failed|failures?|errors?)\b))",
        )
        .expect("static regex")
    })
}

/// A passing test line (`✓ spec (41 tests)`, `PASS src/a.test.ts`, `ok 3 - parses`).
pub(super) fn pass_marker() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(r"(?i)([✓✔√]|^(PASS|ok)\b|\bpassed\b|\bpassing\b)").expect("static regex")
    })
}

/// `line` without a leading log timestamp (`2024-05-14T02:14:55.903Z`, `[12:00:01]`,
/// `2024-05-14 02:14:55,123`, syslog's `Mar 11 09:31:07`, logcat's `03-11 09:31:07.114`
/// with its `pid tid level tag:` header): log lines open with one, and a shape anchored at
/// the start of a line (`FAIL …`, `error: …`) is then found after it.
pub(super) fn without_timestamp(line: &str) -> &str {
    static R: OnceLock<Regex> = OnceLock::new();
    let r = R.get_or_init(|| {
        Regex::new(
            r"^\s*\[?(\d{4}-\d{2}-\d{2}[T ]|\d{2}-\d{2}\s+|[A-Z][a-z]{2}\s+\d{1,2}\s+)?\d{2}:\d{2}:\d{2}([.,]\d+)?(Z|[+-]\d{2}:?\d{2})?\]?\s+(\d+\s+\d+\s+[VDIWEF]\s+[\w.$/\-]+\s*:\s+)?",
        )
        .expect("static regex")
    });
    match r.find(line) {
        Some(m) => &line[m.end()..],
        None => line,
    }
}

/// `line` without a leading location (`src/db.rs:42:`, `Config/Release.xcconfig:3:`,
/// `Shop/Info.plist: `): `grep -n`, `rg` and compilers put the file (and line) first, and
/// what follows is the line itself — a setting is still a setting when grep found it.
pub(super) fn without_location(line: &str) -> &str {
    static R: OnceLock<Regex> = OnceLock::new();
    let r = R.get_or_init(|| {
        Regex::new(r"^(?:[^\s:]*/[^\s:]*|[^\s:/]+\.[A-Za-z]\w*)(?::\d+){0,2}(?::\s*|-\s+)")
            .expect("static regex")
    });
    match r.find(line) {
        Some(m) if m.end() < line.len() => &line[m.end()..],
        _ => line,
    }
}

/// How many measurements a line reports: a number with its unit (`18240 rows/s`,
/// `1.91 MB`, `812ms`, `3.2%`, `1520 ns/op`, `2.5x`). Benchmark, timing and size reports
/// are lines of these, and what was measured is what an agent compares later.
pub(super) fn measurements(line: &str) -> usize {
    static R: OnceLock<Regex> = OnceLock::new();
    let r = R.get_or_init(|| {
        Regex::new(
            r"(?i)(^|[\s(=:])\d+(\.\d+)?\s?(%|x\b|(ns|us|µs|ms|s|sec|secs|seconds|min|h|b|kb|kib|mb|mib|gb|gib|tb|ops|req|reqs|rows|msgs|events|allocs|qps|rps|tps)(/(s|sec|op|call|req|row|iter))?\b)",
        )
        .expect("static regex")
    });
    r.find_iter(line).count()
}

/// How many `key=value` fields a line holds (`partitions=24 | rf=3`, logfmt's
/// `level=warn lag=18234`): an inventory, a config dump or a structured log line binds
/// its values to their names this way, several to a line.
pub(super) fn fields(line: &str) -> usize {
    static R: OnceLock<Regex> = OnceLock::new();
    let r = R.get_or_init(|| {
        Regex::new(r#"(^|[\s|,;(])[A-Za-z_][\w.\-]{0,40}=[^\s|,;=()]+"#).expect("static regex")
    });
    r.find_iter(line).count()
}

/// Whether a line that matches no known shape still records a value: a line of a
/// listing, a table or a device report (`baro0 (BMP390) responds at 0x76`,
/// `imu_primary output data rate = 3200 Hz`) that names a concrete value, is short, and is
/// neither code (a call, a block, a statement ending in `;`, a comment), a table row (those
/// are [`statement`]s), nor a sentence of
/// prose (it ends without a full stop): output is untrusted, and a sentence in it is where
/// an injected instruction sits.
pub(super) fn value_line(line: &str, n: usize) -> bool {
    static CALL: OnceLock<Regex> = OnceLock::new();
    let call = CALL.get_or_init(|| Regex::new(r"[\w\]!?]\(").expect("static regex"));
    let t = line.trim();
    (2..=20).contains(&n)
        && t.chars().any(|c| c.is_ascii_digit())
        && specifics(t) > 0
        && !t.ends_with(['.', '!', '?', ';', '{', '}', ',', ':', '(', '['])
        && !t.starts_with(['#', '/', '*', '-', '<', '}', ')', ']', '"'])
        && !t.starts_with("--")
        && !call.is_match(t)
        && !t.contains("->")
        && !t.contains("::")
        && !t.contains(" = {")
        && !t.contains('|')
}

/// Whether `line` tallies what a run did, a count per part (`Plan: 3 to add, 1 to change,
/// 0 to destroy.`, `12 files changed, 340 insertions(+), 2 deletions(-)`, `found 3
/// vulnerabilities (1 moderate, 2 high)`): a tool's own summary of its result, which the
/// lines above it only detail.
pub(super) fn tally(line: &str) -> bool {
    static R: OnceLock<Regex> = OnceLock::new();
    let count = R
        .get_or_init(|| Regex::new(r"(?:^|[\s(:])\d+\s+(?:to\s+)?[A-Za-z]").expect("static regex"));
    line.split([',', ';'])
        .filter(|part| count.is_match(part))
        .count()
        >= 2
}

/// Whether `line` is a verdict word and nothing else (`FAIL`, `ok`, `PASSED`).
pub(super) fn bare_verdict(line: &str) -> bool {
    let word = line.trim().trim_matches(|c: char| !c.is_alphanumeric());
    matches!(
        word.to_ascii_lowercase().as_str(),
        "fail" | "failed" | "failure" | "pass" | "passed" | "ok" | "success" | "error"
    )
}

/// Score one line of tool output; `None` when it is not a key line.
pub(super) fn score_line(line: &str) -> Option<(i64, bool)> {
    // A setting's trailing comment (`version = "~> 5.31.0"   # do not loosen`) is no part
    // of its value; one that pins it says the value is deliberate.
    let (line, pinned) = match trailing_comment().captures(line) {
        Some(c) => (
            c.get(1).map_or(line, |m| m.as_str()),
            pinning().is_match(&c[2]),
        ),
        None => (line, false),
    };
    let scored = score_shapes(line)?;
    Some((scored.0 + if pinned { PINNED_BONUS } else { 0 }, scored.1))
}

/// What a setting gains when its comment pins it (`# do not loosen`, `// keep in sync`).
const PINNED_BONUS: i64 = 2;

/// A setting followed by a comment: the setting (a `=` or `:` in it, ending in a literal's
/// last character) and, after whitespace and `#` or `//`, the comment.
fn trailing_comment() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(r#"^(\s*[^#/\s][^#]*?[=:][^#]*?["'\w\]}])\s+(?:#|//)\s*(.*)$"#)
            .expect("static regex")
    })
}

/// A comment that says a value must not change.
fn pinning() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(r"(?i)\b(do not|don't|never|must|keep|pinned?|required|frozen|on purpose|intentional)\b")
            .expect("static regex")
    })
}

/// [`score_line`] of a line without its trailing comment.
fn score_shapes(line: &str) -> Option<(i64, bool)> {
    // An exception's dotted class (`django.db.exceptions.X: …`) reads like a location.
    let raw = without_timestamp(line);
    let line = without_location(raw);
    let n = words(line);
    let mut best = 0i64;
    let mut kinds = 0i64;
    let mut verification = false;
    let mut take = |score: i64, verify: bool, best: &mut i64| {
        *best = (*best).max(score);
        kinds += 1;
        verification |= verify;
    };
    if change()
        .captures(line)
        .is_some_and(|c| literal(&c[2]) && literal(&c[3]))
    {
        take(8, false, &mut best);
    } else if let Some(c) = assignment()
        .captures(line)
        .or_else(|| define().captures(line))
    {
        let (name, value) = (&c[1], &c[2]);
        let base = 6 + if constant_name(name) { 2 } else { 0 };
        if literal(value) {
            take(base + i64::from(numeric(value)), false, &mut best);
        } else if flow_mapping(value) {
            // `OPTIONS = {"visibility_timeout": 3600, "max_retries": 3}`: a row of settings.
            take(base, false, &mut best);
        }
    } else if let Some(c) = key_value()
        .captures(line)
        .filter(|c| !declaration(&c[1]) && !block_indicator(&c[2]))
    {
        let value = &c[2];
        if threshold().is_match(value) {
            // `successCondition: result[0] < 0.015`, `expr: … > 0.05`: the bound a check
            // passes or fires at, whatever expression it is written in.
            take(7, false, &mut best);
        }
        // A value holding code (`Cursor =`, `fn(x) {`) makes the line a declaration.
        let code = value.contains(['=', '{', '}', '(', ';']) || value.contains("->");
        if !value.starts_with("//") && (literal(value) || (words(value) <= 4 && !code)) {
            take(5 + i64::from(numeric(value)), false, &mut best);
        } else if flow_mapping(value) {
            take(6, false, &mut best);
        }
    } else if let Some(c) = compact_setting().captures(line) {
        if literal(&c[2]) || !c[2].contains(['(', '{', '[']) {
            take(5 + i64::from(numeric(&c[2])), false, &mut best);
        }
    } else if let Some((_, value)) = directive(line) {
        take(5 + i64::from(numeric(value)), false, &mut best);
    } else if let Some(c) = xml_element().captures(line) {
        // `<version>3.2.1</version>`, `<string>com.acme.sync</string>`: an element holding
        // a literal is a setting of an XML file (a POM, a plist, a .csproj).
        let value = c[1].trim();
        if !value.is_empty() && words(value) <= 4 {
            take(5 + i64::from(numeric(value)), false, &mut best);
        }
    }
    if best == 0 && line.starts_with('{') && flow_mapping(line) {
        // `{"File": "scripts/seed.ts", "StartLine": 12}`: one record of a JSON listing
        // (`jq -c`, a scanner's findings), its fields bound to their names.
        take(6, false, &mut best);
    }
    if best == 0 && labelled_measure().is_match(line) {
        take(7, false, &mut best);
    }
    if n <= 24 && commit_line().is_match(line) {
        take(5, false, &mut best);
    }
    let failed = failure().is_match(line) && n <= 40;
    if failed {
        take(10, true, &mut best);
    }
    if test_outcome().is_match(line) && n <= 30 {
        // A passing line is context: the failures and the totals outrank it.
        let passing = !failed && pass_marker().is_match(line);
        take(if passing { 5 } else { 8 }, true, &mut best);
    }
    if n <= 24 && tally(line) {
        // Above the resources a plan lists, below a change's values (what is asked later).
        take(7, false, &mut best);
    }
    if exit_code().is_match(line) {
        take(8, true, &mut best);
    }
    if n <= 20 && run_summary().is_match(line) {
        // The whole run's verdict and how long it took (`Pipeline #98211 passed in 14m
        // 52s`, `[+] Building 408.7s (19/19) FINISHED`): a total, as a count of failures is.
        // A measurement, not a verification: a build's many step lines (`#12 DONE 3.1s`)
        // are look-alikes and give way to the one total.
        take(8, false, &mut best);
    }
    let error = error_line().is_match(line)
        || (raw.len() != line.len() && error_line().is_match(raw))
        || server_error_row().is_match(line);
    if error && n <= 40 {
        take(7, true, &mut best);
    }
    if n <= 40 && failure_cause().is_match(line) {
        // Above a bare error marker, a `FAILED: target` line and an exit code: the cause is
        // what the fix needs.
        take(12, true, &mut best);
    }
    if planned_outcome().is_match(line) && n <= 30 {
        // Below the change it announces (`~ allocated_storage = 200 -> 400`): the value is
        // what a later question asks.
        take(6, false, &mut best);
    }
    if warning_line().is_match(line) && n <= 40 {
        take(4, false, &mut best);
    }
    if n <= 30 && unfinished_state().is_match(line) {
        // A row whose state says it is not done (`Pending -- 0047_add_status.sql`, a
        // `NotReady` node): among the listed ones that are, the one the work is about.
        take(6, false, &mut best);
    }
    if n <= 30 && fields(line) >= 2 {
        take(
            6 + i64::from(line.chars().any(|c| c.is_ascii_digit())),
            false,
            &mut best,
        );
    }
    if n <= 20 && measurements(line) >= 2 {
        take(7, false, &mut best);
    }
    if n <= 12 && version().is_match(line) {
        take(4, false, &mut best);
    }
    if n <= 15 && flag().is_match(line) && line.contains("--") {
        take(3, false, &mut best);
    }
    if n <= 12 && names_path(line) {
        take(2, false, &mut best);
    }
    // A statement outranks a bare path or flag (a row naming its file is still a row).
    if best < 4 {
        if let Some(s) = statement(line, n) {
            take(s, false, &mut best);
        } else if best == 0 && value_line(line, n) {
            take(2, false, &mut best);
        }
    }
    (best > 0).then_some((best + (kinds - 1).clamp(0, 2), verification))
}
