//! `opaque_hashed` against the reference engine and its mutants.

use crate::support::judge_with;
use ctxbench_engine::mutants::Mutation;
use ctxbench_harness::storage::schema::VerdictStatus;
use ctxbench_harness::Mode;

const SCENARIO: &str = include_str!("../../../scenarios/native-compaction.yaml");

#[tokio::test]
async fn hashes_only_and_the_leaking_mutant_fails() {
    let find = |j: &ctxbench_harness::runner::Judgement| {
        j.verdicts
            .iter()
            .find(|v| v.grader == "opaque-items-hashed")
            .map(|v| (v.status, v.summary.clone()))
            .unwrap()
    };
    let (_, good) = judge_with(SCENARIO, Mode::Compact, None).await;
    let (s, summary) = find(&good);
    assert_eq!(s, VerdictStatus::Pass, "{summary}");
    assert!(
        !summary.starts_with("0 "),
        "the scenario must produce opaque items: {summary}"
    );
    let (_, bad) = judge_with(SCENARIO, Mode::Compact, Some(Mutation::OpaqueInTrace)).await;
    assert_eq!(find(&bad).0, VerdictStatus::Fail);
}
