//! What every grader needs to read a trial the way ctxbench saw it: the requests sent (read
//! back from the record's message store, wrapped conversations unwrapped), where each piece
//! of a request sat (the fake model's own [`layout`](ctxbench_adapters::fake::layout) rule,
//! from what the system under test *declared* — never from its code), the conversation
//! ctxbench itself played (user texts, scripted tool results, the provider's replies), and
//! redacted evidence.

use ctxbench_adapters::fake::layout::MemoryRule;
use ctxbench_adapters::fake::unwrap_request;
use ctxbench_adapters::{ContentHash, Message, ModelRequest, Role};
use ctxbench_harness::record::{RequestRecord, TrialRecord};
use ctxbench_harness::scenario::{Scenario, Step};
use ctxbench_harness::sut::redact::Redactor;

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

/// A request read back as the model read it: its messages (as [`messages`] lists them),
/// with a conversation wrapped as JSON in one prompt (the "codex wrapper") unwrapped.
pub(crate) fn request(r: &RequestRecord, listed: &[(&str, Option<&Message>)]) -> ModelRequest {
    let req = ModelRequest {
        model: r.row.model.clone(),
        messages: listed.iter().filter_map(|(_, m)| m.cloned()).collect(),
        tools: Vec::new(),
        max_output_tokens: 0,
    };
    unwrap_request(&req).unwrap_or(req)
}

/// Every version of the instruction file the trial wrote, in order.
pub(crate) fn instruction_versions(scenario: &Scenario, rec: &TrialRecord) -> Vec<String> {
    std::iter::once(scenario.instructions.clone())
        .chain(rec.steps.iter().filter_map(|s| match s {
            Step::EditInstructions { text } => Some(text.clone()),
            _ => None,
        }))
        .collect()
}

/// How memory is recognised in this trial's requests: the system's declared markup, else
/// the undeclared rule (system text that is not the instruction file).
pub(crate) fn memory_rule(scenario: &Scenario, rec: &TrialRecord) -> MemoryRule {
    MemoryRule {
        markup: rec.declaration.memory.clone(),
        instructions: instruction_versions(scenario, rec),
    }
}

/// The rule the graders applied to find memory, in words (for verdict summaries).
pub(crate) fn memory_rule_words(rec: &TrialRecord) -> String {
    rec.declaration.memory_rule()
}

/// SHA-256 (hex) of a text.
pub(crate) fn text_hash(text: &str) -> String {
    ContentHash::of_bytes(text.as_bytes()).to_hex()
}

/// The first 12 hex digits of a hash, for notes.
pub(crate) fn short(hash: &str) -> &str {
    &hash[..hash.len().min(12)]
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

/// Whether the system under test reports event family `family` in this trial: as it
/// declared, else as it emitted (a family it never emitted is not judged).
pub(crate) fn reports(rec: &TrialRecord, family: ctxbench_sut::EventFamily) -> bool {
    match &rec.declaration.events {
        Some(declared) => declared.contains(&family),
        None => rec.events.iter().any(|e| e.event.family() == family),
    }
}

/// Why a grader is not applicable when the system does not report `family`.
pub(crate) fn no_family(family: ctxbench_sut::EventFamily) -> String {
    format!(
        "not-applicable: the system under test does not report `{}` events",
        family.as_str()
    )
}

/// Whether the trial comes from a black-box system under test: turns were played (or
/// requests sent) but the system reported no context event (an external agent whose
/// adapter maps none).
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
        if let Step::EditInstructions { text: t } = s {
            text = t.as_str();
        }
    }
    text
}

/// Whether a system message carries the instruction file `file_text`: real runtimes trim
/// the file and often embed it in their own system prompt, so the file's trimmed text must
/// appear in the message, not be all of it. An empty file is carried by nothing.
pub(crate) fn carries_instructions(content: &str, file_text: &str) -> bool {
    let text = file_text.trim();
    !text.is_empty() && content.contains(text)
}

/// Where a request carries the instruction file `file_text`: the index of the first message
/// of the request's system prompt — its leading run of system messages — that carries it.
/// A runtime's system prompt may arrive as several system messages (the Anthropic wire turns
/// each `system` block into one; Claude Code sends a header and an identity line before the
/// file), so "first" means first in the system prompt, not necessarily message 0.
pub(crate) fn instruction_message<'a>(
    messages: impl IntoIterator<Item = Option<&'a Message>>,
    file_text: &str,
) -> Option<usize> {
    messages
        .into_iter()
        .take_while(|m| m.is_some_and(|m| m.role == Role::System))
        .position(|m| m.is_some_and(|m| carries_instructions(&m.content, file_text)))
}

/// One message of the conversation ctxbench itself played.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Played {
    /// Script step.
    pub step: u64,
    /// `user` (the scripted text), `tool` (a scripted result) or `assistant` (a reply the
    /// provider gave).
    pub role: Role,
    /// The text.
    pub text: String,
}

/// The conversation as ctxbench played it, in order: each turn's user text, the tool
/// results it scripted, and every reply the provider gave in that step. Nothing here comes
/// from the system under test.
pub(crate) fn played(rec: &TrialRecord) -> Vec<Played> {
    let mut out = Vec::new();
    for (i, s) in rec.steps.iter().enumerate() {
        let step = i as u64;
        if let Step::Turn(t) = s {
            out.push(Played {
                step,
                role: Role::User,
                text: t.user.clone(),
            });
            for c in t.tool_rounds.iter().flatten() {
                out.push(Played {
                    step,
                    role: Role::Tool,
                    text: c.result.clone(),
                });
            }
        }
        for r in rec
            .requests
            .iter()
            .filter(|r| r.row.sent && r.row.step == step && r.row.purpose == "turn")
        {
            if let Some(resp) = &r.response {
                if !resp.message.content.trim().is_empty() {
                    out.push(Played {
                        step,
                        role: Role::Assistant,
                        text: resp.message.content.clone(),
                    });
                }
            }
        }
    }
    out
}

/// Normalized text for containment checks (the fake model's own rule).
pub(crate) use ctxbench_adapters::fake::text::normalize;

/// The input budget the scenario declares: window − max(reserved output, buffer) (seed 000's
/// formula, as the protocol defines it).
pub(crate) fn declared_available(scenario: &Scenario) -> u64 {
    ctxbench_harness::sut::budget::available_input(
        scenario.model.context_window,
        scenario.context.reserved_output_tokens,
        scenario.context.buffer_tokens,
    )
}

/// `tokens` of the fake model's tokenizer in the provider's own tokens (`token_scale`,
/// rounded up): what the provider would count.
pub(crate) fn provider_scaled(scenario: &Scenario, tokens: u64) -> u64 {
    let s = scenario.token_scale;
    if s == 1.0 || !s.is_finite() || s <= 0.0 {
        tokens
    } else {
        (tokens as f64 * s).ceil() as u64
    }
}

/// The provider's count of a turn's mandatory context: the instruction file as written for
/// that run, the user's message and every tool definition, with request framing.
pub(crate) fn mandatory_tokens(
    scenario: &Scenario,
    rec: &TrialRecord,
    step: u64,
    user: &str,
) -> u64 {
    let file = instructions_at(scenario, rec, step);
    let mut messages = Vec::new();
    if !file.trim().is_empty() {
        messages.push(Message::system(file));
    }
    messages.push(Message::user(user));
    let req = ModelRequest {
        model: String::new(),
        messages,
        tools: scenario.tools.clone(),
        max_output_tokens: 0,
    };
    provider_scaled(
        scenario,
        ctxbench_adapters::fake::FakeTokenizer::new().request_tokens(&req),
    )
}
