//! Event families: reporting some events never makes unrelated graders strict, and a
//! declared family is judged even when the system emitted none of it.

use crate::support::{judge_with, SMALL_RECALL};
use ctxbench_harness::storage::schema::VerdictStatus;
use ctxbench_harness::Mode;
use ctxbench_sut::EventFamily;

fn regrade(
    rec: &ctxbench_harness::record::TrialRecord,
    grader: &str,
) -> ctxbench_harness::storage::schema::Verdict {
    let scenario = ctxbench_harness::scenario::load_str("t.yaml", SMALL_RECALL).unwrap();
    let null = serde_json::Value::Null;
    ctxbench_graders::grader(grader)
        .unwrap()
        .grade_trial(&scenario, rec, &null)
}

#[tokio::test]
async fn only_the_families_reported_enable_their_graders() {
    let (mut rec, _) = judge_with(SMALL_RECALL, Mode::Compact, None).await;
    // The reference engine declares every family: all judged.
    assert_eq!(
        rec.declaration.events.as_deref(),
        Some(&EventFamily::ALL[..])
    );
    assert_eq!(regrade(&rec, "typed-reason").status, VerdictStatus::Pass);
    assert_eq!(
        regrade(&rec, "checkpoint-reuse-valid").status,
        VerdictStatus::Pass
    );

    // A runtime that reports only usage (budget family) and declares nothing.
    rec.declaration.events = None;
    rec.events
        .retain(|e| e.event.family() == EventFamily::Budget);
    assert!(!rec.events.is_empty());
    for g in ["typed-reason", "checkpoint-reuse-valid"] {
        let v = regrade(&rec, g);
        assert_eq!(v.status, VerdictStatus::Skip, "{g}: {v:?}");
        assert!(
            v.summary
                .starts_with("not-applicable: the system under test does not report"),
            "{v:?}"
        );
    }
    // The transcript check needs the transcript, not events.
    assert_eq!(
        regrade(&rec, "transcript-immutable").status,
        VerdictStatus::Pass
    );
    rec.transcript.clear();
    let v = regrade(&rec, "transcript-immutable");
    assert_eq!(v.status, VerdictStatus::Skip, "{v:?}");
    assert!(v.summary.contains("reported no transcript"), "{v:?}");

    // Declared but never emitted: judged (a silent compaction would be a failure to report).
    rec.declaration.events = Some(vec![EventFamily::Compaction]);
    assert_ne!(regrade(&rec, "typed-reason").status, VerdictStatus::Skip);
}
