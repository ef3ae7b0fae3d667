//! `summary-request-fits`: a compaction's own summarization request is never sent when it
//! cannot fit the window (claude-code #9400, #23047: the compaction request itself overflows,
//! so the session can neither continue nor compact).
//!
//! Every sent summarization request (`purpose = summary`) must fit the model's window by the
//! harness's own estimate of the exact request (the scenario's estimator, the same one the
//! engine declares): estimated input + its output allowance ≤ window. An engine that cannot
//! fit one must back down (summarize less) or fail the compaction with a typed reason
//! (`summary_input_too_large`) without sending it. The provider's true count is not judged
//! here: an estimator undercount is what the overflow recovery and the
//! `estimator_p95_undercount` gate are for.

use ctxbench_harness::storage::schema::{Evidence, Verdict};

use crate::{skip, verdict, GradeContext, Grader};

/// The summary-request-fits grader.
pub struct SummaryRequestFits;

impl Grader for SummaryRequestFits {
    fn name(&self) -> &'static str {
        "summary-request-fits"
    }

    fn grade(&self, ctx: &GradeContext<'_>) -> Verdict {
        let window = ctx.scenario.model.context_window;
        let mut failures = Vec::new();
        let mut sent = 0usize;
        for r in ctx
            .record
            .requests
            .iter()
            .filter(|r| r.row.sent && r.row.purpose == "summary")
        {
            sent += 1;
            if !r.row.over_budget {
                continue;
            }
            let rejected = match r.row.error_kind.as_deref() {
                Some(kind) => format!("; the provider answered `{kind}`"),
                None => String::new(),
            };
            failures.push(Evidence {
                request: Some(r.row.seq),
                step: Some(r.row.step),
                expected: Some(format!(
                    "estimated input + output allowance ≤ the {window}-token window, or not sent"
                )),
                seen: Some(format!(
                    "{} estimated input tokens + the output allowance exceed {window}{rejected}",
                    r.row.observed_estimate
                )),
                note: format!(
                    "summarization request {} (step {}) was sent although it cannot fit the \
                     window",
                    r.row.seq, r.row.step
                ),
                ..Default::default()
            });
        }
        if sent == 0 {
            return skip(self.name(), "no summarization request was sent");
        }
        verdict(
            self.name(),
            format!("{sent} summarization request(s), each within the {window}-token window"),
            failures,
        )
    }
}
