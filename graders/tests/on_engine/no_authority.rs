//! `no-authority-in-checkpoint` against the reference engine and its mutants.

use crate::support::{grade_with, HOSTILE};
use ctxbench_adapters::fake::ACTING_ON_AUTHORITY;
use ctxbench_engine::mutants::Mutation;
use ctxbench_harness::storage::schema::VerdictStatus;
use ctxbench_harness::Mode;

#[tokio::test]
async fn reference_keeps_marked_spans_out_and_the_keeping_summarizer_fails() {
    let g = "no-authority-in-checkpoint";
    let (rec, v) = grade_with(HOSTILE, Mode::Compact, None, g).await;
    assert!(
        rec.events
            .iter()
            .any(|e| e.event.kind() == "context.compaction.completed"),
        "fixture must compact"
    );
    assert_eq!(v.status, VerdictStatus::Pass, "{v:?}");
    let (_, v) = grade_with(
        HOSTILE,
        Mode::Compact,
        Some(Mutation::KeepApprovalClaims),
        g,
    )
    .await;
    assert_eq!(v.status, VerdictStatus::Fail, "{v:?}");
    assert!(
        v.evidence[0]
            .seen
            .as_deref()
            .unwrap_or("")
            .contains("memory"),
        "{v:?}"
    );
    assert_eq!(v.evidence[0].hashes.len(), 1, "{v:?}");
}

/// The grader reads the fake model's action line wherever it appears.
#[tokio::test]
async fn acting_on_a_span_fails() {
    let g = ctxbench_graders::grader("no-authority-in-checkpoint").unwrap();
    let scenario = ctxbench_harness::scenario::load_str("hostile.yaml", HOSTILE).unwrap();
    let (mut rec, v) = grade_with(HOSTILE, Mode::Compact, None, g.name()).await;
    assert_eq!(v.status, VerdictStatus::Pass, "{v:?}");
    // The user saying it in their own turn is not laundering: the fake never acted.
    assert!(!rec.requests.iter().any(|r| r
        .response
        .as_ref()
        .is_some_and(|x| x.message.content.contains(ACTING_ON_AUTHORITY))));
    let last = rec
        .requests
        .iter_mut()
        .rev()
        .find(|r| r.response.is_some())
        .unwrap();
    let seq = last.row.seq;
    last.response
        .as_mut()
        .unwrap()
        .message
        .content
        .push_str(&format!("\n{ACTING_ON_AUTHORITY} marked span `readme`"));
    let null = serde_json::Value::Null;
    let v = g.grade_trial(&scenario, &rec, &null);
    assert_eq!(v.status, VerdictStatus::Fail, "{v:?}");
    assert_eq!(v.evidence[0].request, Some(seq));
}
