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
//! - What the requests show agrees: the first request after a reported reuse carries the
//!   memory the last request before the restart carried (unless a compaction rolled it up
//!   after the restart, or wrote the reused checkpoint after that request).
//!
//! The checkpoint identities come from the system's own events (an event family: without
//! events the grader is not applicable); every claim is checked against the requests.

use std::collections::HashSet;

use ctxbench_harness::scenario::Step;
use ctxbench_harness::storage::schema::{Evidence, Verdict};
use ctxbench_harness::sut::EngineEvent;

use ctxbench_adapters::fake::layout::Place;

use crate::common::turn_requests;
use crate::{verdict, GradeContext, Grader};

/// The checkpoint-reuse grader.
pub struct CheckpointReuseValid;

impl Grader for CheckpointReuseValid {
    fn name(&self) -> &'static str {
        "checkpoint-reuse-valid"
    }

    fn grade(&self, ctx: &GradeContext<'_>) -> Verdict {
        let family = ctxbench_sut::EventFamily::Checkpoint;
        if !crate::common::reports(ctx.record, family) {
            return crate::skip(self.name(), &crate::common::no_family(family));
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
                if !rec.corruptions.contains(&index) {
                    // The system offered no way to damage its checkpoint: nothing to reject.
                } else if let Some(id) = &on_disk {
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

        // What the requests show: a checkpoint reported reused is the memory the session
        // carried before the restart.
        let memory_of = |r: &ctxbench_harness::record::RequestRecord| -> String {
            ctx.read
                .pieces(r, Place::Memory)
                .map(|s| s.text)
                .collect::<Vec<_>>()
                .join("\n")
        };
        let mut carried = 0;
        for e in rec.events.iter() {
            let EngineEvent::CheckpointReused { checkpoint_id } = &e.event else {
                continue;
            };
            let before = turn_requests(rec).filter(|r| r.row.step < e.step).last();
            let after = turn_requests(rec).find(|r| r.row.step >= e.step);
            let (Some(before), Some(after)) = (before, after) else {
                continue;
            };
            // A compaction between that request and the restart (a manual `compact` step)
            // wrote the checkpoint being reused after any request carried it: no request
            // shows its memory, so there is no baseline (the event checks above still hold).
            let compacted_since = rec.events.iter().any(|x| {
                x.step > before.row.step
                    && x.step < e.step
                    && matches!(x.event, EngineEvent::CompactionCompleted(_))
            });
            let (m0, m1) = (memory_of(before), memory_of(after));
            if m0.trim().is_empty() || compacted_since {
                continue;
            }
            carried += 1;
            // A compaction in between may roll the reused memory up into new memory.
            let rolled = rec.events.iter().any(|x| {
                x.step >= e.step
                    && x.step <= after.row.step
                    && matches!(x.event, EngineEvent::CompactionCompleted(_))
            });
            if m0 != m1 && !rolled {
                failures.push(Evidence {
                    request: Some(after.row.seq),
                    step: Some(after.row.step),
                    expected: Some(format!(
                        "the memory carried before the restart (request {})",
                        before.row.seq
                    )),
                    seen: Some("different memory".into()),
                    hashes: vec![checkpoint_id.clone()],
                    note: format!(
                        "checkpoint {checkpoint_id} was reported reused at step {}, but the next \
                         request carries other memory",
                        e.step
                    ),
                    ..Default::default()
                });
            }
        }
        verdict(
            self.name(),
            format!(
                "{reused} checkpoint(s) reused and used, {rejected} rejected and never used; \
                 {carried} reuse(s) carried the same memory across the restart"
            ),
            failures,
        )
    }
}
