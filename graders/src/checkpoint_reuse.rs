//! `checkpoint-reuse-valid`: a checkpoint is reused only while it is valid, and a damaged
//! one is rejected and never used (seed 000 §Checkpoint schema: reuse only when source
//! range, tail range and hashes match; the recovery scenario).
//!
//! - After a restart, a `context.checkpoint.reused` names the checkpoint that was last
//!   written (a torn write never counts), and the next request uses it: its budget event's
//!   checkpoint id is that id — or, when a compaction ran first, that compaction rolled it
//!   up (`previous_id`).
//! - A `corrupt_checkpoint` step that damaged a stored checkpoint is answered, at the next
//!   restart, by `context.checkpoint.rejected`; after that restart no request uses the
//!   damaged checkpoint's id (unless a new compaction produced the same id from the
//!   transcript).
//! - Every request that records a checkpoint id carries that checkpoint's memory message
//!   (`[checkpoint <id> …]`), and a request's memory names the checkpoint its row records.

use std::collections::HashSet;

use ctxbench_harness::scenario::Step;
use ctxbench_harness::storage::schema::{Evidence, Verdict};
use ctxbench_harness::sut::EngineEvent;

use crate::common::{is_memory, memory_checkpoint_id, messages, turn_requests};
use crate::{verdict, GradeContext, Grader};

/// The checkpoint-reuse grader.
pub struct CheckpointReuseValid;

impl Grader for CheckpointReuseValid {
    fn name(&self) -> &'static str {
        "checkpoint-reuse-valid"
    }

    fn grade(&self, ctx: &GradeContext<'_>) -> Verdict {
        if crate::common::black_box(ctx.record) {
            return crate::skip(self.name(), crate::common::NO_EVENTS);
        }
        let rec = ctx.record;
        let mut failures = Vec::new();
        // The checkpoint persisted on disk, as the events tell it.
        let mut on_disk: Option<String> = None;
        // A damaged checkpoint awaiting the next restart: (corrupt step, id).
        let mut damaged: Option<(u64, String)> = None;
        // Ids that must not be used any more, and ids rebuilt since.
        let mut banned: Vec<(u64, String)> = Vec::new();
        let mut rebuilt: HashSet<String> = HashSet::new();
        // After a reuse: (restart step, id, rolled-up-by-a-compaction).
        let mut expect_next: Option<(u64, String, bool)> = None;
        let (mut reused, mut rejected) = (0, 0);

        let mut events = rec.events.iter().peekable();
        for (index, step) in rec.steps.iter().enumerate() {
            let index = index as u64;
            if let Step::CorruptCheckpoint { .. } = step {
                if let Some(id) = &on_disk {
                    damaged = Some((index, id.clone()));
                }
            }
            while let Some(e) = events.next_if(|e| e.step <= index) {
                match &e.event {
                    EngineEvent::CompactionCompleted(c) => {
                        on_disk = Some(c.checkpoint_id.clone());
                        rebuilt.insert(c.checkpoint_id.clone());
                        if let Some((_, id, rolled)) = &mut expect_next {
                            if c.previous_id.as_deref() == Some(id.as_str()) {
                                *rolled = true;
                            }
                        }
                    }
                    EngineEvent::SessionRestored { .. } => {
                        let next = events.peek().map(|n| &n.event);
                        if let Some((at, id)) = damaged.take() {
                            if !matches!(next, Some(EngineEvent::CheckpointRejected { .. })) {
                                failures.push(Evidence {
                                    step: Some(e.step),
                                    expected: Some(format!(
                                        "context.checkpoint.rejected for {id} (damaged at step \
                                         {at})"
                                    )),
                                    seen: Some(match next {
                                        Some(EngineEvent::CheckpointReused { checkpoint_id }) => {
                                            format!("context.checkpoint.reused {checkpoint_id}")
                                        }
                                        Some(n) => n.kind().to_string(),
                                        None => "nothing".into(),
                                    }),
                                    hashes: vec![id.clone()],
                                    note: format!(
                                        "the restart at step {} did not reject the checkpoint \
                                         damaged at step {at}",
                                        e.step
                                    ),
                                    ..Default::default()
                                });
                            }
                            rebuilt.remove(&id);
                            banned.push((e.step, id));
                        }
                        if let Some(EngineEvent::CheckpointReused { checkpoint_id }) = next {
                            if on_disk.as_deref() != Some(checkpoint_id.as_str()) {
                                failures.push(Evidence {
                                    step: Some(e.step),
                                    expected: Some(format!(
                                        "the last checkpoint written: {}",
                                        on_disk.as_deref().unwrap_or("none")
                                    )),
                                    seen: Some(format!("reused {checkpoint_id}")),
                                    hashes: vec![checkpoint_id.clone()],
                                    note: format!(
                                        "the restart at step {} reused a checkpoint that was \
                                         not the one written",
                                        e.step
                                    ),
                                    ..Default::default()
                                });
                            }
                            expect_next = Some((e.step, checkpoint_id.clone(), false));
                        } else {
                            expect_next = None;
                        }
                    }
                    EngineEvent::CheckpointReused { .. } => reused += 1,
                    EngineEvent::CheckpointRejected { .. } => {
                        rejected += 1;
                        on_disk = None;
                    }
                    EngineEvent::Budgeted(b) => {
                        if let Some((at, id, rolled)) = expect_next.take() {
                            if !rolled && b.checkpoint_id.as_deref() != Some(id.as_str()) {
                                failures.push(Evidence {
                                    step: Some(e.step),
                                    expected: Some(format!("checkpoint {id} (reused at {at})")),
                                    seen: Some(format!(
                                        "checkpoint {}",
                                        b.checkpoint_id.as_deref().unwrap_or("none")
                                    )),
                                    hashes: vec![id.clone()],
                                    note: format!(
                                        "the first request after the restart at step {at} does \
                                         not use the checkpoint reported reused"
                                    ),
                                    ..Default::default()
                                });
                            }
                        }
                        if let Some(used) = &b.checkpoint_id {
                            if let Some((at, _)) = banned
                                .iter()
                                .find(|(_, id)| id == used && !rebuilt.contains(id))
                            {
                                failures.push(Evidence {
                                    step: Some(e.step),
                                    expected: Some(format!(
                                        "no use of the checkpoint rejected at step {at}"
                                    )),
                                    seen: Some(format!("request budgeted with {used}")),
                                    hashes: vec![used.clone()],
                                    note: format!(
                                        "step {}: a request used the damaged checkpoint {used}",
                                        e.step
                                    ),
                                    ..Default::default()
                                });
                            }
                        }
                    }
                    _ => {}
                }
            }
        }

        // Row ↔ content consistency.
        let mut with_memory = 0;
        for r in turn_requests(rec) {
            let named: Vec<&str> = messages(rec, r)
                .iter()
                .filter_map(|(_, m)| m.filter(|m| is_memory(m)))
                .filter_map(|m| memory_checkpoint_id(&m.content))
                .collect();
            if !named.is_empty() {
                with_memory += 1;
            }
            let ok = match &r.row.checkpoint_id {
                Some(id) => named.iter().any(|n| n == id),
                None => named.is_empty(),
            };
            if !ok {
                failures.push(Evidence {
                    request: Some(r.row.seq),
                    step: Some(r.row.step),
                    expected: Some(format!(
                        "memory of {}",
                        r.row.checkpoint_id.as_deref().unwrap_or("no checkpoint")
                    )),
                    seen: Some(if named.is_empty() {
                        "no memory message".into()
                    } else {
                        format!("memory of {}", named.join(", "))
                    }),
                    note: format!(
                        "request {} carries different checkpoint memory than it records",
                        r.row.seq
                    ),
                    ..Default::default()
                });
            }
        }
        verdict(
            self.name(),
            format!(
                "{reused} checkpoint(s) reused and used, {rejected} rejected and never used; \
                 {with_memory} request(s) carried the memory they record"
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

    /// Compacts, restarts (reuse), damages the checkpoint, restarts (reject), continues.
    const RESTARTS: &str = r#"
id: restarts
title: Restarts
model: {context_window: 8192, max_output: 256}
context: {reserved_output_tokens: 256, buffer_tokens: 512, recent_tail_tokens: 300, summary_target_tokens: 200}
instructions: "You are a coding agent."
script:
  - repeat: 6
    steps:
      - user: "Tidy module {i}. {filler:80}"
      - assistant: "Tidied module {i}."
  - compact: {}
  - restart: {}
  - user: "Next."
  - assistant: "OK."
  - corrupt_checkpoint: stale_source
  - restart: {}
  - repeat: 2
    steps:
      - user: "Test module {i}."
      - assistant: "Tested module {i}."
expect:
  outcome: any
"#;

    #[tokio::test]
    async fn reference_reuses_and_rejects_and_trusting_a_stale_one_fails() {
        let g = "checkpoint-reuse-valid";
        let (rec, v) = grade_with(RESTARTS, Mode::Compact, None, g).await;
        let kinds: Vec<&str> = rec.events.iter().map(|e| e.event.kind()).collect();
        assert!(kinds.contains(&"context.checkpoint.reused"), "{kinds:?}");
        assert!(kinds.contains(&"context.checkpoint.rejected"), "{kinds:?}");
        assert_eq!(v.status, VerdictStatus::Pass, "{v:?}");
        let (_, v) = grade_with(
            RESTARTS,
            Mode::Compact,
            Some(Mutation::TrustStaleCheckpoint),
            g,
        )
        .await;
        assert_eq!(v.status, VerdictStatus::Fail, "{v:?}");
        assert!(!v.evidence[0].hashes.is_empty());
    }
}
