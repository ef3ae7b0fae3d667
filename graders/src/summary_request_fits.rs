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

#[cfg(test)]
mod tests {
    use crate::testing::grade_with;
    use ctxbench_engine::mutants::Mutation;
    use ctxbench_harness::storage::schema::VerdictStatus;
    use ctxbench_harness::Mode;

    /// A model-written checkpoint whose summarization request fits (small summary
    /// allowance), and the same session with an allowance so large it cannot.
    fn session(summary_target: u64) -> String {
        format!(
            r#"
id: summary-fit
title: Summary fit
model: {{context_window: 4096, max_output: 256}}
context: {{reserved_output_tokens: 256, buffer_tokens: 256, recent_tail_tokens: 1200, summary_target_tokens: {summary_target}, strategy: model}}
instructions: "You are a coding agent."
script:
  - repeat: 20
    steps:
      - user: "Review note {{i}}."
      - assistant: {{filler: {{tokens: 300, kind: prose}}}}
expect:
  outcome: any
"#
        )
    }

    #[tokio::test]
    async fn a_fitting_request_passes_and_an_over_window_one_fails() {
        let (rec, v) = grade_with(&session(200), Mode::Compact, None, "summary-request-fits").await;
        assert!(
            rec.requests.iter().any(|r| r.row.purpose == "summary"),
            "fixture must summarize: {:?} {:?}",
            rec.outcome,
            rec.events
                .iter()
                .map(|e| e.event.kind())
                .collect::<Vec<_>>()
        );
        assert_eq!(v.status, VerdictStatus::Pass, "{v:?}");
        // 4,096 − 1,800 leaves 2,296 for the summary input, less than the ≈ 3,000 of history
        // before the tail: the reference refuses to send.
        let big = session(1800);
        let (rec, v) = grade_with(&big, Mode::Compact, None, "summary-request-fits").await;
        assert!(rec.requests.iter().all(|r| r.row.purpose != "summary"));
        assert_eq!(v.status, VerdictStatus::Skip, "{v:?}");
        assert!(rec.events.iter().any(|e| matches!(
            &e.event,
            ctxbench_harness::sut::EngineEvent::CompactionFailed { reason, .. }
                if reason == "summary_input_too_large"
        )));
        let (_, v) = grade_with(
            &big,
            Mode::Compact,
            Some(Mutation::UnboundedSummaryRequest),
            "summary-request-fits",
        )
        .await;
        assert_eq!(v.status, VerdictStatus::Fail, "{v:?}");
        assert!(
            v.evidence[0]
                .seen
                .as_deref()
                .unwrap_or("")
                .contains("context_overflow"),
            "{v:?}"
        );
    }
}
