//! `no-invented-constraints`: no rule the conversation never stated reaches the model as
//! context (users of real agents report summaries that invent constraints: opencode
//! #50816, codex #27731; SCENARIOS.md "summaries that invent constraints").
//!
//! Judged by taint, like hostile text: the inventions are known — the scenario's own
//! `summary: invent_constraint` texts, and the fake model's adversarial profile's
//! [`INVENTED_INSTRUCTION`]. They exist only in the summaries the fake model writes, so any
//! later turn request that carries one (its text, or most of its word 3-grams — the fake
//! model's presence rule, [`tainted`]) adopted an invented rule, wherever it put it.
//! Summarization requests are exempt (they carry earlier summaries as material).
//!
//! Not applicable to a scenario whose fake model invents nothing.

use ctxbench_adapters::fake::summary::INVENTED_INSTRUCTION;
use ctxbench_adapters::fake::{tainted, SummaryProfile};
use ctxbench_harness::scenario::{Fault, SummaryDefect};
use ctxbench_harness::storage::schema::{Evidence, Verdict};

use crate::common::{redacted_excerpt, turn_requests};
use crate::{skip, verdict, GradeContext, Grader};

/// The no-invented-constraints grader.
pub struct NoInventedConstraints;

impl Grader for NoInventedConstraints {
    fn name(&self) -> &'static str {
        "no-invented-constraints"
    }

    fn grade(&self, ctx: &GradeContext<'_>) -> Verdict {
        let rec = ctx.record;
        let mut inventions: Vec<String> = ctx
            .scenario
            .faults
            .iter()
            .filter_map(|f| match f {
                Fault::SummaryDefect {
                    defect: SummaryDefect::InventConstraint { text },
                } => Some(text.trim().to_string()),
                _ => None,
            })
            .collect();
        if ctx.scenario.summary_profile == SummaryProfile::Adversarial {
            inventions.push(INVENTED_INSTRUCTION.to_string());
        }
        if inventions.is_empty() {
            return skip(
                self.name(),
                "not-applicable: the scenario's model invents nothing (no `invent_constraint` \
                 defect, not the adversarial profile)",
            );
        }
        let mut failures = Vec::new();
        let mut reported = std::collections::HashSet::new();
        // The same piece recurs in request after request: each (rule, text) is read once.
        let mut read: std::collections::HashSet<(usize, &str)> = std::collections::HashSet::new();
        let mut checked = 0;
        for r in turn_requests(rec) {
            checked += 1;
            for seg in ctx.read.segments(r) {
                for (k, inv) in inventions.iter().enumerate() {
                    if reported.contains(inv) || !read.insert((k, seg.text)) {
                        continue;
                    }
                    if !tainted(inv, seg.text) {
                        continue;
                    }
                    reported.insert(inv.clone());
                    failures.push(Evidence {
                        request: Some(r.row.seq),
                        step: Some(r.row.step),
                        expected: Some("no rule that was never stated".into()),
                        seen: Some(format!(
                            "an invented rule in {} (message {})",
                            seg.place.as_str(),
                            seg.message
                        )),
                        excerpt: Some(redacted_excerpt(ctx.scenario, inv, 160)),
                        hashes: r
                            .row
                            .message_hashes
                            .get(seg.message)
                            .cloned()
                            .into_iter()
                            .collect(),
                        note: format!(
                            "request {} (step {}) carried a rule only a summary invented",
                            r.row.seq, r.row.step
                        ),
                    });
                }
            }
        }
        verdict(
            self.name(),
            format!(
                "{} invented rule(s) followed through {checked} request(s): none adopted",
                inventions.len()
            ),
            failures,
        )
    }
}
