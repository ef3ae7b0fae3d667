//! How the fake model reads the parts of a request: instructions, the current user message,
//! the conversation, and memory — from the request alone plus what the system under test
//! **declared** about its format. The graders read requests with the same rule, so the
//! model's behaviour and the verdicts agree on what was where.
//!
//! * With declared memory markup ([`MemoryRule::markup`]), text between the declared `open`
//!   and `close` delimiters, in any message, is **memory** (an unclosed block runs to the
//!   end of its message).
//! * Without a declaration, **memory is system-message text that is not the instruction
//!   file**: in each system message, the spans equal to a version of the instruction file
//!   (trimmed) are instructions and every other non-blank span is memory.
//! * Text the fake itself decoded from its own native compaction items is always memory.
//!
//! Everything else is, by role: **instructions** (system), the **current user message** (the
//! latest `user` message), and the **conversation** (every other user, assistant and tool
//! message, including the text arguments of assistant tool calls).

use crate::types::Markup;
use crate::{ModelRequest, Role};

/// Opens text the fake decoded from its own native compaction item (in its readable view
/// only; never sent by anyone).
pub(crate) const DECODED_OPEN: &str = "\u{0}<fake-decoded-memory>";
/// Closes it.
pub(crate) const DECODED_CLOSE: &str = "</fake-decoded-memory>\u{0}";

/// Where a piece of a request sits, in the fake's precedence order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Place {
    /// System-message text that is not memory: authoritative.
    Instructions,
    /// The latest user message: authoritative too (the user speaking now).
    CurrentUser,
    /// Earlier user messages, assistant and tool messages: history.
    Conversation,
    /// Derived memory: untrusted history, lowest precedence, never orders.
    Memory,
}

impl Place {
    /// `instructions`, `current-user`, `conversation` or `memory`.
    pub fn as_str(self) -> &'static str {
        match self {
            Place::Instructions => "instructions",
            Place::CurrentUser => "current-user",
            Place::Conversation => "conversation",
            Place::Memory => "memory",
        }
    }
}

/// How memory is recognised (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryRule {
    /// The memory markup the system under test declared, if any.
    pub markup: Option<Markup>,
    /// Every version of the instruction file (for the undeclared rule).
    pub instructions: Vec<String>,
}

/// One piece of one message's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment<'a> {
    /// Index of the message in the request.
    pub message: usize,
    /// The message's role.
    pub role: Role,
    /// Where it sits.
    pub place: Place,
    /// Byte offset of `text` in the message's content.
    pub offset: usize,
    /// The text.
    pub text: &'a str,
}

/// Pieces of a text with their byte offsets.
type Pieces<'a> = Vec<(usize, &'a str)>;

/// Split `text` at `open … close` blocks: `(outside, inside)` pieces with their offsets.
fn split_blocks<'a>(text: &'a str, open: &str, close: &str) -> (Pieces<'a>, Pieces<'a>) {
    let mut outside = Vec::new();
    let mut inside = Vec::new();
    let mut pos = 0;
    if open.is_empty() {
        return (vec![(0, text)], inside);
    }
    while let Some(rel) = text[pos..].find(open) {
        outside.push((pos, &text[pos..pos + rel]));
        let start = pos + rel + open.len();
        match (!close.is_empty())
            .then(|| text[start..].find(close))
            .flatten()
        {
            Some(end) => {
                inside.push((start, &text[start..start + end]));
                pos = start + end + close.len();
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

/// In `(offset, text)`, the ranges equal to a version of the instruction file: instruction
/// pieces, and the rest (non-blank) as memory pieces.
fn split_instructions<'a>(
    offset: usize,
    text: &'a str,
    instructions: &[String],
) -> (Pieces<'a>, Pieces<'a>) {
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for version in instructions {
        let v = version.trim();
        if v.is_empty() {
            continue;
        }
        for (i, _) in text.match_indices(v) {
            ranges.push((i, i + v.len()));
        }
    }
    ranges.sort();
    let mut merged: Vec<(usize, usize)> = Vec::new();
    for (s, e) in ranges {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    let mut instr = Vec::new();
    let mut memory = Vec::new();
    let mut pos = 0;
    for (s, e) in merged {
        if !text[pos..s].trim().is_empty() {
            memory.push((offset + pos, &text[pos..s]));
        }
        instr.push((offset + s, &text[s..e]));
        pos = e;
    }
    if !text[pos..].trim().is_empty() {
        memory.push((offset + pos, &text[pos..]));
    }
    (instr, memory)
}

/// Every piece of `request`, message by message, with its [`Place`].
pub fn segments<'a>(request: &'a ModelRequest, rule: &MemoryRule) -> Vec<Segment<'a>> {
    let current_user = request.messages.iter().rposition(|m| m.role == Role::User);
    let mut out = Vec::new();
    for (idx, m) in request.messages.iter().enumerate() {
        let (outside_decoded, decoded) = split_blocks(&m.content, DECODED_OPEN, DECODED_CLOSE);
        for (offset, text) in decoded {
            out.push(Segment {
                message: idx,
                role: m.role,
                place: Place::Memory,
                offset,
                text,
            });
        }
        for (base, piece) in outside_decoded {
            let (outside, inside) = match &rule.markup {
                Some(mk) => split_blocks(piece, &mk.open, &mk.close),
                None => (vec![(0, piece)], Vec::new()),
            };
            for (offset, text) in inside {
                out.push(Segment {
                    message: idx,
                    role: m.role,
                    place: Place::Memory,
                    offset: base + offset,
                    text,
                });
            }
            for (offset, text) in outside {
                let place = match m.role {
                    Role::System => Place::Instructions,
                    Role::User if Some(idx) == current_user => Place::CurrentUser,
                    _ => Place::Conversation,
                };
                if place == Place::Instructions && rule.markup.is_none() {
                    let (instr, memory) =
                        split_instructions(base + offset, text, &rule.instructions);
                    for (o, t) in instr {
                        out.push(Segment {
                            message: idx,
                            role: m.role,
                            place: Place::Instructions,
                            offset: o,
                            text: t,
                        });
                    }
                    for (o, t) in memory {
                        out.push(Segment {
                            message: idx,
                            role: m.role,
                            place: Place::Memory,
                            offset: o,
                            text: t,
                        });
                    }
                    continue;
                }
                out.push(Segment {
                    message: idx,
                    role: m.role,
                    place,
                    offset: base + offset,
                    text,
                });
            }
        }
        // The text arguments of the message's tool calls (a command, a path) are
        // conversation too, after the message's content.
        let mut leaves = Vec::new();
        for call in &m.tool_calls {
            string_leaves(&call.arguments, &mut leaves);
        }
        for (k, text) in leaves.into_iter().enumerate() {
            out.push(Segment {
                message: idx,
                role: m.role,
                place: Place::Conversation,
                offset: m.content.len() + 1 + k,
                text,
            });
        }
    }
    out.sort_by_key(|s| (s.message, s.offset));
    out
}

/// Every string leaf of a JSON value, in order.
fn string_leaves<'a>(v: &'a serde_json::Value, out: &mut Vec<&'a str>) {
    match v {
        serde_json::Value::String(s) => out.push(s),
        serde_json::Value::Array(a) => a.iter().for_each(|x| string_leaves(x, out)),
        serde_json::Value::Object(o) => o.values().for_each(|x| string_leaves(x, out)),
        _ => {}
    }
}

/// The pieces of `request` grouped in the fake's precedence order: instructions (newest
/// message first), the current user message, the conversation (newest first), memory
/// (newest message first). Each group holds one message's pieces of that place.
pub fn places<'a>(request: &'a ModelRequest, rule: &MemoryRule) -> Vec<(Place, Vec<Segment<'a>>)> {
    let segs = segments(request, rule);
    let mut out: Vec<(Place, Vec<Segment<'a>>)> = Vec::new();
    for place in [
        Place::Instructions,
        Place::CurrentUser,
        Place::Conversation,
        Place::Memory,
    ] {
        let mut by_message: Vec<(usize, Vec<Segment<'a>>)> = Vec::new();
        for s in segs.iter().filter(|s| s.place == place) {
            match by_message.last_mut() {
                Some((m, group)) if *m == s.message => group.push(s.clone()),
                _ => by_message.push((s.message, vec![s.clone()])),
            }
        }
        for (_, group) in by_message.into_iter().rev() {
            out.push((place, group));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Message;

    fn req(messages: Vec<Message>) -> ModelRequest {
        ModelRequest {
            model: "m".into(),
            messages,
            tools: vec![],
            max_output_tokens: 10,
        }
    }

    fn markup() -> Markup {
        Markup {
            open: "<mem>".into(),
            close: "</mem>".into(),
        }
    }

    fn texts(segs: &[Segment<'_>], place: Place) -> Vec<String> {
        segs.iter()
            .filter(|s| s.place == place)
            .map(|s| s.text.trim().to_string())
            .collect()
    }

    #[test]
    fn declared_markup_marks_memory_in_any_message() {
        let r = req(vec![
            Message::system("Rules.<mem>old summary</mem>"),
            Message::user("hi <mem>quoted"),
            Message::assistant("ok"),
            Message::user("now"),
        ]);
        let rule = MemoryRule {
            markup: Some(markup()),
            instructions: vec![],
        };
        let segs = segments(&r, &rule);
        assert_eq!(texts(&segs, Place::Memory), vec!["old summary", "quoted"]);
        assert_eq!(texts(&segs, Place::Instructions), vec!["Rules."]);
        assert_eq!(texts(&segs, Place::CurrentUser), vec!["now"]);
        assert_eq!(texts(&segs, Place::Conversation), vec!["hi", "ok"]);
        for s in &segs {
            let m = &r.messages[s.message].content;
            assert_eq!(&m[s.offset..s.offset + s.text.len()], s.text);
        }
    }

    #[test]
    fn undeclared_memory_is_system_text_that_is_not_the_instruction_file() {
        let r = req(vec![
            Message::system("You are Agent X.\nBe careful.\n\nSummary: we chose Rust."),
            Message::user("go"),
        ]);
        let rule = MemoryRule {
            markup: None,
            instructions: vec!["Be careful.\n".into()],
        };
        let segs = segments(&r, &rule);
        assert_eq!(texts(&segs, Place::Instructions), vec!["Be careful."]);
        assert_eq!(
            texts(&segs, Place::Memory),
            vec!["You are Agent X.", "Summary: we chose Rust."]
        );
    }

    #[test]
    fn places_in_precedence_order_newest_first() {
        let r = req(vec![
            Message::system("A"),
            Message::user("u1"),
            Message::assistant("a1"),
            Message::user("u2"),
        ]);
        let rule = MemoryRule {
            markup: Some(markup()),
            instructions: vec![],
        };
        let order: Vec<(Place, &str)> = places(&r, &rule)
            .iter()
            .map(|(p, g)| (*p, g[0].text))
            .collect();
        assert_eq!(
            order,
            vec![
                (Place::Instructions, "A"),
                (Place::CurrentUser, "u2"),
                (Place::Conversation, "a1"),
                (Place::Conversation, "u1"),
            ]
        );
    }
}
