//! `limit-honest`: context failure is a real, typed terminal condition.
//!
//! - every turn that did not complete carries a typed reason (never an empty or made-up
//!   success);
//! - in `warn`/`compact`, a request whose mandatory context (instructions, current request,
//!   tools, continuation) exceeds the available input is never sent, and a
//!   `context.limit_reached` stop is followed by no provider call in that turn;
//! - when the scenario expects `limit_reached` before any provider call, the trial stops so
//!   and the stopping turn made zero provider calls.

use ctxbench_harness::scenario::ExpectedOutcome;
use ctxbench_harness::storage::schema::{Evidence, OutcomeStatus, Verdict};
use ctxbench_harness::sut::TurnOutcome;
use ctxbench_harness::Mode;

use crate::{verdict, GradeContext, Grader};

/// Known stop and failure reasons: the engine's own vocabulary.
pub use ctxbench_harness::sut::reasons::TURN as KNOWN_REASONS;

/// The limit-honesty grader.
pub struct LimitHonest;

impl Grader for LimitHonest {
    fn name(&self) -> &'static str {
        "limit-honest"
    }

    fn grade(&self, ctx: &GradeContext<'_>) -> Verdict {
        let rec = ctx.record;
        let mut failures = Vec::new();
        for t in &rec.turns {
            let reason = match &t.outcome {
                TurnOutcome::Completed { .. } => continue,
                TurnOutcome::LimitReached { reason, .. } | TurnOutcome::Failed { reason, .. } => {
                    reason.clone()
                }
                TurnOutcome::Errored { .. } => "infrastructure".to_string(),
            };
            if !KNOWN_REASONS.contains(&reason.as_str()) {
                failures.push(Evidence {
                    step: Some(t.step),
                    expected: Some(format!("one of {}", KNOWN_REASONS.join(", "))),
                    seen: Some(if reason.is_empty() {
                        "(empty reason)".into()
                    } else {
                        reason.clone()
                    }),
                    note: format!("turn at step {} ended without a typed reason", t.step),
                    ..Default::default()
                });
            }
            if let TurnOutcome::LimitReached { .. } = &t.outcome {
                // No provider call may follow the stop within the turn.
                let stop_idx = rec
                    .requests
                    .iter()
                    .position(|r| !r.row.sent && r.row.step == t.step);
                if let Some(i) = stop_idx {
                    if let Some(after) = rec.requests[i + 1..]
                        .iter()
                        .find(|r| r.row.sent && r.row.step == t.step)
                    {
                        failures.push(Evidence {
                            request: Some(after.row.seq),
                            step: Some(t.step),
                            note: format!(
                                "request {} was sent after context.limit_reached in the same turn",
                                after.row.seq
                            ),
                            ..Default::default()
                        });
                    }
                }
            }
        }
        if rec.mode != Mode::Off {
            for r in rec
                .requests
                .iter()
                .filter(|r| r.row.sent && r.row.purpose == "turn")
            {
                let b = &r.row.budget;
                if b.window > 0 && b.mandatory() > b.available_input {
                    failures.push(Evidence {
                        request: Some(r.row.seq),
                        step: Some(r.row.step),
                        expected: Some(format!("no provider call: mandatory context {} > available {}", b.mandatory(), b.available_input)),
                        seen: Some(format!("request {} sent (provider said: {})", r.row.seq, r.row.error_kind.as_deref().unwrap_or("ok"))),
                        note: format!("request {} carried mandatory context that cannot fit, and was sent anyway", r.row.seq),
                        ..Default::default()
                    });
                }
            }
            if let ExpectedOutcome::LimitReached {
                before_provider_call,
            } = ctx.scenario.expect.outcome
            {
                if rec.outcome.status != OutcomeStatus::LimitReached {
                    failures.push(Evidence {
                        step: rec.outcome.step,
                        expected: Some("limit_reached".into()),
                        seen: Some(format!(
                            "{} {}",
                            rec.outcome.status.as_str(),
                            rec.outcome.reason
                        )),
                        note: "expected a limit_reached stop".into(),
                        ..Default::default()
                    });
                } else if before_provider_call {
                    if let Some(t) = rec.turns.iter().find(|t| Some(t.step) == rec.outcome.step) {
                        if !t.requests.is_empty() {
                            failures.push(Evidence {
                                step: Some(t.step),
                                request: t.requests.first().copied(),
                                expected: Some("zero provider calls before the stop".into()),
                                seen: Some(format!("{} provider call(s)", t.requests.len())),
                                note: "the stopping turn called the provider".into(),
                                ..Default::default()
                            });
                        }
                    }
                }
            }
        }
        let stops = rec
            .turns
            .iter()
            .filter(|t| !matches!(t.outcome, TurnOutcome::Completed { .. }))
            .count();
        verdict(
            self.name(),
            format!("{stops} non-completed turn(s), all typed and honest"),
            failures,
        )
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::{judge_with, UNFIT};
    use ctxbench_engine::mutants::Mutation;
    use ctxbench_harness::storage::schema::{OutcomeStatus, VerdictStatus};
    use ctxbench_harness::Mode;

    #[tokio::test]
    async fn unfit_stops_before_any_call() {
        let (rec, j) = judge_with(UNFIT, Mode::Warn, None).await;
        assert_eq!(rec.outcome.status, OutcomeStatus::LimitReached);
        assert_eq!(rec.stats.requests, 0);
        let v = j
            .verdicts
            .iter()
            .find(|v| v.grader == "limit-honest")
            .unwrap();
        assert_eq!(v.status, VerdictStatus::Pass, "{v:?}");
        assert!(j.passed);
    }

    #[tokio::test]
    async fn ignoring_the_mandatory_limit_fails() {
        let (rec, j) = judge_with(UNFIT, Mode::Warn, Some(Mutation::IgnoreMandatoryLimit)).await;
        assert!(rec.stats.requests > 0);
        let v = j
            .verdicts
            .iter()
            .find(|v| v.grader == "limit-honest")
            .unwrap();
        assert_eq!(v.status, VerdictStatus::Fail, "{v:?}");
        assert!(!j.passed);
    }

    #[tokio::test]
    async fn untyped_reason_fails() {
        let (_, j) = judge_with(UNFIT, Mode::Warn, Some(Mutation::UntypedLimitReason)).await;
        let v = j
            .verdicts
            .iter()
            .find(|v| v.grader == "limit-honest")
            .unwrap();
        assert_eq!(v.status, VerdictStatus::Fail, "{v:?}");
        assert!(v
            .evidence
            .iter()
            .any(|e| e.seen.as_deref() == Some("(empty reason)")));
    }
}
