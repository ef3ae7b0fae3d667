//! `recap-not-empty`: history is never silently lost (seed 004 P2, the oversized newest
//! turn: a request must not shrink to the instructions and the current turn while earlier
//! turns exist; seed 000: never hide context loss to make a request appear successful).
//!
//! A sent turn request fails this grader when, before its current user message, it carries
//! nothing but the instruction file — no memory (by the declared markup or the default rule)
//! and no earlier message — although earlier turns exist in the session. Whatever the
//! engine does to fit, earlier turns must reach the model either verbatim or summarized;
//! if neither fits, the honest outcome is a typed stop, not an amnesiac request.

use ctxbench_adapters::fake::layout::Place;
use ctxbench_adapters::Role;
use ctxbench_harness::storage::schema::{Evidence, Verdict};

use crate::common::turn_requests;
use crate::{verdict, GradeContext, Grader};

/// The no-silent-amnesia grader.
pub struct RecapNotEmpty;

impl Grader for RecapNotEmpty {
    fn name(&self) -> &'static str {
        "recap-not-empty"
    }

    fn grade(&self, ctx: &GradeContext<'_>) -> Verdict {
        let rec = ctx.record;
        let mut failures = Vec::new();
        let mut checked = 0;
        for r in turn_requests(rec) {
            let Some(turn) = rec.turns.iter().find(|t| t.step == r.row.step) else {
                continue;
            };
            let earlier = rec.turns.iter().filter(|t| t.step < r.row.step).count();
            if earlier == 0 {
                continue;
            }
            checked += 1;
            let msgs = ctx.read.messages(r);
            let Some(current) = msgs.iter().rposition(|(_, m)| {
                m.is_some_and(|m| m.role == Role::User && m.content == turn.user)
            }) else {
                continue;
            };
            // Anything before the current message but the instruction file counts as
            // carried history: memory, or any other message.
            let req = ctx.read.request(r);
            let context_before = msgs.len() != req.messages.len()
                || ctx.read.segments(r).iter().any(|s| {
                    s.message < current
                        && !(s.place == Place::Instructions || s.text.trim().is_empty())
                });
            if !context_before {
                failures.push(Evidence {
                    request: Some(r.row.seq),
                    step: Some(r.row.step),
                    expected: Some(format!(
                        "the {earlier} earlier turn(s) verbatim or as checkpoint memory"
                    )),
                    seen: Some("only the instructions before the current user message".into()),
                    hashes: msgs.iter().map(|(h, _)| h.to_string()).collect(),
                    note: format!(
                        "request {} (step {}) silently dropped all {earlier} earlier turn(s): \
                         no history and no memory",
                        r.row.seq, r.row.step
                    ),
                    ..Default::default()
                });
            }
        }
        verdict(
            self.name(),
            format!("{checked} request(s) with earlier turns, each carried history or memory"),
            failures,
        )
    }
}
