//! `no-thrash`: compaction stops when it stops helping (seed 000 §No-progress guard; the
//! thrash-guard scenario).
//!
//! Recomputed from the requests the system sent — never from what it says it reclaimed.
//! A **compaction** is observed as a summarization request, or as a change of the memory a
//! turn request carries (memory by the declared markup or the default rule). Per input
//! (script step), leaving out a user's own `/compact` steps:
//!
//! - at most `max_compactions_per_input` compactions (grader parameter, default
//!   [`DEFAULT_MAX_COMPACTIONS`]): the larger of the summarization requests sent and the
//!   memory changes seen;
//! - no two compactions in a row reclaim less than `min_reclaim_tokens` (default
//!   [`DEFAULT_MIN_RECLAIM`]): a system may find once that compacting no longer helps, but
//!   it must then stop, not compact again for as little. Reclaim is counted with the
//!   provider's tokenizer as the old memory plus the conversation messages the new request
//!   no longer carries, minus the new memory. The first request after a restart is not
//!   judged (the memory may be rebuilt from disk).

use std::collections::{BTreeMap, HashSet};

use ctxbench_adapters::fake::layout::Place;
use ctxbench_adapters::fake::FakeTokenizer;
use ctxbench_adapters::Role;
use ctxbench_harness::scenario::Step;
use ctxbench_harness::storage::schema::{Evidence, Verdict};

use crate::common::memory_rule_words;
use crate::{verdict, GradeContext, Grader};

/// Default most compactions one input may trigger before it counts as thrashing.
pub const DEFAULT_MAX_COMPACTIONS: u64 = 3;
/// Default smallest reclaim (provider tokens) that makes a compaction worth it: half of
/// Forge's documented minimum useful reclaim, so estimator differences cannot fail a system
/// that applies Forge's own guard.
pub const DEFAULT_MIN_RECLAIM: u64 = 64;

/// The no-thrash grader.
pub struct NoThrash;

fn param(ctx: &GradeContext<'_>, key: &str, default: u64) -> u64 {
    ctx.params
        .get(key)
        .and_then(|v| v.as_u64())
        .unwrap_or(default)
}

impl Grader for NoThrash {
    fn name(&self) -> &'static str {
        "no-thrash"
    }

    fn grade(&self, ctx: &GradeContext<'_>) -> Verdict {
        let rec = ctx.record;
        let max = param(ctx, "max_compactions_per_input", DEFAULT_MAX_COMPACTIONS);
        let min_reclaim = param(ctx, "min_reclaim_tokens", DEFAULT_MIN_RECLAIM);
        let tok = FakeTokenizer::new();
        let manual: HashSet<u64> = rec
            .steps
            .iter()
            .enumerate()
            .filter(|(_, s)| matches!(s, Step::Compact { .. }))
            .map(|(i, _)| i as u64)
            .collect();
        let restart_steps: Vec<u64> = rec
            .steps
            .iter()
            .enumerate()
            .filter(|(_, s)| matches!(s, Step::Restart))
            .map(|(i, _)| i as u64)
            .collect();
        let mut summaries: BTreeMap<u64, u64> = BTreeMap::new();
        let mut changes: BTreeMap<u64, u64> = BTreeMap::new();
        let mut failures = Vec::new();
        let mut prev: Option<(u64, String, Vec<String>)> = None; // (step, memory, hashes)
                                                                 // The last compaction, when it reclaimed too little: (request, reclaimed).
        let mut small: Option<(u64, u64)> = None;
        for r in rec.requests.iter().filter(|r| r.row.sent) {
            let step = r.row.step;
            if manual.contains(&step) {
                continue;
            }
            if r.row.purpose == "summary" {
                *summaries.entry(step).or_default() += 1;
                continue;
            }
            if r.row.purpose != "turn" {
                continue;
            }
            let memory: String = ctx
                .read
                .pieces(r, Place::Memory)
                .map(|s| s.text)
                .collect::<Vec<_>>()
                .join("\n");
            if let Some((prev_step, prev_memory, prev_hashes)) = &prev {
                let restarted = restart_steps.iter().any(|&s| *prev_step < s && s < step);
                if !memory.trim().is_empty() && memory != *prev_memory && !restarted {
                    *changes.entry(step).or_default() += 1;
                    let now: HashSet<&str> =
                        r.row.message_hashes.iter().map(String::as_str).collect();
                    let covered: u64 = prev_hashes
                        .iter()
                        .filter(|h| !now.contains(h.as_str()))
                        .filter_map(|h| rec.messages.get(h))
                        .filter(|m| m.role != Role::System)
                        .map(|m| tok.count_text(&m.content))
                        .sum();
                    let before = tok.count_text(prev_memory) + covered;
                    let after = tok.count_text(&memory);
                    let reclaimed = before.saturating_sub(after);
                    let again = small.replace((r.row.seq, reclaimed));
                    if reclaimed >= min_reclaim {
                        small = None;
                    } else if let Some((first, first_reclaimed)) = again {
                        failures.push(Evidence {
                            request: Some(r.row.seq),
                            step: Some(step),
                            expected: Some(format!(
                                "a compaction reclaims ≥ {min_reclaim} tokens, or the system \
                                 stops compacting"
                            )),
                            seen: Some(format!(
                                "new memory of {after} tokens replaced {before} (old memory and \
                                 the messages it now covers): {reclaimed} reclaimed, after \
                                 request {first} reclaimed {first_reclaimed}"
                            )),
                            note: format!(
                                "request {} (step {step}) compacted again for only {reclaimed} \
                                 tokens: compaction no longer helped and did not stop",
                                r.row.seq
                            ),
                            ..Default::default()
                        });
                    }
                }
            }
            prev = Some((step, memory, r.row.message_hashes.clone()));
        }
        let mut most = 0;
        for step in summaries
            .keys()
            .chain(changes.keys())
            .copied()
            .collect::<HashSet<_>>()
        {
            let n = summaries
                .get(&step)
                .copied()
                .unwrap_or(0)
                .max(changes.get(&step).copied().unwrap_or(0));
            most = most.max(n);
            if n > max {
                failures.push(Evidence {
                    step: Some(step),
                    expected: Some(format!("≤ {max} compactions for one input")),
                    seen: Some(format!(
                        "{} summarization request(s), {} memory change(s)",
                        summaries.get(&step).copied().unwrap_or(0),
                        changes.get(&step).copied().unwrap_or(0)
                    )),
                    note: format!("step {step} kept compacting: {n} compactions for one input"),
                    ..Default::default()
                });
            }
        }
        failures.sort_by_key(|e| (e.step, e.request));
        verdict(
            self.name(),
            format!(
                "{} compaction(s) observed, at most {most} per input, never two in a row \
                 reclaiming < {min_reclaim} tokens ({})",
                summaries
                    .values()
                    .sum::<u64>()
                    .max(changes.values().sum::<u64>()),
                memory_rule_words(rec)
            ),
            failures,
        )
    }
}
