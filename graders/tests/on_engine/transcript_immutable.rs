//! `transcript_immutable` against the reference engine and its mutants.

use crate::support::{grade_with, COMPACTING};
use ctxbench_adapters::Message;
use ctxbench_engine::mutants::Mutation;
use ctxbench_engine::session::{Session, TurnStatus};
use ctxbench_graders::transcript_immutable::recompute_chain;
use ctxbench_harness::storage::schema::VerdictStatus;
use ctxbench_harness::Mode;

#[test]
fn chain_rule_matches_the_session_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Session::create(dir.path()).unwrap();
    let t1 = vec![Message::user("one"), Message::assistant("a")];
    let t2 = vec![Message::user("two"), Message::tool_result("c", "r")];
    for (msgs, status) in [(&t1, TurnStatus::Completed), (&t2, TurnStatus::Incomplete)] {
        s.begin_turn().unwrap();
        for m in msgs.iter() {
            s.append(m.clone()).unwrap();
        }
        s.end_turn(status).unwrap();
    }
    let transcript: Vec<Message> = t1.iter().chain(&t2).cloned().collect();
    let heads = recompute_chain(&transcript, &[(0, true), (2, false)]);
    assert_eq!(heads[1].1, s.chain_head());
    assert_eq!(heads[1].0, 4);
}

#[tokio::test]
async fn reference_keeps_the_transcript_and_a_destructive_compaction_fails() {
    let (rec, v) = grade_with(COMPACTING, Mode::Compact, None, "transcript-immutable").await;
    assert!(
        rec.events
            .iter()
            .any(|e| e.event.kind() == "context.compaction.completed"),
        "fixture must compact"
    );
    assert_eq!(v.status, VerdictStatus::Pass, "{v:?}");
    let (_, v) = grade_with(COMPACTING, Mode::Off, None, "transcript-immutable").await;
    assert_eq!(v.status, VerdictStatus::Pass, "{v:?}");

    let (_, v) = grade_with(
        COMPACTING,
        Mode::Compact,
        Some(Mutation::MutateTranscript),
        "transcript-immutable",
    )
    .await;
    assert_eq!(v.status, VerdictStatus::Fail, "{v:?}");
    let e = &v.evidence[0];
    assert!(e.request.is_some() && !e.hashes.is_empty(), "{e:?}");
}
