//! `verification_historical` against the reference engine and its mutants.

use crate::support::judge_with;
use ctxbench_engine::mutants::Mutation;
use ctxbench_harness::storage::schema::VerdictStatus;
use ctxbench_harness::Mode;

const SCENARIO: &str = include_str!("../../../scenarios/verification-freshness.yaml");

#[tokio::test]
async fn labelled_results_pass_and_the_unlabelled_mutant_fails() {
    let status = |j: &ctxbench_harness::runner::Judgement| {
        j.verdicts
            .iter()
            .find(|v| v.grader == "verification-historical")
            .map(|v| (v.status, v.summary.clone()))
    };
    let (_, good) = judge_with(SCENARIO, Mode::Compact, None).await;
    let (s, summary) = status(&good).unwrap();
    assert_eq!(s, VerdictStatus::Pass);
    assert!(summary.starts_with("1 verification"), "{summary}");
    let (_, bad) = judge_with(
        SCENARIO,
        Mode::Compact,
        Some(Mutation::UnlabelledVerification),
    )
    .await;
    assert_eq!(
        status(&bad).unwrap().0,
        VerdictStatus::Fail,
        "{:?}",
        status(&bad)
    );
}
