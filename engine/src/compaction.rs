//! Selection and the compaction transaction (seed 000 §Selection algorithm; seed 004's
//! single transaction with one typed outcome).
//!
//! Every trigger — manual `/compact`, the automatic budget check before a request, and
//! recovery from a provider overflow — runs the same transaction:
//!
//! 1. read the transcript and the current checkpoint;
//! 2. select the verbatim tail: whole closed turns, newest first, up to
//!    `recent_tail_tokens` (a turn is atomic, so a tool call is never split from its result
//!    or a parallel batch from its results); the eligible prefix is the contiguous run of
//!    closed turns before it;
//! 3. nothing new to cover → `unchanged / already_compacted` (or `failed /
//!    no_safe_completed_span` when there is no completed span at all, with zero summarizer
//!    calls);
//! 4. summarize the previous checkpoint plus the newly covered messages (rolling);
//! 5. validate, re-estimate the complete request; if it does not fit, back down the tail
//!    (fewer verbatim turns) down to the hard floor — zero verbatim history turns, the
//!    checkpoint and the current turn — and try again;
//! 6. guard against no progress (too little reclaimed, a source already compacted in this
//!    run, too many compactions for one input);
//! 7. persist the checkpoint atomically → `compacted {checkpoint}`; any failure is fail-open:
//!    the previous valid checkpoint and the transcript stay.

use std::collections::HashSet;

use crate::session::{Entry, TurnSpan, TurnStatus};
pub use ctxbench_sut::reasons::{
    COMPACTION_FAILED as FAILED_REASONS, UNCHANGED as UNCHANGED_REASONS,
};
pub use ctxbench_sut::{CompactionOutcome, Trigger};

/// Smallest reclaim worth a checkpoint (Forge's documented minimum useful reclaim).
pub const MIN_USEFUL_RECLAIM_TOKENS: u64 = 128;
/// Most compactions for one input (one user turn).
pub const MAX_COMPACTIONS_PER_TURN: u32 = 3;
/// Most summarizer calls one transaction may make while backing down the tail.
pub const MAX_SUMMARIZER_CALLS_PER_TRANSACTION: usize = 3;

/// Closed turns whose messages lie entirely in `[from, to)`, in order.
pub fn closed_turns(turns: &[TurnSpan], from: usize, to: usize) -> Vec<(usize, usize)> {
    turns
        .iter()
        .filter(|t| {
            t.status != TurnStatus::Open && t.start >= from && t.end <= to && t.end > t.start
        })
        .map(|t| (t.start, t.end))
        .collect()
}

/// Tail starts to try, largest verbatim tail first, each on a turn boundary (not yet
/// filtered against what a checkpoint already covers).
///
/// The first candidate keeps whole turns, newest first, while they fit `tail_budget`; the
/// next ones back down: half the turns, then none (the hard floor: the checkpoint and the
/// current turn carry everything).
pub fn tail_candidates(
    spans: &[(usize, usize)],
    covered: usize,
    history_end: usize,
    tail_budget: u64,
    tokens: &dyn Fn(usize, usize) -> u64,
) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut used = 0u64;
    let mut kept = 0usize;
    let mut first = history_end;
    for &(s, e) in spans.iter().rev() {
        let t = tokens(s, e);
        if used + t > tail_budget {
            break;
        }
        used += t;
        kept += 1;
        first = s;
    }
    starts.push(first);
    if kept > 1 {
        let half = kept / 2;
        let idx = spans.len() - half;
        starts.push(spans[idx].0);
    }
    starts.push(history_end);
    let mut seen = HashSet::new();
    let _ = covered;
    starts.into_iter().filter(|&s| seen.insert(s)).collect()
}

/// Turn number (1-based) of each entry in `[from, to)`.
pub fn turn_numbers(turns: &[TurnSpan], from: usize, to: usize) -> Vec<usize> {
    let mut out = Vec::with_capacity(to.saturating_sub(from));
    let mut t = 0usize;
    for i in from..to {
        while t + 1 < turns.len() && turns[t].end <= i && turns[t + 1].start <= i {
            t += 1;
        }
        out.push(if turns.is_empty() { 0 } else { t + 1 });
    }
    out
}

/// Content hashes of a range, for the same-source guard.
pub fn source_key(entries: &[Entry]) -> String {
    super::checkpoint::range_hash(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(start: usize, end: usize) -> TurnSpan {
        TurnSpan {
            start,
            end,
            status: TurnStatus::Completed,
        }
    }

    #[test]
    fn tail_is_whole_turns_within_budget_then_backs_down_to_the_floor() {
        let turns = vec![
            span(0, 2),
            span(2, 6),
            span(6, 8),
            span(8, 12),
            span(12, 14),
        ];
        let spans = closed_turns(&turns, 0, 14);
        // Each message costs 10 tokens.
        let tok = |s: usize, e: usize| ((e - s) * 10) as u64;
        // Budget 65: turns [12,14) (20) + [8,12) (40) = 60 fit; [6,8) would make 80.
        let c = tail_candidates(&spans, 0, 14, 65, &tok);
        assert_eq!(c, vec![8, 12, 14]);
        // An oversized newest turn: the verbatim tail is empty at once, it is summarized.
        assert_eq!(tail_candidates(&spans, 0, 14, 15, &tok), vec![14]);
    }

    #[test]
    fn empty_odd_and_maximum_histories() {
        let tok = |s: usize, e: usize| ((e - s) * 10) as u64;
        // Empty: nothing to keep, the only candidate is the (empty) end.
        assert_eq!(tail_candidates(&[], 0, 0, 100, &tok), vec![0]);
        // One odd-sized turn (3 messages) that fits: kept verbatim, then the floor.
        let one = closed_turns(&[span(0, 3)], 0, 3);
        assert_eq!(tail_candidates(&one, 0, 3, 100, &tok), vec![0, 3]);
        // A maximum-sized history: 10,000 turns; the tail still holds whole turns only and
        // the candidates stay few (bounded summarizer calls).
        let many: Vec<TurnSpan> = (0..10_000).map(|i| span(i * 2, i * 2 + 2)).collect();
        let spans = closed_turns(&many, 0, 20_000);
        let c = tail_candidates(&spans, 0, 20_000, 1_000, &tok);
        assert_eq!(c, vec![20_000 - 100, 20_000 - 50, 20_000]);
        assert!(
            c.iter().all(|s| s % 2 == 0),
            "every start is a turn boundary"
        );
    }

    #[test]
    fn open_turns_are_never_eligible() {
        let turns = vec![
            span(0, 2),
            TurnSpan {
                start: 2,
                end: 5,
                status: TurnStatus::Open,
            },
        ];
        assert_eq!(closed_turns(&turns, 0, 5), vec![(0, 2)]);
    }

    #[test]
    fn turn_numbers_follow_spans() {
        let turns = vec![span(0, 2), span(2, 5)];
        assert_eq!(turn_numbers(&turns, 0, 5), vec![1, 1, 2, 2, 2]);
        assert_eq!(turn_numbers(&turns, 3, 5), vec![2, 2]);
    }
}
