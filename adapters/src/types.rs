//! Provider-neutral request, response and usage types.
//!
//! These are what crosses the model boundary: the engine builds a [`ModelRequest`],
//! a [`crate::Provider`] answers with a [`ModelResponse`] or a typed
//! [`crate::ProviderError`]. Nothing scenario-specific lives here.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions (and, labelled, conversation memory).
    System,
    /// The user.
    User,
    /// The model.
    Assistant,
    /// A tool result, answering one tool call by id.
    Tool,
}

impl Role {
    /// The wire name (`system`, `user`, `assistant`, `tool`).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// One tool call requested by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Provider-assigned id; the matching tool result carries it.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// JSON arguments.
    pub arguments: serde_json::Value,
}

/// One message of a request or a transcript.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Author.
    pub role: Role,
    /// Text content (may be empty for an assistant message that only calls tools; `null`
    /// reads as empty, as OpenAI-shaped messages have it).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub content: String,
    /// Tool calls (assistant messages only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For `Role::Tool`: the id of the call this result answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Message {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::text(Role::System, content)
    }
    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::text(Role::User, content)
    }
    /// An assistant text message.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::text(Role::Assistant, content)
    }
    /// A tool result answering `call_id`.
    pub fn tool_result(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Message {
            role: Role::Tool,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: Some(call_id.into()),
        }
    }
    fn text(role: Role, content: impl Into<String>) -> Self {
        Message {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }

    /// SHA-256 over a canonical encoding of the whole message (role, content, calls, call id).
    ///
    /// Computed once when a message enters a transcript, then used as the key of the
    /// per-message token cache, so re-estimating a request costs a lookup per message,
    /// not a re-hash or re-tokenization of the whole history.
    pub fn content_hash(&self) -> ContentHash {
        let mut h = Sha256::new();
        h.update(self.role.as_str().as_bytes());
        h.update([0]);
        h.update((self.content.len() as u64).to_le_bytes());
        h.update(self.content.as_bytes());
        for call in &self.tool_calls {
            h.update([1]);
            for part in [call.id.as_str(), call.name.as_str()] {
                h.update((part.len() as u64).to_le_bytes());
                h.update(part.as_bytes());
            }
            let args = call.arguments.to_string();
            h.update((args.len() as u64).to_le_bytes());
            h.update(args.as_bytes());
        }
        if let Some(id) = &self.tool_call_id {
            h.update([2]);
            h.update(id.as_bytes());
        }
        ContentHash(h.finalize().into())
    }
}

/// A SHA-256 digest used to identify content (messages, transcripts, instruction snapshots).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContentHash(pub [u8; 32]);

impl ContentHash {
    /// Hash arbitrary bytes.
    pub fn of_bytes(bytes: &[u8]) -> Self {
        ContentHash(Sha256::digest(bytes).into())
    }
    /// Lowercase hex, `sha256:` prefix omitted.
    ///
    /// Every stored message and request row carries hashes in hex, so this is on the hot
    /// path of each trial: two table lookups per byte into one allocation.
    pub fn to_hex(&self) -> String {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut out = String::with_capacity(self.0.len() * 2);
        for b in self.0 {
            out.push(DIGITS[usize::from(b >> 4)] as char);
            out.push(DIGITS[usize::from(b & 0x0f)] as char);
        }
        out
    }
    /// The first 12 hex digits, for display.
    pub fn short(&self) -> String {
        self.to_hex()[..12].to_string()
    }
}

impl std::fmt::Display for ContentHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl Serialize for ContentHash {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for ContentHash {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        let bytes = hex::decode(&s).map_err(serde::de::Error::custom)?;
        let arr: [u8; 32] = bytes
            .try_into()
            .map_err(|_| serde::de::Error::custom("expected 64 hex digits"))?;
        Ok(ContentHash(arr))
    }
}

/// A tool the model may call: name, description and JSON schema of its parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// Tool name.
    pub name: String,
    /// What the tool does.
    pub description: String,
    /// JSON schema of the arguments.
    pub parameters: serde_json::Value,
}

/// One physical request to a provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    /// Model id as the provider knows it.
    pub model: String,
    /// Messages in order (instructions first).
    pub messages: Vec<Message>,
    /// Advertised tools.
    #[serde(default)]
    pub tools: Vec<ToolDefinition>,
    /// Requested output allowance (`max_tokens`).
    pub max_output_tokens: u32,
}

/// Tokens the provider says it consumed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Input (prompt) tokens as counted by the provider.
    pub input_tokens: u64,
    /// Output (completion) tokens.
    pub output_tokens: u64,
}

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// Natural end of a text answer.
    Stop,
    /// The model asked for tool calls.
    ToolCalls,
    /// The output allowance ran out.
    Length,
}

/// A provider's answer to one request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelResponse {
    /// The assistant message (text and/or tool calls).
    pub message: Message,
    /// Provider-reported usage.
    pub usage: Usage,
    /// Why generation stopped.
    pub finish_reason: FinishReason,
}

/// A provider-native compaction item: opaque state the provider returns and only it can read
/// (e.g. an encrypted Responses-API compaction item). It is bound to the provider and model
/// that created it; engines store it opaquely and traces carry only its hash and size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpaqueItem {
    /// Provider that created it.
    pub provider: String,
    /// Model that created it.
    pub model: String,
    /// The opaque payload (never interpreted by the client).
    pub data: String,
}

impl OpaqueItem {
    /// SHA-256 of the payload, for traces.
    pub fn hash(&self) -> ContentHash {
        ContentHash::of_bytes(self.data.as_bytes())
    }
}

/// An opening and a closing delimiter a system under test uses in its requests, e.g. around
/// derived conversation memory (declared to ctxbench, never guessed).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Markup {
    /// Opens the block.
    pub open: String,
    /// Closes it (an unclosed block runs to the end of its message).
    pub close: String,
}

/// A string that may be `null` (read as empty).
fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(<Option<String> as serde::Deserialize>::deserialize(d)?.unwrap_or_default())
}

#[cfg(test)]
mod hash_tests {
    use super::ContentHash;

    /// The table encoder writes what the `hex` crate writes (which decoding relies on).
    #[test]
    fn hex_matches_the_hex_crate_and_round_trips() {
        for text in ["", "a", "The build is green.", "ünïcødé ✓"] {
            let h = ContentHash::of_bytes(text.as_bytes());
            assert_eq!(h.to_hex(), hex::encode(h.0));
            let back: ContentHash = serde_json::from_value(serde_json::json!(h.to_hex())).unwrap();
            assert_eq!(back, h);
        }
    }
}
