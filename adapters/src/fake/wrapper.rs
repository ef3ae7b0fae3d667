//! The "codex wrapper" request shape (seed 000 §Forge engine coverage; SCENARIOS.md item 9):
//! an engine that drives another agent CLI serializes the conversation as JSON inside one
//! prompt. The shape here is the one the fake provider reads back, so a scenario can run an
//! engine in that mode and still have its turns, probes and summaries played:
//!
//! * the request's first message, when it is a system message (the instruction snapshot),
//!   stays as it is;
//! * every other message becomes one element of a JSON array (the [`Message`] serde form:
//!   `role`, `content`, `tool_calls`, `tool_call_id`), carried by **one** user message whose
//!   first line is [`WRAPPER_MARKER`].
//!
//! [`unwrap_request`] reverses it: the fake provider plays, answers probes and writes
//! summaries from the unwrapped conversation (its window and usage still count the wrapped
//! request as sent), and graders judge the unwrapped view.

use crate::{Message, ModelRequest, Role};

/// First line of the user message that carries a wrapped conversation.
pub const WRAPPER_MARKER: &str = "[ctxbench:conversation-json]";

/// `messages` in the wrapped shape: the leading system message (if any) and one user message
/// with the marker line and the JSON array of the rest. Nothing to wrap: unchanged.
pub fn wrap_messages(messages: &[Message]) -> Vec<Message> {
    let keep = usize::from(messages.first().is_some_and(|m| m.role == Role::System));
    let (head, rest) = messages.split_at(keep);
    if rest.is_empty() {
        return messages.to_vec();
    }
    // A `Message` always serializes (strings and JSON values only).
    let json = serde_json::to_string(rest).unwrap_or_else(|_| String::from("[]"));
    let mut out = head.to_vec();
    out.push(Message::user(format!("{WRAPPER_MARKER}\n{json}")));
    out
}

/// The conversation a wrapped request carries, as messages: the messages before the wrapper
/// message, then the unwrapped array. `None` when the request is not wrapped (its last
/// message is not a user message starting with the marker line) or the JSON does not parse.
pub fn unwrap_request(request: &ModelRequest) -> Option<ModelRequest> {
    let (last, head) = request.messages.split_last()?;
    if last.role != Role::User {
        return None;
    }
    let json = last
        .content
        .strip_prefix(WRAPPER_MARKER)?
        .strip_prefix('\n')?;
    let inner: Vec<Message> = serde_json::from_str(json).ok()?;
    let mut messages = head.to_vec();
    messages.extend(inner);
    Some(ModelRequest {
        messages,
        ..request.clone()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolCall;

    fn conversation() -> Vec<Message> {
        let mut call = Message::assistant("");
        call.tool_calls.push(ToolCall {
            id: "c1".into(),
            name: "read_file".into(),
            arguments: serde_json::json!({"path": "src/\"q\".rs"}),
        });
        vec![
            Message::system("Instructions."),
            Message::system(
                "<conversation-memory trust=\"untrusted\">\nOld.\n</conversation-memory>",
            ),
            Message::user("Line one.\nLine \"two\"."),
            call,
            Message::tool_result("c1", "fn main() {}\n"),
        ]
    }

    #[test]
    fn wraps_all_but_the_instructions_and_unwraps_exactly() {
        let msgs = conversation();
        let wrapped = wrap_messages(&msgs);
        assert_eq!(wrapped.len(), 2);
        assert_eq!(wrapped[0], msgs[0]);
        assert_eq!(wrapped[1].role, Role::User);
        assert!(wrapped[1]
            .content
            .starts_with(&format!("{WRAPPER_MARKER}\n[")));
        let req = ModelRequest {
            model: "m".into(),
            messages: wrapped,
            tools: vec![],
            max_output_tokens: 10,
        };
        let back = unwrap_request(&req).expect("wrapped");
        assert_eq!(back.messages, msgs);
        assert_eq!(back.max_output_tokens, 10);
    }

    #[test]
    fn no_instructions_and_plain_requests() {
        let msgs = vec![Message::user("hi")];
        let wrapped = wrap_messages(&msgs);
        assert_eq!(wrapped.len(), 1);
        let req = ModelRequest {
            model: "m".into(),
            messages: wrapped,
            tools: vec![],
            max_output_tokens: 10,
        };
        assert_eq!(unwrap_request(&req).expect("wrapped").messages, msgs);
        // Only instructions: nothing to wrap.
        assert_eq!(
            wrap_messages(&[Message::system("x")]),
            vec![Message::system("x")]
        );
        // Not wrapped: plain text, the marker elsewhere, or JSON that does not parse.
        for last in [
            Message::user("hi"),
            Message::user(format!("see {WRAPPER_MARKER}\n[]")),
            Message::user(format!("{WRAPPER_MARKER}\n[{{")),
            Message::assistant(format!("{WRAPPER_MARKER}\n[]")),
        ] {
            let req = ModelRequest {
                model: "m".into(),
                messages: vec![last],
                tools: vec![],
                max_output_tokens: 10,
            };
            assert!(unwrap_request(&req).is_none());
        }
    }
}
