//! `no_thrash` against the reference engine and its mutants.

use crate::support::grade_with;
use ctxbench_engine::mutants::Mutation;
use ctxbench_harness::storage::schema::VerdictStatus;
use ctxbench_harness::Mode;

/// A large fixed instruction block and small turns: once the history is compacted, each
/// further compaction can only reclaim a few turns' worth of tokens. (Each turn renames its
/// own variable and a new name in other words: with only counters, "v7 to w6", the turns
/// are a loop the summarizer folds into its newest turn, and the summary would stop
/// growing. The
/// instruction block is sized so that one compaction no longer makes the request fit: the
/// loop mutant then compacts again and again.)
const THRASH: &str = r#"
id: thrash
title: Thrash
model: {context_window: 4096, max_output: 256}
context: {reserved_output_tokens: 256, buffer_tokens: 512, recent_tail_tokens: 120, summary_target_tokens: 120}
instructions: "You are a coding agent. {filler:3200}"
script:
  - repeat: 40
    steps:
      - user: "Rename variable v{i} in the parser to {filler:4:prose}"
      - assistant: "Renamed v{i}."
expect:
  outcome: any
"#;

#[tokio::test]
async fn reference_stops_on_little_reclaim_and_the_loop_fails() {
    let g = "no-thrash";
    let (rec, v) = grade_with(THRASH, Mode::Compact, None, g).await;
    assert_eq!(v.status, VerdictStatus::Pass, "{v:?}");
    assert!(
        rec.events.iter().any(|e| matches!(&e.event,
                ctxbench_harness::sut::EngineEvent::CompactionFailed { reason, .. }
                    if reason == "no_progress")),
        "the reference must hit its no-progress guard"
    );
    let (_, v) = grade_with(THRASH, Mode::Compact, Some(Mutation::LoopCompaction), g).await;
    assert_eq!(v.status, VerdictStatus::Fail, "{v:?}");
}
