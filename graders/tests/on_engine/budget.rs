//! `budget` against the reference engine and its mutants.

use crate::support::{judge_with, OVER_BUDGET};
use ctxbench_engine::mutants::Mutation;
use ctxbench_harness::storage::schema::VerdictStatus;
use ctxbench_harness::Mode;

#[tokio::test]
async fn warn_passes_and_silent_over_budget_fails() {
    let (rec, good) = judge_with(OVER_BUDGET, Mode::Warn, None).await;
    assert!(
        rec.requests.iter().any(|r| r.row.sent && r.row.over_budget),
        "fixture must go over budget"
    );
    let v = good.verdicts.iter().find(|v| v.grader == "budget").unwrap();
    assert_eq!(v.status, VerdictStatus::Pass, "{v:?}");
    let (_, bad) = judge_with(OVER_BUDGET, Mode::Warn, Some(Mutation::SilentOverBudget)).await;
    let v = bad.verdicts.iter().find(|v| v.grader == "budget").unwrap();
    assert_eq!(v.status, VerdictStatus::Fail, "{v:?}");
    assert!(v.evidence[0].request.is_some());
}

#[tokio::test]
async fn compact_passes_and_sending_over_budget_without_compacting_fails() {
    let (_, good) = judge_with(OVER_BUDGET, Mode::Compact, None).await;
    let v = good.verdicts.iter().find(|v| v.grader == "budget").unwrap();
    assert_eq!(v.status, VerdictStatus::Pass, "{v:?}");
    let (_, bad) = judge_with(
        OVER_BUDGET,
        Mode::Compact,
        Some(Mutation::SilentOverBudgetCompact),
    )
    .await;
    let v = bad.verdicts.iter().find(|v| v.grader == "budget").unwrap();
    assert_eq!(v.status, VerdictStatus::Fail, "{v:?}");
    assert!(v.evidence[0].note.contains("compact mode"), "{v:?}");
}

#[tokio::test]
async fn off_reports_but_does_not_fail() {
    let (_, j) = judge_with(OVER_BUDGET, Mode::Off, None).await;
    let v = j.verdicts.iter().find(|v| v.grader == "budget").unwrap();
    assert_eq!(v.status, VerdictStatus::Pass, "{v:?}");
}
