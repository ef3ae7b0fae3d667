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
//!
//! Below those per-estimator caches sits one **process-wide memo per tokenizer**
//! ([`SharedCounts`]): the engine's estimator and the harness's independent estimate of the
//! same request (its `observed_estimate`) would otherwise each run the BPE over every
//! message — the largest CPU cost of a trial. The memo is keyed only by a hash the
//! estimator computes itself from the exact content it counts ([`Message::content_hash`],
//! SHA-256), never by a hash a caller supplies: a caller-supplied hash keys that
//! estimator's own cache only, so an engine that passes a wrong hash can mislead its own
//! estimate but never another estimator's. A memoized count is therefore still an exact
//! count of the content. The memo is bounded (two generations of
//! [`SHARED_GENERATION_CAPACITY`] entries; the older one is dropped when the newer fills),
//! so it holds the recent working set, not every message ever seen. The conservative
//! rule is cheaper than hashing and is not memoized. [`count_text_with`] and
//! [`RequestEstimator::message_tokens_uncached`] always tokenize.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

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

/// Entries per generation of a [`SharedCounts`] memo. Two generations of 32,768 entries
/// (≈ 3 MiB at most per tokenizer) hold thousands of trials' messages — far more than the
/// few trials in flight whose engine and harness estimates share counts.
pub const SHARED_GENERATION_CAPACITY: usize = 1 << 15;

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

/// Load `kind`'s BPE tables now, on a background thread: the first count otherwise pays
/// for it (about 90 ms of CPU for `cl100k_base`) while every other trial worker waits on
/// the same one-time initialisation. A run calls this before its first trial; the load
/// then overlaps with the run's setup and its first scenario instantiations.
///
/// The tables are tiktoken-rs's singletons, so a second call (or a count racing the load)
/// only waits for, or finds, the one load.
pub fn prewarm(kind: EstimatorKind) {
    if kind == EstimatorKind::Conservative {
        return; // nothing to load
    }
    let _ = std::thread::Builder::new()
        .name("ctxbench-bpe".into())
        .spawn(move || {
            let _ = bpe(kind);
        });
}

/// Count one string with `kind`. Not cached by content: every call counts the text (for
/// `cl100k_base` and ASCII text through [`cl100k_ascii`], whose per-piece memo is exact).
pub fn count_text_with(kind: EstimatorKind, text: &str) -> u64 {
    let Some(bpe) = bpe(kind) else {
        return conservative_tokens(text);
    };
    if text.is_empty() {
        return 0;
    }
    if kind == EstimatorKind::Cl100kBase && text.is_ascii() {
        return cl100k_ascii::count(bpe, text.as_bytes());
    }
    tiktoken_count(bpe, text)
}

/// tiktoken's own count of `text` (ordinary encoding, see [text counting](self#text-counting)).
fn tiktoken_count(bpe: &tiktoken_rs::CoreBPE, text: &str) -> u64 {
    let no_special = std::collections::HashSet::new();
    match bpe.encode(text, &no_special) {
        Ok((tokens, _)) => tokens.len() as u64,
        Err(_) => conservative_tokens(text),
    }
}

/// Exact `cl100k_base` counts of ASCII text without tiktoken's regex engine.
///
/// Profiling a trial showed tiktoken's pre-tokenizer (a `fancy_regex` with a look-ahead,
/// run through a backtracking VM) as most of the BPE's cost, and the BPE as the largest
/// single cost of a run. For ASCII text the pre-tokenizer's pattern — tiktoken-rs 0.12's
///
/// ```text
/// '(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s
/// ```
///
/// — reduces to a handful of byte classes (`\p{L}` = `[A-Za-z]`, `\p{N}` = `[0-9]`, `\s` =
/// `[\t\n\x0B\x0C\r ]`), so [`split`] scans it directly, alternative by alternative in the
/// pattern's order. Each piece is then counted by tiktoken itself (`CoreBPE::encode` of
/// the piece alone, which the pattern splits into exactly that one piece — see `split`),
/// memoized per thread by the piece's bytes: prose and code reuse a small vocabulary of
/// pieces, so nearly every piece is a lookup. The result is identical to tiktoken's count
/// of the whole text (tests compare them on fixtures, edge cases and random ASCII);
/// non-ASCII text, and every other tokenizer, goes through tiktoken unchanged.
pub(crate) mod cl100k_ascii {
    use std::cell::RefCell;
    use std::collections::HashMap;
    use std::hash::{BuildHasherDefault, Hasher};

    const LETTER: u8 = 1;
    const DIGIT: u8 = 2;
    /// Whitespace other than `\r` / `\n`: space, `\t`, `\x0B`, `\x0C`.
    const SPACE: u8 = 3;
    const NEWLINE: u8 = 4;
    /// Anything else: punctuation, symbols, other control characters.
    const OTHER: u8 = 5;

    const CLASS: [u8; 128] = {
        let mut t = [OTHER; 128];
        let mut i = 0;
        while i < 128 {
            let b = i as u8;
            t[i] = if b.is_ascii_alphabetic() {
                LETTER
            } else if b.is_ascii_digit() {
                DIGIT
            } else if b == b'\r' || b == b'\n' {
                NEWLINE
            } else if b == b' ' || b == b'\t' || b == 0x0B || b == 0x0C {
                SPACE
            } else {
                OTHER
            };
            i += 1;
        }
        t
    };

    fn class(b: u8) -> u8 {
        CLASS[(b & 0x7F) as usize]
    }

    fn run(text: &[u8], mut q: usize, pred: impl Fn(u8) -> bool) -> usize {
        while q < text.len() && pred(class(text[q])) {
            q += 1;
        }
        q
    }

    /// Split ASCII `text` into cl100k pre-tokenizer pieces, calling `piece` with each.
    ///
    /// At each position the alternatives are tried in the pattern's order, with its
    /// possessive and greedy semantics; every ASCII byte starts some alternative, so the
    /// pieces tile the text. Every piece is also the single match of the pattern on the
    /// piece alone: a contraction or a letter run matches the same alternative; a
    /// punctuation run contains no letter, so alternative 4 takes all of it; a whitespace
    /// piece reaches the end of the piece, so `\s++$` takes all of it.
    pub(crate) fn split(text: &[u8], mut piece: impl FnMut(&[u8])) {
        let n = text.len();
        let mut p = 0;
        while p < n {
            let c = text[p];
            let cls = class(c);
            let next = |i: usize| text.get(i).map(|&b| class(b));
            let end = 'alt: {
                // 1. '(?i:[sdmt]|ll|ve|re)
                if c == b'\'' && p + 1 < n {
                    let c1 = text[p + 1].to_ascii_lowercase();
                    if matches!(c1, b's' | b'd' | b'm' | b't') {
                        break 'alt p + 2;
                    }
                    if p + 2 < n {
                        let c2 = text[p + 2].to_ascii_lowercase();
                        if matches!((c1, c2), (b'l', b'l') | (b'v', b'e') | (b'r', b'e')) {
                            break 'alt p + 3;
                        }
                    }
                }
                // 2. [^\r\n\p{L}\p{N}]?+\p{L}++
                if cls == LETTER {
                    break 'alt run(text, p + 1, |k| k == LETTER);
                }
                if (cls == SPACE || cls == OTHER) && next(p + 1) == Some(LETTER) {
                    break 'alt run(text, p + 2, |k| k == LETTER);
                }
                // 3. \p{N}{1,3}+
                if cls == DIGIT {
                    let mut q = p + 1;
                    while q < n && q < p + 3 && class(text[q]) == DIGIT {
                        q += 1;
                    }
                    break 'alt q;
                }
                // 4.  ?[^\s\p{L}\p{N}]++[\r\n]*+
                let start = if c == b' ' && next(p + 1) == Some(OTHER) {
                    Some(p + 1)
                } else if cls == OTHER {
                    Some(p)
                } else {
                    None
                };
                if let Some(s) = start {
                    let q = run(text, s, |k| k == OTHER);
                    break 'alt run(text, q, |k| k == NEWLINE);
                }
                // Whitespace from here on: the run p..q, and its last newline.
                let mut q = p;
                let mut last_newline = None;
                while q < n {
                    match class(text[q]) {
                        NEWLINE => last_newline = Some(q),
                        SPACE => {}
                        _ => break,
                    }
                    q += 1;
                }
                // 5. \s++$
                if q == n {
                    break 'alt n;
                }
                // 6. \s*[\r\n] (greedy \s* backs off to the run's last newline)
                if let Some(l) = last_newline {
                    break 'alt l + 1;
                }
                // 7. \s+(?!\S): all but the last of a run followed by a non-space
                if q - p >= 2 {
                    break 'alt q - 1;
                }
                // 8. \s
                p + 1
            };
            piece(&text[p..end]);
            p = end;
        }
    }

    /// Pieces longer than this are counted without being memoized (rare: very long
    /// words or runs of punctuation or whitespace).
    const MAX_MEMO_PIECE: usize = 64;
    /// Pieces memoized per thread before the memo is cleared (a few MiB at most).
    const MAX_MEMO_ENTRIES: usize = 1 << 16;

    /// FxHash-style hashing of short byte strings: the default SipHash would cost more
    /// than the rest of a lookup.
    #[derive(Default, Clone, Copy)]
    struct PieceHasher(u64);

    impl PieceHasher {
        fn add(&mut self, word: u64) {
            self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }

    impl Hasher for PieceHasher {
        fn finish(&self) -> u64 {
            self.0
        }
        fn write(&mut self, bytes: &[u8]) {
            let mut chunks = bytes.chunks_exact(8);
            for c in &mut chunks {
                self.add(u64::from_le_bytes(c.try_into().unwrap_or([0; 8])));
            }
            let rest = chunks.remainder();
            if !rest.is_empty() {
                let mut b = [0u8; 8];
                b[..rest.len()].copy_from_slice(rest);
                self.add(u64::from_le_bytes(b));
            }
        }
        fn write_usize(&mut self, n: usize) {
            self.add(n as u64);
        }
    }

    type Memo = HashMap<Box<[u8]>, u32, BuildHasherDefault<PieceHasher>>;

    thread_local! {
        static MEMO: RefCell<Memo> = RefCell::new(Memo::default());
    }

    /// tiktoken's token count of one piece (the piece is ASCII, hence UTF-8).
    fn piece_tokens(bpe: &tiktoken_rs::CoreBPE, piece: &[u8]) -> u32 {
        let text = std::str::from_utf8(piece).unwrap_or_default();
        super::tiktoken_count(bpe, text) as u32
    }

    /// The `cl100k_base` token count of ASCII `text`, equal to tiktoken's.
    pub(crate) fn count(bpe: &tiktoken_rs::CoreBPE, text: &[u8]) -> u64 {
        MEMO.with(|memo| {
            let mut memo = memo.borrow_mut();
            let mut total = 0u64;
            split(text, |piece| {
                let n = if piece.len() > MAX_MEMO_PIECE {
                    piece_tokens(bpe, piece)
                } else if let Some(&n) = memo.get(piece) {
                    n
                } else {
                    let n = piece_tokens(bpe, piece);
                    if memo.len() >= MAX_MEMO_ENTRIES {
                        memo.clear();
                    }
                    memo.insert(piece.into(), n);
                    n
                };
                total += u64::from(n);
            });
            total
        })
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

type CountMap = HashMap<ContentHash, u64, DigestHasher>;

/// A bounded, thread-safe memo of token counts for one tokenizer, keyed by a SHA-256 of
/// the exact content counted (see [caching](self#caching) for why the key must be computed
/// from the content by the estimator, not taken from a caller).
///
/// Bounded by generations rather than by clearing: when the current generation reaches
/// its capacity it becomes the previous one (the older is dropped) and a hit in the
/// previous one is promoted, so the entries in active use — a trial's messages, between
/// the engine's count and the harness's — survive a rollover.
#[derive(Debug)]
pub struct SharedCounts {
    capacity: usize,
    maps: Mutex<(CountMap, CountMap)>,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl SharedCounts {
    /// An empty memo holding at most `2 × capacity` entries (`capacity` ≥ 1).
    pub fn new(capacity: usize) -> Self {
        SharedCounts {
            capacity: capacity.max(1),
            maps: Mutex::new((CountMap::default(), CountMap::default())),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// The process-wide memo for `kind` (`None` for the conservative rule, which is
    /// cheaper to compute than to look up).
    pub fn global(kind: EstimatorKind) -> Option<&'static SharedCounts> {
        static CL100K: OnceLock<SharedCounts> = OnceLock::new();
        static O200K: OnceLock<SharedCounts> = OnceLock::new();
        let cell = match kind {
            EstimatorKind::Cl100kBase => &CL100K,
            EstimatorKind::O200kBase => &O200K,
            EstimatorKind::Conservative => return None,
        };
        Some(cell.get_or_init(|| SharedCounts::new(SHARED_GENERATION_CAPACITY)))
    }

    /// The count memoized under `key`, or `count()` (run outside the lock, so concurrent
    /// trials never wait on each other's tokenization) memoized under it. `key` must be a
    /// hash of exactly what `count` counts, computed by the caller from that content.
    pub fn get_or_count(&self, key: ContentHash, count: impl FnOnce() -> u64) -> u64 {
        {
            let mut maps = lock(&self.maps);
            if let Some(&n) = maps.0.get(&key) {
                self.hits.fetch_add(1, Ordering::Relaxed);
                return n;
            }
            if let Some(n) = maps.1.remove(&key) {
                self.hits.fetch_add(1, Ordering::Relaxed);
                self.insert(&mut maps, key, n);
                return n;
            }
        }
        let n = count();
        self.misses.fetch_add(1, Ordering::Relaxed);
        self.insert(&mut lock(&self.maps), key, n);
        n
    }

    fn insert(&self, maps: &mut (CountMap, CountMap), key: ContentHash, n: u64) {
        if maps.0.len() >= self.capacity {
            maps.1 = std::mem::take(&mut maps.0);
        }
        maps.0.insert(key, n);
    }

    /// Entries held (both generations; at most `2 × capacity`).
    pub fn len(&self) -> usize {
        let maps = lock(&self.maps);
        maps.0.len() + maps.1.len()
    }

    /// Whether nothing is memoized.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `(hits, misses)` since creation; a miss is one count actually computed.
    pub fn stats(&self) -> (u64, u64) {
        (
            self.hits.load(Ordering::Relaxed),
            self.misses.load(Ordering::Relaxed),
        )
    }
}

/// Which memo, if any, backs an estimator's own caches.
#[derive(Debug, Clone)]
enum Shared {
    None,
    Global(&'static SharedCounts),
    Own(Arc<SharedCounts>),
}

impl Shared {
    fn get(&self) -> Option<&SharedCounts> {
        match self {
            Shared::None => None,
            Shared::Global(s) => Some(s),
            Shared::Own(s) => Some(s),
        }
    }
}

/// Estimates request size with one tokenizer, caching per message and per tool list.
///
/// `Send + Sync`; share one per estimator kind behind an `Arc`. The caches are only an
/// optimisation: every method returns the same number as an uncached count.
#[derive(Debug)]
pub struct RequestEstimator {
    kind: EstimatorKind,
    messages: Mutex<CountMap>,
    tools: Mutex<CountMap>,
    shared: Shared,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl RequestEstimator {
    /// An estimator of `kind` with empty caches of its own, backed by the process-wide
    /// memo of its tokenizer ([`SharedCounts::global`]). The BPE itself is process-wide
    /// and loaded on first use, so creating estimators is cheap.
    pub fn new(kind: EstimatorKind) -> Self {
        Self::with_shared(
            kind,
            SharedCounts::global(kind).map_or(Shared::None, Shared::Global),
        )
    }

    /// An estimator that shares counts with no other: every message it has not seen is
    /// tokenized. For measurements that must not depend on what else the process counted.
    pub fn unshared(kind: EstimatorKind) -> Self {
        Self::with_shared(kind, Shared::None)
    }

    /// An estimator backed by the given memo instead of the process-wide one (tests,
    /// benchmarks: estimators that share counts only with each other).
    pub fn sharing(kind: EstimatorKind, memo: Arc<SharedCounts>) -> Self {
        Self::with_shared(kind, Shared::Own(memo))
    }

    fn with_shared(kind: EstimatorKind, shared: Shared) -> Self {
        RequestEstimator {
            kind,
            messages: Mutex::new(HashMap::default()),
            tools: Mutex::new(HashMap::default()),
            shared,
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
        self.message_tokens_keyed(msg, hash, false)
    }

    /// [`Self::message_tokens`]; `verified` says `hash` was computed here from `msg`, so it
    /// may key the shared memo without being recomputed.
    fn message_tokens_keyed(&self, msg: &Message, hash: &ContentHash, verified: bool) -> u64 {
        if let Some(&n) = lock(&self.messages).get(hash) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return n;
        }
        // Tokenize outside the lock so concurrent trials do not serialize on it.
        let n = match self.shared.get() {
            None => self.message_tokens_uncached(msg),
            Some(memo) => {
                // The shared memo is keyed by a hash of the exact content, computed here:
                // a caller's hash is trusted for this estimator's own cache only.
                let key = if verified { *hash } else { msg.content_hash() };
                memo.get_or_count(key, || self.message_tokens_uncached(msg))
            }
        };
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
        let count = || {
            jsons
                .iter()
                .map(|j| self.count_text(j) + TOOL_DEFINITION_FRAMING)
                .sum()
        };
        let n = match self.shared.get() {
            None => count(),
            // Keyed apart from message hashes (a different preimage), computed from the
            // list's content right here.
            Some(memo) => {
                let mut d = Sha256::new();
                d.update(b"ctxbench.tool-list\0");
                d.update(key.0);
                memo.get_or_count(ContentHash(d.finalize().into()), count)
            }
        };
        self.misses.fetch_add(1, Ordering::Relaxed);
        insert_bounded(&mut lock(&self.tools), key, n);
        n
    }

    /// The whole request: every message, the tool list and the reply priming.
    ///
    /// Hashes each message here; a caller that already holds the hashes should sum
    /// [`Self::message_tokens`] itself to skip that (or use
    /// [`Self::request_tokens_hashed`]).
    pub fn request_tokens(&self, req: &ModelRequest) -> u64 {
        let messages: u64 = req
            .messages
            .iter()
            .map(|m| self.message_tokens_keyed(m, &m.content_hash(), true))
            .sum();
        messages + self.tools_tokens(&req.tools) + Self::request_priming()
    }

    /// [`Self::request_tokens`] that also returns each message's content hash (computed
    /// here, once), for a caller that needs both — the harness records every message of a
    /// request by hash next to its independent estimate.
    pub fn request_tokens_hashed(&self, req: &ModelRequest) -> (u64, Vec<ContentHash>) {
        let mut hashes = Vec::with_capacity(req.messages.len());
        let mut total = self.tools_tokens(&req.tools) + Self::request_priming();
        for m in &req.messages {
            let h = m.content_hash();
            total += self.message_tokens_keyed(m, &h, true);
            hashes.push(h);
        }
        (total, hashes)
    }

    /// Tokens per request that prime the reply ([`REQUEST_PRIMING`]).
    pub fn request_priming() -> u64 {
        REQUEST_PRIMING
    }

    /// `(hits, misses)` over this estimator's own caches since creation; a miss is a
    /// message or tool list it had to count — by tokenizing it, or from the shared memo
    /// when another estimator of the process already did.
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

fn insert_bounded(map: &mut CountMap, key: ContentHash, value: u64) {
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
    fn a_second_estimator_counts_from_the_shared_memo() {
        // The engine's estimator and the harness's independent one over the same request:
        // the BPE runs once per message, and both get the uncached count.
        let memo = Arc::new(SharedCounts::new(64));
        let engine = RequestEstimator::sharing(EstimatorKind::Cl100kBase, memo.clone());
        let harness = RequestEstimator::sharing(EstimatorKind::Cl100kBase, memo.clone());
        let messages: Vec<Message> = (0..10)
            .map(|i| Message::user(format!("message {i}: the deploy region is eu-west-{i}")))
            .collect();
        for m in &messages {
            engine.message_tokens(m, &m.content_hash());
        }
        assert_eq!(memo.stats(), (0, 10));
        let req = ModelRequest {
            model: "m".into(),
            messages: messages.clone(),
            tools: vec![],
            max_output_tokens: 10,
        };
        let uncached: u64 = messages
            .iter()
            .map(|m| harness.message_tokens_uncached(m))
            .sum::<u64>()
            + REQUEST_PRIMING;
        let (total, hashes) = harness.request_tokens_hashed(&req);
        assert_eq!(total, uncached);
        assert_eq!(harness.request_tokens(&req), uncached);
        assert_eq!(
            hashes,
            messages
                .iter()
                .map(Message::content_hash)
                .collect::<Vec<_>>()
        );
        assert_eq!(memo.stats(), (10, 10), "no message tokenized twice");
        // An unshared estimator tokenizes for itself.
        let alone = RequestEstimator::unshared(EstimatorKind::Cl100kBase);
        assert_eq!(alone.request_tokens(&req), uncached);
        assert_eq!(memo.stats(), (10, 10));
    }

    #[test]
    fn a_forged_hash_cannot_poison_another_estimators_count() {
        // An engine passing message B's hash with message A's content misleads its own
        // cache only: the shared memo is keyed by the hash of what was actually counted.
        let memo = Arc::new(SharedCounts::new(64));
        let engine = RequestEstimator::sharing(EstimatorKind::Cl100kBase, memo.clone());
        let harness = RequestEstimator::sharing(EstimatorKind::Cl100kBase, memo);
        let short = Message::user("ok");
        let long = Message::user("a considerably longer message ".repeat(50));
        let forged = engine.message_tokens(&short, &long.content_hash());
        assert_eq!(forged, engine.message_tokens_uncached(&short));
        let req = ModelRequest {
            model: "m".into(),
            messages: vec![long.clone()],
            tools: vec![],
            max_output_tokens: 10,
        };
        assert_eq!(
            harness.request_tokens(&req),
            harness.message_tokens_uncached(&long) + REQUEST_PRIMING
        );
    }

    #[test]
    fn shared_memo_is_bounded_and_keeps_entries_in_use() {
        let memo = SharedCounts::new(4);
        let key = |i: u8| ContentHash([i; 32]);
        for i in 0..100u8 {
            assert_eq!(memo.get_or_count(key(i), || u64::from(i)), u64::from(i));
            // Key 0 stays in use (as a trial's message between two counts does).
            assert_eq!(memo.get_or_count(key(0), || unreachable!("evicted")), 0);
            assert!(memo.len() <= 8, "{} entries", memo.len());
        }
        let (hits, misses) = memo.stats();
        assert_eq!((hits, misses), (100, 100));
        // Old, unused entries were dropped: counting again computes.
        assert_eq!(memo.get_or_count(key(1), || 41), 41);
    }

    #[test]
    fn global_memo_per_tiktoken_kind_only() {
        assert!(SharedCounts::global(EstimatorKind::Conservative).is_none());
        let a = SharedCounts::global(EstimatorKind::Cl100kBase).unwrap();
        let b = SharedCounts::global(EstimatorKind::O200kBase).unwrap();
        assert!(
            !std::ptr::eq(a, b),
            "counts of different tokenizers never mix"
        );
        // Same content, different tokenizers: each estimator gets its own kind's count.
        let m = Message::user("Supercalifragilistic tokenization of PostgreSQL 16384");
        let cl = RequestEstimator::new(EstimatorKind::Cl100kBase);
        let o2 = RequestEstimator::new(EstimatorKind::O200kBase);
        assert_eq!(
            cl.message_tokens(&m, &m.content_hash()),
            cl.message_tokens_uncached(&m)
        );
        assert_eq!(
            o2.message_tokens(&m, &m.content_hash()),
            o2.message_tokens_uncached(&m)
        );
    }

    /// tiktoken's tokens for `text`, and the fast path's: its pieces, each encoded alone.
    fn both_token_sequences(text: &str) -> (Vec<u32>, Vec<u32>) {
        let bpe = bpe(EstimatorKind::Cl100kBase).unwrap();
        let whole = bpe.encode_ordinary(text);
        let mut pieces = Vec::new();
        let mut rebuilt = Vec::new();
        cl100k_ascii::split(text.as_bytes(), |p| {
            rebuilt.extend_from_slice(p);
            pieces.extend(bpe.encode_ordinary(std::str::from_utf8(p).unwrap()));
        });
        assert_eq!(rebuilt, text.as_bytes(), "pieces tile the text");
        (whole, pieces)
    }

    fn assert_fast_path_exact(text: &str) {
        let (whole, pieces) = both_token_sequences(text);
        assert_eq!(pieces, whole, "token sequence of {text:?}");
        let bpe = bpe(EstimatorKind::Cl100kBase).unwrap();
        assert_eq!(
            cl100k_ascii::count(bpe, text.as_bytes()),
            tiktoken_count(bpe, text),
            "count of {text:?}"
        );
        assert_eq!(
            count_text_with(EstimatorKind::Cl100kBase, text),
            whole.len() as u64
        );
    }

    #[test]
    fn cl100k_ascii_fast_path_equals_tiktoken_on_fixtures_and_edge_cases() {
        for fixture in [
            include_str!("fake/testdata/prose.txt"),
            include_str!("fake/testdata/code.rs.txt"),
        ] {
            assert_fast_path_exact(fixture);
        }
        for text in [
            "",
            "a",
            " ",
            "  ",
            "\n",
            "hello world",
            "I'm sure they'll say it's theirs, we've we're we'd I'D IT'S 'sam 'll 'x",
            "'",
            "''s",
            "don't'",
            "x   y",
            "x \t y",
            "a\n\n  b",
            "a\n  \n  ",
            "trailing   ",
            "trailing\n\n  ",
            "\r\n\r\nCRLF\r\n",
            "tab\tseparated\tvalues\t1\t22\t333\t4444\t55555",
            "12345678901 1 22 333 4444",
            " 1 2",
            "  .x ..y ... z\n\n",
            "!!!\n\n\nnext",
            "\x0b\x0cvertical\x0b tab \x0c form feed",
            "\x00\x01control\x1f\x7f bytes",
            "<|endoftext|> stays ordinary text",
            "camelCaseIdentifier snake_case_identifier SCREAMING_CASE x86_64",
            "{\"path\": \"src/main.rs\", \"line\": 42}",
            "fn main() {\n    println!(\"{}\", 1 + 2);\n}\n",
            "    indented\n\tand tabbed\n \n\t\n",
            "https://example.com/a/b?c=d&e=f#g",
            "The deploy region is eu-west-3.",
        ] {
            assert_fast_path_exact(text);
        }
    }

    #[test]
    fn cl100k_ascii_fast_path_equals_tiktoken_on_random_ascii() {
        // Seeded random strings over an alphabet weighted toward the pattern's edge cases:
        // whitespace kinds and runs, apostrophes and contraction letters, digit runs,
        // punctuation, control bytes.
        const ALPHABET: &[u8] = b"     \n\n\r\t\x0b\x0c''sSdDtTmMlLvVeErRxyzAQ0123456789.,;:!?()[]{}<>\"-_=+*/\\|@#$%^&~`\x00\x1f\x7f";
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..20_000 {
            let len = (next() % 48) as usize;
            let text: String = (0..len)
                .map(|_| ALPHABET[(next() % ALPHABET.len() as u64) as usize] as char)
                .collect();
            assert_fast_path_exact(&text);
        }
    }

    #[test]
    fn non_ascii_text_is_counted_by_tiktoken() {
        let text = "Café déjà vu — naïve façade, 日本語のテキスト and it's fine";
        let bpe = bpe(EstimatorKind::Cl100kBase).unwrap();
        assert_eq!(
            count_text_with(EstimatorKind::Cl100kBase, text),
            bpe.encode_ordinary(text).len() as u64
        );
    }

    #[test]
    fn estimator_is_send_sync() {
        fn check<T: Send + Sync>() {}
        check::<RequestEstimator>();
    }
}
