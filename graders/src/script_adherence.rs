//! `script-adherence`: the fake model stayed on script, so the trial measured what the
//! scenario meant.
//!
//! A system that drops or alters the user's message gets replies the script never planned
//! — smaller requests, fewer tool calls — which would otherwise count as completed turns and
//! inflate token reduction. From what ctxbench saw, for every scripted user turn:
//!
//! - when the turn sent any request, at least one carried the scripted user text (verbatim,
//!   or inside the runtime's own decoration) as its latest user message;
//! - no reply was the fake model's [`UNSCRIPTED_REPLY`] (no scripted turn matched);
//! - a turn that completed played every scripted tool call (a turn that stopped may not).
//!
//! A trial that fails here never passes, and reports leave it out of token-reduction pairs.

use ctxbench_adapters::fake::UNSCRIPTED_REPLY;
use ctxbench_adapters::Role;
use ctxbench_harness::scenario::Step;
use ctxbench_harness::storage::schema::{Evidence, Verdict};
use ctxbench_harness::sut::TurnOutcome;

use crate::common::{redacted_excerpt, turn_requests};
use crate::{verdict, GradeContext, Grader};

/// The script-adherence grader.
pub struct ScriptAdherence;

impl Grader for ScriptAdherence {
    fn name(&self) -> &'static str {
        "script-adherence"
    }

    fn grade(&self, ctx: &GradeContext<'_>) -> Verdict {
        let rec = ctx.record;
        let mut failures = Vec::new();
        let mut turns = 0;
        for (i, s) in rec.steps.iter().enumerate() {
            let Step::Turn(turn) = s else { continue };
            let step = i as u64;
            turns += 1;
            let sent: Vec<_> = turn_requests(rec).filter(|r| r.row.step == step).collect();
            let want = turn.user.trim();
            let carried = sent.iter().any(|r| {
                r.row
                    .message_hashes
                    .iter()
                    .filter_map(|h| rec.messages.get(h))
                    .rfind(|m| m.role == Role::User)
                    .is_some_and(|m| m.content == turn.user || m.content.contains(want))
            });
            if !sent.is_empty() && !carried {
                failures.push(Evidence {
                    request: sent.first().map(|r| r.row.seq),
                    step: Some(step),
                    expected: Some("the scripted user message as the latest user message".into()),
                    seen: Some(format!("{} request(s), none carrying it", sent.len())),
                    excerpt: Some(redacted_excerpt(ctx.scenario, &turn.user, 100)),
                    note: format!("step {step}: the user's message was dropped or altered"),
                    ..Default::default()
                });
            }
            for r in &sent {
                let unscripted = r
                    .response
                    .as_ref()
                    .is_some_and(|x| x.message.content.starts_with(UNSCRIPTED_REPLY));
                if unscripted {
                    failures.push(Evidence {
                        request: Some(r.row.seq),
                        step: Some(step),
                        expected: Some("a scripted reply".into()),
                        seen: Some("the model had no scripted turn for this request".into()),
                        note: format!(
                            "request {} (step {step}): the model had to improvise",
                            r.row.seq
                        ),
                        ..Default::default()
                    });
                }
            }
            let completed = rec
                .turns
                .iter()
                .any(|t| t.step == step && matches!(t.outcome, TurnOutcome::Completed { .. }));
            let scripted = turn.tool_rounds.iter().flatten().count();
            let played = rec
                .tool_executions
                .iter()
                .filter(|e| e.step == step && e.scripted)
                .count();
            if completed && played < scripted {
                failures.push(Evidence {
                    step: Some(step),
                    expected: Some(format!("{scripted} scripted tool call(s) played")),
                    seen: Some(format!("{played} played")),
                    note: format!(
                        "step {step}: the turn completed without playing every scripted tool call"
                    ),
                    ..Default::default()
                });
            }
        }
        verdict(
            self.name(),
            format!("{turns} scripted turn(s) played as written"),
            failures,
        )
    }
}
