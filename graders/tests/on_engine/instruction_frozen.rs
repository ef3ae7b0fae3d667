//! `instruction_frozen` against the reference engine and its mutants.

use crate::support::grade_with;
use ctxbench_engine::mutants::Mutation;
use ctxbench_harness::storage::schema::VerdictStatus;
use ctxbench_harness::Mode;

/// Multi-round turns and an instruction edit.
const ROUNDS: &str = r#"
id: rounds
title: Rounds
model: {context_window: 16384, max_output: 512}
context: {reserved_output_tokens: 512, buffer_tokens: 1024}
instructions: "You are a coding agent."
tools:
  - name: read_file
    description: Read a file.
    parameters: {type: object, properties: {path: {type: string}}, required: [path]}
script:
  - user: "Read two files."
  - tool_calls:
      - call: {name: read_file, args: {path: a.rs}}
        result: "fn a() {}"
  - tool_calls:
      - call: {name: read_file, args: {path: b.rs}}
        result: "fn b() {}"
  - assistant: "Read both."
  - edit_instructions: {set: "You are a careful coding agent."}
  - user: "And one more."
  - tool_calls:
      - call: {name: read_file, args: {path: c.rs}}
        result: "fn c() {}"
  - assistant: "Done."
expect:
  outcome: success
"#;

#[tokio::test]
async fn reference_freezes_per_run_and_rereading_per_request_fails() {
    let g = "instruction-hash-frozen";
    for mode in [Mode::Off, Mode::Warn, Mode::Compact] {
        let (_, v) = grade_with(ROUNDS, mode, None, g).await;
        assert_eq!(v.status, VerdictStatus::Pass, "{mode}: {v:?}");
    }
    let (_, v) = grade_with(
        ROUNDS,
        Mode::Compact,
        Some(Mutation::ReloadInstructionsPerAttempt),
        g,
    )
    .await;
    assert_eq!(v.status, VerdictStatus::Fail, "{v:?}");
    assert!(v.evidence[0].request.is_some());
    assert_eq!(v.evidence[0].hashes.len(), 2);
}
