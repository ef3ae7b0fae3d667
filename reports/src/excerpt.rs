//! Transcript excerpts for the trials the HTML drills down: the last messages of each
//! trial's last sent request, read back from `messages.jsonl` by content hash.
//!
//! Only the drilled-down trials (a handful) are looked up, in one streaming pass over
//! `requests.jsonl` and one over `messages.jsonl`, so a million-row run costs two scans
//! and a few kilobytes of memory. Messages in run storage are already redacted; the HTML
//! escapes them like every other untrusted string.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{BufRead, BufReader};

use serde::Deserialize;

use crate::read::RunData;

/// Messages shown per excerpt (the newest ones).
pub const EXCERPT_MESSAGES: usize = 6;
/// Characters shown per message.
pub const EXCERPT_CHARS: usize = 400;

/// One message of an excerpt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExcerptMessage {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// The content, cut to [`EXCERPT_CHARS`] (with `…` when cut).
    pub text: String,
}

/// The excerpt of one trial: the newest messages of its last sent request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Excerpt {
    /// Messages in the request.
    pub request_messages: usize,
    /// The newest of them.
    pub messages: Vec<ExcerptMessage>,
}

#[derive(Deserialize)]
struct RequestHashes {
    trial_id: String,
    #[serde(default)]
    segment: u32,
    seq: u64,
    sent: bool,
    #[serde(default)]
    message_hashes: Vec<String>,
}

#[derive(Deserialize)]
struct StoredMessage {
    hash: String,
    message: StoredContent,
}

#[derive(Deserialize)]
struct StoredContent {
    role: String,
    #[serde(default)]
    content: String,
}

/// Excerpts of the trials with ids in `wanted`. A run without the files, or a line that
/// does not parse, yields no excerpt for that trial rather than failing the report: the
/// excerpt is a convenience, the CSVs are the record.
pub fn excerpts(run: &RunData, wanted: &[&str]) -> HashMap<String, Excerpt> {
    let mut last: HashMap<String, (u64, Vec<String>)> = HashMap::new();
    let segments: HashMap<&str, u32> = run
        .trials
        .iter()
        .filter(|t| wanted.contains(&t.trial_id.as_str()))
        .map(|t| (t.trial_id.as_str(), t.segment))
        .collect();
    for source in &run.runs {
        let Ok(f) = File::open(source.dir.join("requests.jsonl")) else {
            continue;
        };
        for line in BufReader::new(f).lines().map_while(Result::ok) {
            // Cheap pre-filter: most lines belong to other trials; one look at the row's
            // `trial_id` decides, before any parsing.
            if !trial_id_of(&line).is_some_and(|id| segments.contains_key(id)) {
                continue;
            }
            let Ok(r) = serde_json::from_str::<RequestHashes>(&line) else {
                continue;
            };
            if !r.sent || segments.get(r.trial_id.as_str()) != Some(&r.segment) {
                continue;
            }
            let slot = last.entry(r.trial_id).or_insert((0, Vec::new()));
            if r.seq >= slot.0 {
                *slot = (r.seq, r.message_hashes);
            }
        }
    }
    let needed: HashSet<&str> = last
        .values()
        .flat_map(|(_, h)| h.iter().rev().take(EXCERPT_MESSAGES))
        .map(String::as_str)
        .collect();
    let mut found: HashMap<String, ExcerptMessage> = HashMap::new();
    for source in &run.runs {
        let Ok(f) = File::open(source.dir.join("messages.jsonl")) else {
            continue;
        };
        for line in BufReader::new(f).lines().map_while(Result::ok) {
            if found.len() == needed.len() {
                break;
            }
            // The same pre-filter: a message row's first `hash` key is its own (the key
            // comes before the message, whose text is escaped JSON), so a row that is not
            // wanted is skipped without parsing its (possibly long) content.
            if !hash_of(&line).is_some_and(|h| needed.contains(h) && !found.contains_key(h)) {
                continue;
            }
            let Ok(m) = serde_json::from_str::<StoredMessage>(&line) else {
                continue;
            };
            if needed.contains(m.hash.as_str()) {
                found.insert(
                    m.hash,
                    ExcerptMessage {
                        role: m.message.role,
                        text: cut(&m.message.content),
                    },
                );
            }
        }
    }
    last.into_iter()
        .map(|(id, (_, hashes))| {
            let start = hashes.len().saturating_sub(EXCERPT_MESSAGES);
            let messages = hashes[start..]
                .iter()
                .filter_map(|h| found.get(h).cloned())
                .collect();
            (
                id,
                Excerpt {
                    request_messages: hashes.len(),
                    messages,
                },
            )
        })
        .collect()
}

/// The `trial_id` value of a request line, read without parsing the row (ids are plain
/// `scenario/mode/trial` text, never escaped).
fn trial_id_of(line: &str) -> Option<&str> {
    const KEY: &str = "\"trial_id\":\"";
    let start = line.find(KEY)? + KEY.len();
    let len = line[start..].find('"')?;
    Some(&line[start..start + len])
}

/// The `hash` value of a message line, read without parsing the row (a hex digest).
fn hash_of(line: &str) -> Option<&str> {
    const KEY: &str = "\"hash\":\"";
    let start = line.find(KEY)? + KEY.len();
    let len = line[start..].find('"')?;
    Some(&line[start..start + len])
}

fn cut(s: &str) -> String {
    match s.char_indices().nth(EXCERPT_CHARS) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_row_hash_is_read_before_the_message_text() {
        let row = r#"{"schema":"ctxbench.message/1","hash":"ab12","message":{"role":"user","content":"say \"hash\":\"ff\" please"}}"#;
        assert_eq!(hash_of(row), Some("ab12"));
        assert_eq!(hash_of(r#"{"schema":"x"}"#), None);
        let parsed: StoredMessage = serde_json::from_str(row).unwrap();
        assert_eq!(hash_of(row), Some(parsed.hash.as_str()));
    }
}
