//! `instructions-outrank-history` against the reference engine and its mutants.

use crate::support::{grade_with, COMPACTING};
use ctxbench_engine::mutants::Mutation;
use ctxbench_harness::storage::schema::VerdictStatus;
use ctxbench_harness::Mode;

#[tokio::test]
async fn reference_puts_instructions_first_and_misplaced_memory_fails() {
    let g = "instructions-outrank-history";
    let (_, v) = grade_with(COMPACTING, Mode::Compact, None, g).await;
    assert_eq!(v.status, VerdictStatus::Pass, "{v:?}");
    let (_, v) = grade_with(
        COMPACTING,
        Mode::Compact,
        Some(Mutation::MemoryAboveInstructions),
        g,
    )
    .await;
    assert_eq!(v.status, VerdictStatus::Fail, "{v:?}");
    let (_, v) = grade_with(COMPACTING, Mode::Warn, Some(Mutation::DropInstructions), g).await;
    assert_eq!(v.status, VerdictStatus::Fail, "{v:?}");
}

/// A runtime may trim its instruction file and embed it in its own system prompt; what it
/// may not do is put anything else first, leave the file out, or put history in the
/// instruction position.
#[tokio::test]
async fn instructions_may_be_embedded_but_must_come_first_and_alone() {
    let (mut rec, _) = grade_with(COMPACTING, Mode::Off, None, "budget").await;
    rec.events.clear();
    let scenario = ctxbench_harness::scenario::load_str("test.yaml", COMPACTING).unwrap();
    let grade = |rec: &ctxbench_harness::record::TrialRecord| {
        let null = serde_json::Value::Null;
        let ctx = ctxbench_graders::GradeContext {
            scenario: &scenario,
            record: rec,
            params: &null,
        };
        (
            ctxbench_graders::grader("instructions-outrank-history")
                .unwrap()
                .grade(&ctx),
            ctxbench_graders::grader("instruction-hash-frozen")
                .unwrap()
                .grade(&ctx),
        )
    };
    let first = rec.requests[0].row.message_hashes[0].clone();
    let original = rec.messages[&first].content.clone();
    rec.messages.get_mut(&first).unwrap().content = format!(
        "You are RuntimeX.\n\n<project-instructions>\n{}\n</project-instructions>",
        original.trim()
    );
    let (outrank, frozen) = grade(&rec);
    assert_eq!(outrank.status, VerdictStatus::Pass, "{outrank:?}");
    assert_eq!(frozen.status, VerdictStatus::Pass, "{frozen:?}");
    // History laundered into the system prompt, with the memory markup declared.
    rec.declaration = ctxbench_engine::markup::declaration();
    let earlier = rec.turns[2].user.clone();
    rec.messages.get_mut(&first).unwrap().content =
        format!("{}\nEarlier the user said: {earlier}", original.trim());
    let (outrank, _) = grade(&rec);
    assert_eq!(outrank.status, VerdictStatus::Fail, "{outrank:?}");
    rec.messages.get_mut(&first).unwrap().content = "You are RuntimeX.".into();
    let (outrank, frozen) = grade(&rec);
    assert_eq!(outrank.status, VerdictStatus::Fail, "{outrank:?}");
    assert_eq!(frozen.status, VerdictStatus::Fail, "{frozen:?}");
}
