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
    pub snippet: Option<Snippet>,
}

/// The source line shown under a diagnostic: control characters escaped and long lines cut
/// around the column, so it may differ in length from the line in the file. `caret` is
/// where the diagnostic's column falls in this shown text; the column itself always counts
/// the characters of the real line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snippet {
    /// The line as shown.
    pub text: String,
    /// 1-based position (in characters of `text`) the caret points at; `None`: the
    /// diagnostic's column, as for an uncut line without control characters.
    pub caret: Option<usize>,
}

impl std::ops::Deref for Snippet {
    type Target = str;
    fn deref(&self) -> &str {
        &self.text
    }
}

impl From<&str> for Snippet {
    fn from(text: &str) -> Self {
        Snippet {
            text: text.to_string(),
            caret: None,
        }
    }
}

impl From<String> for Snippet {
    fn from(text: String) -> Self {
        Snippet { text, caret: None }
    }
}

impl fmt::Display for Snippet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
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
                // The caret's place in the shown text, which escapes and cutting may move
                // away from the real column.
                let caret = snippet.caret.unwrap_or(column);
                // Mirror tabs so the caret lines up whatever the terminal's tab width.
                let lead: String = snippet
                    .chars()
                    .take(caret.saturating_sub(1))
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

    /// The key whose value starts at byte `start` (`key: value`, in a block or flow
    /// mapping), if the text just before the value is a plain or quoted key and a colon.
    fn key_before(&self, start: usize) -> Option<String> {
        let before = self.text.get(..start)?.trim_end();
        let before = before.strip_suffix(':')?.trim_end_matches([' ', '\t']);
        let before = before.strip_suffix(['"', '\'']).unwrap_or(before);
        let key_start = before
            .char_indices()
            .rev()
            .take_while(|(_, c)| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
            .last()
            .map(|(i, _)| i)?;
        Some(before[key_start..].to_string())
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
        // `column` stays the real one (characters of the line in the file); only the
        // caret moves with the escapes and the cut of the shown line.
        let snippet = line
            .and_then(|l| source_line(self.text, l))
            .map(|s| cut_line(&s, column));
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
        let key = at
            .and_then(|l| usize::try_from(l.span().byte_offset()?).ok())
            .and_then(|start| self.key_before(start));
        let (message, expected) = match scalar
            .as_deref()
            .and_then(|s| out_of_range(s, key.as_deref()))
        {
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

/// The accepted range of an integer key of the scenario format, and what it counts:
/// its own limit where it has one (see docs/scenario-format.md), else the `i64` the
/// parser reads it as.
fn integer_range(key: &str) -> Option<(i128, i128, String)> {
    let max = i128::from(i64::MAX);
    Some(match key {
        "version" => (1, 1, "the only format version".to_string()),
        "context_window"
        | "max_output"
        | "reserved_output_tokens"
        | "recent_tail_tokens"
        | "summary_target_tokens" => (1, max, "a token count".to_string()),
        "buffer_tokens" => (0, max, "a token count".to_string()),
        "at_request" => (1, max, "the request's number in the trial".to_string()),
        "at_compaction" => (1, max, "the compaction's number in the trial".to_string()),
        "tokens" => (
            1,
            i128::from(super::MAX_FILLER_TOKENS),
            "tokens of one filler".to_string(),
        ),
        "count" => (
            1,
            i128::from(super::MAX_GENERATED_TOOLS),
            "tools per `generate`".to_string(),
        ),
        "schema_tokens" => (
            20,
            i128::from(super::MAX_SCHEMA_TOKENS),
            "tokens per generated tool".to_string(),
        ),
        "seed" => (0, i128::from(u64::MAX), "a catalogue seed".to_string()),
        "instances" => (
            1,
            i128::from(super::MAX_VARY_INSTANCES),
            "trials".to_string(),
        ),
        "repeat" => (
            1,
            i128::from(super::MAX_EXPANDED_STEPS),
            format!(
                "copies; the script expands to at most {} steps",
                super::MAX_EXPANDED_STEPS
            ),
        ),
        _ => return None,
    })
}

/// A whole number the parser could not hold in its field (too large for the integer, or
/// negative for an unsigned one): "out of range" with the field's own limit when `key` is a
/// known integer key, instead of "expected a whole number".
fn out_of_range(scalar: &str, key: Option<&str>) -> Option<(String, Option<String>)> {
    let scalar = scalar.trim();
    let digits = scalar.strip_prefix(['+', '-']).unwrap_or(scalar);
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit() || c == '_') {
        return None;
    }
    let shown = if scalar.chars().count() > 40 {
        let head: String = scalar.chars().take(40).collect();
        format!(
            "{head}… ({} digits)",
            digits.chars().filter(char::is_ascii_digit).count()
        )
    } else {
        scalar.to_string()
    };
    let shown = sanitize(&shown);
    // None: too large even for i128, so out of any range.
    let value = scalar.replace('_', "").parse::<i128>().ok();
    if let Some((min, max, what)) = key.and_then(integer_range) {
        if value.is_some_and(|v| (min..=max).contains(&v)) {
            return None;
        }
        let key = key.unwrap_or_default();
        let expected = if min == max {
            format!("`{key}: {min}` ({what})")
        } else {
            format!("a whole number from {min} to {max} ({what})")
        };
        return Some((
            format!("number out of range for `{key}`: {shown}"),
            Some(expected),
        ));
    }
    if value.is_some_and(|v| i64::try_from(v).is_ok()) {
        return None;
    }
    let message = match key {
        Some(key) => format!("number out of range for `{key}`: {shown}"),
        None => format!("number out of range: {shown}"),
    };
    Some((
        message,
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

/// Cuts a long line around `column`, escaping control characters, and places the caret
/// on the same character in the shown text (the column itself is not changed).
fn cut_line(line: &str, column: Option<usize>) -> Snippet {
    let chars: Vec<char> = line.chars().collect();
    let col0 = column.map(|c| c.saturating_sub(1)).unwrap_or(0);
    let start = if chars.len() > SNIPPET_MAX_CHARS && col0 > SNIPPET_MAX_CHARS / 2 {
        (col0 - SNIPPET_MAX_CHARS / 2).min(chars.len().saturating_sub(SNIPPET_MAX_CHARS))
    } else {
        0
    };
    let end = (start + SNIPPET_MAX_CHARS).min(chars.len());
    let mut out = String::new();
    let mut caret = None;
    if start > 0 {
        out.push('…');
    }
    for (i, c) in chars[start..end].iter().enumerate() {
        if i + start == col0 {
            caret = column.map(|_| out.chars().count() + 1);
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(*c);
        }
    }
    if col0 >= end {
        caret = column.map(|_| out.chars().count() + 1);
    }
    if end < chars.len() {
        out.push('…');
    }
    Snippet { text: out, caret }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cutting_or_escaping_the_shown_line_keeps_the_real_column() {
        let line = format!("{}X{}", "a".repeat(300), "b".repeat(300));
        let s = cut_line(&line, Some(301));
        assert!(s.text.starts_with('…') && s.text.ends_with('…'), "{s:?}");
        assert_eq!(s.text.chars().nth(s.caret.unwrap() - 1), Some('X'));
        let r = Reporter::new("f.yaml", &line);
        let d = r.at_line(Some(1), Some(301), "m".into(), None);
        assert_eq!(d.column, Some(301));
        assert!(d.to_string().starts_with("f.yaml:1:301: error: m"));
        // Escapes lengthen the shown line; the column counts each control character once.
        let d = Reporter::new("f.yaml", "\t\r\u{1b}X").at_line(Some(1), Some(4), "m".into(), None);
        assert_eq!(d.column, Some(4));
        let snippet = d.snippet.clone().unwrap();
        assert_eq!(snippet.text, "\\t\\r\\u{1b}X");
        assert_eq!(
            snippet.text.chars().nth(snippet.caret.unwrap() - 1),
            Some('X')
        );
        assert!(
            d.to_string().ends_with(&format!("| {}^", " ".repeat(10))),
            "{d}"
        );
    }

    #[test]
    fn out_of_range_names_the_field_and_its_own_limit() {
        let (m, e) = out_of_range("18446744073709551617", Some("tokens")).unwrap();
        assert_eq!(m, "number out of range for `tokens`: 18446744073709551617");
        assert_eq!(
            e.unwrap(),
            "a whole number from 1 to 1000000 (tokens of one filler)"
        );
        let (_, e) = out_of_range("-1", Some("seed")).unwrap();
        assert!(e.unwrap().contains("0 to 18446744073709551615"));
        let (m, e) = out_of_range("99999999999999999999", None).unwrap();
        assert_eq!(m, "number out of range: 99999999999999999999");
        assert!(e.unwrap().contains("9223372036854775807"));
        // In range, or not a number: not this error.
        assert_eq!(out_of_range("5", Some("count")), None);
        assert_eq!(out_of_range("1e3", Some("count")), None);
        let long = "9".repeat(500);
        let (m, _) = out_of_range(&long, Some("repeat")).unwrap();
        assert!(m.len() < 120 && m.contains("500 digits"), "{m}");
    }

    #[test]
    fn the_key_before_a_value_is_found_in_block_and_flow_mappings() {
        let text = "a: {at_request: 9, \"count\": 3}\nfiller:\n  tokens:\n    77\n- 5\n";
        let r = Reporter::new("f.yaml", text);
        let key = |needle: &str| r.key_before(text.find(needle).unwrap());
        assert_eq!(key("9").as_deref(), Some("at_request"));
        assert_eq!(key("3").as_deref(), Some("count"));
        assert_eq!(key("77").as_deref(), Some("tokens"));
        assert_eq!(key("5"), None);
    }
}
