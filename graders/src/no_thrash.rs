//! `no-thrash`: compaction stops when it stops helping (seed 000 §No-progress guard; the
//! thrash-guard scenario).
//!
//! Per run (script step), counting only compactions the engine triggered itself
//! (automatic and overflow recovery, not a user's `/compact`):
//!
//! - at most [`MAX_COMPACTIONS_PER_TURN`] compaction transactions start;
//! - no two completed compactions cover the same source (the same `summarized_through`):
//!   the same source is never compacted twice for one input;
//! - every completed compaction reclaimed at least [`MIN_USEFUL_RECLAIM_TOKENS`].

use std::collections::BTreeMap;

/// Most compactions one input may trigger before it counts as thrashing.
const MAX_COMPACTIONS_PER_TURN: u32 = 3;
/// Smallest reclaim that makes a compaction worth it.
const MIN_USEFUL_RECLAIM_TOKENS: u64 = 128;
use ctxbench_harness::storage::schema::{Evidence, Verdict};
use ctxbench_harness::sut::EngineEvent;

use crate::{verdict, GradeContext, Grader};

/// The no-thrash grader.
pub struct NoThrash;

impl Grader for NoThrash {
    fn name(&self) -> &'static str {
        "no-thrash"
    }

    fn grade(&self, ctx: &GradeContext<'_>) -> Verdict {
        if crate::common::black_box(ctx.record) {
            return crate::skip(self.name(), crate::common::NO_EVENTS);
        }
        let rec = ctx.record;
        let mut failures = Vec::new();
        let mut started: BTreeMap<u64, u32> = BTreeMap::new();
        let mut sources: BTreeMap<(u64, u64), u64> = BTreeMap::new(); // (step, through) → event
        let mut completed = 0;
        for e in &rec.events {
            match &e.event {
                EngineEvent::CompactionStarted { trigger, .. } if trigger != "manual" => {
                    let n = started.entry(e.step).or_default();
                    *n += 1;
                    if *n == MAX_COMPACTIONS_PER_TURN + 1 {
                        failures.push(Evidence {
                            step: Some(e.step),
                            expected: Some(format!(
                                "≤ {MAX_COMPACTIONS_PER_TURN} compactions for one input"
                            )),
                            seen: Some(format!("compaction {n} started (event {})", e.seq)),
                            note: format!(
                                "step {} kept compacting: more than {MAX_COMPACTIONS_PER_TURN} \
                                 compactions for one input",
                                e.step
                            ),
                            ..Default::default()
                        });
                    }
                }
                EngineEvent::CompactionCompleted(c) if c.trigger != "manual" => {
                    completed += 1;
                    if let Some(first) = sources.insert((e.step, c.summarized_through), e.seq) {
                        failures.push(Evidence {
                            step: Some(e.step),
                            expected: Some("each source compacted once per input".into()),
                            seen: Some(format!(
                                "messages {}–{} compacted again (events {first} and {})",
                                c.summarized_from, c.summarized_through, e.seq
                            )),
                            hashes: vec![c.checkpoint_id.clone()],
                            note: format!(
                                "step {}: the same source was compacted twice for one input",
                                e.step
                            ),
                            ..Default::default()
                        });
                    }
                    if c.reclaimed_tokens < MIN_USEFUL_RECLAIM_TOKENS {
                        failures.push(Evidence {
                            step: Some(e.step),
                            expected: Some(format!(
                                "≥ {MIN_USEFUL_RECLAIM_TOKENS} tokens reclaimed, or a typed \
                                 no_progress stop"
                            )),
                            seen: Some(format!(
                                "{} tokens reclaimed by {} ({} trigger)",
                                c.reclaimed_tokens, c.checkpoint_id, c.trigger
                            )),
                            hashes: vec![c.checkpoint_id.clone()],
                            note: format!(
                                "step {}: a compaction reclaimed only {} tokens and was kept",
                                e.step, c.reclaimed_tokens
                            ),
                            ..Default::default()
                        });
                    }
                }
                _ => {}
            }
        }
        verdict(
            self.name(),
            format!(
                "{completed} engine-triggered compaction(s), each useful and on a new source; \
                 at most {} per input",
                started.values().max().copied().unwrap_or(0)
            ),
            failures,
        )
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::grade_with;
    use ctxbench_engine::mutants::Mutation;
    use ctxbench_harness::storage::schema::VerdictStatus;
    use ctxbench_harness::Mode;

    /// A large fixed instruction block and small turns: once the history is compacted, each
    /// further compaction can only reclaim a few turns' worth of tokens.
    pub(crate) const THRASH: &str = r#"
id: thrash
title: Thrash
model: {context_window: 4096, max_output: 256}
context: {reserved_output_tokens: 256, buffer_tokens: 512, recent_tail_tokens: 120, summary_target_tokens: 120}
instructions: "You are a coding agent. {filler:3150}"
script:
  - repeat: 40
    steps:
      - user: "Rename variable {i} in the parser."
      - assistant: "Renamed variable {i}."
expect:
  outcome: any
"#;

    #[tokio::test]
    async fn reference_stops_on_little_reclaim_and_the_loop_fails() {
        let g = "no-thrash";
        let (rec, v) = grade_with(THRASH, Mode::Compact, None, g).await;
        assert_eq!(v.status, VerdictStatus::Pass, "{v:?}");
        assert!(
            rec.events.iter().any(|e| matches!(&e.event,
                ctxbench_harness::sut::EngineEvent::CompactionFailed { reason, .. }
                    if reason == "no_progress")),
            "the reference must hit its no-progress guard"
        );
        let (_, v) = grade_with(THRASH, Mode::Compact, Some(Mutation::LoopCompaction), g).await;
        assert_eq!(v.status, VerdictStatus::Fail, "{v:?}");
    }
}
