//! `overflow_no_duplicate` against the reference engine and its mutants.

use crate::support::grade_with;
use ctxbench_engine::mutants::Mutation;
use ctxbench_harness::storage::schema::VerdictStatus;
use ctxbench_harness::Mode;

/// Three requests per turn; the faults hit the seventh turn's second request (20).
fn overflow(faults: &str) -> String {
    format!(
        r#"
id: overflow
title: Overflow
model: {{context_window: 8192, max_output: 256}}
context: {{reserved_output_tokens: 256, buffer_tokens: 512, recent_tail_tokens: 800, summary_target_tokens: 200}}
instructions: "You are a coding agent."
tools:
  - name: read_file
    description: Read a file.
    parameters: {{type: object, properties: {{path: {{type: string}}}}, required: [path]}}
  - name: write_file
    description: Write a file.
    parameters: {{type: object, properties: {{path: {{type: string}}}}, required: [path]}}
script:
  - repeat: 8
    steps:
      - user: "Fix handler {{i}}. {{filler:150}}"
      - tool_calls:
          - call: {{name: read_file, args: {{path: "src/h{{i}}.rs"}}}}
            result: {{filler: {{tokens: 300, kind: code}}}}
      - tool_calls:
          - call: {{name: write_file, args: {{path: "src/h{{i}}.rs"}}}}
            result: "Wrote src/h{{i}}.rs"
      - assistant: "Fixed handler {{i}}."
faults:
{faults}
expect:
  outcome: any
"#
    )
}

#[tokio::test]
async fn one_clean_retry_passes_and_broken_retries_fail() {
    let g = "overflow-no-duplicate";
    let once = overflow("  - {at_request: 20, provider: overflow}");
    let twice = overflow(
        "  - {at_request: 20, provider: overflow}\n  - {at_request: 21, provider: overflow}",
    );
    let partial = overflow("  - {at_request: 20, provider: overflow_after_partial_output}");
    for yaml in [&once, &twice, &partial] {
        let (rec, v) = grade_with(yaml, Mode::Compact, None, g).await;
        assert!(rec.stats.provider_overflows > 0, "fixture must overflow");
        assert_eq!(v.status, VerdictStatus::Pass, "{v:?}");
    }
    let (rec, v) = grade_with(&once, Mode::Compact, None, g).await;
    assert!(
        rec.requests
            .iter()
            .any(|r| r.row.retry_reason.as_deref() == Some("provider_overflow")),
        "the clean overflow is retried"
    );
    assert!(v.summary.contains("1 run(s) retried once"), "{v:?}");

    let (_, v) = grade_with(&twice, Mode::Compact, Some(Mutation::RetryTwice), g).await;
    assert_eq!(v.status, VerdictStatus::Fail, "{v:?}");
    let (_, v) = grade_with(
        &once,
        Mode::Compact,
        Some(Mutation::DuplicateInputOnRetry),
        g,
    )
    .await;
    assert_eq!(v.status, VerdictStatus::Fail, "{v:?}");
    assert!(v.evidence.iter().any(|e| e.request.is_some()), "{v:?}");
}
