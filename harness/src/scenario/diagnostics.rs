//! Located, user-facing problems of a scenario file.
//!
//! Scenario files are hand-written, so every problem carries the file, the 1-based line and
//! column (in characters, as editors count them), what was wrong, what was expected instead
//! and the offending source line. [`Diagnostics`] renders them compiler-style:
//!
//! ```text
//! scenarios/x.yaml:12:21: error: probe of undefined fact `regon`
//!   expected: one of the ids under `facts:`: database, region (did you mean `region`?)
//!    |
//! 12 |   - probe: [database, regon]
//!    |                       ^
//! ```

use std::fmt;

use serde_saphyr::{Location, MessageFormatter, UserMessageFormatter};

/// Longest source line kept in a snippet; longer lines are cut around the column so a
/// minified or binary file cannot blow up an error message.
const SNIPPET_MAX_CHARS: usize = 160;

/// One problem in one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file (or source name) the problem is in.
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// 1-based column in characters, when known.
    pub column: Option<usize>,
    /// What is wrong.
    pub message: String,
    /// What would be accepted instead (the fix), when there is something useful to say.
    pub expected: Option<String>,
    /// The source line the problem is on (control characters escaped, long lines cut).
    pub snippet: Option<String>,
}

/// Every problem found in a scenario file or suite, in file order.
///
/// Never empty when returned as an error.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    /// The problems, in file order.
    pub fn iter(&self) -> std::slice::Iter<'_, Diagnostic> {
        self.0.iter()
    }

    /// How many problems there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there is no problem.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The problems, owned.
    pub fn into_vec(self) -> Vec<Diagnostic> {
        self.0
    }
}

impl IntoIterator for Diagnostics {
    type Item = Diagnostic;
    type IntoIter = std::vec::IntoIter<Diagnostic>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a> IntoIterator for &'a Diagnostics {
    type Item = &'a Diagnostic;
    type IntoIter = std::slice::Iter<'a, Diagnostic>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        write!(f, ": error: {}", self.message)?;
        if let Some(expected) = &self.expected {
            write!(f, "\n  expected: {expected}")?;
        }
        if let (Some(snippet), Some(line)) = (&self.snippet, self.line) {
            let gutter = line.to_string();
            let pad = " ".repeat(gutter.len());
            write!(f, "\n{pad} |\n{gutter} | {snippet}")?;
            if let Some(column) = self.column {
                // Mirror tabs so the caret lines up whatever the terminal's tab width.
                let lead: String = snippet
                    .chars()
                    .take(column.saturating_sub(1))
                    .map(|c| if c == '\t' { '\t' } else { ' ' })
                    .collect();
                write!(f, "\n{pad} | {lead}^")?;
            }
        }
        Ok(())
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (n, d) in self.0.iter().enumerate() {
            if n > 0 {
                f.write_str("\n\n")?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostics {}

impl From<Diagnostic> for Diagnostics {
    fn from(d: Diagnostic) -> Self {
        Diagnostics(vec![d])
    }
}

/// Builds diagnostics for one source text: knows its name and lines, so every diagnostic
/// gets its snippet the same way.
pub(crate) struct Reporter<'a> {
    file: &'a str,
    text: &'a str,
    found: Vec<Diagnostic>,
}

impl<'a> Reporter<'a> {
    pub(crate) fn new(file: &'a str, text: &'a str) -> Self {
        Reporter {
            file,
            text,
            found: Vec::new(),
        }
    }

    /// Records a problem at `at` (None: the file as a whole).
    pub(crate) fn error(
        &mut self,
        at: Option<Location>,
        message: impl Into<String>,
        expected: Option<String>,
    ) {
        let d = self.make(at, message.into(), expected);
        self.found.push(d);
    }

    /// Records a problem about `needle` (e.g. a placeholder) inside the node at `at`,
    /// pointing at the needle itself when it can be found in the node's source text.
    pub(crate) fn error_in(
        &mut self,
        at: Option<Location>,
        needle: &str,
        message: impl Into<String>,
        expected: Option<String>,
    ) {
        let d = match at.and_then(|l| self.find_in(l, needle)) {
            Some((line, column)) => {
                self.at_line(Some(line), Some(column), message.into(), expected)
            }
            None => self.make(at, message.into(), expected),
        };
        self.found.push(d);
    }

    /// Line and column of the first `needle` in the source of the node at `at`: within its
    /// span when the span has a length (scalars), else within the next 4 KiB (collections,
    /// whose span is only their start).
    fn find_in(&self, at: Location, needle: &str) -> Option<(usize, usize)> {
        let span = at.span();
        let start = usize::try_from(span.byte_offset()?).ok()?;
        let len = span
            .byte_len()
            .and_then(|l| usize::try_from(l).ok())
            .filter(|l| *l > 0)
            .unwrap_or(4096);
        let end = start.saturating_add(len).min(self.text.len());
        let hay = self.text.get(start..end)?;
        let k = hay.find(needle)?;
        let before = &hay[..k];
        let line = usize::try_from(at.line()).ok()? + before.matches('\n').count();
        let column = match before.rfind('\n') {
            Some(nl) => before[nl + 1..].chars().count() + 1,
            None => usize::try_from(at.column()).ok()? + before.chars().count(),
        };
        Some((line, column))
    }

    /// The plain scalar starting at `at` (up to a flow delimiter, blank or comment), if any.
    fn scalar_at(&self, at: Location) -> Option<String> {
        let start = usize::try_from(at.span().byte_offset()?).ok()?;
        let rest = self.text.get(start..)?;
        let end = rest
            .find(|c: char| c.is_whitespace() || matches!(c, ',' | '}' | ']' | '#'))
            .unwrap_or(rest.len());
        // `end` is a char boundary (found by `find`); very long scalars are not numbers.
        (end > 0 && end <= 4096).then(|| rest[..end].to_string())
    }

    /// A diagnostic at `at`, not recorded.
    pub(crate) fn make(
        &self,
        at: Option<Location>,
        message: String,
        expected: Option<String>,
    ) -> Diagnostic {
        let (line, column) = match at.filter(|l| l.line() > 0) {
            Some(l) => (
                usize::try_from(l.line()).ok(),
                usize::try_from(l.column()).ok().filter(|c| *c > 0),
            ),
            None => (None, None),
        };
        self.at_line(line, column, message, expected)
    }

    /// A diagnostic at a known line/column (1-based), not recorded.
    pub(crate) fn at_line(
        &self,
        line: Option<usize>,
        column: Option<usize>,
        message: String,
        expected: Option<String>,
    ) -> Diagnostic {
        let snippet = line.and_then(|l| source_line(self.text, l));
        let (snippet, column) = match (snippet, column) {
            (Some(s), c) => {
                let (s, c) = cut_line(&s, c);
                (Some(s), c)
            }
            (None, c) => (None, c),
        };
        Diagnostic {
            file: self.file.to_string(),
            line,
            column,
            message: sanitize(&message),
            expected: expected.map(|e| sanitize(&e)),
            snippet,
        }
    }

    /// Converts a serde-saphyr error, keeping its location.
    pub(crate) fn yaml_error(&mut self, err: &serde_saphyr::Error) {
        let raw = UserMessageFormatter.format_message(err.without_snippet());
        let (message, expected) = split_expected(&raw);
        let (message, expected) = improve_yaml_message(message, expected);
        let at = err.location();
        // An integer the parser could not hold: say "out of range", not "not a number".
        let scalar = at.and_then(|l| self.scalar_at(l));
        let (message, expected) = match scalar.as_deref().and_then(out_of_range) {
            Some(better) if message.starts_with("expected a whole number") => better,
            _ => (message, expected),
        };
        let d = self.make(at, message, expected);
        self.found.push(d);
    }

    /// Whether nothing has been recorded.
    pub(crate) fn is_clean(&self) -> bool {
        self.found.is_empty()
    }

    /// Everything recorded, sorted by position (file-level problems first).
    pub(crate) fn finish(mut self) -> Vec<Diagnostic> {
        self.found
            .sort_by_key(|d| (d.line.unwrap_or(0), d.column.unwrap_or(0)));
        self.found.dedup();
        self.found
    }
}

/// Splits serde's "X, expected Y" into ("X", Some("Y")).
fn split_expected(raw: &str) -> (String, Option<String>) {
    match raw.split_once(", expected ") {
        Some((m, e)) => (m.to_string(), Some(e.to_string())),
        None => (raw.to_string(), None),
    }
}

/// Rewords the few serde-saphyr messages that are technical for a scenario author.
fn improve_yaml_message(message: String, expected: Option<String>) -> (String, Option<String>) {
    if message.starts_with("YAML document too large or too complex") {
        return (
            format!("{message} (scenario files are parsed with fixed limits)"),
            Some(
                "a scenario under the documented limits: at most 48 levels of nesting, \
                 one document, few anchors/aliases"
                    .to_string(),
            ),
        );
    }
    if let Some(field) = message
        .strip_prefix("missing field `")
        .and_then(|r| r.strip_suffix('`'))
    {
        return (
            format!("missing required key `{field}`"),
            Some(format!("a `{field}:` entry in this mapping")),
        );
    }
    if message == "expected mapping start" && expected.is_none() {
        return (
            "expected a mapping (`key: value` lines) here".to_string(),
            Some("a mapping; see docs/scenario-format.md for the keys".to_string()),
        );
    }
    if message == "expected sequence start" && expected.is_none() {
        return (
            "expected a list (`- item` lines or `[a, b]`) here".to_string(),
            Some("a list".to_string()),
        );
    }
    if message == "expected string scalar" && expected.is_none() {
        return (
            "expected a text value here".to_string(),
            Some("a string (quote it if it looks like a number or starts with `{`)".to_string()),
        );
    }
    if let Some(rest) = message.strip_prefix("invalid ") {
        if matches!(rest, "u64" | "i64" | "u32" | "usize") {
            return (
                "expected a whole number here".to_string(),
                Some("an integer such as 4096".to_string()),
            );
        }
    }
    (message, expected)
}

/// A scalar that is a whole number too large for any integer field: its own message, with
/// the limit, instead of "expected a whole number".
fn out_of_range(scalar: &str) -> Option<(String, Option<String>)> {
    let digits = scalar.trim().trim_start_matches(['+', '-']);
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit() || c == '_') {
        return None;
    }
    if scalar.trim().parse::<i64>().is_ok() {
        return None;
    }
    Some((
        format!("number out of range: {}", sanitize(scalar.trim())),
        Some(format!(
            "a whole number between {} and {} (and within the field's own limit)",
            i64::MIN,
            i64::MAX
        )),
    ))
}

/// Replaces control characters (tabs too: a message shows what the file holds, visibly) so
/// a hostile file cannot inject terminal escape sequences into the error output.
pub(crate) fn sanitize(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// The `line`-th (1-based) line of `text`, without its line break.
fn source_line(text: &str, line: usize) -> Option<String> {
    let text = text.strip_prefix('\u{FEFF}').unwrap_or(text);
    text.split('\n')
        .nth(line.checked_sub(1)?)
        .map(|l| l.strip_suffix('\r').unwrap_or(l).to_string())
}

/// Cuts a long line around `column`, escaping control characters, and moves the column so
/// the caret still points at the same character.
fn cut_line(line: &str, column: Option<usize>) -> (String, Option<usize>) {
    let chars: Vec<char> = line.chars().collect();
    let col0 = column.map(|c| c.saturating_sub(1)).unwrap_or(0);
    let start = if chars.len() > SNIPPET_MAX_CHARS && col0 > SNIPPET_MAX_CHARS / 2 {
        (col0 - SNIPPET_MAX_CHARS / 2).min(chars.len().saturating_sub(SNIPPET_MAX_CHARS))
    } else {
        0
    };
    let end = (start + SNIPPET_MAX_CHARS).min(chars.len());
    let mut out = String::new();
    let mut new_col = column;
    if start > 0 {
        out.push('…');
    }
    for (i, c) in chars[start..end].iter().enumerate() {
        if i + start == col0 {
            new_col = column.map(|_| out.chars().count() + 1);
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(*c);
        }
    }
    if col0 >= end {
        new_col = column.map(|_| out.chars().count() + 1);
    }
    if end < chars.len() {
        out.push('…');
    }
    (out, new_col)
}
