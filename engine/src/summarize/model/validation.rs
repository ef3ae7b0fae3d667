//! Validation of a model-written summary: size, structure, safety, traceability of its
//! constraints, and the archive references of its source (seed 000 §Summary contract; seed
//! 004 P1). A model summary is untrusted output: it replaces nothing until it passes.

use std::sync::OnceLock;

use ctxbench_adapters::FinishReason;
use regex::Regex;

use super::{archive_refs_in, bounded, build_request, SIZE_SLACK};
use crate::summarize::SummaryRequest;

/// Whether the summary ends cleanly: its last line ends with a sentence terminator
/// (closing quotes or brackets may follow), or is a list item naming one path-like token
/// (`- src/x.rs`). A cut-off answer ends mid-sentence and fails this.
pub fn ends_complete(text: &str) -> bool {
    let Some(last) = text.lines().map(str::trim).rfind(|l| !l.is_empty()) else {
        return false;
    };
    let core = last.trim_end_matches(['"', '\'', ')', ']', '`', '*', '”', '’']);
    if core.ends_with(['.', '!', '?']) {
        return true;
    }
    let item = last.strip_prefix("- ").or_else(|| last.strip_prefix("* "));
    item.is_some_and(|t| {
        !t.is_empty()
            && !t.contains(char::is_whitespace)
            && t.contains(['/', '.', '_', '`'])
            && !t.ends_with(['.', ','])
    })
}

/// Validate a model summary (seed 000: size, schema and safety before it can replace the
/// active view), including [traceability](untraceable_constraints) of its constraints to the
/// request's own material. `Err` carries the reason.
pub fn validate(
    text: &str,
    request: &SummaryRequest<'_>,
    finish: FinishReason,
) -> Result<(), String> {
    validate_structure(text, request, finish)?;
    validate_traceable(text, request)
}

/// Every constraint sentence of `text` is traceable to the summarization input built from
/// `request` (the rendered transcript and the previous summary, as sent; not the prompt).
fn validate_traceable(text: &str, request: &SummaryRequest<'_>) -> Result<(), String> {
    let model_request = build_request(request).map_err(|e| e.to_string())?;
    let sources: Vec<&str> = model_request
        .messages
        .iter()
        .skip(1) // the instruction: its own wording is no conversation constraint
        .map(|m| m.content.as_str())
        .collect();
    let untraceable = untraceable_constraints(text, &sources);
    match untraceable.first() {
        None => Ok(()),
        Some(first) => Err(format!(
            "untraceable constraint: \"{}\" is stated nowhere in the summarized conversation{}",
            bounded(first, 160),
            if untraceable.len() > 1 {
                format!(" ({} such sentences)", untraceable.len())
            } else {
                String::new()
            }
        )),
    }
}

/// Size, structure and safety checks (everything but traceability).
pub(super) fn validate_structure(
    text: &str,
    request: &SummaryRequest<'_>,
    finish: FinishReason,
) -> Result<(), String> {
    if finish == FinishReason::Length {
        return Err("truncated: the output allowance ran out".into());
    }
    if text.trim().is_empty() {
        return Err("empty summary".into());
    }
    // The sections are asked for, not required: models answer in their own shape, and a
    // complete, bounded, safe summary in another shape is still a summary.
    if !ends_complete(text) {
        return Err("truncated: the summary stops mid-sentence".into());
    }
    let tokens = request.estimator.count_text(text);
    let limit = request.target_tokens.saturating_mul(SIZE_SLACK.0) / SIZE_SLACK.1;
    if tokens > limit {
        return Err(format!(
            "too large: {tokens} estimated tokens, limit {limit} (target {})",
            request.target_tokens
        ));
    }
    let claims = crate::summarize::extractive::claims().sentences_in(text);
    if let Some(first) = claims.first() {
        return Err(format!(
            "carries {} approval/authority claim(s), e.g. \"{first}\"",
            claims.len()
        ));
    }
    if request.redactor.contains_secret(text) {
        return Err("contains a configured secret".into());
    }
    validate_archive_refs(text, request)
}

/// Every `archive://` reference in the summarized material (the covered messages and the
/// previous summary) is in the summary: a checkpoint must not erase the only address of
/// archived output (seed 004 P1). The extractive summary keeps them by construction; a
/// model may paraphrase them away.
pub fn validate_archive_refs(text: &str, request: &SummaryRequest<'_>) -> Result<(), String> {
    let mut sources: Vec<String> = Vec::new();
    if let Some(prev) = request.previous.and_then(|p| p.summary.as_deref()) {
        sources.push(request.redactor.redact(prev));
    }
    for e in request.covered {
        let m = request.redactor.redact_message(&e.message);
        sources.push(m.content);
        sources.extend(m.tool_calls.iter().map(|c| c.arguments.to_string()));
    }
    let mut expected: Vec<&str> = Vec::new();
    for s in &sources {
        for r in archive_refs_in(s) {
            if !expected.contains(&r) {
                expected.push(r);
            }
        }
    }
    let missing: Vec<&str> = expected
        .iter()
        .copied()
        .filter(|r| !text.contains(r))
        .collect();
    match missing.first() {
        None => Ok(()),
        Some(first) => Err(format!(
            "drops archive references: {first} ({} of {} missing) would become unaddressable",
            missing.len(),
            expected.len()
        )),
    }
}

/// Words that make a sentence read as a constraint on later turns.
fn constraint_words() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(
            r"(?i)\b(must|mustn't|never|always|only|required|requires?|do not|don't|shall|forbidden|prohibited|mandatory|not allowed)\b",
        )
        .expect("static regex")
    })
}

/// Labels a summary puts before quoted text: `(historical)`, `(historical, turn N)`,
/// `[turn N · role]`, `result:`, `Last user request:`.
fn labels() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(
            r"(?i)^(?:[-*]\s+|\(historical(?:, turn \d+)?\)\s*|\[turn \d+ · [a-z]+\]\s*|result:\s*|last user request:\s*|[\x22'“”‘’]+)",
        )
        .expect("static regex")
    })
}

/// Whether a sentence reads like a constraint (*must*, *never*, *always*, *only*, *required*,
/// *do not*, …).
pub fn is_constraint(sentence: &str) -> bool {
    constraint_words().is_match(sentence)
}

/// Normalized text for traceability: lowercase, every quote mark as `'`, whitespace runs
/// collapsed to one space, trimmed.
pub fn normalize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut space = false;
    for c in text.chars() {
        if c.is_whitespace() {
            space = !out.is_empty();
            continue;
        }
        if space {
            out.push(' ');
            space = false;
        }
        match c {
            '"' | '“' | '”' | '‘' | '’' | '`' => out.push('\''),
            _ => out.extend(c.to_lowercase()),
        }
    }
    out
}

/// `text` without leading labels, bullets and quote marks (repeatedly).
fn strip_labels(mut text: &str) -> &str {
    loop {
        let t = text.trim_start();
        match labels().find(t) {
            Some(m) if m.end() > 0 => text = &t[m.end()..],
            _ => return t,
        }
    }
}

/// The sentences of a summary's body: headings skipped, bullets and labels stripped, split
/// at `.`, `!` or `?` followed by whitespace (or the line's end).
pub fn summary_sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = strip_labels(line);
        let mut start = 0;
        let mut chars = line.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            let at_end = chars.peek().is_none_or(|&(_, n)| n.is_whitespace());
            if matches!(c, '.' | '!' | '?') && at_end {
                let end = i + c.len_utf8();
                out.push(strip_labels(&line[start..end]));
                start = end;
            }
        }
        out.push(strip_labels(&line[start..]));
    }
    out.retain(|s| !s.is_empty());
    out
}

/// The traceable fragments of a sentence: its normalized text cut at `…` (an elision or a
/// cut-off quote), each fragment trimmed of punctuation and quote marks at both ends.
pub fn fragments(sentence: &str) -> Vec<String> {
    normalize(sentence)
        .split('…')
        .map(|f| {
            f.trim_matches(|c: char| c.is_whitespace() || ".,;:!?'()[]".contains(c))
                .to_string()
        })
        .filter(|f| !f.is_empty())
        .collect()
}

/// The constraint sentences of `summary` (see [`summary_sentences`], [`is_constraint`]) that
/// are not traceable to `sources`: some fragment ([`fragments`]) occurs in no source (each
/// source [normalized](normalize) on its own, so a fragment cannot straddle two).
pub fn untraceable_constraints(summary: &str, sources: &[&str]) -> Vec<String> {
    let normalized: Vec<String> = sources.iter().map(|s| normalize(s)).collect();
    summary_sentences(summary)
        .into_iter()
        .filter(|s| is_constraint(s))
        .filter(|s| {
            fragments(s)
                .iter()
                .any(|f| !normalized.iter().any(|src| src.contains(f.as_str())))
        })
        .map(str::to_string)
        .collect()
}
