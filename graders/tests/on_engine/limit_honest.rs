//! `limit-honest` against the reference engine and its mutants.

use crate::support::{judge_with, SMALL_RECALL, UNFIT};
use ctxbench_engine::mutants::Mutation;
use ctxbench_harness::storage::schema::{OutcomeStatus, VerdictStatus};
use ctxbench_harness::sut::TurnOutcome;
use ctxbench_harness::Mode;

fn verdict(j: &ctxbench_harness::runner::Judgement) -> &ctxbench_harness::storage::schema::Verdict {
    j.verdicts
        .iter()
        .find(|v| v.grader == "limit-honest")
        .unwrap()
}

#[tokio::test]
async fn unfit_stops_before_any_call() {
    let (rec, j) = judge_with(UNFIT, Mode::Warn, None).await;
    assert_eq!(rec.outcome.status, OutcomeStatus::LimitReached);
    assert_eq!(rec.stats.requests, 0);
    assert_eq!(verdict(&j).status, VerdictStatus::Pass, "{:?}", verdict(&j));
    assert!(j.passed);
}

#[tokio::test]
async fn ignoring_the_mandatory_limit_fails() {
    let (rec, j) = judge_with(UNFIT, Mode::Warn, Some(Mutation::IgnoreMandatoryLimit)).await;
    assert!(rec.stats.requests > 0);
    assert_eq!(verdict(&j).status, VerdictStatus::Fail, "{:?}", verdict(&j));
    assert!(!j.passed);
}

#[tokio::test]
async fn untyped_reason_fails() {
    let (_, j) = judge_with(UNFIT, Mode::Warn, Some(Mutation::UntypedLimitReason)).await;
    assert_eq!(verdict(&j).status, VerdictStatus::Fail);
    assert!(verdict(&j)
        .evidence
        .iter()
        .any(|e| e.seen.as_deref() == Some("(empty reason)")));
}

/// A system that refuses work that fits, naming a context stop, is caught: the grader counts
/// the turn's context itself.
#[tokio::test]
async fn a_refusal_of_work_that_fits_fails() {
    let (mut rec, j) = judge_with(SMALL_RECALL, Mode::Compact, None).await;
    assert_eq!(verdict(&j).status, VerdictStatus::Pass);
    let scenario = ctxbench_harness::scenario::load_str("t.yaml", SMALL_RECALL).unwrap();
    for reason in ["mandatory_context_exceeds_budget", "context_exhausted"] {
        let t = rec.turns.last_mut().unwrap();
        t.outcome = TurnOutcome::LimitReached {
            reason: reason.into(),
            detail: "refused".into(),
            budget: None,
        };
        rec.requests
            .retain(|r| r.row.step != rec.turns.last().unwrap().step);
        let null = serde_json::Value::Null;
        let v = ctxbench_graders::grader("limit-honest")
            .unwrap()
            .grade_trial(&scenario, &rec, &null);
        assert_eq!(v.status, VerdictStatus::Fail, "{reason}: {v:?}");
        assert!(
            v.evidence[0].seen.as_deref().unwrap_or("").contains("fits"),
            "{v:?}"
        );
    }
}

/// A claimed provider failure must be backed by what ctxbench's provider recorded for the
/// turn (issue #16): `failed / provider_rejected` with no request sent, or after requests the
/// provider answered without error, fails; with a recorded provider error it passes.
#[tokio::test]
async fn an_unbacked_provider_failure_fails() {
    let (rec, j) = judge_with(SMALL_RECALL, Mode::Compact, None).await;
    assert_eq!(verdict(&j).status, VerdictStatus::Pass);
    let scenario = ctxbench_harness::scenario::load_str("t.yaml", SMALL_RECALL).unwrap();
    let null = serde_json::Value::Null;
    let grade = |rec: &ctxbench_harness::record::TrialRecord| {
        ctxbench_graders::grader("limit-honest")
            .unwrap()
            .grade_trial(&scenario, rec, &null)
    };
    let step = rec.turns.last().unwrap().step;
    let reason = "provider_rejected";
    let mut claimed = rec.clone();
    claimed.turns.last_mut().unwrap().outcome = TurnOutcome::Failed {
        reason: reason.into(),
        detail: "refused".into(),
    };
    // Requests answered without error: not backed.
    let v = grade(&claimed);
    assert_eq!(v.status, VerdictStatus::Fail, "{reason} answered: {v:?}");
    assert!(
        v.evidence[0]
            .seen
            .as_deref()
            .unwrap_or("")
            .contains("without an error"),
        "{v:?}"
    );
    // No request at all: not backed.
    let mut silent = claimed.clone();
    silent.requests.retain(|r| r.row.step != step);
    let v = grade(&silent);
    assert_eq!(v.status, VerdictStatus::Fail, "{reason} silent: {v:?}");
    assert!(
        v.evidence[0]
            .seen
            .as_deref()
            .unwrap_or("")
            .contains("no request was sent"),
        "{v:?}"
    );
    // The provider did reject a request of that turn: backed.
    let mut backed = claimed.clone();
    let r = backed
        .requests
        .iter_mut()
        .rev()
        .find(|r| r.row.sent && r.row.step == step)
        .expect("a request in the last turn");
    r.response = None;
    r.error = Some(ctxbench_adapters::ProviderError::Rejected {
        status: 400,
        message: "bad request".into(),
    });
    r.row.error_kind = Some("rejected".into());
    let v = grade(&backed);
    assert_eq!(v.status, VerdictStatus::Pass, "{reason} backed: {v:?}");
}
