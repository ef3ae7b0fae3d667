//! `budget`: what was sent stayed inside its declared input budget, or said so first.
//!
//! - every physical request is preceded by `context.budgeted` (all modes: `off` still
//!   measures);
//! - `warn`: a request over its declared input budget must be preceded by
//!   `context.warning`;
//! - `compact`: no request may be over budget at all.
//!
//! "Over budget" uses the larger of the engine's declared estimate and the harness's own
//! estimate of the exact request sent, so an engine cannot under-declare its way out.
//! In `off`, over-budget requests are the documented baseline behaviour and are reported,
//! not failed.

use ctxbench_harness::storage::schema::{Evidence, Verdict};
use ctxbench_harness::Mode;

use crate::{verdict, GradeContext, Grader};

/// The budget grader.
pub struct Budget;

impl Grader for Budget {
    fn name(&self) -> &'static str {
        "budget"
    }

    fn grade(&self, ctx: &GradeContext<'_>) -> Verdict {
        let mode = ctx.record.mode;
        if crate::common::black_box(ctx.record) {
            return black_box(self.name(), ctx);
        }
        let mut failures = Vec::new();
        let mut sent = 0;
        let mut over = 0;
        for r in ctx
            .record
            .requests
            .iter()
            .filter(|r| r.row.sent && r.row.purpose == "turn")
        {
            sent += 1;
            let row = &r.row;
            if row.budget.window == 0 {
                failures.push(Evidence {
                    request: Some(row.seq),
                    step: Some(row.step),
                    note: format!(
                        "request {} was sent without a preceding context.budgeted",
                        row.seq
                    ),
                    ..Default::default()
                });
                continue;
            }
            if !row.over_budget {
                continue;
            }
            over += 1;
            let size = row.budget.total.max(row.observed_estimate);
            let seen = format!(
                "{size} estimated input tokens (declared {}, observed {}) against {} available",
                row.budget.total, row.observed_estimate, row.budget.available_input
            );
            let violation = match mode {
                Mode::Off => None,
                Mode::Warn if !row.warned => {
                    Some("over budget without a preceding context.warning")
                }
                Mode::Warn => None,
                Mode::Compact => Some("over budget in compact mode"),
            };
            if let Some(what) = violation {
                failures.push(Evidence {
                    request: Some(row.seq),
                    step: Some(row.step),
                    expected: Some(format!(
                        "≤ {} tokens, or a warning first",
                        row.budget.available_input
                    )),
                    seen: Some(seen),
                    note: format!("request {} (step {}): {what}", row.seq, row.step),
                    ..Default::default()
                });
            }
        }
        verdict(
            self.name(),
            format!(
                "{sent} requests budgeted; {over} over budget ({})",
                match mode {
                    Mode::Off => "reported, not gated in off",
                    Mode::Warn => "each warned",
                    Mode::Compact => "none allowed",
                }
            ),
            failures,
        )
    }
}

/// Without budget events only the window can be checked: the harness judged each request
/// as sent (its estimate plus the output allowance) against the model's window. In
/// `compact` no request may exceed it; in `warn` and `off` over-window requests are
/// reported (whether a warning preceded them is not observable).
fn black_box(name: &str, ctx: &GradeContext<'_>) -> Verdict {
    let mode = ctx.record.mode;
    let mut failures = Vec::new();
    let (mut sent, mut over) = (0, 0);
    for r in crate::common::turn_requests(ctx.record) {
        sent += 1;
        if !r.row.over_budget {
            continue;
        }
        over += 1;
        if mode == Mode::Compact {
            failures.push(Evidence {
                request: Some(r.row.seq),
                step: Some(r.row.step),
                expected: Some("a request that fits the model's window".into()),
                seen: Some(format!(
                    "{} estimated input tokens plus the output allowance exceed the window",
                    r.row.observed_estimate
                )),
                note: format!(
                    "request {} (step {}): over the window in compact mode",
                    r.row.seq, r.row.step
                ),
                ..Default::default()
            });
        }
    }
    verdict(
        name,
        format!(
            "black box (no budget events): {sent} request(s), {over} over the window ({})",
            if mode == Mode::Compact {
                "none allowed"
            } else {
                "reported; warnings are not observable"
            }
        ),
        failures,
    )
}

#[cfg(test)]
mod tests {
    use crate::testing::{judge_with, OVER_BUDGET};
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
}
