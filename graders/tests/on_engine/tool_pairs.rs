//! `tool_pairs` against the reference engine and its mutants.

use crate::support::{grade_with, COMPACTING};
use ctxbench_engine::mutants::Mutation;
use ctxbench_harness::storage::schema::VerdictStatus;
use ctxbench_harness::Mode;

/// Parallel batches in every turn, compacted in compact mode.
const PARALLEL: &str = r#"
id: parallel
title: Parallel
model: {context_window: 4096, max_output: 256}
context: {reserved_output_tokens: 256, buffer_tokens: 512, recent_tail_tokens: 700, summary_target_tokens: 200}
instructions: "You are a coding agent."
tools:
  - name: read_file
    description: Read a file.
    parameters: {type: object, properties: {path: {type: string}}, required: [path]}
script:
  - repeat: 8
    steps:
      - user: "Read module {i}. {filler:200}"
      - tool_calls:
          - call: {name: read_file, args: {path: "src/a{i}.rs"}}
            result: {filler: {tokens: 90, kind: code}}
          - call: {name: read_file, args: {path: "src/b{i}.rs"}}
            result: {filler: {tokens: 90, kind: code}}
      - tool_calls:
          - call: {name: read_file, args: {path: "src/c{i}.rs"}}
            result: {filler: {tokens: 100, kind: code}}
      - assistant: "Read module {i}."
expect:
  outcome: any
"#;

#[tokio::test]
async fn reference_keeps_pairs_and_a_mid_turn_tail_fails() {
    for yaml in [PARALLEL, COMPACTING] {
        let (rec, v) = grade_with(yaml, Mode::Compact, None, "tool-pairs").await;
        assert!(
            rec.events
                .iter()
                .any(|e| e.event.kind() == "context.compaction.completed"),
            "fixture must compact"
        );
        assert_eq!(v.status, VerdictStatus::Pass, "{v:?}");
    }
    let (_, v) = grade_with(
        PARALLEL,
        Mode::Compact,
        Some(Mutation::SplitToolPairs),
        "tool-pairs",
    )
    .await;
    assert_eq!(v.status, VerdictStatus::Fail, "{v:?}");
    let e = &v.evidence[0];
    assert!(e.request.is_some(), "{e:?}");
    assert!(
        e.excerpt.as_deref().unwrap_or("").contains("[tool("),
        "{e:?}"
    );
}
