//! `checkpoint_reuse` against the reference engine and its mutants.

use crate::support::grade_with;
use ctxbench_engine::mutants::Mutation;
use ctxbench_harness::storage::schema::VerdictStatus;
use ctxbench_harness::Mode;

/// Compacts, restarts (reuse), damages the checkpoint, restarts (reject), continues.
const RESTARTS: &str = r#"
id: restarts
title: Restarts
model: {context_window: 8192, max_output: 256}
context: {reserved_output_tokens: 256, buffer_tokens: 512, recent_tail_tokens: 300, summary_target_tokens: 200}
instructions: "You are a coding agent."
script:
  - repeat: 6
    steps:
      - user: "Tidy module {i}. {filler:80}"
      - assistant: "Tidied module {i}."
  - compact: {}
  - restart: {}
  - user: "Next."
  - assistant: "OK."
  - corrupt_checkpoint: stale_source
  - restart: {}
  - repeat: 2
    steps:
      - user: "Test module {i}."
      - assistant: "Tested module {i}."
expect:
  outcome: any
"#;

#[tokio::test]
async fn reference_reuses_and_rejects_and_trusting_a_stale_one_fails() {
    let g = "checkpoint-reuse-valid";
    let (rec, v) = grade_with(RESTARTS, Mode::Compact, None, g).await;
    let kinds: Vec<&str> = rec.events.iter().map(|e| e.event.kind()).collect();
    assert!(kinds.contains(&"context.checkpoint.reused"), "{kinds:?}");
    assert!(kinds.contains(&"context.checkpoint.rejected"), "{kinds:?}");
    assert_eq!(v.status, VerdictStatus::Pass, "{v:?}");
    let (_, v) = grade_with(
        RESTARTS,
        Mode::Compact,
        Some(Mutation::TrustStaleCheckpoint),
        g,
    )
    .await;
    assert_eq!(v.status, VerdictStatus::Fail, "{v:?}");
    assert!(!v.evidence[0].hashes.is_empty());
}

/// Compacts on its own first, then a manual compaction directly before a restart: the
/// checkpoint reused is the manual one, newer than any memory a request carried before the
/// restart, so the memory check has no baseline (it used to compare against the older one).
const MANUAL_COMPACT_THEN_RESTART: &str = r#"
id: manual-then-restart
title: Manual compaction directly before a restart
model: {context_window: 8192, max_output: 256}
context: {reserved_output_tokens: 256, buffer_tokens: 512, recent_tail_tokens: 300, summary_target_tokens: 200}
instructions: "You are a coding agent."
script:
  - repeat: 24
    steps:
      - user: "Tidy module {i}. {filler:400}"
      - assistant: "Tidied module {i}."
  - user: "Now the parser. {filler:300}"
  - assistant: "Parser next."
  - compact: {}
  - restart: {}
  - repeat: 2
    steps:
      - user: "Test module {i}."
      - assistant: "Tested module {i}."
expect:
  outcome: any
"#;

#[tokio::test]
async fn a_manual_compaction_right_before_a_restart_is_not_a_stale_memory() {
    let g = "checkpoint-reuse-valid";
    let (rec, v) = grade_with(MANUAL_COMPACT_THEN_RESTART, Mode::Compact, None, g).await;
    let kinds: Vec<&str> = rec.events.iter().map(|e| e.event.kind()).collect();
    let compactions = kinds
        .iter()
        .filter(|k| **k == "context.compaction.completed")
        .count();
    assert!(compactions >= 2, "{kinds:?}");
    assert!(kinds.contains(&"context.checkpoint.reused"), "{kinds:?}");
    assert_eq!(v.status, VerdictStatus::Pass, "{v:?}");
}
