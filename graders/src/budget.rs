//! `budget`: what was sent stayed inside the declared input budget, or said so first.
//!
//! The budget is the scenario's: window − max(reserved output, buffer) (seed 000's formula),
//! never what the system says its budget was. The size of a request is ctxbench's own count
//! of the exact request sent, with the scenario's estimator (`observed_estimate`).
//!
//! - `warn`: a request over the budget must be preceded by a `context.warning` in the same
//!   turn (a system that reports no events cannot show one: then over-budget `warn` requests
//!   make the verdict not-applicable, never a pass);
//! - `compact`: no request may be over budget at all;
//! - `off`: over-budget requests are the documented baseline and are reported, not failed.

use ctxbench_harness::storage::schema::{Evidence, Verdict, VerdictStatus};
use ctxbench_harness::Mode;

use crate::common::declared_available;
use crate::{verdict, GradeContext, Grader};

/// The budget grader.
pub struct Budget;

impl Grader for Budget {
    fn name(&self) -> &'static str {
        "budget"
    }

    fn grade(&self, ctx: &GradeContext<'_>) -> Verdict {
        let mode = ctx.record.mode;
        let available = declared_available(ctx.scenario);
        // Warnings are seen only from a system that reports the `warning` family.
        let black_box = !crate::common::reports(ctx.record, ctxbench_sut::EventFamily::Warning);
        let mut failures = Vec::new();
        let (mut sent, mut over, mut unverifiable) = (0, 0, 0);
        for r in crate::common::turn_requests(ctx.record) {
            sent += 1;
            let row = &r.row;
            if row.observed_estimate <= available {
                continue;
            }
            over += 1;
            let seen = format!(
                "{} input tokens (ctxbench's count of the request sent) against {available} \
                 available",
                row.observed_estimate
            );
            let violation = match mode {
                Mode::Off => None,
                Mode::Warn if black_box => {
                    unverifiable += 1;
                    None
                }
                Mode::Warn if !row.warned => {
                    Some("over budget without a preceding context.warning")
                }
                Mode::Warn => None,
                Mode::Compact => Some("over budget in compact mode"),
            };
            if let Some(what) = violation {
                failures.push(Evidence {
                    request: Some(row.seq),
                    step: Some(row.step),
                    expected: Some(format!("≤ {available} tokens, or a warning first")),
                    seen: Some(seen),
                    note: format!("request {} (step {}): {what}", row.seq, row.step),
                    ..Default::default()
                });
            }
        }
        if failures.is_empty() && unverifiable > 0 {
            return Verdict {
                grader: self.name().into(),
                status: VerdictStatus::Skip,
                summary: format!(
                    "not-applicable: the system under test does not report `warning` events, so \
                     no warning before its {unverifiable} over-budget request(s) in warn mode \
                     can be seen"
                ),
                evidence: Vec::new(),
            };
        }
        verdict(
            self.name(),
            format!(
                "{sent} requests against a declared budget of {available}; {over} over budget ({})",
                match mode {
                    Mode::Off => "reported, not gated in off",
                    Mode::Warn => "each warned",
                    Mode::Compact => "none allowed",
                }
            ),
            failures,
        )
    }
}
