//! `instruction-hash-frozen`: instructions are reloaded at the start of every run and then
//! frozen for it (seed 000 invariant 11; §Instruction scope is deliberate).
//!
//! Judged from the requests alone — never from the hash a system reports: within one run
//! (one script step), every physical attempt (every round, every retry) carries the
//! instruction file as ctxbench wrote it for that run in its system prompt (the leading run
//! of system messages), in a byte-identical message, so an `edit_instructions` step takes
//! effect at the next run.

use std::collections::BTreeMap;

use ctxbench_harness::storage::schema::{Evidence, Verdict};

use crate::common::{short, text_hash};
use crate::{verdict, GradeContext, Grader};

/// The frozen-instructions grader.
pub struct InstructionHashFrozen;

impl Grader for InstructionHashFrozen {
    fn name(&self) -> &'static str {
        "instruction-hash-frozen"
    }

    fn grade(&self, ctx: &GradeContext<'_>) -> Verdict {
        observed(self.name(), ctx)
    }
}

/// The system prompt of each request (its leading system messages) must carry the instruction file as
/// ctxbench wrote it for that run (trimmed, possibly inside the runtime's own system prompt;
/// the edited text from the run after an edit on), and be byte-identical for every attempt
/// of the run — a runtime that re-reads or rebuilds its instructions per request changes it
/// within the run.
fn observed(name: &str, ctx: &GradeContext<'_>) -> Verdict {
    let rec = ctx.record;
    let mut failures = Vec::new();
    let mut checked = 0;
    let mut run_snapshot: BTreeMap<u64, (u64, String)> = BTreeMap::new();
    for r in crate::common::turn_requests(rec) {
        let text = crate::common::instructions_at(ctx.scenario, rec, r.row.step);
        if text.trim().is_empty() {
            continue;
        }
        checked += 1;
        let expected = text_hash(text);
        let carried = crate::common::instruction_message(
            r.row.message_hashes.iter().map(|h| rec.messages.get(h)),
            text,
        )
        .and_then(|k| r.row.message_hashes.get(k))
        .and_then(|h| rec.messages.get(h));
        let Some(first) = carried else {
            let first = r
                .row
                .message_hashes
                .first()
                .and_then(|h| rec.messages.get(h))
                .filter(|m| m.role == ctxbench_adapters::Role::System);
            failures.push(Evidence {
                request: Some(r.row.seq),
                step: Some(r.row.step),
                expected: Some(format!(
                    "a system prompt carrying sha256:{} (the instruction file of this run)",
                    short(&expected)
                )),
                seen: Some(match first {
                    Some(m) => format!(
                        "first system message sha256:{}, none carrying the file",
                        short(&text_hash(&m.content))
                    ),
                    None => "no system message first".into(),
                }),
                note: format!(
                    "request {} (step {}): the instructions sent are not this run's file",
                    r.row.seq, r.row.step
                ),
                ..Default::default()
            });
            continue;
        };
        let h = text_hash(&first.content);
        let (first_req, reference) = run_snapshot
            .entry(r.row.step)
            .or_insert_with(|| (r.row.seq, h.clone()))
            .clone();
        if h != reference {
            failures.push(Evidence {
                request: Some(r.row.seq),
                step: Some(r.row.step),
                expected: Some(format!(
                    "sha256:{} (the run's instructions, as request {first_req})",
                    short(&reference)
                )),
                seen: Some(format!("sha256:{}", short(&h))),
                hashes: vec![reference.clone(), h.clone()],
                note: format!(
                    "the instruction snapshot changed within the run at step {} (request {})",
                    r.row.step, r.row.seq
                ),
                ..Default::default()
            });
        }
    }
    verdict(
        name,
        format!("{checked} request(s) carry this run's instruction file, one snapshot per run"),
        failures,
    )
}
