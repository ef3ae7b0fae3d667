//! `archive_refs` against the reference engine and its mutants.

use crate::support::grade_with;
use ctxbench_engine::mutants::Mutation;
use ctxbench_harness::storage::schema::VerdictStatus;
use ctxbench_harness::Mode;

/// Tool results that point at archives, enough of them to be summarized.
const ARCHIVED: &str = r#"
id: archived
title: Archived
model: {context_window: 4096, max_output: 256}
context: {reserved_output_tokens: 256, buffer_tokens: 512, recent_tail_tokens: 600, summary_target_tokens: 250}
instructions: "You are a coding agent."
tools:
  - name: run_command
    description: Run a command.
    parameters: {type: object, properties: {command: {type: string}}, required: [command]}
script:
  - repeat: 14
    steps:
      - user: "Build variant {i}. {filler:150}"
      - tool_calls:
          - call: {name: run_command, args: {command: "cargo build -F v{i}"}}
            result: "Build {i} finished. Full output archived at archive://runs/{i}/stdout.log (use read_archive).\n{filler:300:code}"
      - assistant: "Variant {i} builds."
expect:
  outcome: any
"#;

#[tokio::test]
async fn reference_keeps_refs_and_dropping_them_fails() {
    let g = "archive-refs";
    let (rec, v) = grade_with(ARCHIVED, Mode::Compact, None, g).await;
    assert!(
        rec.events
            .iter()
            .any(|e| e.event.kind() == "context.compaction.completed"),
        "fixture must compact"
    );
    assert_eq!(v.status, VerdictStatus::Pass, "{v:?}");
    let (_, v) = grade_with(ARCHIVED, Mode::Compact, Some(Mutation::DropArchiveRefs), g).await;
    assert_eq!(v.status, VerdictStatus::Fail, "{v:?}");
    assert!(v.evidence[0]
        .excerpt
        .as_deref()
        .is_some_and(|x| x.starts_with("archive://")));
}
