//! How the fake provider answers a probe: **only from the request**, by precedence.
//!
//! A probe asks for facts by id; the provider knows each fact's possible wordings
//! ([`FakeFact::statements`], version 0 first) but not which one the engine kept. It looks
//! for them in the request, place by place, in this order:
//!
//! 1. **instructions** — system messages, text outside any conversation-memory block,
//!    newest system message first;
//! 2. **the current user message** — the latest `user` message, outside memory blocks;
//! 3. **the conversation** — user, assistant and tool messages (contents only), newest
//!    first, outside memory blocks;
//! 4. **conversation memory** — the text inside `MEMORY_OPEN … MEMORY_CLOSE` blocks of any
//!    message, newest message first.
//!
//! The answer is taken from the first place where any statement of the fact occurs
//! verbatim (case-sensitive substring). If several statements occur in that place, the one
//! occurring last wins (the occurrence that ends last; at an equal end, the longer one, so a
//! statement that contains another one wins). A fact found nowhere, or an id the script does
//! not define, is answered with [`UNKNOWN_ANSWER`]: recall measures exactly what the
//! context manager kept, and an abstention probe rewards not guessing.
//!
//! An unclosed memory block runs to the end of its message: unlabelled-but-opened memory is
//! still untrusted.

use super::FakeFact;
use crate::conventions::{MEMORY_CLOSE, MEMORY_OPEN, UNKNOWN_ANSWER};
use crate::{Message, ModelRequest, Role};

/// A piece of one message's text, with its byte offset in that message.
pub(crate) type Segment<'a> = (usize, &'a str);

/// Split a message's text into the parts outside and inside conversation-memory blocks.
pub(crate) fn split_memory(text: &str) -> (Vec<Segment<'_>>, Vec<Segment<'_>>) {
    let mut outside = Vec::new();
    let mut inside = Vec::new();
    let mut pos = 0;
    while let Some(rel) = text[pos..].find(MEMORY_OPEN) {
        outside.push((pos, &text[pos..pos + rel]));
        let start = pos + rel + MEMORY_OPEN.len();
        match text[start..].find(MEMORY_CLOSE) {
            Some(end) => {
                inside.push((start, &text[start..start + end]));
                pos = start + end + MEMORY_CLOSE.len();
            }
            None => {
                inside.push((start, &text[start..]));
                pos = text.len();
            }
        }
    }
    if pos < text.len() {
        outside.push((pos, &text[pos..]));
    }
    (outside, inside)
}

/// The statement occurring last in `segments`, if any occurs.
fn latest_statement<'s>(segments: &[Segment<'_>], statements: &'s [String]) -> Option<&'s str> {
    let mut best: Option<((usize, usize), &'s str)> = None;
    for statement in statements.iter().filter(|s| !s.is_empty()) {
        for &(offset, seg) in segments {
            if let Some(i) = seg.rfind(statement.as_str()) {
                let key = (offset + i + statement.len(), statement.len());
                if best.is_none_or(|(k, _)| key > k) {
                    best = Some((key, statement.as_str()));
                }
            }
        }
    }
    best.map(|(_, s)| s)
}

/// The places of a request in precedence order, each a list of text segments.
fn places(request: &ModelRequest) -> Vec<Vec<Segment<'_>>> {
    let msgs = &request.messages;
    let current_user = msgs.iter().rposition(|m| m.role == Role::User);
    let split: Vec<(&Message, Vec<Segment<'_>>, Vec<Segment<'_>>)> = msgs
        .iter()
        .map(|m| {
            let (o, i) = split_memory(&m.content);
            (m, o, i)
        })
        .collect();

    let mut places = Vec::new();
    // 1. Instructions, newest first.
    for (m, outside, _) in split.iter().rev() {
        if m.role == Role::System {
            places.push(outside.clone());
        }
    }
    // 2. The current user message.
    if let Some(u) = current_user {
        places.push(split[u].1.clone());
    }
    // 3. The conversation, newest first, minus the current user message.
    for (idx, (m, outside, _)) in split.iter().enumerate().rev() {
        if m.role != Role::System && Some(idx) != current_user {
            places.push(outside.clone());
        }
    }
    // 4. Memory blocks, newest message first.
    for (_, _, inside) in split.iter().rev() {
        if !inside.is_empty() {
            places.push(inside.clone());
        }
    }
    places
}

/// Answer the facts `ids` (in order) from `request` alone, one answer per id.
///
/// `facts` is the script's fact list; the answer is the winning statement verbatim, or
/// [`UNKNOWN_ANSWER`].
pub fn answer_probe(request: &ModelRequest, facts: &[FakeFact], ids: &[String]) -> Vec<String> {
    let places = places(request);
    ids.iter()
        .map(|id| {
            facts
                .iter()
                .find(|f| &f.id == id)
                .and_then(|fact| {
                    places
                        .iter()
                        .find_map(|segs| latest_statement(segs, &fact.statements))
                })
                .unwrap_or(UNKNOWN_ANSWER)
                .to_string()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(messages: Vec<Message>) -> ModelRequest {
        ModelRequest {
            model: "fake-16k".into(),
            messages,
            tools: vec![],
            max_output_tokens: 100,
        }
    }

    fn fact(id: &str, statements: &[&str]) -> FakeFact {
        FakeFact {
            id: id.into(),
            statements: statements.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn memory(text: &str) -> String {
        format!("{MEMORY_OPEN}{text}{MEMORY_CLOSE}")
    }

    fn ask(request: &ModelRequest, facts: &[FakeFact], ids: &[&str]) -> Vec<String> {
        let ids: Vec<String> = ids.iter().map(|s| s.to_string()).collect();
        answer_probe(request, facts, &ids)
    }

    const V0: &str = "The deploy window is Friday.";
    const V1: &str = "The deploy window is Tuesday.";

    #[test]
    fn split_memory_segments() {
        let text = format!("a{}b{}", memory("m1"), memory("m2"));
        let (o, i) = split_memory(&text);
        let outside: Vec<&str> = o.iter().map(|s| s.1).collect();
        let inside: Vec<&str> = i.iter().map(|s| s.1).collect();
        assert_eq!(outside, vec!["a", "b"]);
        assert_eq!(inside, vec!["m1", "m2"]);
        // Offsets point into the original text.
        for (off, s) in o.iter().chain(i.iter()) {
            assert_eq!(&text[*off..*off + s.len()], *s);
        }
        // Unclosed: the rest is memory.
        let text = format!("x{MEMORY_OPEN}tail");
        let (o, i) = split_memory(&text);
        assert_eq!(o.iter().map(|s| s.1).collect::<Vec<_>>(), vec!["x"]);
        assert_eq!(i.iter().map(|s| s.1).collect::<Vec<_>>(), vec!["tail"]);
    }

    #[test]
    fn found_in_conversation() {
        let r = req(vec![
            Message::system("You are helpful."),
            Message::user(format!("Note: {V0} Thanks.")),
            Message::assistant("Noted."),
            Message::user("What is the deploy window?"),
        ]);
        assert_eq!(ask(&r, &[fact("w", &[V0, V1])], &["w"]), vec![V0]);
    }

    #[test]
    fn abstains_when_absent_or_undefined() {
        let r = req(vec![Message::user("What is the deploy window?")]);
        let facts = [fact("w", &[V0, V1]), fact("never", &[])];
        assert_eq!(
            ask(&r, &facts, &["w", "never", "no-such-id"]),
            vec![UNKNOWN_ANSWER; 3]
        );
    }

    #[test]
    fn instructions_beat_user_and_conversation() {
        let r = req(vec![
            Message::system(format!("Policy: {V0}")),
            Message::user(V1),
            Message::assistant(V1),
            Message::user(format!("Remember: {V1} What is the window?")),
        ]);
        assert_eq!(ask(&r, &[fact("w", &[V0, V1])], &["w"]), vec![V0]);
    }

    #[test]
    fn current_user_beats_conversation() {
        let r = req(vec![
            Message::user(V1),
            Message::assistant(V1),
            Message::user(format!("Actually, {V0} Right?")),
        ]);
        assert_eq!(ask(&r, &[fact("w", &[V0, V1])], &["w"]), vec![V0]);
    }

    #[test]
    fn newest_conversation_message_wins() {
        let r = req(vec![
            Message::user(V0),
            Message::assistant("ok"),
            Message::user(V1),
            Message::assistant("ok"),
            Message::tool_result("call_1", "log: nothing relevant"),
            Message::user("Which day?"),
        ]);
        assert_eq!(ask(&r, &[fact("w", &[V0, V1])], &["w"]), vec![V1]);
        // A newer tool result mentioning the old version wins over the older user message.
        let mut r2 = r.clone();
        r2.messages[4] = Message::tool_result("call_1", format!("wiki says: {V0}"));
        assert_eq!(ask(&r2, &[fact("w", &[V0, V1])], &["w"]), vec![V0]);
    }

    #[test]
    fn last_occurrence_within_a_message_wins() {
        let r = req(vec![
            Message::user(format!("First {V1} then later {V0}")),
            Message::user("q"),
        ]);
        assert_eq!(ask(&r, &[fact("w", &[V0, V1])], &["w"]), vec![V0]);
        let r = req(vec![
            Message::user(format!("First {V0} then later {V1}")),
            Message::user("q"),
        ]);
        assert_eq!(ask(&r, &[fact("w", &[V0, V1])], &["w"]), vec![V1]);
    }

    #[test]
    fn containing_statement_wins_over_contained_prefix() {
        let f = fact("port", &["The port is 80", "The port is 8080"]);
        let r = req(vec![Message::user("The port is 8080."), Message::user("q")]);
        assert_eq!(ask(&r, &[f], &["port"]), vec!["The port is 8080"]);
    }

    #[test]
    fn memory_has_lowest_precedence() {
        // Memory says V1, but an older conversation message outside memory says V0.
        let r = req(vec![
            Message::system(format!("Be brief.\n{}", memory(V1))),
            Message::user(V0),
            Message::assistant("ok"),
            Message::user("Which day?"),
        ]);
        assert_eq!(ask(&r, &[fact("w", &[V0, V1])], &["w"]), vec![V0]);
    }

    #[test]
    fn memory_is_used_when_nothing_else_has_the_fact() {
        let r = req(vec![
            Message::system(format!(
                "Be brief.\n{}\n{}",
                memory(&format!("Old: {V0}")),
                memory(&format!("Newer: {V1}"))
            )),
            Message::user("Which day?"),
        ]);
        assert_eq!(ask(&r, &[fact("w", &[V0, V1])], &["w"]), vec![V1]);
        // Newest message's memory first.
        let r = req(vec![
            Message::system(memory(V1)),
            Message::assistant(memory(V0)),
            Message::user("Which day?"),
        ]);
        assert_eq!(ask(&r, &[fact("w", &[V0, V1])], &["w"]), vec![V0]);
    }

    #[test]
    fn memory_inside_a_system_message_is_not_instruction() {
        // The memory block in the system message must not outrank the conversation.
        let r = req(vec![
            Message::system(format!("Rules.{}", memory(V0))),
            Message::user(V1),
            Message::user("Which day?"),
        ]);
        assert_eq!(ask(&r, &[fact("w", &[V0, V1])], &["w"]), vec![V1]);
    }

    #[test]
    fn several_facts_in_order() {
        let r = req(vec![
            Message::user("The build uses cargo. The owner is Ana."),
            Message::user("q"),
        ]);
        let facts = [
            fact("tool", &["The build uses cargo."]),
            fact("owner", &["The owner is Ana.", "The owner is Bo."]),
            fact("secret", &["The key is 42."]),
        ];
        assert_eq!(
            ask(&r, &facts, &["owner", "secret", "tool"]),
            vec!["The owner is Ana.", UNKNOWN_ANSWER, "The build uses cargo."]
        );
    }

    #[test]
    fn matching_is_verbatim() {
        let r = req(vec![
            Message::user("the deploy window is friday."),
            Message::user("q"),
        ]);
        assert_eq!(ask(&r, &[fact("w", &[V0])], &["w"]), vec![UNKNOWN_ANSWER]);
    }
}
