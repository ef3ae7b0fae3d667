//! `limit-honest`: context failure is a real, typed terminal condition — and a stop has a
//! cause ctxbench can see.
//!
//! - Every turn that did not complete carries a reason from the protocol's vocabulary
//!   ([`KNOWN_REASONS`], docs/agent-protocol.md) — never an empty or made-up one.
//! - The reason agrees with what happened: `provider_overflow` needs a context overflow from
//!   the provider in that turn, `provider_overflow_after_output` one with partial output,
//!   and any other `provider_*` failure (e.g. `provider_rejected`) a request of that turn
//!   that ctxbench's provider answered with an error (issue #16: a runtime claiming the
//!   provider failed without asking it, or when it answered, fails here);
//!   `mandatory_context_exceeds_budget` needs a turn with no provider call whose mandatory
//!   context (instruction file, user message, tool definitions — counted by the provider's
//!   tokenizer) does not fit the scenario's declared input budget; any other context stop
//!   needs a session that, kept whole, would not fit it. A system that refuses work that fits
//!   fails here. Counts within `tolerance` (parameter, default 10%) of the budget are given
//!   the benefit of the doubt either way: estimators differ.
//! - The modes' contract: `off` never stops for context (it sends; the provider decides), and
//!   `warn` stops only for mandatory context — a refusal in either is a failure.
//! - In `warn`/`compact`, no request is sent whose mandatory context is over the budget by
//!   more than the tolerance.
//! - When the scenario expects `limit_reached` before any provider call, the trial stops so
//!   and the stopping turn made zero provider calls.

use ctxbench_harness::record::TrialRecord;
use ctxbench_harness::scenario::{ExpectedOutcome, Scenario, Step};
use ctxbench_harness::storage::schema::{Evidence, OutcomeStatus, Verdict};
use ctxbench_harness::sut::{reasons, TurnOutcome};
use ctxbench_harness::Mode;

use crate::common::{declared_available, mandatory_tokens, provider_scaled};
use crate::{verdict, GradeContext, Grader};

/// The protocol's reason vocabulary.
pub use ctxbench_harness::sut::reasons::TURN as KNOWN_REASONS;

/// Default share of the budget within which a count is not held against a system.
pub const DEFAULT_TOLERANCE: f64 = 0.10;

/// The limit-honesty grader.
pub struct LimitHonest;

/// The provider's count of the session kept whole up to and including step `step`'s user
/// message: mandatory context plus every earlier user text, tool result and model reply.
fn whole_session_tokens(scenario: &Scenario, rec: &TrialRecord, step: u64, user: &str) -> u64 {
    let tok = ctxbench_adapters::fake::FakeTokenizer::new();
    let mut history = 0u64;
    for p in crate::common::played(rec).iter().filter(|p| p.step < step) {
        history += tok.count_text(&p.text) + ctxbench_adapters::fake::FAKE_MESSAGE_FRAMING;
    }
    mandatory_tokens(scenario, rec, step, user) + provider_scaled(scenario, history)
}

impl Grader for LimitHonest {
    fn name(&self) -> &'static str {
        "limit-honest"
    }

    fn grade(&self, ctx: &GradeContext<'_>) -> Verdict {
        let rec = ctx.record;
        let tol = ctx
            .params
            .get("tolerance")
            .and_then(|v| v.as_f64())
            .filter(|t| (0.0..1.0).contains(t))
            .unwrap_or(DEFAULT_TOLERANCE);
        let available = declared_available(ctx.scenario);
        let low = (available as f64 * (1.0 - tol)) as u64;
        let high = (available as f64 * (1.0 + tol)) as u64;
        let mut failures = Vec::new();
        for t in &rec.turns {
            let reason = match &t.outcome {
                TurnOutcome::Completed { .. } | TurnOutcome::Errored { .. } => continue,
                TurnOutcome::LimitReached { reason, .. } | TurnOutcome::Failed { reason, .. } => {
                    reason.clone()
                }
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
                continue;
            }
            let in_step = || {
                rec.requests
                    .iter()
                    .filter(move |r| r.row.sent && r.row.step == t.step)
            };
            let overflow = |partial: bool| {
                in_step().any(|r| {
                    matches!(&r.error, Some(ctxbench_adapters::ProviderError::ContextOverflow { partial_output, .. })
                        if partial_output.as_deref().is_some_and(|p| !p.is_empty()) == partial)
                })
            };
            let sent = in_step().count();
            let errors = || {
                in_step()
                    .filter(|r| r.error.is_some() || r.row.error_kind.is_some())
                    .count()
            };
            let mandatory = mandatory_tokens(ctx.scenario, rec, t.step, &t.user);
            let problem: Option<(String, String)> = match reason.as_str() {
                reasons::PROVIDER_OVERFLOW if !overflow(false) && !overflow(true) => Some((
                    "a context overflow from the provider in this turn".into(),
                    "no overflow error was observed".into(),
                )),
                reasons::PROVIDER_OVERFLOW_AFTER_OUTPUT if !overflow(true) => Some((
                    "an overflow that carried partial output".into(),
                    "no such overflow was observed".into(),
                )),
                reasons::MANDATORY_CONTEXT if sent > 0 => Some((
                    "no provider call in a turn stopped for mandatory context".into(),
                    format!("{sent} request(s) sent in the turn"),
                )),
                reasons::MANDATORY_CONTEXT if mandatory < low => Some((
                    format!("mandatory context over the declared input budget of {available}"),
                    format!("mandatory context of {mandatory} tokens (provider count) fits"),
                )),
                r if r.starts_with("provider_")
                    && r != reasons::PROVIDER_OVERFLOW
                    && r != reasons::PROVIDER_OVERFLOW_AFTER_OUTPUT
                    && errors() == 0 =>
                {
                    Some((
                        "a provider error in this turn (the provider's recorded responses)".into(),
                        if sent == 0 {
                            "no request was sent to the provider in the turn".into()
                        } else {
                            format!(
                                "{sent} request(s) sent in the turn, all answered without an \
                                 error"
                            )
                        },
                    ))
                }
                r if r.starts_with("provider_")
                    || r == "infrastructure"
                    || r == reasons::ROUND_LIMIT =>
                {
                    None
                }
                reasons::MANDATORY_CONTEXT => None,
                _ => {
                    let whole = whole_session_tokens(ctx.scenario, rec, t.step, &t.user);
                    (whole < low).then(|| {
                        (
                            format!("a session that no longer fits the declared input budget of {available}"),
                            format!("the whole session so far is {whole} tokens (provider count): it fits"),
                        )
                    })
                }
            };
            // The modes' contract (seed 000 §Recommended modes): `off` sends everything and
            // never stops for context; `warn` stops only when mandatory context cannot fit.
            let problem = problem.or_else(|| {
                let stopped = matches!(t.outcome, TurnOutcome::LimitReached { .. });
                match rec.mode {
                    Mode::Off if stopped => Some((
                        "no context stop in `off` (it sends, the provider decides)".into(),
                        format!("limit_reached / {reason}"),
                    )),
                    Mode::Warn if stopped && reason != reasons::MANDATORY_CONTEXT => Some((
                        "in `warn`, a stop only for mandatory context that cannot fit".into(),
                        format!("limit_reached / {reason}"),
                    )),
                    _ => None,
                }
            });
            if let Some((expected, seen)) = problem {
                failures.push(Evidence {
                    step: Some(t.step),
                    expected: Some(expected),
                    seen: Some(seen),
                    note: format!(
                        "turn at step {} stopped with `{reason}`, which what ctxbench saw does \
                         not support",
                        t.step
                    ),
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
            let mut judged = std::collections::HashSet::new();
            for r in rec
                .requests
                .iter()
                .filter(|r| r.row.sent && r.row.purpose == "turn")
            {
                if !judged.insert(r.row.step) {
                    continue;
                }
                let Some(Step::Turn(turn)) = rec.steps.get(r.row.step as usize) else {
                    continue;
                };
                let mandatory = mandatory_tokens(ctx.scenario, rec, r.row.step, &turn.user);
                if mandatory > high {
                    failures.push(Evidence {
                        request: Some(r.row.seq),
                        step: Some(r.row.step),
                        expected: Some(format!(
                            "no provider call: mandatory context {mandatory} > declared input \
                             budget {available}"
                        )),
                        seen: Some(format!(
                            "request {} sent (provider said: {})",
                            r.row.seq,
                            r.row.error_kind.as_deref().unwrap_or("ok")
                        )),
                        note: format!(
                            "request {} carried mandatory context that cannot fit, and was sent \
                             anyway",
                            r.row.seq
                        ),
                        ..Default::default()
                    });
                }
            }
            if let ExpectedOutcome::LimitReached {
                before_provider_call,
            } = *ctx.scenario.expect.outcome_for(rec.mode)
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
                        let calls = rec
                            .requests
                            .iter()
                            .filter(|r| r.row.sent && r.row.step == t.step)
                            .count();
                        if calls > 0 {
                            failures.push(Evidence {
                                step: Some(t.step),
                                expected: Some("zero provider calls before the stop".into()),
                                seen: Some(format!("{calls} provider call(s)")),
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
            format!(
                "{stops} non-completed turn(s), all typed and with a cause ctxbench saw \
                 (declared input budget {available})"
            ),
            failures,
        )
    }
}
