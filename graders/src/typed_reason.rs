//! `typed-reason`: every compaction transaction ends in one typed outcome whose reason is
//! true (seed 004: `compacted | unchanged | failed` with stable reasons; finding P3:
//! `no_safe_completed_span` must not be reported as `summarizer_failed`).
//!
//! For each transaction (`context.compaction.started` up to its `completed`, `unchanged` or
//! `failed` event):
//!
//! - the reason is one of the documented ones;
//! - `failed / no_safe_completed_span`: zero summarizer calls (the event says 0, no
//!   summarization request and no completed compaction in that step), and indeed no turn
//!   preceded it in the session;
//! - `failed / summarizer_failed`: the summarizer was actually called and failed — an
//!   injected summarizer fault remains to account for it, or a summarization request in
//!   that step failed (the `native` strategy's provider call is not observable and is
//!   trusted); and a completed turn existed to summarize;
//! - `failed / checkpoint_write_failed`: an injected checkpoint-write crash accounts for it;
//! - `unchanged / already_compacted`: a checkpoint was in force (written, or reused after a
//!   restart, and not since rejected).
//!
//! And every non-dry-run manual `compact` step's outcome in `record.compactions` is the
//! outcome its transaction's event reported (same kind, same reason or checkpoint id).

use ctxbench_harness::scenario::{Fault, Step, SummaryStrategy};
use ctxbench_harness::storage::schema::{Evidence, Verdict};
use ctxbench_harness::sut::CompactionOutcome;
use ctxbench_harness::sut::EngineEvent;

use crate::{verdict, GradeContext, Grader};

pub use ctxbench_harness::sut::reasons::{
    COMPACTION_FAILED as FAILED_REASONS, UNCHANGED as UNCHANGED_REASONS,
};

/// The typed-reason grader.
pub struct TypedReason;

/// One transaction's end as the events report it.
#[derive(Debug)]
enum End<'a> {
    Completed(&'a str),
    Unchanged(&'a str),
    Failed(&'a str, u32),
}

impl Grader for TypedReason {
    fn name(&self) -> &'static str {
        "typed-reason"
    }

    fn grade(&self, ctx: &GradeContext<'_>) -> Verdict {
        let family = ctxbench_sut::EventFamily::Compaction;
        if !crate::common::reports(ctx.record, family) {
            return crate::skip(self.name(), &crate::common::no_family(family));
        }
        let rec = ctx.record;
        let scenario = ctx.scenario;
        let mut failures = Vec::new();
        let injected_summarizer = scenario
            .faults
            .iter()
            .filter(|f| matches!(f, Fault::SummarizerFailure { .. }))
            .count();
        let injected_crashes = scenario
            .faults
            .iter()
            .filter(|f| matches!(f, Fault::CrashDuringCheckpointWrite { .. }))
            .count();
        let native = scenario.context.strategy == SummaryStrategy::Native;
        let turns_before = |step: u64| rec.turns.iter().filter(|t| t.step < step).count();
        let summary_requests = |step: u64| {
            rec.requests
                .iter()
                .filter(move |r| r.row.purpose == "summary" && r.row.step == step)
        };
        let completed_in = |step: u64| {
            rec.events
                .iter()
                .any(|e| e.step == step && matches!(e.event, EngineEvent::CompactionCompleted(_)))
        };

        let mut checkpoint_in_force = false;
        let mut summarizer_failures = 0usize;
        let mut write_failures = 0usize;
        let mut transactions = 0usize;
        let mut ends: Vec<(u64, End<'_>)> = Vec::new(); // manual ones, by step
        let mut open: Option<(u64, &str)> = None; // (step, trigger)
        for e in &rec.events {
            let end = match &e.event {
                EngineEvent::CompactionStarted { trigger, .. } => {
                    open = Some((e.step, trigger.as_str()));
                    continue;
                }
                EngineEvent::SessionRestored { .. } => {
                    checkpoint_in_force = false;
                    continue;
                }
                EngineEvent::CheckpointReused { .. } => {
                    checkpoint_in_force = true;
                    continue;
                }
                EngineEvent::CheckpointRejected { .. } => {
                    checkpoint_in_force = false;
                    continue;
                }
                EngineEvent::CompactionCompleted(c) => End::Completed(c.checkpoint_id.as_str()),
                EngineEvent::CompactionUnchanged { reason, .. } => End::Unchanged(reason),
                EngineEvent::CompactionFailed {
                    reason,
                    summarizer_calls,
                    ..
                } => End::Failed(reason, *summarizer_calls),
                _ => continue,
            };
            let step = e.step;
            let trigger = open.take().map(|(_, t)| t).unwrap_or("manual");
            transactions += 1;
            let mut fail = |expected: String, seen: String, note: String| {
                failures.push(Evidence {
                    step: Some(step),
                    expected: Some(expected),
                    seen: Some(seen),
                    note: format!(
                        "step {step} ({trigger} compaction, event {}): {note}",
                        e.seq
                    ),
                    ..Default::default()
                })
            };
            match &end {
                End::Completed(_) => {}
                End::Unchanged(reason) => {
                    if !UNCHANGED_REASONS.contains(reason) {
                        fail(
                            format!("one of {}", UNCHANGED_REASONS.join(", ")),
                            format!("unchanged / {reason}"),
                            "undocumented reason".into(),
                        );
                    }
                    if *reason == "already_compacted" && !checkpoint_in_force {
                        fail(
                            "already_compacted only while a checkpoint is in force".into(),
                            "no checkpoint had been written or reused".into(),
                            "`already_compacted` reported with no checkpoint".into(),
                        );
                    }
                }
                End::Failed(reason, calls) => {
                    if !FAILED_REASONS.contains(reason) {
                        fail(
                            format!("one of {}", FAILED_REASONS.join(", ")),
                            format!("failed / {reason}"),
                            "undocumented reason".into(),
                        );
                    }
                    let before = turns_before(step);
                    let summary_calls = summary_requests(step).count();
                    match *reason {
                        "no_safe_completed_span" => {
                            if *calls > 0 || summary_calls > 0 || completed_in(step) {
                                fail(
                                    "zero summarizer calls".into(),
                                    format!(
                                        "{calls} reported, {summary_calls} summarization \
                                         request(s) in the step"
                                    ),
                                    "`no_safe_completed_span` after calling the summarizer".into(),
                                );
                            }
                            if before > 0 {
                                fail(
                                    "no completed turn before the compaction".into(),
                                    format!("{before} earlier turn(s) in the session"),
                                    "`no_safe_completed_span` although completed turns \
                                     existed"
                                        .into(),
                                );
                            }
                        }
                        "summarizer_failed" => {
                            summarizer_failures += 1;
                            let failed_request =
                                summary_requests(step).any(|r| r.row.error_kind.is_some());
                            if before == 0 {
                                fail(
                                    "a summarizer call, which needs a completed span".into(),
                                    "no turn preceded the compaction: nothing to summarize".into(),
                                    "`summarizer_failed` where the summarizer cannot have run \
                                     (no_safe_completed_span)"
                                        .into(),
                                );
                            } else if summarizer_failures > injected_summarizer
                                && !failed_request
                                && !native
                            {
                                fail(
                                    format!(
                                        "a failed summarizer call ({injected_summarizer} \
                                         injected fault(s), no failed summarization request \
                                         in the step)"
                                    ),
                                    format!("summarizer_failed #{summarizer_failures}"),
                                    "`summarizer_failed` with no summarizer failure to \
                                     account for it"
                                        .into(),
                                );
                            }
                        }
                        "checkpoint_write_failed" => {
                            write_failures += 1;
                            if write_failures > injected_crashes {
                                fail(
                                    format!("≤ {injected_crashes} injected write crash(es)"),
                                    format!("checkpoint_write_failed #{write_failures}"),
                                    "`checkpoint_write_failed` with no write failure to \
                                     account for it"
                                        .into(),
                                );
                            }
                        }
                        _ => {}
                    }
                }
            }
            if let End::Completed(_) = end {
                checkpoint_in_force = true;
            }
            if trigger == "manual" {
                ends.push((step, end));
            }
        }

        // Manual compact outcomes match their events.
        for c in rec.compactions.iter().filter(|c| !c.dry_run) {
            let seen = ends.iter().find(|(s, _)| *s == c.step).map(|(_, e)| e);
            let matches = match (&c.outcome, seen) {
                (CompactionOutcome::Compacted { checkpoint_id, .. }, Some(End::Completed(id))) => {
                    checkpoint_id == id
                }
                (CompactionOutcome::Unchanged { reason }, Some(End::Unchanged(r))) => reason == r,
                (CompactionOutcome::Failed { reason, .. }, Some(End::Failed(r, _))) => reason == r,
                _ => false,
            };
            if !matches {
                failures.push(Evidence {
                    step: Some(c.step),
                    expected: Some(format!("{:?}", seen)),
                    seen: Some(format!("{:?}", c.outcome)),
                    note: format!(
                        "the manual compact at step {} returned an outcome its events do not \
                         report",
                        c.step
                    ),
                    ..Default::default()
                });
            }
        }
        let compact_steps = rec
            .steps
            .iter()
            .filter(|s| matches!(s, Step::Compact { .. }))
            .count();
        verdict(
            self.name(),
            format!(
                "{transactions} compaction transaction(s) with accurate typed reasons; \
                 {}/{compact_steps} manual compact outcome(s) recorded",
                rec.compactions.len()
            ),
            failures,
        )
    }
}
