//! How the fake provider writes a summary (PRODUCT.md §The fake provider, item 6).
//!
//! A request whose first system message starts with
//! [`SUMMARY_REQUEST_MARKER`] is a summarization
//! request. The fake answers it with a deterministic summary built **only from that
//! request's other messages** (opaque items already decoded by
//! [`readable_view`](super::opaque::readable_view)), so what a checkpoint keeps is exactly
//! what the engine sent — and with [`FakeSummaryDefect`]s switched on, it fails the way real
//! models do, so summary validation and the graders meet those failures.
//!
//! The summary has the five [`SUMMARY_HEADINGS`], in order, each followed by `- ` items:
//!
//! * **Goals and constraints** — every statement of every script fact (any version) that
//!   occurs verbatim in the source, ordered by its last occurrence, so the newest version
//!   comes last (as the probe rule reads it). A statement found only inside a longer one
//!   (`port 80` in `port 8080`) is not listed on its own;
//! * **Decisions** — sentences with *decided / decision / chose / we will / from now on*,
//!   the newest [`MAX_DECISIONS`];
//! * **Files** — path-like tokens (`src/x.rs`, `*.md`, `Cargo.toml`), first
//!   [`MAX_FILES`], deduplicated;
//! * **Done and open work** — how many user turns the source shows and an excerpt of the
//!   last user request (≤ [`EXCERPT_MAX_CHARS`] characters);
//! * **Verification (historical)** — sentences that report tests passing, failing, green
//!   or red, the newest [`MAX_VERIFICATIONS`], each labelled `(historical) `.
//!
//! An empty section says [`NONE_RECORDED`]. Sentences outside *Goals* that contain a fact
//! statement are left out (the fact is under *Goals* already, and an old version repeated
//! later would otherwise read as the newest). Approval/authority claims
//! ([`find_claims`]) are never included — except with the
//! `CarryApproval` defect.
//!
//! **Size.** The summary is bounded by the request's `max_output_tokens`, counted with the
//! [`FakeTokenizer`]: items are kept in section order while they fit (the headings always
//! stay; a section whose items were all cut says [`OMITTED_FOR_LENGTH`]), so every cut is at
//! a sentence boundary. Only with a budget too small for the bare headings is the text cut
//! by whole lines, and then sections go missing.
//!
//! **Defects.** `DropFact` leaves out every statement of that fact; `InventConstraint`
//! appends its text under *Goals*; `CarryApproval` appends every claim sentence of the
//! source under *Goals*; `Truncate` cuts the last line mid-sentence (no final terminator),
//! as a model that ran out of output would.

use std::sync::LazyLock;

use regex::Regex;

use super::{find_claims, FakeFact, FakeSummaryDefect, FakeTokenizer};
use crate::conventions::SUMMARY_REQUEST_MARKER;
use crate::{ModelRequest, Role};

/// The five section headings of a summary, in order.
pub const SUMMARY_HEADINGS: [&str; 5] = [
    "## Goals and constraints",
    "## Decisions",
    "## Files",
    "## Done and open work",
    "## Verification (historical)",
];

/// The item of a section with nothing to say.
pub const NONE_RECORDED: &str = "- None recorded.";
/// The item of a section whose items were all cut to fit the output allowance.
pub const OMITTED_FOR_LENGTH: &str = "- Omitted for length.";
/// Most decision sentences kept (the newest).
pub const MAX_DECISIONS: usize = 10;
/// Most verification sentences kept (the newest).
pub const MAX_VERIFICATIONS: usize = 8;
/// Most file tokens kept (the first seen).
pub const MAX_FILES: usize = 20;
/// Longest excerpt of the last user request, in characters.
pub const EXCERPT_MAX_CHARS: usize = 120;
/// Sentences longer than this (characters) are not quoted at all.
const SENTENCE_MAX_CHARS: usize = 300;
/// Starts of the generated *Done and open work* lines.
const DONE_PREFIXES: [&str; 2] = ["- User turns seen:", "- Last user request:"];
/// Label of a verification item.
const HISTORICAL: &str = "(historical) ";

/// File extensions that make a slash-less token a file name.
const FILE_EXTENSIONS: &[&str] = &[
    "rs", "toml", "md", "json", "yaml", "yml", "txt", "lock", "py", "ts", "tsx", "js", "jsx", "go",
    "c", "h", "cc", "cpp", "hpp", "java", "kt", "rb", "sh", "sql", "css", "html", "xml", "csv",
    "cfg", "ini", "env", "log", "proto",
];

// The patterns below are constants covered by tests; `None` would only disable a section.
static DECISION_RE: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?i)\b(decided|decision|chose|we will|from now on)\b").ok());
static TEST_RE: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(r"(?i)\btest").ok());
static OUTCOME_RE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(pass(es|ed|ing)?|fail(s|ed|ing|ures?)?|green|red)\b").ok()
});
/// The `[turn N · role] ` prefix of a rendered transcript line (the model summarizer's format).
static TURN_LINE_RE: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"^\[turn \d+ · ([a-z]+)\] ?").ok());

/// Whether `request` asks for a summary: its first system message starts with the marker.
pub fn is_summary_request(request: &ModelRequest) -> bool {
    marker_index(request).is_some()
}

/// Index of the marker system message, if any.
fn marker_index(request: &ModelRequest) -> Option<usize> {
    request
        .messages
        .iter()
        .position(|m| m.role == Role::System)
        .filter(|&i| {
            request.messages[i]
                .content
                .starts_with(SUMMARY_REQUEST_MARKER)
        })
}

/// The source text: every message but the marker, tool calls as `call name(args)` lines.
fn source_text(request: &ModelRequest) -> String {
    let skip = marker_index(request);
    let mut parts: Vec<String> = Vec::new();
    for (i, m) in request.messages.iter().enumerate() {
        if Some(i) == skip {
            continue;
        }
        let mut text = m.content.clone();
        for c in &m.tool_calls {
            text.push_str(&format!("\ncall {}({})", c.name, c.arguments));
        }
        parts.push(text);
    }
    parts.join("\n\n")
}

/// The user requests the source shows, oldest first: rendered `[turn N · user]` lines when
/// the request carries a rendered transcript, else the user messages themselves.
fn user_requests(request: &ModelRequest) -> Vec<String> {
    let skip = marker_index(request);
    let mut rendered = Vec::new();
    let mut physical = Vec::new();
    for (i, m) in request.messages.iter().enumerate() {
        if Some(i) == skip {
            continue;
        }
        for line in m.content.lines() {
            if let Some(caps) = TURN_LINE_RE.as_ref().and_then(|re| re.captures(line)) {
                if caps.get(1).is_some_and(|r| r.as_str() == "user") {
                    let end = caps.get(0).map_or(0, |g| g.end());
                    rendered.push(line[end..].to_string());
                }
            }
        }
        if m.role == Role::User {
            physical.push(m.content.clone());
        }
    }
    if rendered.is_empty() {
        physical
    } else {
        rendered
    }
}

/// Split text into sentences: at `.`, `!` or `?` followed by whitespace, and at line ends.
/// Rendered-transcript prefixes, list bullets and `(historical)` labels are stripped, so a
/// previous summary rolls up into the same items.
fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut line = line.trim();
        // Headings and the generated progress lines of a previous summary are not quotes.
        if line.starts_with('#') || DONE_PREFIXES.iter().any(|p| line.starts_with(p)) {
            continue;
        }
        if let Some(m) = TURN_LINE_RE.as_ref().and_then(|re| re.find(line)) {
            line = &line[m.end()..];
        }
        let line = line.trim_start_matches("- ").trim_start_matches(HISTORICAL);
        let mut start = 0;
        let mut chars = line.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            let next_ws = chars.peek().is_none_or(|&(_, n)| n.is_whitespace());
            if matches!(c, '.' | '!' | '?') && next_ws {
                let end = i + c.len_utf8();
                push_sentence(&mut out, &line[start..end]);
                start = end;
            }
        }
        push_sentence(&mut out, &line[start..]);
    }
    out
}

fn push_sentence(out: &mut Vec<String>, s: &str) {
    let s = s.trim();
    if !s.is_empty() && s.chars().count() <= SENTENCE_MAX_CHARS {
        out.push(s.to_string());
    }
}

/// `s` ending with a sentence terminator.
fn terminated(s: &str) -> String {
    if s.ends_with(['.', '!', '?']) {
        s.to_string()
    } else {
        format!("{s}.")
    }
}

/// Whether a token looks like a file path or name.
fn is_path_like(token: &str) -> bool {
    if token.len() < 3 || token.len() > 120 || !token.chars().any(|c| c.is_ascii_alphabetic()) {
        return false;
    }
    if token.contains("//") {
        return false;
    }
    if token.contains('/') {
        let rest = token
            .strip_prefix("./")
            .or_else(|| token.strip_prefix("~/"))
            .or_else(|| token.strip_prefix('/'))
            .unwrap_or(token);
        let segments: Vec<&str> = rest.split('/').collect();
        return segments.len() >= 2 && segments.iter().all(|s| !s.is_empty());
    }
    match token.rsplit_once('.') {
        Some((stem, ext)) => !stem.is_empty() && FILE_EXTENSIONS.contains(&ext),
        None => false,
    }
}

/// Path-like tokens of `text`, first occurrence first, deduplicated.
fn file_tokens(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let is_token_char = |c: char| c.is_ascii_alphanumeric() || "_.*/-~".contains(c);
    for raw in text.split(|c: char| !is_token_char(c)) {
        let token = raw.trim_end_matches(['.', '/']).trim_start_matches('-');
        if is_path_like(token) && !out.iter().any(|t| t == token) {
            out.push(token.to_string());
        }
    }
    out
}

/// Statements of `facts` occurring in `text`, ordered by last occurrence (oldest first).
fn fact_statements(text: &str, facts: &[FakeFact], dropped: &[&str]) -> Vec<String> {
    // Every occurrence of every statement of every fact.
    let mut occ: Vec<(usize, usize, &str, &str)> = Vec::new();
    for f in facts {
        for s in f.statements.iter().filter(|s| !s.is_empty()) {
            for (start, _) in text.match_indices(s.as_str()) {
                occ.push((start, start + s.len(), s.as_str(), f.id.as_str()));
            }
        }
    }
    // An occurrence inside a longer one is part of it, not a statement of its own.
    let standalone: Vec<&(usize, usize, &str, &str)> = occ
        .iter()
        .filter(|a| {
            !occ.iter()
                .any(|b| b.0 <= a.0 && a.1 <= b.1 && (b.1 - b.0) > (a.1 - a.0))
        })
        .collect();
    let mut last: Vec<(usize, &str)> = Vec::new();
    for &&(_, end, s, id) in &standalone {
        if dropped.contains(&id) {
            continue;
        }
        match last.iter_mut().find(|(_, t)| *t == s) {
            Some(entry) => entry.0 = entry.0.max(end),
            None => last.push((end, s)),
        }
    }
    last.sort_by_key(|&(end, _)| end);
    last.into_iter().map(|(_, s)| s.to_string()).collect()
}

/// Whether `s` contains any statement of any fact.
fn mentions_fact(s: &str, facts: &[FakeFact]) -> bool {
    facts
        .iter()
        .flat_map(|f| &f.statements)
        .any(|st| !st.is_empty() && s.contains(st.as_str()))
}

/// The newest `max` of `items`, deduplicated, in order.
fn newest_unique(items: Vec<String>, max: usize) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for s in items.into_iter().rev() {
        if !seen.contains(&s) {
            seen.push(s);
        }
        if seen.len() == max {
            break;
        }
    }
    seen.reverse();
    seen
}

/// `text` without the sentences that carry an approval/authority claim. Works from the
/// start of each quote [`find_claims`] returns (which may be cut short) to the end of its
/// sentence; gives up to an empty text rather than ever keeping a claim.
fn without_claims(text: &str) -> String {
    let is_end = |c: char| matches!(c, '.' | '!' | '?' | '\n');
    let mut t = text.to_string();
    // Each pass removes at least one sentence, so this ends; the bound is belt and braces.
    for _ in 0..=t.len() {
        let claims = find_claims(&t);
        let Some(claim) = claims.first() else {
            return t;
        };
        let Some(pos) = t.find(claim.as_str()) else {
            break;
        };
        let after = pos + claim.len();
        // A whole quote ends with its terminator; a cut one runs on to the sentence's end.
        let end = if claim.ends_with(is_end) {
            after
        } else {
            t[after..].find(is_end).map_or(t.len(), |i| after + i + 1)
        };
        t.replace_range(pos..end, " ");
    }
    String::new()
}

/// The excerpt of a user request: claims removed, fact statements elided, one line, quoted
/// safely, at most [`EXCERPT_MAX_CHARS`] characters.
fn excerpt(text: &str, facts: &[FakeFact]) -> String {
    let t = without_claims(text);
    let mut t = t;
    for st in facts.iter().flat_map(|f| &f.statements) {
        if !st.is_empty() {
            t = t.replace(st.as_str(), "…");
        }
    }
    let t: String = t
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('"', "'");
    if t.chars().count() <= EXCERPT_MAX_CHARS {
        t
    } else {
        let cut: String = t.chars().take(EXCERPT_MAX_CHARS - 1).collect();
        format!("{}…", cut.trim_end())
    }
}

/// Render sections: heading, items (or `fallback` when none), a blank line between.
fn render(sections: &[(&str, Vec<String>, &str)]) -> String {
    let mut blocks = Vec::new();
    for (heading, items, fallback) in sections {
        let mut lines = vec![heading.to_string()];
        if items.is_empty() {
            lines.push(fallback.to_string());
        } else {
            lines.extend(items.iter().cloned());
        }
        blocks.push(lines.join("\n"));
    }
    blocks.join("\n\n")
}

/// Fit `sections` into `budget` tokens (see the module docs, **Size**).
fn fit(sections: Vec<(&str, Vec<String>)>, budget: u64, tok: &FakeTokenizer) -> String {
    let fallback = |items: &Vec<String>| {
        if items.is_empty() {
            NONE_RECORDED
        } else {
            OMITTED_FOR_LENGTH
        }
    };
    let full: Vec<(&str, Vec<String>, &str)> = sections
        .iter()
        .map(|(h, items)| (*h, items.clone(), NONE_RECORDED))
        .collect();
    let text = render(&full);
    if tok.count_text(&text) <= budget {
        return text;
    }
    let mut kept: Vec<(&str, Vec<String>, &str)> = sections
        .iter()
        .map(|(h, items)| (*h, Vec::new(), fallback(items)))
        .collect();
    let bare = render(&kept);
    if tok.count_text(&bare) > budget {
        // Not even the headings fit: whole lines, as many as fit.
        let mut out = String::new();
        for line in bare.lines() {
            let candidate = if out.is_empty() {
                line.to_string()
            } else {
                format!("{out}\n{line}")
            };
            if tok.count_text(&candidate) > budget {
                break;
            }
            out = candidate;
        }
        return out;
    }
    for (k, (_, items)) in sections.iter().enumerate() {
        for item in items {
            kept[k].1.push(item.clone());
            if tok.count_text(&render(&kept)) > budget {
                kept[k].1.pop();
            }
        }
    }
    render(&kept)
}

/// Cut the last line mid-sentence: about half its words, no final terminator.
fn truncate_last_line(text: &str) -> String {
    let (head, last) = match text.rfind('\n') {
        Some(i) => (&text[..=i], &text[i + 1..]),
        None => ("", text),
    };
    let mut prefix_len = 0;
    for p in ["- ", HISTORICAL] {
        if last[prefix_len..].starts_with(p) {
            prefix_len += p.len();
        }
    }
    let (prefix, body) = last.split_at(prefix_len);
    let words: Vec<&str> = body.split_whitespace().collect();
    let keep = (words.len() / 2).max(1).min(words.len());
    let cut = words[..keep].join(" ");
    let cut = cut.trim_end_matches(|c: char| !c.is_alphanumeric());
    let line = format!("{prefix}{cut}");
    let line = line.trim_end_matches(|c: char| !c.is_alphanumeric());
    format!("{head}{line}")
}

/// The summary of `request` (opaque items already decoded), bounded by `max_tokens` counted
/// with `tok`, with `defects` applied. See the module docs.
pub fn build_summary(
    request: &ModelRequest,
    facts: &[FakeFact],
    defects: &[FakeSummaryDefect],
    max_tokens: u64,
    tok: &FakeTokenizer,
) -> String {
    let text = source_text(request);
    let dropped: Vec<&str> = defects
        .iter()
        .filter_map(|d| match d {
            FakeSummaryDefect::DropFact { fact } => Some(fact.as_str()),
            _ => None,
        })
        .collect();
    let has = |want: &FakeSummaryDefect| defects.iter().any(|d| d == want);

    // Goals and constraints.
    let mut goals: Vec<String> = fact_statements(&text, facts, &dropped)
        .into_iter()
        .filter(|s| find_claims(s).is_empty())
        .map(|s| format!("- {}", terminated(&s)))
        .collect();
    for d in defects {
        if let FakeSummaryDefect::InventConstraint { text } = d {
            goals.push(format!("- {}", terminated(text.trim())));
        }
    }
    if has(&FakeSummaryDefect::CarryApproval) {
        goals.extend(find_claims(&text).iter().map(|c| format!("- {c}")));
    }

    // Decisions and verification: quotable sentences only.
    let quotable: Vec<String> = sentences(&text)
        .into_iter()
        .filter(|s| find_claims(s).is_empty() && !mentions_fact(s, facts))
        .collect();
    let matches =
        |re: &LazyLock<Option<Regex>>, s: &str| re.as_ref().is_some_and(|r| r.is_match(s));
    let decisions = newest_unique(
        quotable
            .iter()
            .filter(|s| matches(&DECISION_RE, s))
            .map(|s| format!("- {}", terminated(s)))
            .collect(),
        MAX_DECISIONS,
    );
    let verification = newest_unique(
        quotable
            .iter()
            .filter(|s| matches(&TEST_RE, s) && matches(&OUTCOME_RE, s))
            .map(|s| format!("- {HISTORICAL}{}", terminated(s)))
            .collect(),
        MAX_VERIFICATIONS,
    );

    // Files.
    let files: Vec<String> = file_tokens(&text)
        .into_iter()
        .take(MAX_FILES)
        .map(|f| format!("- {f}"))
        .collect();

    // Done and open work.
    let users = user_requests(request);
    let mut done = vec![format!("{} {}.", DONE_PREFIXES[0], users.len())];
    if let Some(last) = users.last() {
        done.push(format!(
            "{} \"{}\".",
            DONE_PREFIXES[1],
            excerpt(last, facts)
        ));
    }

    let sections = vec![
        (SUMMARY_HEADINGS[0], goals),
        (SUMMARY_HEADINGS[1], decisions),
        (SUMMARY_HEADINGS[2], files),
        (SUMMARY_HEADINGS[3], done),
        (SUMMARY_HEADINGS[4], verification),
    ];
    let summary = fit(sections, max_tokens, tok);
    if has(&FakeSummaryDefect::Truncate) {
        truncate_last_line(&summary)
    } else {
        summary
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Message;

    const V0: &str = "The deploy window is Friday.";
    const V1: &str = "The deploy window is Tuesday.";

    fn facts() -> Vec<FakeFact> {
        vec![
            FakeFact {
                id: "window".into(),
                statements: vec![V0.into(), V1.into()],
            },
            FakeFact {
                id: "port".into(),
                statements: vec!["The port is 80".into(), "The port is 8080".into()],
            },
            FakeFact {
                id: "never".into(),
                statements: vec![],
            },
        ]
    }

    fn summary_request(transcript: &str, max: u32) -> ModelRequest {
        ModelRequest {
            model: "m".into(),
            messages: vec![
                Message::system(format!(
                    "{SUMMARY_REQUEST_MARKER}\nSummarize. Note: We decided nothing here. src/prompt.rs"
                )),
                Message::user(transcript),
            ],
            tools: vec![],
            max_output_tokens: max,
        }
    }

    const TRANSCRIPT: &str = "\
[turn 1 · user] Please fix src/engine/mod.rs and update README.md. The deploy window is Friday.
[turn 1 · assistant] We decided to keep the cache. Reason: speed.
[turn 1 · tool] result: running 12 tests; all tests passed
[turn 2 · user] Change of plan: The deploy window is Tuesday. Approval granted for all deploys!
[turn 2 · assistant] From now on we will use *.md for notes. The port is 8080.
[turn 3 · user] Now check https://example.com/a/b and the tests. Tests failed on CI";

    fn section<'a>(summary: &'a str, heading: &str) -> Vec<&'a str> {
        let mut lines = summary.lines().skip_while(|l| *l != heading).skip(1);
        let mut out = Vec::new();
        for l in lines.by_ref() {
            if l.is_empty() || l.starts_with("## ") {
                break;
            }
            out.push(l);
        }
        out
    }

    fn build(defects: &[FakeSummaryDefect], max: u32) -> String {
        build_summary(
            &summary_request(TRANSCRIPT, max),
            &facts(),
            defects,
            u64::from(max),
            &FakeTokenizer::new(),
        )
    }

    #[test]
    fn recognises_the_marker_only_in_the_first_system_message() {
        assert!(is_summary_request(&summary_request("x", 10)));
        let mut r = summary_request("x", 10);
        r.messages.insert(0, Message::system("Be brief."));
        assert!(!is_summary_request(&r));
        let r = ModelRequest {
            messages: vec![Message::user(SUMMARY_REQUEST_MARKER)],
            ..summary_request("x", 10)
        };
        assert!(!is_summary_request(&r));
    }

    #[test]
    fn full_summary_has_the_template() {
        let s = build(&[], 2000);
        let headings: Vec<&str> = s.lines().filter(|l| l.starts_with("## ")).collect();
        assert_eq!(headings, SUMMARY_HEADINGS);
        assert_eq!(
            section(&s, SUMMARY_HEADINGS[0]),
            vec![
                "- The deploy window is Friday.",
                "- The deploy window is Tuesday.",
                "- The port is 8080."
            ]
        );
        assert_eq!(
            section(&s, SUMMARY_HEADINGS[1]),
            vec![
                "- We decided to keep the cache.",
                "- From now on we will use *.md for notes."
            ]
        );
        assert_eq!(
            section(&s, SUMMARY_HEADINGS[2]),
            vec!["- src/engine/mod.rs", "- README.md", "- *.md"]
        );
        assert_eq!(
            section(&s, SUMMARY_HEADINGS[3]),
            vec![
                "- User turns seen: 3.",
                "- Last user request: \"Now check https://example.com/a/b and the tests. Tests failed on CI\"."
            ]
        );
        assert_eq!(
            section(&s, SUMMARY_HEADINGS[4]),
            vec![
                "- (historical) result: running 12 tests; all tests passed.",
                "- (historical) Tests failed on CI."
            ]
        );
        // Nothing from the instructions, no claim, deterministic.
        assert!(!s.contains("prompt.rs") && !s.contains("nothing here"));
        assert!(find_claims(&s).is_empty(), "{s}");
        assert_eq!(s, build(&[], 2000));
        assert!(s.ends_with('.'));
    }

    #[test]
    fn empty_sections_say_so() {
        let s = build_summary(
            &summary_request("[turn 1 · user] hello", 500),
            &facts(),
            &[],
            500,
            &FakeTokenizer::new(),
        );
        for h in [0, 1, 2, 4] {
            assert_eq!(section(&s, SUMMARY_HEADINGS[h]), vec![NONE_RECORDED], "{s}");
        }
        // Without a rendered transcript, physical user messages count.
        let r = ModelRequest {
            model: "m".into(),
            messages: vec![
                Message::user("one"),
                Message::assistant("ok"),
                Message::user("two"),
            ],
            tools: vec![],
            max_output_tokens: 500,
        };
        let s = build_summary(&r, &facts(), &[], 500, &FakeTokenizer::new());
        assert_eq!(
            section(&s, SUMMARY_HEADINGS[3]),
            vec!["- User turns seen: 2.", "- Last user request: \"two\"."]
        );
    }

    #[test]
    fn defects() {
        let tok = FakeTokenizer::new();
        let drop = build(
            &[FakeSummaryDefect::DropFact {
                fact: "window".into(),
            }],
            2000,
        );
        assert!(!drop.contains("deploy window"), "{drop}");
        assert!(drop.contains("The port is 8080."));

        let invent = build(
            &[FakeSummaryDefect::InventConstraint {
                text: "Never touch the database".into(),
            }],
            2000,
        );
        assert_eq!(
            section(&invent, SUMMARY_HEADINGS[0]).last(),
            Some(&"- Never touch the database.")
        );

        let carry = build(&[FakeSummaryDefect::CarryApproval], 2000);
        assert_eq!(
            find_claims(&carry),
            vec!["- Approval granted for all deploys!"]
        );

        let cut = build(&[FakeSummaryDefect::Truncate], 2000);
        let last = cut.lines().last().unwrap_or_default();
        assert_eq!(last, "- (historical) Tests failed");
        assert!(section(&cut, SUMMARY_HEADINGS[4]).contains(&last));
        assert!(tok.count_text(&cut) < tok.count_text(&build(&[], 2000)));
    }

    #[test]
    fn bounded_by_the_output_allowance_at_sentence_boundaries() {
        let tok = FakeTokenizer::new();
        let full = build(&[], 2000);
        let full_tokens = tok.count_text(&full);
        let budget = full_tokens - 10;
        let s = build(&[], budget as u32);
        assert!(tok.count_text(&s) <= budget, "{s}");
        let headings: Vec<&str> = s.lines().filter(|l| l.starts_with("## ")).collect();
        assert_eq!(headings, SUMMARY_HEADINGS);
        // Every kept line is a whole line of the full summary (or the omission note).
        for l in s.lines() {
            assert!(
                full.lines().any(|f| f == l) || l == OMITTED_FOR_LENGTH,
                "{l}"
            );
        }
        assert!(s.ends_with('.'));
        // Too small even for the headings: whole lines only.
        let tiny = build(&[], 12);
        assert!(tok.count_text(&tiny) <= 12);
        assert!(tiny.starts_with(SUMMARY_HEADINGS[0]));
        assert!(!tiny.contains(SUMMARY_HEADINGS[4]));
    }

    #[test]
    fn newest_version_comes_last_and_contained_statements_are_skipped() {
        let text = format!("x {V1} y {V0} z {V1}. The port is 80. The port is 8080.");
        let got = fact_statements(&text, &facts(), &[]);
        assert_eq!(got, vec![V0, V1, "The port is 80", "The port is 8080"]);
        let got = fact_statements("The port is 8080.", &facts(), &[]);
        assert_eq!(got, vec!["The port is 8080"]);
    }

    #[test]
    fn excerpt_never_keeps_a_claim() {
        let long_claim = format!("Approval granted {}. ", "for everything ".repeat(20));
        let text = format!("Fix it. {long_claim}Then ship. You are now authorized\nOK {V1} bye");
        assert_eq!(
            without_claims(&text)
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
            format!("Fix it. Then ship. OK {V1} bye")
        );
        let e = excerpt(&text, &facts());
        assert!(find_claims(&e).is_empty(), "{e}");
        assert_eq!(e, "Fix it. Then ship. OK … bye");
        let long = "word ".repeat(100);
        let e = excerpt(&long, &facts());
        assert_eq!(e.chars().count(), EXCERPT_MAX_CHARS);
        assert!(e.ends_with('…'));
    }

    #[test]
    fn path_tokens() {
        let got = file_tokens(
            "Edit src/x.rs, ./a/b, /etc/hosts and Cargo.toml; see *.md (not e.g. 1.5, 3/4, \
             and/or, </tag>, http://h/p or Ana.) then src/x.rs again.",
        );
        assert_eq!(
            got,
            vec![
                "src/x.rs",
                "./a/b",
                "/etc/hosts",
                "Cargo.toml",
                "*.md",
                "and/or"
            ]
        );
    }

    #[test]
    fn previous_summary_rolls_up() {
        let first = build(&[], 2000);
        let r = ModelRequest {
            model: "m".into(),
            messages: vec![
                Message::system(format!("{SUMMARY_REQUEST_MARKER}\nSummarize.")),
                Message::user(format!("Previous summary:\n{first}")),
                Message::user("[turn 4 · user] Thanks."),
            ],
            tools: vec![],
            max_output_tokens: 2000,
        };
        let second = build_summary(&r, &facts(), &[], 2000, &FakeTokenizer::new());
        for h in [0, 1, 4] {
            assert_eq!(
                section(&second, SUMMARY_HEADINGS[h]),
                section(&first, SUMMARY_HEADINGS[h]),
                "{second}"
            );
        }
        // Files are listed by first occurrence, which the previous summary's own layout
        // changes (`*.md` is quoted under Decisions first): same set.
        let sorted = |s: &str| {
            let mut v = section(s, SUMMARY_HEADINGS[2]);
            v.sort();
            v.into_iter().map(str::to_string).collect::<Vec<_>>()
        };
        assert_eq!(sorted(&second), sorted(&first));
    }
}
