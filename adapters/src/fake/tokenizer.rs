//! The fake provider's own "true" tokenizer.
//!
//! Real providers count with a tokenizer and framing the client can only approximate, so a
//! client's estimate and the reported usage never agree exactly. The fake provider keeps
//! that property by counting with its own rule, deliberately **not** tiktoken, calibrated to
//! land near `cl100k_base` on English prose and Rust code (a test measures the band, see
//! `calibration_against_cl100k`) so that scenario budgets written in cl100k terms stay in
//! the right ballpark.
//!
//! ## The rule
//!
//! Text is scanned once, character by character, into runs:
//!
//! | run | cost |
//! | --- | --- |
//! | ASCII letters and `_` (a word); a lower→upper case change starts a new word (`camelCase` = 2 words) | `ceil(len / 10)` |
//! | ASCII digits | `ceil(len / 3)` (cl100k splits numbers in groups of three) |
//! | other printable ASCII (punctuation, operators, JSON/code delimiters) | `ceil(len / 3)` |
//! | a newline (`\n`) | 1 |
//! | other whitespace | 0 |
//! | any non-ASCII, non-whitespace character | 1 each |
//!
//! Any character ends a run of a different class. Counting allocates nothing. Whitespace
//! separates: no run spans it, so `count(a + b) == count(a) + count(b)` whenever `a` ends
//! or `b` starts with whitespace (scenario filler is sized by summing piece counts on that
//! basis; a test checks the property).
//!
//! Why these numbers: cl100k has a single token (leading space included) for nearly every
//! common English word and identifier fragment, so a *word* costs about one token whatever
//! its length, hence the generous 10 letters per token; numbers are split in threes by the
//! cl100k pre-tokenizer; punctuation and delimiters merge into short multi-character tokens
//! (`");`, `":"`, `::`). Measured: prose 1.03×, Rust code 1.03× of cl100k (fixtures in
//! `fake/testdata/`), a realistic request with 20 tool schemas 1.06× of the client's
//! cl100k estimate. Random letter strings (hashes, base64) come out *below* cl100k
//! (≈0.8×), so there the client's estimate errs on the safe side.
//!
//! ## Request framing
//!
//! Different from the client estimator's cookbook framing on purpose:
//! [`FAKE_MESSAGE_FRAMING`] = 4 per message, each tool call its name + compact JSON
//! arguments + [`FAKE_TOOL_CALL_FRAMING`] = 4, [`FAKE_REQUEST_FRAMING`] = 3 per request,
//! each tool definition its compact JSON + [`FAKE_TOOL_DEFINITION_FRAMING`] = 10.

use crate::estimate::tool_json;
use crate::{Message, ModelRequest, ToolDefinition};

/// Framing tokens per message.
pub const FAKE_MESSAGE_FRAMING: u64 = 4;
/// Framing tokens per tool call, on top of its name and arguments.
pub const FAKE_TOOL_CALL_FRAMING: u64 = 4;
/// Framing tokens per request.
pub const FAKE_REQUEST_FRAMING: u64 = 3;
/// Framing tokens per tool definition, on top of its compact JSON.
pub const FAKE_TOOL_DEFINITION_FRAMING: u64 = 10;

const WORD_CHARS_PER_TOKEN: u64 = 10;
const DIGITS_PER_TOKEN: u64 = 3;
const PUNCT_PER_TOKEN: u64 = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Run {
    None,
    Word,
    Digits,
    Punct,
}

/// The fake provider's deterministic tokenizer (the rule is in the [module docs](crate::fake::tokenizer)).
#[derive(Debug, Clone, Copy, Default)]
pub struct FakeTokenizer;

impl FakeTokenizer {
    /// The tokenizer. Stateless; exists as a value so the provider can own "its" tokenizer.
    pub fn new() -> Self {
        FakeTokenizer
    }

    /// Tokens of one string, by the documented run rule.
    ///
    /// The provider counts every request it receives and scenario instantiation counts
    /// every filler piece with it, so it is on the hot path of every trial: ASCII text (the
    /// usual case) takes a byte-level scan of whole runs, anything else the general
    /// per-character scan. Both implement the same rule (a test compares them).
    pub fn count_text(&self, text: &str) -> u64 {
        if text.is_ascii() {
            count_ascii(text.as_bytes())
        } else {
            count_chars(text)
        }
    }

    /// Tokens of one message: content, tool calls and framing.
    pub fn message_tokens(&self, msg: &Message) -> u64 {
        let mut n = FAKE_MESSAGE_FRAMING + self.count_text(&msg.content);
        for call in &msg.tool_calls {
            n += self.count_text(&call.name)
                + self.count_text(&call.arguments.to_string())
                + FAKE_TOOL_CALL_FRAMING;
        }
        n
    }

    /// Tokens of one tool definition: its compact JSON and framing.
    pub fn tool_tokens(&self, tool: &ToolDefinition) -> u64 {
        self.count_text(&tool_json(tool)) + FAKE_TOOL_DEFINITION_FRAMING
    }

    /// The provider's true input count for a request: what it enforces the window on and
    /// reports as `usage.input_tokens`.
    pub fn request_tokens(&self, req: &ModelRequest) -> u64 {
        let messages: u64 = req.messages.iter().map(|m| self.message_tokens(m)).sum();
        let tools: u64 = req.tools.iter().map(|t| self.tool_tokens(t)).sum();
        messages + tools + FAKE_REQUEST_FRAMING
    }
}

/// The rule, character by character (any text).
fn count_chars(text: &str) -> u64 {
    let mut total = 0u64;
    let mut run = Run::None;
    let mut len = 0u64;
    let mut prev = ' ';

    let cost = |run: Run, len: u64| match run {
        Run::None => 0,
        Run::Word => len.div_ceil(WORD_CHARS_PER_TOKEN),
        Run::Digits => len.div_ceil(DIGITS_PER_TOKEN),
        Run::Punct => len.div_ceil(PUNCT_PER_TOKEN),
    };

    for c in text.chars() {
        let class = if c.is_ascii_alphabetic() || c == '_' {
            Run::Word
        } else if c.is_ascii_digit() {
            Run::Digits
        } else if c.is_ascii_graphic() {
            Run::Punct
        } else {
            Run::None
        };
        let camel_break = class == Run::Word && c.is_ascii_uppercase() && prev.is_ascii_lowercase();
        if class != run || camel_break {
            total += cost(run, len);
            run = class;
            len = 0;
        }
        match class {
            // A newline, or a non-ASCII non-whitespace character: one token each.
            Run::None if c == '\n' || !c.is_whitespace() => total += 1,
            Run::None => {}
            _ => len += 1,
        }
        prev = c;
    }
    total + cost(run, len)
}

/// Character classes of ASCII bytes under the rule (see the module docs).
const ASCII_RUN: [Run; 128] = {
    let mut t = [Run::None; 128];
    let mut i = 0;
    while i < 128 {
        let b = i as u8;
        t[i] = if b.is_ascii_alphabetic() || b == b'_' {
            Run::Word
        } else if b.is_ascii_digit() {
            Run::Digits
        } else if b.is_ascii_graphic() {
            Run::Punct
        } else {
            Run::None
        };
        i += 1;
    }
    t
};

/// The rule over ASCII bytes, a whole run at a time: the same count as [`count_chars`].
fn count_ascii(bytes: &[u8]) -> u64 {
    let class = |b: u8| ASCII_RUN[(b & 0x7F) as usize];
    let n = bytes.len();
    let mut total = 0u64;
    let mut i = 0;
    while i < n {
        let b = bytes[i];
        let start = i;
        i += 1;
        match class(b) {
            Run::Word => {
                // A lower→upper case change starts a new word.
                while i < n
                    && class(bytes[i]) == Run::Word
                    && !(bytes[i].is_ascii_uppercase() && bytes[i - 1].is_ascii_lowercase())
                {
                    i += 1;
                }
                total += ((i - start) as u64).div_ceil(WORD_CHARS_PER_TOKEN);
            }
            Run::Digits => {
                while i < n && class(bytes[i]) == Run::Digits {
                    i += 1;
                }
                total += ((i - start) as u64).div_ceil(DIGITS_PER_TOKEN);
            }
            Run::Punct => {
                while i < n && class(bytes[i]) == Run::Punct {
                    i += 1;
                }
                total += ((i - start) as u64).div_ceil(PUNCT_PER_TOKEN);
            }
            // A newline or a control character: one token; other whitespace (as
            // `char::is_whitespace` has it, vertical tab included) is free.
            Run::None => {
                let free_space = b.is_ascii_whitespace() || b == 0x0B;
                if b == b'\n' || !free_space {
                    total += 1;
                }
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimate::{count_text_with, EstimatorKind};
    use crate::ToolCall;

    const PROSE: &str = include_str!("testdata/prose.txt");
    const CODE: &str = include_str!("testdata/code.rs.txt");

    /// The property filler sizing relies on: whitespace separates counts.
    #[test]
    fn whitespace_separates_counts() {
        let t = FakeTokenizer::new();
        let alphabet: Vec<char> = "aZ_9.;{ \n\t\u{0b}xY0-\u{a0}é日".chars().collect();
        let spaces = [" ", "\n", "\t", "  \n", "\u{a0}"];
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = |m: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % m as u64) as usize
        };
        for _ in 0..3000 {
            let word = |n: usize, next: &mut dyn FnMut(usize) -> usize| -> String {
                (0..n).map(|_| alphabet[next(alphabet.len())]).collect()
            };
            let a = word(next(12), &mut next);
            let b = word(next(12), &mut next);
            let sp = spaces[next(spaces.len())];
            for (l, r) in [
                (format!("{a}{sp}"), b.clone()),
                (a.clone(), format!("{sp}{b}")),
            ] {
                assert_eq!(
                    t.count_text(&format!("{l}{r}")),
                    t.count_text(&l) + t.count_text(&r),
                    "{l:?} + {r:?}"
                );
            }
        }
    }

    #[test]
    fn rule_examples() {
        let t = FakeTokenizer::new();
        assert_eq!(t.count_text(""), 0);
        assert_eq!(t.count_text("   \t "), 0);
        assert_eq!(t.count_text("hello"), 1);
        assert_eq!(t.count_text("hello world"), 2);
        // 10 letters is one word token, 11 is two.
        assert_eq!(t.count_text("abcdefghij"), 1);
        assert_eq!(t.count_text("abcdefghijk"), 2);
        // snake_case is one run; camelCase splits at the case change.
        assert_eq!(t.count_text("snake_case"), 1);
        assert_eq!(t.count_text("camelCase"), 2);
        assert_eq!(t.count_text("HTTPServer"), 1);
        // Digits in threes.
        assert_eq!(t.count_text("123"), 1);
        assert_eq!(t.count_text("1234"), 2);
        assert_eq!(t.count_text("16384"), 2);
        // Punctuation in threes.
        assert_eq!(t.count_text("."), 1);
        assert_eq!(t.count_text("::"), 1);
        assert_eq!(t.count_text("();"), 1);
        assert_eq!(t.count_text("\":{\""), 2);
        // Each newline is one token; "\r" is free whitespace.
        assert_eq!(t.count_text("\n"), 1);
        assert_eq!(t.count_text("a\n\nb"), 4);
        assert_eq!(t.count_text("a\r\n  \nb"), 4);
        assert_eq!(t.count_text("a\nb\nc"), 5);
        // Non-ASCII: one per character.
        assert_eq!(t.count_text("日本語"), 3);
        assert_eq!(t.count_text("café"), 2);
        // Classes end each other's runs.
        assert_eq!(t.count_text("a1.b"), 4);
    }

    #[test]
    fn ascii_scan_counts_like_the_character_scan() {
        let t = FakeTokenizer::new();
        for text in [
            PROSE,
            CODE,
            "aB_cD eF\x0b\x0c\x00\x7f\t\r\n 12345 ...;;; HTTPServer",
        ] {
            assert_eq!(count_ascii(text.as_bytes()), count_chars(text), "{text:?}");
        }
        // Seeded random ASCII over every byte class (all 128 code points).
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        for _ in 0..5_000 {
            let len = (x % 40) as usize;
            let text: String = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    // Mostly letters (both cases) and spaces, so runs and camel breaks occur.
                    match x % 4 {
                        0 => (b'a' + (x >> 8) as u8 % 26) as char,
                        1 => (b'A' + (x >> 8) as u8 % 26) as char,
                        2 => ' ',
                        _ => ((x >> 8) as u8 % 128) as char,
                    }
                })
                .collect();
            assert_eq!(t.count_text(&text), count_chars(&text), "{text:?}");
        }
        // Non-ASCII text takes the character scan.
        assert_eq!(t.count_text("café\u{a0}日本"), 4);
    }

    #[test]
    fn calibration_against_cl100k() {
        let t = FakeTokenizer::new();
        for (name, text) in [("prose", PROSE), ("code", CODE)] {
            assert!(text.len() > 2500, "{name} sample too small");
            let ours = t.count_text(text) as f64;
            let cl = count_text_with(EstimatorKind::Cl100kBase, text) as f64;
            let ratio = ours / cl;
            let o200k = count_text_with(EstimatorKind::O200kBase, text) as f64;
            println!(
                "{name}: fake {ours} / cl100k {cl} = {ratio:.3} (o200k {o200k}: {:.3})",
                ours / o200k
            );
            assert!(
                (0.85..=1.15).contains(&ratio),
                "{name}: fake/cl100k = {ratio:.3} ({ours} / {cl})"
            );
        }
    }

    #[test]
    fn whole_request_estimate_is_in_the_ballpark() {
        // What scenario budgets rely on: the engine's cl100k estimate of a realistic request
        // (framing included) is close to, but not equal to, what the provider enforces.
        let est = crate::estimate::RequestEstimator::new(EstimatorKind::Cl100kBase);
        let tools: Vec<ToolDefinition> = (0..20)
            .map(|i| ToolDefinition {
                name: format!("tool_{i}"),
                description: format!("Reads file number {i} and returns its contents."),
                parameters: serde_json::json!({
                    "type": "object",
                    "properties": {"path": {"type": "string", "description": "File path"}},
                    "required": ["path"]
                }),
            })
            .collect();
        let mut messages = vec![Message::system("You are a careful coding assistant.")];
        for (i, chunk) in PROSE.split("\n\n").chain(CODE.split("\n\n")).enumerate() {
            messages.push(if i % 2 == 0 {
                Message::user(chunk)
            } else {
                Message::assistant(chunk)
            });
        }
        let req = ModelRequest {
            model: "fake-16k".into(),
            messages,
            tools,
            max_output_tokens: 1000,
        };
        let truth = FakeTokenizer::new().request_tokens(&req) as f64;
        let estimate = est.request_tokens(&req) as f64;
        let ratio = truth / estimate;
        println!("request: fake {truth} / cl100k estimate {estimate} = {ratio:.3}");
        assert!(
            (0.85..=1.15).contains(&ratio),
            "truth/estimate = {ratio:.3}"
        );
        assert_ne!(truth, estimate);
    }

    #[test]
    fn request_framing() {
        let t = FakeTokenizer::new();
        let call = Message {
            role: crate::Role::Assistant,
            content: String::new(),
            tool_calls: vec![ToolCall {
                id: "c".into(),
                name: "grep".into(),
                arguments: serde_json::json!({"q": "x"}),
            }],
            tool_call_id: None,
        };
        let tool = ToolDefinition {
            name: "grep".into(),
            description: "Search.".into(),
            parameters: serde_json::json!({"type": "object"}),
        };
        let req = ModelRequest {
            model: "fake-16k".into(),
            messages: vec![Message::user("hello world"), call.clone()],
            tools: vec![tool.clone()],
            max_output_tokens: 10,
        };
        let expected = (4 + 2)
            + (4 + t.count_text("grep") + t.count_text(r#"{"q":"x"}"#) + 4)
            + (t.count_text(&tool_json(&tool)) + 10)
            + 3;
        assert_eq!(t.request_tokens(&req), expected);
    }
}
