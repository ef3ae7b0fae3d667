//! `no-invented-constraints` against the reference engine and its mutants.

use crate::support::grade_with;
use ctxbench_engine::mutants::Mutation;
use ctxbench_harness::storage::schema::VerdictStatus;
use ctxbench_harness::Mode;

const DEFECTS: &str = include_str!("../../../scenarios/model-summary-defects.yaml");

#[tokio::test]
async fn an_accepted_invented_constraint_fails() {
    let g = "no-invented-constraints";
    let (_, v) = grade_with(DEFECTS, Mode::Compact, None, g).await;
    assert_eq!(v.status, VerdictStatus::Pass, "{v:?}");
    let (_, v) = grade_with(
        DEFECTS,
        Mode::Compact,
        Some(Mutation::AcceptInventedConstraints),
        g,
    )
    .await;
    assert_eq!(v.status, VerdictStatus::Fail, "{v:?}");
    assert_eq!(
        v.evidence[0].excerpt.as_deref(),
        Some("Never run database migrations on weekdays.")
    );
}

#[tokio::test]
async fn not_applicable_where_nothing_is_invented() {
    let (_, v) = grade_with(
        crate::support::COMPACTING,
        Mode::Compact,
        None,
        "no-invented-constraints",
    )
    .await;
    assert_eq!(v.status, VerdictStatus::Skip, "{v:?}");
}
