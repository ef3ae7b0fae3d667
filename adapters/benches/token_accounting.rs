//! Token accounting at scale: what an engine pays to budget every request of a long
//! session, against tokenizing its transcript once.
//!
//! Each turn appends a user message and an assistant answer (content hash computed once,
//! when the message enters the transcript, as the reference engine does), then estimates
//! the whole request — the worst case, `off` mode, where every request carries the entire
//! history. Per-message counts are cached by content hash, so each message is tokenized
//! once and later requests only sum cached counts.
//!
//! Every measurement uses estimators that do not share counts with the rest of the process
//! (`RequestEstimator::unshared`), so each starts cold whatever ran before it. The last
//! line measures the process-wide memo: a second, independent estimate of the session's
//! final request (what the harness records as `observed_estimate`) after the engine's
//! estimator has counted it, with and without a memo shared between the two.
//!
//! Run: `cargo bench -p ctxbench-adapters --bench token_accounting [-- TURNS]`
//! (default 2000; it also runs 2×TURNS and prints the ratio).

use std::sync::Arc;
use std::time::Instant;

use ctxbench_adapters::estimate::{EstimatorKind, RequestEstimator, SharedCounts, TokenLedger};
use ctxbench_adapters::{ContentHash, Message, ModelRequest};

fn turn_text(i: usize, words: usize) -> String {
    // Varied prose so BPE merges behave like real text, deterministic per turn.
    const VOCAB: &[&str] = &[
        "refactor",
        "module",
        "tests",
        "green",
        "database",
        "PostgreSQL",
        "latency",
        "budget",
        "compaction",
        "checkpoint",
        "the",
        "and",
        "of",
        "to",
        "in",
        "function",
        "returns",
        "error",
        "handler",
        "config",
        "deploy",
        "region",
        "retry",
        "overflow",
        "window",
    ];
    let mut s = format!("Turn {i}: ");
    let mut x = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for _ in 0..words {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.push_str(VOCAB[(x % VOCAB.len() as u64) as usize]);
        s.push(' ');
    }
    s
}

fn transcript(turns: usize) -> Vec<Message> {
    let mut out = Vec::with_capacity(turns * 2 + 1);
    out.push(Message::system("You are a coding agent."));
    for i in 0..turns {
        out.push(Message::user(turn_text(i, 60)));
        out.push(Message::assistant(turn_text(i + 1_000_000, 40)));
    }
    out
}

/// Seconds to tokenize every message once (no cache).
fn tokenize_once(msgs: &[Message]) -> (f64, u64) {
    let e = RequestEstimator::unshared(EstimatorKind::Cl100kBase);
    let t0 = Instant::now();
    let total: u64 = msgs.iter().map(|m| e.message_tokens_uncached(m)).sum();
    (t0.elapsed().as_secs_f64(), total)
}

/// Seconds to budget every request of the session the way the reference engine does: each
/// turn's messages enter the transcript (hashed once) and the running [`TokenLedger`]; a
/// request's history is one `range` — whatever its length.
fn account_session(msgs: &[Message]) -> (f64, u64) {
    let e = RequestEstimator::unshared(EstimatorKind::Cl100kBase);
    let t0 = Instant::now();
    let mut ledger = TokenLedger::default();
    let mut last = 0;
    let h = msgs[0].content_hash();
    ledger.push(&e, &msgs[0], &h);
    for end in (3..=msgs.len()).step_by(2) {
        for m in &msgs[end - 2..end] {
            let h: ContentHash = m.content_hash();
            ledger.push(&e, m, &h);
        }
        last = RequestEstimator::request_priming() + ledger.range(0, end);
    }
    (t0.elapsed().as_secs_f64(), last)
}

/// The same session summing every request's history message by message (cached counts):
/// what the ledger replaces, for comparison.
fn account_session_summing(msgs: &[Message]) -> (f64, u64) {
    let e = RequestEstimator::unshared(EstimatorKind::Cl100kBase);
    let t0 = Instant::now();
    let mut hashes: Vec<ContentHash> = Vec::with_capacity(msgs.len());
    let mut last = 0;
    hashes.push(msgs[0].content_hash());
    for end in (3..=msgs.len()).step_by(2) {
        hashes.push(msgs[end - 2].content_hash());
        hashes.push(msgs[end - 1].content_hash());
        last = RequestEstimator::request_priming()
            + e.sum_message_tokens(msgs[..end].iter().zip(&hashes));
    }
    (t0.elapsed().as_secs_f64(), last)
}

/// Seconds for a second estimator to count the session's whole final request after the
/// engine's estimator counted every message: `shared` gives both one memo (as in a trial),
/// otherwise the second tokenizes everything again.
fn second_estimate(msgs: &[Message], shared: bool) -> (f64, u64) {
    let memo = Arc::new(SharedCounts::new(msgs.len().max(1)));
    let make = || {
        if shared {
            RequestEstimator::sharing(EstimatorKind::Cl100kBase, memo.clone())
        } else {
            RequestEstimator::unshared(EstimatorKind::Cl100kBase)
        }
    };
    let engine = make();
    for m in msgs {
        engine.message_tokens(m, &m.content_hash());
    }
    let req = ModelRequest {
        model: "m".into(),
        messages: msgs.to_vec(),
        tools: vec![],
        max_output_tokens: 1,
    };
    let harness = make();
    let t0 = Instant::now();
    let n = harness.request_tokens(&req);
    (t0.elapsed().as_secs_f64(), n)
}

fn main() {
    let turns: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(2000);
    let small = transcript(turns);
    let large = transcript(turns * 2);
    // Warm the process-wide BPE tables so neither side pays for loading them.
    let _ = tokenize_once(&small[..10]);

    let (once_s, tokens) = tokenize_once(&small);
    let (acct_s, last) = account_session(&small);
    let (acct_l, _) = account_session(&large);
    let (sum_s, sum_last) = account_session_summing(&small);
    let (sum_l, _) = account_session_summing(&large);
    let (second_u, n_u) = second_estimate(&small, false);
    let (second_s, n_s) = second_estimate(&small, true);
    assert_eq!(sum_last, last, "the ledger and per-request sums must agree");
    assert_eq!(n_u, n_s, "a memoized count is the same count");
    assert_eq!(n_u, last, "the independent estimate agrees with the ledger");
    println!("token accounting, cl100k_base, {turns} turns ({tokens} transcript tokens)");
    println!("  tokenize transcript once      {:>9.1} ms", once_s * 1e3);
    println!(
        "  budget all {turns} requests    {:>9.1} ms   ({:.2}x tokenizing once; last request {last} tokens)",
        acct_s * 1e3,
        acct_s / once_s
    );
    println!(
        "  budget all {} requests    {:>9.1} ms   ({:.2}x the {turns}-turn session)",
        turns * 2,
        acct_l * 1e3,
        acct_l / acct_s
    );
    println!(
        "  (per-request sums instead:  {:>7.1} ms = {:.2}x once; doubled {:.2}x)",
        sum_s * 1e3,
        sum_s / once_s,
        sum_l / sum_s
    );
    println!(
        "  second estimate of the last request: {:.1} ms re-tokenizing, {:.1} ms with the shared memo ({:.0}x)",
        second_u * 1e3,
        second_s * 1e3,
        second_u / second_s.max(1e-9)
    );
}
