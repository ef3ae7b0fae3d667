//! Mentions: the tool lines the conversation talks about.
//!
//! A tool result is read once and discussed in prose: the agent says "the read timeout is
//! the shortest", the user asks about "that 504". Of a config dump's dozen look-alike
//! settings, or a log's dozen rows, the one the prose names is the one the session was
//! about, and a later question is about it too. A key line is *mentioned* when
//!
//! - it sets a setting whose name the prose says: the whole name as one word
//!   (`MAX_RETRIES`), its last two parts as two words in a row (`proxy_read_timeout` —
//!   "read timeout"), or a one-part name of three letters or more (`workers` — "worker",
//!   `pro` — "the pro plan");
//! - or it holds a value the prose says (`504`, `7f3e9b2a`: three characters or more with
//!   a digit) that fewer than half of its result's key lines hold: a value every row has
//!   (`2024`, `HTTP/1.1`) tells no row apart.
//!
//! The prose is what the user and the agent wrote in the covered turns and what the previous
//! checkpoint kept of it, never tool output (that would mention itself).

use std::collections::{HashMap, HashSet};

use super::tool_lines::setting;

/// Shortest value token that counts as a mention.
const MIN_VALUE_CHARS: usize = 3;
/// Shortest one-part setting name that counts as a mention.
const MIN_NAME_CHARS: usize = 3;

/// The words of `s`, lowercased, with a plural `s` taken off words of four letters or more.
fn words(s: &str) -> impl Iterator<Item = String> + '_ {
    s.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .map(|w| {
            let w = w.to_lowercase();
            match w.strip_suffix('s') {
                Some(stem) if stem.chars().count() >= 3 && !stem.ends_with('s') => stem.to_string(),
                _ => w,
            }
        })
}

/// The parts of a setting name (`proxy_read_timeout`, `maxRetries`, `max-retries`),
/// lowercased.
fn name_parts(name: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for c in name.chars() {
        if !c.is_alphanumeric() {
            if !current.is_empty() {
                parts.push(std::mem::take(&mut current));
            }
            previous_lower = false;
            continue;
        }
        if c.is_uppercase() && previous_lower && !current.is_empty() {
            parts.push(std::mem::take(&mut current));
        }
        previous_lower = c.is_lowercase();
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        parts.push(current);
    }
    parts
}

/// A value token of a line: three characters or more, with a digit.
fn value_tokens(line: &str) -> HashSet<String> {
    line.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
        .map(|t| t.trim_matches('.').to_lowercase())
        .filter(|t| t.chars().count() >= MIN_VALUE_CHARS && t.chars().any(|c| c.is_ascii_digit()))
        .collect()
}

/// What the prose of a session says.
#[derive(Debug, Default)]
pub(super) struct Mentions {
    words: HashSet<String>,
    pairs: HashSet<(String, String)>,
    values: HashSet<String>,
}

impl Mentions {
    /// The mentions of `prose` (user and assistant text, never tool output).
    pub(super) fn of<'a>(prose: impl IntoIterator<Item = &'a str>) -> Self {
        let mut m = Mentions::default();
        for text in prose {
            let ws: Vec<String> = words(text).collect();
            for pair in ws.windows(2) {
                m.pairs.insert((pair[0].clone(), pair[1].clone()));
            }
            m.values.extend(value_tokens(text));
            m.words.extend(ws);
        }
        m
    }

    /// Whether the prose names the setting `line` sets.
    fn names_setting(&self, line: &str) -> bool {
        let Some((qualified, _)) = setting(line) else {
            return false;
        };
        // A name qualified by its section (`tiers.pro`) is named by its own part.
        let name = qualified
            .rsplit('.')
            .next()
            .unwrap_or(&qualified)
            .to_string();
        let whole = words(&name).next().unwrap_or_default();
        if whole.contains(['_', '-', '.']) && self.words.contains(&whole) {
            return true;
        }
        let parts = name_parts(&name);
        let stem = |p: &String| words(p).next().unwrap_or_default();
        match parts.as_slice() {
            [] => false,
            [one] => one.chars().count() >= MIN_NAME_CHARS && self.words.contains(&stem(one)),
            [.., a, b] => self.pairs.contains(&(stem(a), stem(b))),
        }
    }

    /// Which of `lines` (one result's key lines) the prose mentions.
    pub(super) fn mentioned(&self, lines: &[&str]) -> Vec<bool> {
        let tokens: Vec<HashSet<String>> = lines.iter().map(|l| value_tokens(l)).collect();
        let mut holders: HashMap<&str, usize> = HashMap::new();
        for t in tokens.iter().flatten() {
            *holders.entry(t.as_str()).or_default() += 1;
        }
        lines
            .iter()
            .zip(&tokens)
            .map(|(line, own)| {
                self.names_setting(line)
                    || own.iter().any(|t| {
                        self.values.contains(t)
                            && holders.get(t.as_str()).copied().unwrap_or(0) * 2 < lines.len()
                    })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_setting_the_prose_names_is_mentioned_and_its_look_alikes_are_not() {
        let m = Mentions::of([
            "The proxy timeouts differ, and the read timeout is the shortest of them.",
            "Every 504 is a PDF export; check MAX_RETRIES and the worker count too.",
        ]);
        let lines = [
            "proxy_send_timeout 60s;",
            "proxy_read_timeout 17s;",
            "keepalive_timeout 75s;",
            "MAX_RETRIES = 7",
            "workers = 5",
            "threads = 2",
        ];
        assert_eq!(
            m.mentioned(&lines),
            vec![false, true, false, true, true, false]
        );
        let m = Mentions::of(["Customers on the pro plan get 429s too early."]);
        let tiers = [
            "tiers.free: {requests_per_minute: 60, burst: 15}",
            "tiers.pro: {requests_per_minute: 600, burst: 90}",
        ];
        assert_eq!(m.mentioned(&tiers), vec![false, true]);
    }

    #[test]
    fn a_value_the_prose_names_marks_the_rows_that_hold_it_unless_most_do() {
        let m = Mentions::of(["Users get a 504 on exports since 2024."]);
        let rows = [
            "2024 GET /a 200",
            "2024 GET /export/1 504",
            "2024 GET /b 200",
            "2024 GET /c 200",
        ];
        assert_eq!(m.mentioned(&rows), vec![false, true, false, false]);
    }

    #[test]
    fn name_parts_split_snake_kebab_and_camel_case() {
        assert_eq!(
            name_parts("proxy_read_timeout"),
            ["proxy", "read", "timeout"]
        );
        assert_eq!(name_parts("maxRetryCount"), ["max", "retry", "count"]);
        assert_eq!(name_parts("MAX_RETRIES"), ["max", "retries"]);
    }
}
