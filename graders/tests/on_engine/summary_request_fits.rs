//! `summary_request_fits` against the reference engine and its mutants.

use crate::support::grade_with;
use ctxbench_engine::mutants::Mutation;
use ctxbench_harness::storage::schema::{OutcomeStatus, VerdictStatus};
use ctxbench_harness::Mode;

/// A model-written checkpoint whose summarization request fits (small summary
/// allowance), and the same session with an allowance so large it cannot.
fn session(summary_target: u64, tail: u64) -> String {
    format!(
        r#"
id: summary-fit
title: Summary fit
model: {{context_window: 4096, max_output: 256}}
context: {{reserved_output_tokens: 256, buffer_tokens: 256, recent_tail_tokens: {tail}, summary_target_tokens: {summary_target}, strategy: model}}
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
    let (rec, v) = grade_with(
        &session(200, 1200),
        Mode::Compact,
        None,
        "summary-request-fits",
    )
    .await;
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
    // 4,096 − 2,000 leaves 2,096 for the summary input, less than the ≈ 3,600 of history
    // before a 100-token tail: the reference summarizes in stages (a smaller completed
    // prefix first), and every request it sends fits. Sent whole, with the 300-token output
    // allowance it asks its model for (15 % of the target), that request overflows.
    let big = session(2000, 100);
    let (rec, v) = grade_with(&big, Mode::Compact, None, "summary-request-fits").await;
    let staged = rec
        .requests
        .iter()
        .filter(|r| r.row.purpose == "summary")
        .count();
    assert!(staged >= 2, "{staged} summarization request(s)");
    assert_eq!(v.status, VerdictStatus::Pass, "{v:?}");
    // The stages are sized so each later request can roll the one before: the session
    // completes.
    assert_eq!(
        rec.outcome.status,
        OutcomeStatus::Success,
        "{:?}",
        rec.outcome
    );
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
