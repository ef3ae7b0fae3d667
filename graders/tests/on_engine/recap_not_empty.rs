//! `recap_not_empty` against the reference engine and its mutants.

use crate::support::grade_with;
use ctxbench_engine::mutants::Mutation;
use ctxbench_harness::storage::schema::VerdictStatus;
use ctxbench_harness::Mode;

/// Small turns, then a newest turn larger than the recent tail, then a compact.
const OVERSIZED: &str = r#"
id: oversized
title: Oversized
model: {context_window: 8192, max_output: 256}
context: {reserved_output_tokens: 256, buffer_tokens: 512, recent_tail_tokens: 400, summary_target_tokens: 200}
instructions: "You are a coding agent."
facts:
  - id: db
    states: "All storage must use PostgreSQL 16."
    question: "Which database must all storage use?"
    expect: {contains: PostgreSQL}
tools:
  - name: read_file
    description: Read a file.
    parameters: {type: object, properties: {path: {type: string}}, required: [path]}
script:
  - user: "Ground rules: {fact:db}"
  - assistant: "Understood."
  - repeat: 4
    steps:
      - user: "Clean up module {i}. {filler:150}"
      - assistant: "Cleaned up module {i}."
  - user: "Read the whole build log."
  - tool_calls:
      - call: {name: read_file, args: {path: build.log}}
        result: {filler: {tokens: 1500, kind: code}}
  - assistant: "The build fails in the migration step."
  - compact: {}
  - probe: [db]
expect:
  outcome: any
"#;

#[tokio::test]
async fn reference_keeps_a_recap_and_dropping_history_fails() {
    let g = "recap-not-empty";
    let (rec, v) = grade_with(OVERSIZED, Mode::Compact, None, g).await;
    assert_eq!(v.status, VerdictStatus::Pass, "{v:?}");
    assert!(
        format!("{:?}", rec.compactions).contains("Compacted"),
        "fixture must compact: {:?}",
        rec.compactions
    );
    let (_, v) = grade_with(OVERSIZED, Mode::Compact, Some(Mutation::EmptyRecap), g).await;
    assert_eq!(v.status, VerdictStatus::Fail, "{v:?}");
    let (_, v) = grade_with(OVERSIZED, Mode::Warn, Some(Mutation::DropHistory), g).await;
    assert_eq!(v.status, VerdictStatus::Fail, "{v:?}");
}
