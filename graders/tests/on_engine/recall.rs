//! `recall` against the reference engine and its mutants.

use crate::support::{judge_with, SMALL_RECALL};
use ctxbench_engine::mutants::Mutation;
use ctxbench_harness::storage::schema::VerdictStatus;
use ctxbench_harness::Mode;

#[tokio::test]
async fn reference_engine_recalls_and_dropped_history_fails() {
    let (_, good) = judge_with(SMALL_RECALL, Mode::Warn, None).await;
    let v = good.verdicts.iter().find(|v| v.grader == "recall").unwrap();
    assert_eq!(v.status, VerdictStatus::Pass, "{v:?}");
    // The answer is read from the model's reply and resolved to the fact's statement.
    assert!(good
        .recall
        .iter()
        .any(|r| r.correct && r.answer.as_deref() == Some("All storage must use PostgreSQL 16.")));
    let (_, bad) = judge_with(SMALL_RECALL, Mode::Warn, Some(Mutation::DropHistory)).await;
    let v = bad.verdicts.iter().find(|v| v.grader == "recall").unwrap();
    assert_eq!(v.status, VerdictStatus::Fail, "{v:?}");
    assert!(v
        .evidence
        .iter()
        .any(|e| e.seen.as_deref() == Some("unknown")));
}

/// A later probe cannot be answered from an earlier probe's reply: the reply names a
/// version, never its text, so depth is measured from the statement.
#[tokio::test]
async fn probe_replies_do_not_replant_the_fact() {
    const TWICE: &str = r#"
id: twice
model: {context_window: 16384, max_output: 512}
context: {reserved_output_tokens: 512, buffer_tokens: 1024}
facts:
  - id: db
    states: "All storage must use PostgreSQL 16."
    question: "Which database?"
    expect: {contains: PostgreSQL}
script:
  - user: "Start. {fact:db}"
  - assistant: "Noted."
  - probe: [db]
  - probe: [db]
expect:
  outcome: any
"#;
    // DropHistory sends only the current turn: the first probe (right after the statement)
    // already fails; the second cannot recover the fact from the first probe's reply either.
    let (rec, j) = judge_with(TWICE, Mode::Warn, None).await;
    assert!(j.recall.iter().all(|r| r.correct), "{:?}", j.recall);
    for r in rec.requests.iter().filter_map(|r| r.response.as_ref()) {
        assert!(
            !r.message.content.contains("PostgreSQL"),
            "{}",
            r.message.content
        );
    }
}
