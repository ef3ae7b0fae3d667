//! Deterministic generated content: filler text and synthetic tool catalogues.
//!
//! Everything here is a pure function of (seed, key, sizes, counter). Randomness comes from
//! `ChaCha8Rng` seeded by SHA-256 of a domain tag, the seed and a stable key — never from
//! `std`'s hasher or iteration order, which may change between Rust versions — so the same
//! scenario and seed give byte-identical text on every platform and release.
//!
//! Sizes are measured with the caller's token counter (the fake provider's tokenizer), so
//! "600 tokens of code" means 600 tokens to the provider that enforces the window.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use super::template::FillerKind;
use ctxbench_adapters::ToolDefinition;

/// A deterministic RNG for (`domain`, `seed`, `key`).
pub(crate) fn rng_for(domain: &str, seed: u64, key: &str) -> ChaCha8Rng {
    let mut h = Sha256::new();
    h.update(b"ctxbench.scenario.");
    h.update(domain.as_bytes());
    h.update([0]);
    h.update(seed.to_le_bytes());
    h.update(key.as_bytes());
    ChaCha8Rng::from_seed(h.finalize().into())
}

/// `n` scaled by a seeded factor in `[1 − spread, 1 + spread]` for (`seed`, `key`): never
/// below 1 and never above `ceil(n × (1 + spread))` (the bound validation checks).
pub(crate) fn vary(seed: u64, key: &str, n: u64, spread: f64) -> u64 {
    let f: f64 = rng_for("vary", seed, key).random_range(-spread..=spread);
    let hi = super::validate::max_scaled(n, spread);
    (((n as f64) * (1.0 + f)).round() as u64).clamp(1, hi)
}

const WORDS: &[&str] = &[
    "the",
    "module",
    "request",
    "handler",
    "returns",
    "a",
    "value",
    "when",
    "cache",
    "is",
    "empty",
    "we",
    "should",
    "check",
    "that",
    "every",
    "test",
    "passes",
    "before",
    "merging",
    "branch",
    "into",
    "main",
    "config",
    "file",
    "loads",
    "from",
    "disk",
    "and",
    "parses",
    "each",
    "entry",
    "error",
    "path",
    "keeps",
    "its",
    "context",
    "so",
    "caller",
    "can",
    "retry",
    "later",
    "with",
    "backoff",
    "queue",
    "drains",
    "slowly",
    "under",
    "load",
    "worker",
    "thread",
    "picks",
    "next",
    "job",
    "after",
    "previous",
    "one",
    "finishes",
    "schema",
    "migration",
    "adds",
    "column",
    "index",
    "table",
    "query",
    "plan",
    "uses",
    "scan",
    "instead",
    "of",
    "lookup",
    "this",
    "change",
    "touches",
    "three",
    "files",
    "review",
    "notes",
    "mention",
    "naming",
    "style",
    "docs",
    "need",
    "update",
    "for",
    "new",
    "flag",
    "default",
    "stays",
    "off",
    "until",
    "release",
    "build",
    "script",
    "runs",
    "lints",
    "formatter",
    "on",
    "commit",
    "logs",
    "show",
    "warning",
    "about",
    "deprecated",
    "call",
    "site",
    "in",
    "parser",
    "tokenizer",
    "splits",
    "input",
    "at",
    "whitespace",
    "but",
    "keeps",
    "quoted",
    "strings",
    "intact",
    "benchmark",
    "shows",
    "small",
    "regression",
    "hot",
    "loop",
    "allocation",
    "can",
    "be",
    "hoisted",
    "out",
    "timeout",
    "fires",
    "if",
    "server",
    "does",
    "not",
    "answer",
    "within",
    "budget",
    "client",
    "sends",
    "header",
    "once",
    "per",
    "session",
    "state",
    "machine",
    "moves",
    "to",
    "done",
    "only",
    "all",
    "steps",
    "succeed",
    "otherwise",
    "it",
    "records",
    "reason",
];

const IDENTS: &[&str] = &[
    "buf", "cfg", "ctx", "entry", "item", "key", "len", "node", "offset", "path", "req", "resp",
    "row", "state", "token", "value", "count", "index", "limit", "batch", "cursor", "handle",
    "result", "source", "target", "queue", "writer", "reader", "cache", "span",
];

const TYPES: &[&str] = &[
    "Config", "Request", "Response", "Entry", "Node", "Session", "Buffer", "Cursor", "Record",
    "Batch", "Handle", "Token", "Span", "Index", "Store",
];

const VERBS: &[&str] = &[
    "load", "parse", "flush", "read", "write", "merge", "split", "apply", "check", "build",
    "resolve", "encode", "decode", "insert", "remove", "update", "render", "collect",
];

fn pick<'a>(rng: &mut ChaCha8Rng, from: &[&'a str]) -> &'a str {
    from[rng.random_range(0..from.len())]
}

/// Generated pieces (words with their trailing separator), concatenated in one buffer with
/// each piece's end offset: generating filler allocates nothing per piece.
#[derive(Debug, Default)]
pub(crate) struct Pieces {
    text: String,
    ends: Vec<usize>,
}

impl Pieces {
    fn clear(&mut self) {
        self.text.clear();
        self.ends.clear();
    }

    /// Ends the piece written since the previous one.
    fn end_piece(&mut self) {
        self.ends.push(self.text.len());
    }

    /// All pieces concatenated.
    fn as_str(&self) -> &str {
        &self.text
    }
}

/// Appends one sentence of prose (capitalised, ending with a period) as space-separated
/// pieces, each piece carrying its trailing separator.
fn prose_sentence(rng: &mut ChaCha8Rng, out: &mut Pieces) {
    let n = rng.random_range(6..15);
    for k in 0..n {
        let w = pick(rng, WORDS);
        if k == 0 {
            let mut c = w.chars();
            if let Some(f) = c.next() {
                out.text.extend(f.to_uppercase());
                out.text.push_str(c.as_str());
            }
        } else {
            out.text.push_str(w);
        }
        out.text.push_str(if k + 1 == n { ". " } else { " " });
        out.end_piece();
    }
}

/// Appends one line of Rust-like code as pieces (split at spaces; the last ends in `\n`).
fn code_line(rng: &mut ChaCha8Rng, depth: &mut usize, out: &mut Pieces) {
    let indent = "    ".repeat(*depth);
    let a = pick(rng, IDENTS);
    let b = pick(rng, IDENTS);
    let t = pick(rng, TYPES);
    let v = pick(rng, VERBS);
    let line = match (rng.random_range(0..10u32), *depth) {
        (0, 0) | (1, 0) | (2, 0) => {
            *depth = 1;
            format!("pub fn {v}_{a}({b}: &{t}) -> Result<{t}, Error> {{")
        }
        (_, 0) => format!("use crate::{a}::{t};"),
        (0, d) if d < 3 => {
            *depth += 1;
            format!("{indent}if {a}.len() > {} {{", rng.random_range(1..512u32))
        }
        (1, _) => {
            *depth -= 1;
            "    ".repeat(*depth) + "}"
        }
        (2, _) => {
            let w1 = pick(rng, WORDS);
            let w2 = pick(rng, WORDS);
            let w3 = pick(rng, WORDS);
            format!("{indent}// {w1} {w2} {w3}")
        }
        (3, _) => format!("{indent}let {a} = {b}.{v}()?;"),
        (4, _) => format!("{indent}let mut {a} = {t}::with_capacity({b}.len());"),
        (5, _) => format!("{indent}{a}.{v}(&{b})?;"),
        (6, _) => format!("{indent}return Ok({t}::from({a}));"),
        (7, _) => format!("{indent}for {a} in {b}.iter() {{ {a}.{v}()?; }}"),
        (8, _) => format!("{indent}debug_assert!(!{a}.is_empty(), \"{v} {b}\");"),
        _ => format!(
            "{indent}let {a}: {t} = {b}.{v}_{a}({});",
            rng.random_range(0..64u32)
        ),
    };
    // Indentation stays attached to the line's first word: a piece of bare spaces would
    // count as nothing in the text but as a minimum of one in the per-piece estimate.
    let body = line.trim_start_matches(' ');
    let indent = &line[..line.len() - body.len()];
    let mut parts = body.split(' ').peekable();
    let mut first = true;
    while let Some(p) = parts.next() {
        let sep = if parts.peek().is_some() { " " } else { "\n" };
        if first {
            out.text.push_str(indent);
        }
        first = false;
        out.text.push_str(p);
        out.text.push_str(sep);
        out.end_piece();
    }
}

/// What filler is measured with: a token count, and whether it is separable.
#[derive(Clone, Copy)]
pub struct Counter<'a> {
    count: &'a dyn Fn(&str) -> u64,
    separable: bool,
}

impl<'a> Counter<'a> {
    /// Any counter: every candidate prefix of a filler is counted whole.
    pub fn general(count: &'a dyn Fn(&str) -> u64) -> Self {
        Counter {
            count,
            separable: false,
        }
    }

    /// A counter that whitespace separates: `count(a + b) == count(a) + count(b)` whenever
    /// `a` ends or `b` starts with whitespace (nothing spans a space or a line break). The
    /// fake provider's tokenizer is one (its runs end at whitespace, a test checks it), a
    /// word counter is one; BPE tokenizers are not (cl100k merges a leading space into the
    /// next word). Filler then sums piece counts instead of recounting whole prefixes;
    /// debug builds check every such sum against a whole count.
    pub fn separable(count: &'a dyn Fn(&str) -> u64) -> Self {
        Counter {
            count,
            separable: true,
        }
    }
}

/// About `tokens` tokens of filler of `kind`, seeded by (`seed`, `key`).
///
/// The result is the longest prefix of a generated piece stream (words for prose, words of
/// lines for code) whose count is at most `tokens` — so it is within one word of the
/// target — with trailing whitespace removed.
///
/// Cost: one counter call per generated sentence or line, plus prefix counts: the
/// per-sentence counts give a guess (refined piece by piece inside the sentence where the
/// target falls) that is exact for a [separable](Counter::separable) counter, so the usual
/// case is two prefix checks (the guess fits, one more word does not). Other counters are
/// handled by galloping from the guess and a binary search. A separable counter's prefix
/// counts are sums of piece counts; any other counter's are whole counts of the prefix
/// (which then dominate). For a counter that never decreases as the prefix grows, the
/// result does not depend on the guess, and a separable counter gives the same result as
/// the same counter used as a general one.
pub(crate) fn filler(
    seed: u64,
    key: &str,
    tokens: u64,
    kind: FillerKind,
    counter: Counter<'_>,
) -> String {
    let separable = counter.separable;
    let counter = counter.count;
    if tokens == 0 {
        return String::new();
    }
    let mut rng = rng_for("filler", seed, &format!("{}/{key}", kind.as_str()));
    // All pieces concatenated, with each piece's end offset; each generated sentence or
    // line as (end, in pieces; its count).
    let mut text = String::new();
    let mut ends: Vec<usize> = Vec::new();
    let mut batches: Vec<(usize, u64)> = Vec::new();
    let mut depth = 0usize;
    let mut batch = Pieces::default();
    // A hard cap on generated text whatever the counter says (a counter that returns 0 or
    // a constant must not make this loop forever): 64 bytes per token is ten times what
    // any real tokenizer needs.
    let max_bytes = usize::try_from(tokens.saturating_mul(64))
        .unwrap_or(usize::MAX)
        .saturating_add(4096);
    let mut grow_to =
        |goal: u64, text: &mut String, ends: &mut Vec<usize>, batches: &mut Vec<(usize, u64)>| {
            let mut have: u64 = batches.iter().map(|(_, c)| (*c).max(1)).sum();
            while have < goal && text.len() < max_bytes {
                batch.clear();
                match kind {
                    FillerKind::Prose => prose_sentence(&mut rng, &mut batch),
                    FillerKind::Code => code_line(&mut rng, &mut depth, &mut batch),
                }
                let c = counter(batch.as_str());
                // Progress even if the counter says 0.
                have += c.max(1);
                let base = text.len();
                text.push_str(batch.as_str());
                ends.extend(batch.ends.iter().map(|e| base + e));
                batches.push((ends.len(), c));
            }
        };
    let mut goal = tokens.saturating_add(tokens / 8).saturating_add(16);
    let mut rounds = 0;
    loop {
        grow_to(goal, &mut text, &mut ends, &mut batches);
        let n = ends.len();
        let prefix = |k: usize| -> &str {
            match k {
                0 => "",
                _ => text[..ends[k - 1]].trim_end(),
            }
        };
        // The count of piece `k` alone.
        let piece = |k: usize| {
            let start = if k == 0 { 0 } else { ends[k - 1] };
            counter(&text[start..ends[k]])
        };
        // Prefix sums of the sentences' counts: sums[b] = the first b sentences.
        let sums: Vec<u64> = std::iter::once(0)
            .chain(batches.iter().scan(0u64, |acc, (_, c)| {
                *acc += c;
                Some(*acc)
            }))
            .collect();
        // A separable counter's count of prefix(k): the pieces' counts summed (whole
        // sentences from `sums`, the rest piece by piece), less its trailing whitespace's.
        let summed = |k: usize| -> u64 {
            let b = batches.partition_point(|(end, _)| *end <= k);
            let first = if b == 0 { 0 } else { batches[b - 1].0 };
            let total = sums[b] + (first..k).map(piece).sum::<u64>();
            let full = &text[..ends[k - 1]];
            let tail = &full[full.trim_end().len()..];
            total.saturating_sub(counter(tail))
        };
        let count = |k: usize| -> u64 {
            if separable {
                let n = summed(k);
                debug_assert_eq!(n, counter(prefix(k)), "a counter declared separable is not");
                n
            } else {
                counter(prefix(k))
            }
        };
        let fits = |k: usize| k == 0 || count(k) <= tokens;
        let mut guess = 0usize;
        let mut sum = 0u64;
        for &(end, c) in &batches {
            if sum + c <= tokens {
                sum += c;
                guess = end;
                continue;
            }
            // The target falls inside this sentence: piece by piece.
            let first = guess;
            for k in first..end {
                let c = piece(k);
                if sum + c > tokens {
                    break;
                }
                sum += c;
                guess = k + 1;
            }
            break;
        }
        let guess = guess.clamp(1, n);
        // Bracket the answer by galloping from the guess: fits(lo) holds, answer ≤ hi.
        let (mut lo, mut hi) = if fits(guess) {
            let (mut lo, mut step) = (guess, 1usize);
            loop {
                let next = lo + step;
                if next > n {
                    break (lo, n);
                }
                if fits(next) {
                    lo = next;
                    step *= 2;
                } else {
                    break (lo, next - 1);
                }
            }
        } else {
            let (mut bad, mut step) = (guess, 1usize);
            loop {
                let cand = bad.saturating_sub(step);
                if fits(cand) {
                    break (cand, bad - 1);
                }
                bad = cand;
                step *= 2;
            }
        };
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if fits(mid) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        // Everything generated fits: the per-piece counts overestimated the whole text
        // (e.g. rounding per piece). Generate more and search again.
        if lo == n && rounds < 4 && text.len() < max_bytes {
            goal = goal.saturating_mul(2);
            rounds += 1;
            continue;
        }
        return prefix(lo.max(1)).to_string();
    }
}

/// Most properties of one generated tool (far above what `MAX_SCHEMA_TOKENS` needs).
const MAX_PROPERTIES: usize = 4096;

const PROPERTY_NAMES: &[(&str, &str)] = &[
    ("path", "string"),
    ("query", "string"),
    ("limit", "integer"),
    ("offset", "integer"),
    ("recursive", "boolean"),
    ("encoding", "string"),
    ("timeout_ms", "integer"),
    ("branch", "string"),
    ("pattern", "string"),
    ("include_hidden", "boolean"),
    ("max_results", "integer"),
    ("format", "string"),
    ("language", "string"),
    ("dry_run", "boolean"),
    ("workspace", "string"),
    ("cursor", "string"),
    ("page_size", "integer"),
    ("sort_by", "string"),
    ("ascending", "boolean"),
    ("labels", "array"),
    ("owner", "string"),
    ("repository", "string"),
    ("commit", "string"),
    ("since", "string"),
    ("until", "string"),
    ("verbose", "boolean"),
    ("retries", "integer"),
    ("environment", "string"),
    ("region", "string"),
    ("tags", "array"),
];

/// The synthetic catalogue `{prefix}001 …`: `count` tools whose compact JSON definition
/// (`name`, `description`, `parameters`) is about `schema_tokens` tokens each — the first
/// size at or above the target, so at most one property over.
///
/// Seeded by (`seed`, `prefix`, tool number) only, so a tool does not change when the
/// catalogue grows or another catalogue is added before it.
pub(crate) fn tool_catalogue(
    prefix: &str,
    count: u64,
    schema_tokens: u64,
    seed: u64,
    counter: &dyn Fn(&str) -> u64,
) -> Vec<ToolDefinition> {
    (1..=count)
        .map(|n| synthetic_tool(prefix, n, schema_tokens, seed, counter))
        .collect()
}

/// Tokens of a definition's compact JSON, serialized exactly as the estimators and the
/// fake provider serialize a [`ToolDefinition`] (framing excluded).
fn tool_tokens(
    name: &str,
    description: &str,
    parameters: &Value,
    counter: &dyn Fn(&str) -> u64,
) -> u64 {
    let tool = ToolDefinition {
        name: name.to_string(),
        description: description.to_string(),
        parameters: parameters.clone(),
    };
    counter(&serde_json::to_string(&tool).unwrap_or_default())
}

fn synthetic_tool(
    prefix: &str,
    n: u64,
    schema_tokens: u64,
    seed: u64,
    counter: &dyn Fn(&str) -> u64,
) -> ToolDefinition {
    let name = format!("{prefix}{n:03}");
    let mut rng = rng_for("tool", seed, &name);
    let verb = pick(&mut rng, VERBS);
    let object = pick(&mut rng, TYPES).to_lowercase();
    let mut words = Pieces::default();
    prose_sentence(&mut rng, &mut words);
    let description = format!(
        "{}s a {object} in the workspace. {}",
        capitalise(verb),
        words.as_str().trim_end()
    );
    let mut properties = Map::new();
    let mut required: Vec<Value> = Vec::new();
    let start = rng.random_range(0..PROPERTY_NAMES.len());
    let mut k = 0usize;
    let params = |properties: &Map<String, Value>, required: &[Value]| json!({"type": "object", "properties": properties, "required": required});
    let mut add_property =
        |k: usize, properties: &mut Map<String, Value>, required: &mut Vec<Value>| {
            let (pname, ptype) = PROPERTY_NAMES[(start + k) % PROPERTY_NAMES.len()];
            let round = k / PROPERTY_NAMES.len();
            let pname = if round == 0 {
                pname.to_string()
            } else {
                format!("{pname}_{}", round + 1)
            };
            let mut doc = Pieces::default();
            prose_sentence(&mut rng, &mut doc);
            let mut prop = Map::new();
            prop.insert("type".into(), Value::String(ptype.to_string()));
            if ptype == "array" {
                prop.insert("items".into(), json!({"type": "string"}));
            }
            prop.insert(
                "description".into(),
                Value::String(doc.as_str().trim_end().to_string()),
            );
            if k < 2 {
                required.push(Value::String(pname.clone()));
            }
            // What this property adds to the serialized definition, counted on its own.
            let piece = format!("{},", json!({ pname.clone(): prop }));
            properties.insert(pname, Value::Object(prop));
            piece
        };
    // Grow by per-property estimates, then confirm with a whole-definition count and
    // top up the measured deficit the same way (converges in one or two rounds).
    // Recounting the whole definition after every property would be quadratic in
    // `schema_tokens`.
    loop {
        let whole = tool_tokens(
            &name,
            &description,
            &params(&properties, &required),
            counter,
        );
        if whole >= schema_tokens || k >= MAX_PROPERTIES {
            break;
        }
        let deficit = schema_tokens - whole;
        let mut added = 0;
        while added < deficit && k < MAX_PROPERTIES {
            let piece = add_property(k, &mut properties, &mut required);
            added += counter(&piece).max(1);
            k += 1;
        }
    }
    ToolDefinition {
        name,
        description,
        parameters: params(&properties, &required),
    }
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> u64 {
        s.split_whitespace().count() as u64
    }

    fn quarter(s: &str) -> u64 {
        (s.len() as u64).div_ceil(4)
    }

    #[test]
    fn filler_is_deterministic_and_close_to_size() {
        for kind in [FillerKind::Prose, FillerKind::Code] {
            for counter in [&words as &dyn Fn(&str) -> u64, &quarter] {
                for n in [1u64, 7, 80, 600, 3000] {
                    let a = filler(42, "s0/r3", n, kind, Counter::general(counter));
                    let b = filler(42, "s0/r3", n, kind, Counter::general(counter));
                    assert_eq!(a, b);
                    let c = counter(&a);
                    assert!(c <= n || n < 3, "{kind:?} {n}: {c}");
                    assert!(c + 12 >= n, "{kind:?} {n}: only {c}");
                }
            }
        }
        assert_ne!(
            filler(1, "k", 100, FillerKind::Prose, Counter::general(&words)),
            filler(2, "k", 100, FillerKind::Prose, Counter::general(&words))
        );
        assert_ne!(
            filler(1, "k", 100, FillerKind::Prose, Counter::general(&words)),
            filler(1, "j", 100, FillerKind::Prose, Counter::general(&words))
        );
    }

    /// A separable counter sizes filler exactly as the same counter used as a general one
    /// (debug builds also check each prefix sum against a whole count).
    #[test]
    fn separable_counting_gives_the_general_result() {
        let fake = ctxbench_adapters::fake::FakeTokenizer::new();
        let fake = |t: &str| fake.count_text(t);
        for kind in [FillerKind::Prose, FillerKind::Code] {
            for counter in [&words as &dyn Fn(&str) -> u64, &fake] {
                for n in [1u64, 2, 7, 80, 105, 600, 3000] {
                    for seed in 0..4 {
                        assert_eq!(
                            filler(seed, "k", n, kind, Counter::separable(counter)),
                            filler(seed, "k", n, kind, Counter::general(counter)),
                            "{kind:?} {n} {seed}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn filler_terminates_with_degenerate_counters() {
        let zero = |_: &str| 0u64;
        let one = |_: &str| 1u64;
        let huge = |_: &str| 1_000u64;
        let counters: [&dyn Fn(&str) -> u64; 3] = [&zero, &one, &huge];
        for counter in counters {
            let s = filler(3, "k", 200, FillerKind::Code, Counter::general(counter));
            assert!(!s.is_empty());
            assert!(s.len() <= 200 * 64 + 4096 + 200, "{}", s.len());
        }
    }

    #[test]
    fn catalogue_is_deterministic_sized_and_named() {
        let a = tool_catalogue("plugin_", 5, 120, 0, &quarter);
        let b = tool_catalogue("plugin_", 5, 120, 0, &quarter);
        assert_eq!(a, b);
        assert_eq!(a[0].name, "plugin_001");
        assert_eq!(a[4].name, "plugin_005");
        for t in &a {
            let c = tool_tokens(&t.name, &t.description, &t.parameters, &quarter);
            assert!((120..220).contains(&c), "{}: {c}", t.name);
        }
        // Growing the catalogue does not change the existing tools.
        let bigger = tool_catalogue("plugin_", 8, 120, 0, &quarter);
        assert_eq!(&bigger[..5], &a[..]);
        assert_ne!(tool_catalogue("plugin_", 1, 120, 1, &quarter)[0], a[0]);
    }
}
