//! Small helpers shared by the invariant graders: reading requests back from the record's
//! message store, recognising the engine-visible categories of a request (instructions,
//! labelled memory, projected tool output), and building redacted evidence.

use ctxbench_adapters::conventions::{MEMORY_CLOSE, MEMORY_OPEN};
use ctxbench_adapters::{ContentHash, Message, Role};
use ctxbench_harness::record::{RequestRecord, TrialRecord};
use ctxbench_harness::scenario::Scenario;
use ctxbench_harness::sut::redact::Redactor;

/// Prefix of a projected (bounded) tool result (`engine::tool_projection`).
pub(crate) const PROJECTION_PREFIX: &str = "[tool output projected";

/// Sent requests made for a user turn (not summarization requests, not preflight stops).
pub(crate) fn turn_requests(rec: &TrialRecord) -> impl Iterator<Item = &RequestRecord> {
    rec.requests
        .iter()
        .filter(|r| r.row.sent && r.row.purpose == "turn")
}

/// The messages of a request with their content hashes (hex), in order. A hash missing
/// from the store yields `None` for the message.
pub(crate) fn messages<'a>(
    rec: &'a TrialRecord,
    r: &'a RequestRecord,
) -> Vec<(&'a str, Option<&'a Message>)> {
    r.row
        .message_hashes
        .iter()
        .map(|h| (h.as_str(), rec.messages.get(h)))
        .collect()
}

/// Whether a message is a labelled conversation-memory message (a checkpoint).
pub(crate) fn is_memory(m: &Message) -> bool {
    m.role == Role::System && m.content.contains(MEMORY_OPEN)
}

/// Whether a message is a projected tool result (bounded stand-in for a large result).
pub(crate) fn is_projection(m: &Message) -> bool {
    m.role == Role::Tool && m.content.starts_with(PROJECTION_PREFIX)
}

/// The text inside every `MEMORY_OPEN … MEMORY_CLOSE` block of `text` (an unclosed block
/// runs to the end, as the fake provider reads it).
pub(crate) fn memory_blocks(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut pos = 0;
    while let Some(rel) = text[pos..].find(MEMORY_OPEN) {
        let start = pos + rel + MEMORY_OPEN.len();
        match text[start..].find(MEMORY_CLOSE) {
            Some(end) => {
                out.push(&text[start..start + end]);
                pos = start + end + MEMORY_CLOSE.len();
            }
            None => {
                out.push(&text[start..]);
                break;
            }
        }
    }
    out
}

/// SHA-256 (hex) of an instruction text, as `instruction_hash` records it.
pub(crate) fn text_hash(text: &str) -> String {
    ContentHash::of_bytes(text.as_bytes()).to_hex()
}

/// The first 12 hex digits of a hash, for notes.
pub(crate) fn short(hash: &str) -> &str {
    &hash[..hash.len().min(12)]
}

/// The checkpoint id a memory message names (`[checkpoint ck_… · …]`), if any.
pub(crate) fn memory_checkpoint_id(text: &str) -> Option<&str> {
    let rest = &text[text.find("[checkpoint ")? + "[checkpoint ".len()..];
    let end = rest
        .find(|c: char| c.is_whitespace() || c == ']')
        .unwrap_or(rest.len());
    Some(&rest[..end])
}

/// A role as written in notes.
pub(crate) fn role(m: &Message) -> &'static str {
    m.role.as_str()
}

/// A single-line excerpt of `text` with the scenario's secrets redacted.
pub(crate) fn redacted_excerpt(scenario: &Scenario, text: &str, max: usize) -> String {
    let r = Redactor::new(&scenario.secrets);
    crate::excerpt(&r.redact(text), max)
}

/// Why a grader that needs the system's own events is not applicable to a trial without.
pub(crate) const NO_EVENTS: &str =
    "not-applicable: the system under test reported no context events";

/// Whether the trial comes from a black-box system under test: turns were played (or
/// requests sent) but the system reported no context event (an external agent whose
/// adapter maps none). The reference engine announces every run, so an in-process trial
/// never qualifies.
pub(crate) fn black_box(rec: &TrialRecord) -> bool {
    rec.events.is_empty() && (!rec.turns.is_empty() || rec.requests.iter().any(|r| r.row.sent))
}

/// The instruction file's text as ctxbench had written it when script step `step` ran:
/// the scenario's instructions, or the last `edit_instructions` before `step`.
pub(crate) fn instructions_at<'a>(
    scenario: &'a Scenario,
    rec: &'a TrialRecord,
    step: u64,
) -> &'a str {
    let mut text = scenario.instructions.as_str();
    for (i, s) in rec.steps.iter().enumerate() {
        if i as u64 >= step {
            break;
        }
        if let ctxbench_harness::scenario::Step::EditInstructions { text: t } = s {
            text = t.as_str();
        }
    }
    text
}

/// Whether a system message sent by a black-box runtime carries the instruction file
/// `file_text`: real runtimes trim the file and often embed it in their own system prompt
/// (Claude Code, `llm -s`), so the file's trimmed text must appear in the message, not be
/// all of it. An empty file is carried by nothing.
pub(crate) fn carries_instructions(content: &str, file_text: &str) -> bool {
    let text = file_text.trim();
    !text.is_empty() && content.contains(text)
}

/// The conversation as observed in the requests: every user, assistant and tool message in
/// order of first appearance (what a black-box agent's transcript shows of itself).
pub(crate) fn observed_transcript(rec: &TrialRecord) -> Vec<Message> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for r in rec
        .requests
        .iter()
        .filter(|r| r.row.sent && r.row.purpose == "turn")
    {
        for h in &r.row.message_hashes {
            let Some(m) = rec.messages.get(h) else {
                continue;
            };
            if m.role != Role::System && seen.insert(h.as_str()) {
                out.push(m.clone());
            }
        }
    }
    out
}

/// Normalized text for containment checks: lowercase, every quote mark as `'`, whitespace
/// runs collapsed to one space, trimmed.
pub(crate) fn normalize(text: &str) -> String {
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
            '"' | '\u{201c}' | '\u{201d}' | '\u{2018}' | '\u{2019}' | '`' => out.push('\''),
            _ => out.extend(c.to_lowercase()),
        }
    }
    out
}
