//! Task state: where the work stood when the covered span ends.
//!
//! After a compaction an agent most often loses the thread of the current task: the newest
//! request with *all* its parts (a multi-part request that survives as its first sentence
//! loses the rest of the work), the last command it ran and what that returned, and the file
//! it was working on. This module splits a request into its parts and fits them into the
//! task's share of the budget by shortening each part, never by dropping the later ones.

use std::sync::OnceLock;

use regex::Regex;

use super::rules::{is_follow_up, rule_strength};
use super::text::{one_line, sentences, specifics};

/// Shortest a request part is clipped to, in characters, however tight the budget.
const MIN_PART_CHARS: usize = 60;
/// Longest a request part is kept, in characters.
const MAX_PART_CHARS: usize = 400;

/// Where one sentence holds several parts: `;`, an inline enumeration (`(2)`, `2)`), or a
/// sequencing connective (`, then`, `, and also`).
fn part_break() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(r"(?i);\s+|\s+\(?[0-9]{1,2}\)\s+|,\s+(?:and\s+)?(?:then|also|after that|finally|next)\s+")
            .expect("static regex")
    })
}

/// The parts of a request, in order, each with the index of the sentence it belongs to:
/// its sentences and list items, long sentences further split where they enumerate. The
/// separators stay in the text (`a;` `then b`), so the parts joined with spaces read as the
/// request.
pub fn request_parts(text: &str) -> Vec<(usize, String)> {
    let mut parts = Vec::new();
    for (k, s) in sentences(text).into_iter().enumerate() {
        let mut start = 0;
        for m in part_break().find_iter(&s) {
            // Cut after a leading `;`/`,` and whitespace: they close the part before.
            let lead =
                m.as_str().len() - m.as_str().trim_start_matches([';', ',', ' ', '\t']).len();
            let cut = m.start() + lead;
            let head = s[start..cut].trim();
            if !head.is_empty() {
                parts.push((k, one_line(head)));
            }
            start = cut;
        }
        let tail = s[start..].trim();
        if !tail.is_empty() {
            parts.push((k, one_line(tail)));
        }
    }
    parts
}

/// Characters each part may keep so that all `parts` fit `budget_chars` together (each
/// part at least [`MIN_PART_CHARS`], at most [`MAX_PART_CHARS`]).
pub fn part_chars(parts: &[(usize, String)], budget_chars: usize) -> usize {
    if parts.is_empty() {
        return MAX_PART_CHARS;
    }
    // Short parts keep their length; the rest share what is left equally.
    let mut limit = MAX_PART_CHARS;
    for _ in 0..8 {
        let used: usize = parts
            .iter()
            .map(|(_, p)| p.chars().count().min(limit))
            .sum();
        if used <= budget_chars {
            return limit;
        }
        let long = parts
            .iter()
            .filter(|(_, p)| p.chars().count() > limit / 2)
            .count()
            .max(1);
        let short: usize = parts
            .iter()
            .map(|(_, p)| p.chars().count())
            .filter(|&c| c <= limit / 2)
            .sum();
        limit = (budget_chars.saturating_sub(short) / long).clamp(MIN_PART_CHARS, limit);
        if limit == MIN_PART_CHARS {
            return limit;
        }
    }
    limit
}

/// Whether a part carries information of its own: a rule, a value, a follow-up.
pub fn informative(part: &str) -> bool {
    specifics(part) > 0 || rule_strength(part) >= 3 || is_follow_up(part)
}

/// A character limit for each part so that together they fit `budget_chars`: informative
/// parts keep up to [`MAX_PART_CHARS`] when they fit together; the others share the rest
/// ([`part_chars`]).
pub fn part_limits(parts: &[(usize, String)], budget_chars: usize) -> Vec<usize> {
    let informative_chars: usize = parts
        .iter()
        .filter(|(_, p)| informative(p))
        .map(|(_, p)| p.chars().count().min(MAX_PART_CHARS))
        .sum();
    if informative_chars >= budget_chars {
        let limit = part_chars(parts, budget_chars);
        return vec![limit; parts.len()];
    }
    let rest: Vec<(usize, String)> = parts
        .iter()
        .filter(|(_, p)| !informative(p))
        .cloned()
        .collect();
    let limit = part_chars(&rest, budget_chars - informative_chars);
    parts
        .iter()
        .map(|(_, p)| {
            if informative(p) {
                MAX_PART_CHARS
            } else {
                limit
            }
        })
        .collect()
}

/// A part clipped to `limit` characters, keeping its beginning and its end (what a long
/// sentence is about is as often at its end as at its start).
pub fn clip_part(part: &str, limit: usize) -> String {
    let n = part.chars().count();
    if n <= limit {
        return part.to_string();
    }
    let head = limit * 2 / 5;
    let tail = limit - head;
    let start: String = part.chars().take(head).collect();
    let end: String = part.chars().skip(n - tail).collect();
    format!("{} … {}", start.trim_end(), end.trim_start())
}

/// Path-like string arguments of a tool call, in argument order: the files a call touched.
pub fn paths_in(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::String(s)
            if s.len() <= 200
                && !s.contains(char::is_whitespace)
                // A search pattern (`process\.env\.`, `TODO|FIXME`, `*.rs`) is no file.
                && !s.contains(['\\', '|', '^', '$', '(', ')', '[', ']', '*', '?'])
                && (s.contains('/') || s.contains('.')) =>
        {
            out.push(s.clone())
        }
        serde_json::Value::Object(o) => o.values().for_each(|v| paths_in(v, out)),
        serde_json::Value::Array(a) => a.iter().for_each(|v| paths_in(v, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_multi_part_request_splits_into_every_part() {
        let p: Vec<String> = request_parts(
            "Please fix the lexer bug; then bump the version to 0.5.0. Also update CHANGELOG.md.\n- and run the benchmarks",
        )
        .into_iter()
        .map(|(_, p)| p)
        .collect();
        assert_eq!(
            p,
            vec![
                "Please fix the lexer bug;",
                "then bump the version to 0.5.0.",
                "Also update CHANGELOG.md.",
                "- and run the benchmarks",
            ]
        );
        let p = request_parts("Do three things (1) rename foo (2) delete bar, then add tests.");
        let texts: Vec<&str> = p.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(
            texts,
            vec![
                "Do three things",
                "(1) rename foo",
                "(2) delete bar,",
                "then add tests."
            ]
        );
        assert!(p.iter().all(|(k, _)| *k == 0));
        // Joined, the parts read as the sentence.
        assert_eq!(
            texts.join(" "),
            "Do three things (1) rename foo (2) delete bar, then add tests."
        );
    }

    #[test]
    fn parts_are_shortened_not_dropped() {
        let parts: Vec<(usize, String)> = (0..5)
            .map(|i| (i, format!("part {}", "x".repeat(300))))
            .collect();
        let limit = part_chars(&parts, 600);
        assert_eq!(limit, 120);
        assert!(parts
            .iter()
            .all(|(_, p)| clip_part(p, limit).chars().count() == 123));
        assert_eq!(clip_part("abcdefghij", 5), "ab … hij");
        // An informative part keeps its length; the filler around it is shortened.
        let mut mixed = parts.clone();
        mixed.push((5, "The owner of INC-4471 is Amara Diallo.".to_string()));
        let limits = part_limits(&mixed, 400);
        assert_eq!(limits[5], MAX_PART_CHARS);
        assert!(limits[0] < 100, "{limits:?}");
        let short = vec![(0, "a".to_string()), (1, "b".to_string())];
        assert_eq!(part_chars(&short, 10), MAX_PART_CHARS);
        assert_eq!(part_chars(&parts, 10), MIN_PART_CHARS);
    }
}
