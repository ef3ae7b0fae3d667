//! The fake provider's native compaction items: encoding, and reading them back.
//!
//! Provider-native compaction (seed 000 §Summary contract, last paragraph) returns state that
//! is intentionally not human-readable and that only the creating provider and model can
//! use. The fake imitates that so an engine meets the same constraints as with a real one:
//!
//! * the payload is `fk1:` + lowercase hex of `text ‖ sha256(text)[..4]` XORed with a key
//!   stream derived from the **model id** — deterministic and reversible, but clearly not
//!   plain text, and undecodable under another model's key (the checksum fails);
//! * a request carries an item as `{OPAQUE_OPEN} provider="P" model="M">DATA{OPAQUE_CLOSE}`
//!   (what the harness's `checkpoint::memory_text` writes);
//! * [`readable_view`] replaces every item this provider and model can decode with its text,
//!   as conversation memory (always memory to the fake, whatever markup surrounds it: lowest
//!   precedence and never authoritative), and removes every other item: a foreign item
//!   cannot be read, just as a real provider would reject or ignore it.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::Regex;
use sha2::{Digest, Sha256};

use super::layout::{DECODED_CLOSE, DECODED_OPEN};
use crate::conventions::{OPAQUE_CLOSE, OPAQUE_OPEN};
use crate::ModelRequest;

/// Prefix (format version) of the fake's opaque payload.
pub const OPAQUE_DATA_PREFIX: &str = "fk1:";

/// Bytes of checksum appended before encryption; a wrong key fails it.
const CHECKSUM_LEN: usize = 4;

static ITEM_RE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    // Built from constants; `None` would only make items unreadable, never panic.
    Regex::new(&format!(
        r#"(?s){}\s+provider="([^"]*)"\s+model="([^"]*)"\s*>(.*?){}"#,
        regex::escape(OPAQUE_OPEN),
        regex::escape(OPAQUE_CLOSE)
    ))
    .ok()
});

/// `len` bytes of key stream for `model`: SHA-256 blocks over a domain tag, the model id and
/// a block counter. Keyed on the model so an item is bound to the model that wrote it.
fn key_stream(model: &str, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 32);
    let mut block: u64 = 0;
    while out.len() < len {
        let mut h = Sha256::new();
        h.update(b"ctxbench.fake.opaque.v1\0");
        h.update((model.len() as u64).to_le_bytes());
        h.update(model.as_bytes());
        h.update(block.to_le_bytes());
        out.extend_from_slice(&h.finalize());
        block += 1;
    }
    out.truncate(len);
    out
}

/// Encode `text` as this model's opaque payload.
pub fn encode_opaque(model: &str, text: &str) -> String {
    let mut bytes = text.as_bytes().to_vec();
    bytes.extend_from_slice(&Sha256::digest(text.as_bytes())[..CHECKSUM_LEN]);
    let key = key_stream(model, bytes.len());
    for (b, k) in bytes.iter_mut().zip(key) {
        *b ^= k;
    }
    format!("{OPAQUE_DATA_PREFIX}{}", hex::encode(bytes))
}

/// Decode a payload written by [`encode_opaque`] for the same `model`; `None` when it is not
/// one (wrong prefix, not hex, another model's key, corrupted, not UTF-8).
pub fn decode_opaque(model: &str, data: &str) -> Option<String> {
    let mut bytes = hex::decode(data.strip_prefix(OPAQUE_DATA_PREFIX)?).ok()?;
    if bytes.len() < CHECKSUM_LEN {
        return None;
    }
    let key = key_stream(model, bytes.len());
    for (b, k) in bytes.iter_mut().zip(key) {
        *b ^= k;
    }
    let (text, sum) = bytes.split_at(bytes.len() - CHECKSUM_LEN);
    if Sha256::digest(text)[..CHECKSUM_LEN] != *sum {
        return None;
    }
    String::from_utf8(text.to_vec()).ok()
}

/// The text of `content` with every opaque item replaced: readable ones (`provider` and
/// `model` match and the payload decodes) by their text, as memory; the others by nothing.
/// `None` when `content` holds no item.
fn rewrite(content: &str, provider: &str, model: &str) -> Option<String> {
    let re = ITEM_RE.as_ref()?;
    if !content.contains(OPAQUE_OPEN) {
        return None;
    }
    let mut out = String::with_capacity(content.len());
    let mut last = 0;
    for caps in re.captures_iter(content) {
        let Some(whole) = caps.get(0) else { continue };
        out.push_str(&content[last..whole.start()]);
        last = whole.end();
        let field = |i: usize| caps.get(i).map_or("", |m| m.as_str());
        if field(1) != provider || field(2) != model {
            continue;
        }
        let Some(text) = decode_opaque(model, field(3)) else {
            continue;
        };
        // The decoded text must not open or close the fake's memory blocks itself.
        let text = text.replace(DECODED_OPEN, "").replace(DECODED_CLOSE, "");
        out.push_str(&format!("{DECODED_OPEN}{text}{DECODED_CLOSE}"));
    }
    out.push_str(&content[last..]);
    Some(out)
}

/// `request` as this provider and model read it: opaque items decoded into conversation
/// memory, or dropped when unreadable. Borrowed unchanged when the request has no item.
pub fn readable_view<'a>(
    request: &'a ModelRequest,
    provider: &str,
    model: &str,
) -> Cow<'a, ModelRequest> {
    if !request
        .messages
        .iter()
        .any(|m| m.content.contains(OPAQUE_OPEN))
    {
        return Cow::Borrowed(request);
    }
    let mut view = request.clone();
    for m in &mut view.messages {
        if let Some(text) = rewrite(&m.content, provider, model) {
            m.content = text;
        }
    }
    Cow::Owned(view)
}

/// How a request carries an item (the format `checkpoint::memory_text` writes).
pub fn item_markup(provider: &str, model: &str, data: &str) -> String {
    format!("{OPAQUE_OPEN} provider=\"{provider}\" model=\"{model}\">{data}{OPAQUE_CLOSE}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Message;

    fn req(messages: Vec<Message>) -> ModelRequest {
        ModelRequest {
            model: "m1".into(),
            messages,
            tools: vec![],
            max_output_tokens: 10,
        }
    }

    #[test]
    fn round_trip_and_not_plain_text() {
        let text = "## Goals and constraints\n- The owner is Ana.\n";
        let data = encode_opaque("m1", text);
        assert!(data.starts_with(OPAQUE_DATA_PREFIX));
        assert!(!data.contains("owner"));
        assert!(data[OPAQUE_DATA_PREFIX.len()..]
            .chars()
            .all(|c| c.is_ascii_hexdigit()));
        assert_eq!(encode_opaque("m1", text), data, "deterministic");
        assert_eq!(decode_opaque("m1", &data).as_deref(), Some(text));
        // Empty text round-trips too.
        assert_eq!(
            decode_opaque("m1", &encode_opaque("m1", "")).as_deref(),
            Some("")
        );
    }

    #[test]
    fn other_model_or_garbage_does_not_decode() {
        let data = encode_opaque("m1", "The owner is Ana.");
        assert_eq!(decode_opaque("m2", &data), None);
        assert_eq!(decode_opaque("m1", "fk1:zz"), None);
        assert_eq!(decode_opaque("m1", "fk1:00"), None);
        assert_eq!(decode_opaque("m1", "plain text"), None);
        let mut flipped = data.clone();
        flipped.pop();
        flipped.push(if data.ends_with('0') { '1' } else { '0' });
        assert_eq!(decode_opaque("m1", &flipped), None);
    }

    #[test]
    fn view_decodes_own_items_into_memory_and_drops_others() {
        let own = item_markup("fake", "m1", &encode_opaque("m1", "The owner is Ana."));
        let other_model = item_markup("fake", "m2", &encode_opaque("m2", "The owner is Bo."));
        let other_provider = item_markup("acme", "m1", &encode_opaque("m1", "The key is 42."));
        let lying_header = item_markup("fake", "m1", &encode_opaque("m2", "The key is 7."));
        let r = req(vec![
            Message::system(format!("<memory>\nheader\n{own}\n</memory>")),
            Message::user(format!("x {other_model} y {other_provider} {lying_header}")),
            Message::assistant(own.clone()),
        ]);
        let v = readable_view(&r, "fake", "m1");
        let decoded = format!("{DECODED_OPEN}The owner is Ana.{DECODED_CLOSE}");
        assert_eq!(
            v.messages[0].content,
            format!("<memory>\nheader\n{decoded}\n</memory>")
        );
        assert_eq!(v.messages[1].content, "x  y  ");
        // Wherever it sits, the decoded text is the fake's memory.
        assert_eq!(v.messages[2].content, decoded);
        // No item: borrowed as is.
        let plain = req(vec![Message::user("hi")]);
        assert!(matches!(
            readable_view(&plain, "fake", "m1"),
            Cow::Borrowed(_)
        ));
    }
}
