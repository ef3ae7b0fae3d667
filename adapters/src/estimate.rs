//! Client-side token estimators: what the engine uses to decide, *before* sending, whether a
//! request fits the model's window (seed 000 §Token budget).
//!
//! Three estimators exist:
//!
//! | kind | method | confidence | rule |
//! | --- | --- | --- | --- |
//! | [`EstimatorKind::Cl100kBase`] | `sdk` | `estimated` | tiktoken `cl100k_base` |
//! | [`EstimatorKind::O200kBase`] | `sdk` | `estimated` | tiktoken `o200k_base` |
//! | [`EstimatorKind::Conservative`] | `conservative-fallback` | `estimated` | `ceil(utf8_bytes / 3) + 4` per string |
//!
//! Even with the model's own encoding the confidence is `estimated`, never `exact`: the
//! provider adds framing we can only approximate (see [framing](#request-framing)).
//!
//! ## Text counting
//!
//! tiktoken encodings count text with the *ordinary* encoder (`CoreBPE::encode` with an
//! empty allowed-special set): a literal `<|endoftext|>` inside user content or a tool result
//! is counted as the plain text it is, which is how providers treat untrusted content. If the
//! BPE split ever fails (tiktoken-rs reports a regex error instead of panicking on that
//! path) the string is counted with the conservative rule instead, so estimation never fails.
//!
//! The conservative rule is Forge's documented fallback for models without a local
//! tokenizer: `ceil(utf8_bytes / 3) + 4` per string. Three bytes per token over-counts
//! English (≈4 bytes/token) and the `+ 4` covers per-string overhead, so it errs on the
//! side of compacting early rather than overflowing.
//!
//! ## Request framing
//!
//! Chat APIs wrap every message in role/separator tokens that are not in the text. We use
//! the OpenAI cookbook convention (`num_tokens_from_messages`), in one place:
//!
//! * [`MESSAGE_FRAMING`] = 3 tokens per message, on top of its content;
//! * [`REQUEST_PRIMING`] = 3 tokens per request (the reply is primed with
//!   `<|start|>assistant<|message|>`);
//! * a tool call counts its name + its JSON arguments (compact) + [`TOOL_CALL_FRAMING`] = 3;
//! * each tool definition counts its compact JSON (`name`, `description`, `parameters`)
//!   + [`TOOL_DEFINITION_FRAMING`] = 8.
//!
//! Ids (tool-call ids, `tool_call_id`) are treated as part of the framing and not counted.
//!
//! ## Caching
//!
//! An engine re-estimates the whole request before every model step. Tokenizing the whole
//! history each time would make a long session quadratic, so [`RequestEstimator`] caches
//! per-message counts by [`ContentHash`] and tool-list counts by a hash of the list: a step
//! costs one tokenization per *new* message plus a lookup per old one.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use thiserror::Error;

use crate::{ContentHash, Message, ModelRequest, ToolDefinition};

/// Tokens of framing per message (OpenAI cookbook `tokens_per_message`).
pub const MESSAGE_FRAMING: u64 = 3;
/// Tokens per request that prime the assistant's reply.
pub const REQUEST_PRIMING: u64 = 3;
/// Tokens of framing per tool call, on top of its name and JSON arguments.
pub const TOOL_CALL_FRAMING: u64 = 3;
/// Tokens of framing per tool definition, on top of its compact JSON.
pub const TOOL_DEFINITION_FRAMING: u64 = 8;
/// Bytes per token assumed by the conservative fallback.
pub const CONSERVATIVE_BYTES_PER_TOKEN: u64 = 3;
/// Tokens added per string by the conservative fallback.
pub const CONSERVATIVE_PER_STRING: u64 = 4;

/// Above this many cached entries a cache is cleared rather than grown: a shared estimator
/// serving many trials must not hold every message ever seen. Clearing only costs
/// re-tokenization, never correctness.
const CACHE_CAPACITY: usize = 1 << 20;

/// Which tokenizer an estimator uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EstimatorKind {
    /// tiktoken `cl100k_base` (GPT-4, GPT-3.5; also the fake models' nearest match).
    #[serde(rename = "cl100k_base")]
    Cl100kBase,
    /// tiktoken `o200k_base` (GPT-4o, GPT-4.1, o-series).
    #[serde(rename = "o200k_base")]
    O200kBase,
    /// `ceil(utf8_bytes / 3) + 4` per string, for models without a local tokenizer.
    #[serde(rename = "conservative")]
    Conservative,
}

impl EstimatorKind {
    /// Every kind, for listings.
    pub const ALL: [EstimatorKind; 3] = [
        EstimatorKind::Cl100kBase,
        EstimatorKind::O200kBase,
        EstimatorKind::Conservative,
    ];

    /// The serialized name (`cl100k_base`, `o200k_base`, `conservative`).
    pub fn as_str(self) -> &'static str {
        match self {
            EstimatorKind::Cl100kBase => "cl100k_base",
            EstimatorKind::O200kBase => "o200k_base",
            EstimatorKind::Conservative => "conservative",
        }
    }

    /// How this kind estimates, as reported in a token estimate.
    pub fn method(self) -> EstimationMethod {
        match self {
            EstimatorKind::Cl100kBase | EstimatorKind::O200kBase => EstimationMethod::Sdk,
            EstimatorKind::Conservative => EstimationMethod::ConservativeFallback,
        }
    }
}

impl fmt::Display for EstimatorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An estimator name that is not one of [`EstimatorKind::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown estimator `{0}` (expected cl100k_base, o200k_base or conservative)")]
pub struct UnknownEstimator(pub String);

impl FromStr for EstimatorKind {
    type Err = UnknownEstimator;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        EstimatorKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| UnknownEstimator(s.to_string()))
    }
}

/// How a token count was obtained (seed 000 `TokenEstimate.method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EstimationMethod {
    /// The provider's own tokenizer or token-counting endpoint.
    ProviderTokenizer,
    /// A local SDK tokenizer (tiktoken).
    Sdk,
    /// The byte-based conservative rule.
    ConservativeFallback,
}

impl EstimationMethod {
    /// The serialized name.
    pub fn as_str(self) -> &'static str {
        match self {
            EstimationMethod::ProviderTokenizer => "provider-tokenizer",
            EstimationMethod::Sdk => "sdk",
            EstimationMethod::ConservativeFallback => "conservative-fallback",
        }
    }
}

/// Whether a count is what the provider will charge (seed 000 `TokenEstimate.confidence`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Confidence {
    /// Exactly what the provider counts.
    Exact,
    /// An estimate; compare with provider-reported usage.
    Estimated,
}

impl Confidence {
    /// The serialized name.
    pub fn as_str(self) -> &'static str {
        match self {
            Confidence::Exact => "exact",
            Confidence::Estimated => "estimated",
        }
    }
}

/// The conservative fallback for one string: `ceil(utf8_bytes / 3) + 4`.
pub fn conservative_tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(CONSERVATIVE_BYTES_PER_TOKEN) + CONSERVATIVE_PER_STRING
}

/// The BPE for a tiktoken kind; loaded once per process by tiktoken-rs's singletons.
fn bpe(kind: EstimatorKind) -> Option<&'static tiktoken_rs::CoreBPE> {
    match kind {
        EstimatorKind::Cl100kBase => Some(tiktoken_rs::cl100k_base_singleton()),
        EstimatorKind::O200kBase => Some(tiktoken_rs::o200k_base_singleton()),
        EstimatorKind::Conservative => None,
    }
}

/// Count one string with `kind`, uncached.
pub fn count_text_with(kind: EstimatorKind, text: &str) -> u64 {
    let Some(bpe) = bpe(kind) else {
        return conservative_tokens(text);
    };
    if text.is_empty() {
        return 0;
    }
    let no_special = std::collections::HashSet::new();
    match bpe.encode(text, &no_special) {
        Ok((tokens, _)) => tokens.len() as u64,
        Err(_) => conservative_tokens(text),
    }
}

/// Compact JSON of a tool definition, the text a tool schema costs.
pub(crate) fn tool_json(tool: &ToolDefinition) -> String {
    // Serializing a struct of strings and a `serde_json::Value` cannot fail; the fallback
    // only exists so that no input can make estimation panic.
    serde_json::to_string(tool).unwrap_or_else(|_| format!("{}{}", tool.name, tool.description))
}

/// Running sums of estimated tokens over an append-only message list (a transcript):
/// `range(a, b)` is the tokens of messages `a..b` in O(1), so budgeting every request of a
/// long session costs one tokenization per message plus one subtraction per request —
/// linear in the session's length, where summing the history per request is quadratic.
#[derive(Debug, Clone)]
pub struct TokenLedger {
    prefix: Vec<u64>,
}

impl Default for TokenLedger {
    fn default() -> Self {
        TokenLedger { prefix: vec![0] }
    }
}

impl TokenLedger {
    /// Messages accounted so far.
    pub fn len(&self) -> usize {
        self.prefix.len() - 1
    }

    /// Whether no message is accounted.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Account the next message (the list's message number `self.len()`).
    pub fn push(&mut self, estimator: &RequestEstimator, msg: &Message, hash: &ContentHash) {
        let next = self.prefix[self.prefix.len() - 1] + estimator.message_tokens(msg, hash);
        self.prefix.push(next);
    }

    /// Forget messages from `len` on (the list was reloaded or rewritten from there).
    pub fn truncate(&mut self, len: usize) {
        self.prefix.truncate(len + 1);
    }

    /// Tokens of messages `start..end` (both clamped to what is accounted).
    pub fn range(&self, start: usize, end: usize) -> u64 {
        let end = end.min(self.len());
        self.prefix[end] - self.prefix[start.min(end)]
    }
}

/// Hashes a [`ContentHash`] key by its first eight bytes: it already is a SHA-256 digest,
/// so rehashing it with SipHash only costs time on every cache probe.
#[derive(Debug, Clone, Copy, Default)]
pub struct DigestHasher;

impl std::hash::BuildHasher for DigestHasher {
    type Hasher = DigestHasherState;
    fn build_hasher(&self) -> DigestHasherState {
        DigestHasherState(0)
    }
}

/// State of [`DigestHasher`].
#[derive(Debug, Clone, Copy, Default)]
pub struct DigestHasherState(u64);

impl std::hash::Hasher for DigestHasherState {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // The digest bytes arrive in one write (after a length prefix, via write_usize);
        // fold any other input in so the hasher stays correct for any key.
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.0 = self.0.rotate_left(29) ^ u64::from_le_bytes(b);
        }
    }
    fn write_usize(&mut self, _len: usize) {}
}

/// Estimates request size with one tokenizer, caching per message and per tool list.
///
/// `Send + Sync`; share one per estimator kind behind an `Arc`. The caches are only an
/// optimisation: every method returns the same number as an uncached count.
#[derive(Debug)]
pub struct RequestEstimator {
    kind: EstimatorKind,
    messages: Mutex<HashMap<ContentHash, u64, DigestHasher>>,
    tools: Mutex<HashMap<ContentHash, u64, DigestHasher>>,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl RequestEstimator {
    /// An estimator of `kind` with empty caches. The BPE itself is process-wide and loaded
    /// on first use, so creating estimators is cheap.
    pub fn new(kind: EstimatorKind) -> Self {
        RequestEstimator {
            kind,
            messages: Mutex::new(HashMap::default()),
            tools: Mutex::new(HashMap::default()),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// The tokenizer used.
    pub fn kind(&self) -> EstimatorKind {
        self.kind
    }

    /// How counts are obtained (`sdk` or `conservative-fallback`).
    pub fn method(&self) -> EstimationMethod {
        self.kind.method()
    }

    /// Always [`Confidence::Estimated`]: no local count includes the provider's exact framing.
    pub fn confidence(&self) -> Confidence {
        Confidence::Estimated
    }

    /// Tokens of one string, without framing. Uncached.
    pub fn count_text(&self, text: &str) -> u64 {
        count_text_with(self.kind, text)
    }

    /// Tokens of one message (content + tool calls + framing), cached by `hash`.
    ///
    /// `hash` must be `msg.content_hash()`; engines compute it once when a message enters the
    /// transcript, which is what makes a re-estimate cost a lookup per old message.
    pub fn message_tokens(&self, msg: &Message, hash: &ContentHash) -> u64 {
        if let Some(&n) = lock(&self.messages).get(hash) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return n;
        }
        // Tokenize outside the lock so concurrent trials do not serialize on it.
        let n = self.message_tokens_uncached(msg);
        self.misses.fetch_add(1, Ordering::Relaxed);
        insert_bounded(&mut lock(&self.messages), *hash, n);
        n
    }

    /// Tokens of many messages (each cached by its hash, as [`Self::message_tokens`]),
    /// taking the cache lock once: a request's history costs one tight pass over its
    /// messages, not one lock and one hash-map probe each.
    pub fn sum_message_tokens<'a>(
        &self,
        items: impl IntoIterator<Item = (&'a Message, &'a ContentHash)>,
    ) -> u64 {
        let mut total = 0;
        let mut missing: Vec<(&Message, ContentHash)> = Vec::new();
        {
            let cache = lock(&self.messages);
            let mut hits = 0;
            for (m, h) in items {
                match cache.get(h) {
                    Some(&n) => {
                        total += n;
                        hits += 1;
                    }
                    None => missing.push((m, *h)),
                }
            }
            self.hits.fetch_add(hits, Ordering::Relaxed);
        }
        for (m, h) in missing {
            total += self.message_tokens(m, &h);
        }
        total
    }

    /// Tokens of one message, always tokenizing (no cache).
    pub fn message_tokens_uncached(&self, msg: &Message) -> u64 {
        let mut n = MESSAGE_FRAMING + self.count_text(&msg.content);
        for call in &msg.tool_calls {
            n += self.count_text(&call.name)
                + self.count_text(&call.arguments.to_string())
                + TOOL_CALL_FRAMING;
        }
        n
    }

    /// Tokens of the advertised tool list, cached by a hash of the list's compact JSON.
    pub fn tools_tokens(&self, tools: &[ToolDefinition]) -> u64 {
        if tools.is_empty() {
            return 0;
        }
        let jsons: Vec<String> = tools.iter().map(tool_json).collect();
        let mut h = Sha256::new();
        for j in &jsons {
            h.update((j.len() as u64).to_le_bytes());
            h.update(j.as_bytes());
        }
        let key = ContentHash(h.finalize().into());
        if let Some(&n) = lock(&self.tools).get(&key) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return n;
        }
        let n = jsons
            .iter()
            .map(|j| self.count_text(j) + TOOL_DEFINITION_FRAMING)
            .sum();
        self.misses.fetch_add(1, Ordering::Relaxed);
        insert_bounded(&mut lock(&self.tools), key, n);
        n
    }

    /// The whole request: every message, the tool list and the reply priming.
    ///
    /// Hashes each message here; a caller that already holds the hashes should sum
    /// [`Self::message_tokens`] itself to skip that.
    pub fn request_tokens(&self, req: &ModelRequest) -> u64 {
        let messages: u64 = req
            .messages
            .iter()
            .map(|m| self.message_tokens(m, &m.content_hash()))
            .sum();
        messages + self.tools_tokens(&req.tools) + Self::request_priming()
    }

    /// Tokens per request that prime the reply ([`REQUEST_PRIMING`]).
    pub fn request_priming() -> u64 {
        REQUEST_PRIMING
    }

    /// `(hits, misses)` over both caches since creation; a miss is one tokenization of a
    /// message or of a tool list.
    pub fn cache_stats(&self) -> (u64, u64) {
        (
            self.hits.load(Ordering::Relaxed),
            self.misses.load(Ordering::Relaxed),
        )
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn insert_bounded(map: &mut HashMap<ContentHash, u64, DigestHasher>, key: ContentHash, value: u64) {
    if map.len() >= CACHE_CAPACITY {
        map.clear();
    }
    map.insert(key, value);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Role, ToolCall};

    #[test]
    fn kind_names_round_trip() {
        for k in EstimatorKind::ALL {
            assert_eq!(k.as_str().parse::<EstimatorKind>(), Ok(k));
            let json = serde_json::to_string(&k).unwrap();
            assert_eq!(json, format!("\"{}\"", k.as_str()));
            assert_eq!(serde_json::from_str::<EstimatorKind>(&json).unwrap(), k);
        }
        assert!("cl100k".parse::<EstimatorKind>().is_err());
        assert_eq!(
            serde_json::to_string(&EstimationMethod::ConservativeFallback).unwrap(),
            "\"conservative-fallback\""
        );
        assert_eq!(
            serde_json::to_string(&EstimationMethod::ProviderTokenizer).unwrap(),
            "\"provider-tokenizer\""
        );
        assert_eq!(EstimationMethod::Sdk.as_str(), "sdk");
        assert_eq!(
            serde_json::to_string(&Confidence::Estimated).unwrap(),
            "\"estimated\""
        );
        assert_eq!(Confidence::Exact.as_str(), "exact");
    }

    #[test]
    fn known_counts_cl100k() {
        let e = RequestEstimator::new(EstimatorKind::Cl100kBase);
        assert_eq!(e.count_text(""), 0);
        assert_eq!(e.count_text("hello world"), 2);
        // The tiktoken README example.
        assert_eq!(
            e.count_text("This is a test         with a lot of spaces"),
            10
        );
        assert_eq!(
            e.count_text("The quick brown fox jumps over the lazy dog"),
            9
        );
        // A special-token literal is ordinary text, not one special token.
        assert!(e.count_text("<|endoftext|>") > 1);
        assert_eq!(e.method(), EstimationMethod::Sdk);
        assert_eq!(e.confidence(), Confidence::Estimated);
    }

    #[test]
    fn known_counts_o200k() {
        let e = RequestEstimator::new(EstimatorKind::O200kBase);
        assert_eq!(e.count_text("hello world"), 2);
        assert_eq!(
            e.count_text("The quick brown fox jumps over the lazy dog"),
            9
        );
        assert!(e.count_text("<|endoftext|>") > 1);
    }

    #[test]
    fn conservative_formula_at_boundaries() {
        let e = RequestEstimator::new(EstimatorKind::Conservative);
        assert_eq!(e.method(), EstimationMethod::ConservativeFallback);
        assert_eq!(e.count_text(""), 4);
        assert_eq!(e.count_text("a"), 5);
        assert_eq!(e.count_text("abc"), 5);
        assert_eq!(e.count_text("abcd"), 6);
        assert_eq!(e.count_text("abcdef"), 6);
        assert_eq!(e.count_text("abcdefg"), 7);
        // Bytes, not chars: "é" is two bytes, "€" three.
        assert_eq!(e.count_text("é"), 5);
        assert_eq!(e.count_text("€€"), 6);
        assert_eq!(e.count_text("€€a"), 7);
    }

    #[test]
    fn message_framing_and_tool_calls() {
        let e = RequestEstimator::new(EstimatorKind::Cl100kBase);
        let m = Message::user("hello world");
        assert_eq!(e.message_tokens_uncached(&m), 2 + MESSAGE_FRAMING);
        let call = Message {
            role: Role::Assistant,
            content: String::new(),
            tool_calls: vec![ToolCall {
                id: "call_1".into(),
                name: "read_file".into(),
                arguments: serde_json::json!({"path": "a.rs"}),
            }],
            tool_call_id: None,
        };
        let expected = MESSAGE_FRAMING
            + e.count_text("read_file")
            + e.count_text(r#"{"path":"a.rs"}"#)
            + TOOL_CALL_FRAMING;
        assert_eq!(e.message_tokens_uncached(&call), expected);
        let req = ModelRequest {
            model: "gpt-4o".into(),
            messages: vec![m.clone(), call.clone()],
            tools: vec![],
            max_output_tokens: 100,
        };
        assert_eq!(
            e.request_tokens(&req),
            e.message_tokens_uncached(&m) + expected + REQUEST_PRIMING
        );
    }

    #[test]
    fn ledger_ranges_equal_sums_and_batch_sums_equal_single_counts() {
        let e = RequestEstimator::new(EstimatorKind::Cl100kBase);
        let msgs: Vec<Message> = (0..50)
            .map(|i| Message::user(format!("message {i} about PostgreSQL {}", "x ".repeat(i))))
            .collect();
        let hashes: Vec<ContentHash> = msgs.iter().map(Message::content_hash).collect();
        let mut ledger = TokenLedger::default();
        for (m, h) in msgs.iter().zip(&hashes) {
            ledger.push(&e, m, h);
        }
        let single = |a: usize, b: usize| -> u64 {
            (a..b).map(|i| e.message_tokens_uncached(&msgs[i])).sum()
        };
        for (a, b) in [(0, 50), (10, 20), (49, 50), (7, 7), (30, 99)] {
            assert_eq!(ledger.range(a, b), single(a.min(50), b.min(50)), "{a}..{b}");
        }
        assert_eq!(
            e.sum_message_tokens(msgs.iter().zip(&hashes)),
            single(0, 50)
        );
        ledger.truncate(10);
        assert_eq!(ledger.len(), 10);
        assert_eq!(ledger.range(0, 50), single(0, 10));
    }

    #[test]
    fn cache_hit_on_second_call() {
        let e = RequestEstimator::new(EstimatorKind::O200kBase);
        let m = Message::assistant("A reasonably ordinary sentence.");
        let h = m.content_hash();
        let first = e.message_tokens(&m, &h);
        assert_eq!(e.cache_stats(), (0, 1));
        let second = e.message_tokens(&m, &h);
        assert_eq!(first, second);
        assert_eq!(first, e.message_tokens_uncached(&m));
        assert_eq!(e.cache_stats(), (1, 1));
    }

    #[test]
    fn re_estimating_a_request_tokenizes_each_message_once() {
        let e = RequestEstimator::new(EstimatorKind::Cl100kBase);
        let n = 50u64;
        let messages: Vec<Message> = (0..n)
            .map(|i| {
                if i % 2 == 0 {
                    Message::user(format!("question number {i} about the build"))
                } else {
                    Message::assistant(format!("answer number {i}: it compiles"))
                }
            })
            .collect();
        let mut req = ModelRequest {
            model: "m".into(),
            messages,
            tools: vec![],
            max_output_tokens: 10,
        };
        let a = e.request_tokens(&req);
        assert_eq!(e.cache_stats(), (0, n));
        let b = e.request_tokens(&req);
        assert_eq!(a, b);
        assert_eq!(e.cache_stats(), (n, n));
        // One new message costs one tokenization.
        req.messages.push(Message::user("one more"));
        e.request_tokens(&req);
        assert_eq!(e.cache_stats(), (2 * n, n + 1));
    }

    #[test]
    fn tool_list_is_cached_and_counted() {
        let e = RequestEstimator::new(EstimatorKind::Cl100kBase);
        let tools: Vec<ToolDefinition> = (0..150)
            .map(|i| ToolDefinition {
                name: format!("tool_{i}"),
                description: format!("Does thing number {i}."),
                parameters: serde_json::json!({
                    "type": "object",
                    "properties": {"path": {"type": "string"}},
                    "required": ["path"]
                }),
            })
            .collect();
        let expected: u64 = tools
            .iter()
            .map(|t| e.count_text(&tool_json(t)) + TOOL_DEFINITION_FRAMING)
            .sum();
        assert_eq!(e.tools_tokens(&tools), expected);
        assert_eq!(e.cache_stats(), (0, 1));
        assert_eq!(e.tools_tokens(&tools), expected);
        assert_eq!(e.cache_stats(), (1, 1));
        // A changed schema is a different list.
        let mut changed = tools.clone();
        changed[3].description.push_str(" Carefully.");
        assert!(e.tools_tokens(&changed) > expected);
        assert_eq!(e.cache_stats(), (1, 2));
        assert_eq!(e.tools_tokens(&[]), 0);
    }

    #[test]
    fn estimator_is_send_sync() {
        fn check<T: Send + Sync>() {}
        check::<RequestEstimator>();
    }
}
