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
        (
            ctxbench_graders::grader("instructions-outrank-history")
                .unwrap()
                .grade_trial(&scenario, rec, &null),
            ctxbench_graders::grader("instruction-hash-frozen")
                .unwrap()
                .grade_trial(&scenario, rec, &null),
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

/// A system prompt that arrives as several system messages (the Anthropic wire turns each
/// `system` block into one; Claude Code sends a header and an identity line before the file)
/// carries the file as long as one of the leading system messages does; memory above that
/// message, or the file only after the conversation has begun, still fails.
#[tokio::test]
async fn a_system_prompt_split_into_several_messages_carries_the_file() {
    use ctxbench_adapters::Message;
    let (mut rec, _) = grade_with(COMPACTING, Mode::Off, None, "budget").await;
    rec.events.clear();
    rec.declaration = ctxbench_engine::markup::declaration();
    let scenario = ctxbench_harness::scenario::load_str("test.yaml", COMPACTING).unwrap();
    let grade = |rec: &ctxbench_harness::record::TrialRecord| {
        let null = serde_json::Value::Null;
        (
            ctxbench_graders::grader("instructions-outrank-history")
                .unwrap()
                .grade_trial(&scenario, rec, &null),
            ctxbench_graders::grader("instruction-hash-frozen")
                .unwrap()
                .grade_trial(&scenario, rec, &null),
        )
    };
    let put = |rec: &mut ctxbench_harness::record::TrialRecord, key: &str, m: Message| {
        rec.messages.insert(key.to_string(), m);
        key.to_string()
    };
    let header = put(
        &mut rec,
        "h-header",
        Message::system("x-runtime-header: v=1"),
    );
    let identity = put(&mut rec, "h-identity", Message::system("You are RuntimeX."));
    let split = |rec: &mut ctxbench_harness::record::TrialRecord, ahead: &[String]| {
        for r in rec.requests.iter_mut() {
            for (i, h) in ahead.iter().enumerate() {
                r.row.message_hashes.insert(i, h.clone());
            }
        }
    };
    let mut split_rec = rec.clone();
    split(&mut split_rec, &[header.clone(), identity.clone()]);
    let (outrank, frozen) = grade(&split_rec);
    assert_eq!(outrank.status, VerdictStatus::Pass, "{outrank:?}");
    assert_eq!(frozen.status, VerdictStatus::Pass, "{frozen:?}");

    // Declared memory ahead of the file's message.
    let (open, close) = {
        let m = rec.declaration.memory.clone().unwrap();
        (m.open, m.close)
    };
    let memory = put(
        &mut rec,
        "h-memory",
        Message::system(format!("{open}\nearlier work\n{close}")),
    );
    let mut above = rec.clone();
    split(&mut above, &[header.clone(), memory]);
    let (outrank, _) = grade(&above);
    assert_eq!(outrank.status, VerdictStatus::Fail, "{outrank:?}");
    assert!(outrank.evidence[0].note.contains("above"), "{outrank:?}");

    // Without declared markup, a runtime's own preamble above the file is fine; history
    // above it is not.
    let mut undeclared = split_rec.clone();
    undeclared.declaration = Default::default();
    let (outrank, _) = grade(&undeclared);
    assert_eq!(outrank.status, VerdictStatus::Pass, "{outrank:?}");
    let earlier = rec.turns[2].user.clone();
    let history = put(
        &mut undeclared,
        "h-history",
        Message::system(format!("Earlier the user said: {earlier}")),
    );
    split(&mut undeclared, &[history]);
    let (outrank, _) = grade(&undeclared);
    assert_eq!(outrank.status, VerdictStatus::Fail, "{outrank:?}");
    assert!(outrank.evidence[0].note.contains("above"), "{outrank:?}");

    // A user message first: the file is no longer in the system prompt.
    let user = put(&mut rec, "h-user", Message::user("hello"));
    let mut late = rec.clone();
    split(&mut late, &[user]);
    let (outrank, frozen) = grade(&late);
    assert_eq!(outrank.status, VerdictStatus::Fail, "{outrank:?}");
    assert_eq!(frozen.status, VerdictStatus::Fail, "{frozen:?}");
}
