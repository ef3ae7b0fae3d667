//! `typed_reason` against the reference engine and its mutants.

use crate::support::grade_with;
use ctxbench_engine::mutants::Mutation;
use ctxbench_harness::storage::schema::VerdictStatus;
use ctxbench_harness::Mode;

/// A compact before any turn (no safe span), compacts with a throwing summarizer and
/// with nothing new.
const REASONS: &str = r#"
id: reasons
title: Reasons
model: {context_window: 8192, max_output: 256}
context: {reserved_output_tokens: 256, buffer_tokens: 512, recent_tail_tokens: 300, summary_target_tokens: 200}
instructions: "You are a coding agent."
script:
  - compact: {}
  - repeat: 6
    steps:
      - user: "Tidy module {i}. {filler:80}"
      - assistant: "Tidied module {i}."
  - compact: {}
  - repeat: 3
    steps:
      - user: "Test module {i}. {filler:80}"
      - assistant: "Tested module {i}."
  - compact: {}
  - compact: {}
faults:
  - {at_compaction: 1, summarizer: fail}
expect:
  outcome: any
"#;

#[tokio::test]
async fn reference_reasons_are_true_and_mistyped_ones_fail() {
    let g = "typed-reason";
    let (rec, v) = grade_with(REASONS, Mode::Compact, None, g).await;
    let reasons: Vec<String> = rec
        .compactions
        .iter()
        .map(|c| format!("{:?}", c.outcome))
        .collect();
    assert!(
        reasons[0].contains("no_safe_completed_span")
            && reasons[1].contains("summarizer_failed")
            && reasons[2].contains("Compacted")
            && reasons[3].contains("already_compacted"),
        "{reasons:?}"
    );
    assert_eq!(v.status, VerdictStatus::Pass, "{v:?}");
    let (_, v) = grade_with(
        REASONS,
        Mode::Compact,
        Some(Mutation::MistypeFailureReason),
        g,
    )
    .await;
    assert_eq!(v.status, VerdictStatus::Fail, "{v:?}");
    assert_eq!(v.evidence[0].step, Some(0), "{v:?}");
}
