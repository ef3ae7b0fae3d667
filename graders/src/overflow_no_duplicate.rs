//! `overflow-no-duplicate`: overflow recovery retries once, with the same admitted input and
//! no repeated side effect (seed 000 invariant 10; §Overflow recovery).
//!
//! - **Input admitted once.** No turn request carries its run's user message more often
//!   than the runs so far that said exactly that, and the final transcript holds each user
//!   text exactly as often as runs admitted it: a retry reuses the admitted input, it never
//!   appends it again.
//! - **No side effect twice.** Within a run, no tool call id is executed twice.
//! - **One retry per input.** No attempt number exceeds 2, and at most one request per run
//!   is an overflow retry (`retry_reason: provider_overflow`); a second overflow is an
//!   ordinary, reported failure.
//! - **Visible output is never retried.** After an overflow whose error carried partial
//!   output, no further request is sent in that run.

use std::collections::{BTreeMap, HashMap, HashSet};

use ctxbench_adapters::{ProviderError, Role};
use ctxbench_harness::storage::schema::{Evidence, Verdict};

use crate::common::{redacted_excerpt, turn_requests};
use crate::{verdict, GradeContext, Grader};

/// The overflow-recovery grader.
pub struct OverflowNoDuplicate;

impl Grader for OverflowNoDuplicate {
    fn name(&self) -> &'static str {
        "overflow-no-duplicate"
    }

    fn grade(&self, ctx: &GradeContext<'_>) -> Verdict {
        let rec = ctx.record;
        let mut failures = Vec::new();
        let user_of: HashMap<u64, &str> = rec
            .turns
            .iter()
            .map(|t| (t.step, t.user.as_str()))
            .collect();
        // Runs so far that said each text.
        let said_by = |text: &str, up_to: u64| {
            rec.turns
                .iter()
                .filter(|t| t.step <= up_to && t.user == text)
                .count()
        };

        // Input admitted once, in every request.
        let mut flagged_steps = HashSet::new();
        for r in turn_requests(rec) {
            let Some(&user) = user_of.get(&r.row.step) else {
                continue;
            };
            let count = ctx
                .read
                .messages(r)
                .iter()
                .filter(|(_, m)| m.is_some_and(|m| m.role == Role::User && m.content == user))
                .count();
            let allowed = said_by(user, r.row.step);
            if count > allowed && flagged_steps.insert(r.row.step) {
                failures.push(Evidence {
                    request: Some(r.row.seq),
                    step: Some(r.row.step),
                    expected: Some(format!("the admitted input at most {allowed} time(s)")),
                    seen: Some(format!(
                        "{count} copies (attempt {}{})",
                        r.row.attempt,
                        r.row
                            .retry_reason
                            .as_deref()
                            .map(|s| format!(", retry: {s}"))
                            .unwrap_or_default()
                    )),
                    excerpt: Some(redacted_excerpt(ctx.scenario, user, 100)),
                    note: format!(
                        "request {} (step {}) carries the run's user input {count} times",
                        r.row.seq, r.row.step
                    ),
                    ..Default::default()
                });
            }
        }

        // And in the transcript.
        let mut in_transcript: BTreeMap<&str, usize> = BTreeMap::new();
        for m in rec.transcript.iter().filter(|m| m.role == Role::User) {
            *in_transcript.entry(m.content.as_str()).or_default() += 1;
        }
        for (text, n) in in_transcript {
            let admitted = rec.turns.iter().filter(|t| t.user == text).count();
            // A user text no run said is not a duplicate (`transcript-immutable` judges it).
            if admitted > 0 && n > admitted {
                failures.push(Evidence {
                    expected: Some(format!("{admitted} time(s), once per run that said it")),
                    seen: Some(format!("{n} time(s) in the final transcript")),
                    excerpt: Some(redacted_excerpt(ctx.scenario, text, 100)),
                    note: format!("a user input was admitted into the transcript {n} times"),
                    ..Default::default()
                });
            }
        }

        // No tool call executed twice within a run.
        let mut executed: HashSet<(u64, &str)> = HashSet::new();
        for x in &rec.tool_executions {
            if !executed.insert((x.step, x.call_id.as_str())) {
                failures.push(Evidence {
                    step: Some(x.step),
                    expected: Some("each tool call executed at most once".into()),
                    seen: Some(format!("`{}` ({}) executed again", x.call_id, x.name)),
                    note: format!(
                        "tool call `{}` was executed twice at step {}: a repeated side effect",
                        x.call_id, x.step
                    ),
                    ..Default::default()
                });
            }
        }

        // One retry per input; no retry after visible output.
        let mut overflows = 0;
        let mut retries: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        let mut partial_at: HashMap<u64, u64> = HashMap::new();
        // A black-box agent declares no retry reason: a turn request sent right after an
        // overflowed one of the same run is its retry.
        let black_box = crate::common::black_box(rec);
        let mut overflowed_in: Option<u64> = None;
        for r in rec.requests.iter().filter(|r| r.row.purpose == "turn") {
            let step = r.row.step;
            if black_box && r.row.sent {
                if overflowed_in == Some(step) {
                    retries.entry(step).or_default().push(r.row.seq);
                }
                overflowed_in =
                    matches!(r.error, Some(ProviderError::ContextOverflow { .. })).then_some(step);
            }
            if let Some(&at) = partial_at.get(&step) {
                if r.row.sent {
                    failures.push(Evidence {
                        request: Some(r.row.seq),
                        step: Some(step),
                        expected: Some(format!(
                            "no request after the overflow with visible output (request {at})"
                        )),
                        seen: Some(format!(
                            "request {} sent (attempt {})",
                            r.row.seq, r.row.attempt
                        )),
                        note: format!(
                            "step {step} retried after an overflow that had produced output"
                        ),
                        ..Default::default()
                    });
                    partial_at.remove(&step);
                }
            }
            if r.row.sent && r.row.attempt > 2 {
                failures.push(Evidence {
                    request: Some(r.row.seq),
                    step: Some(step),
                    expected: Some("attempt ≤ 2 (one retry per input)".into()),
                    seen: Some(format!("attempt {}", r.row.attempt)),
                    note: format!("request {} is attempt {}", r.row.seq, r.row.attempt),
                    ..Default::default()
                });
            }
            if r.row.sent && r.row.retry_reason.as_deref() == Some("provider_overflow") {
                retries.entry(step).or_default().push(r.row.seq);
            }
            if let Some(ProviderError::ContextOverflow { partial_output, .. }) = &r.error {
                overflows += 1;
                if partial_output.is_some() {
                    partial_at.insert(step, r.row.seq);
                }
            }
        }
        let mut retried = 0;
        for (step, seqs) in &retries {
            retried += 1;
            if seqs.len() > 1 {
                failures.push(Evidence {
                    request: seqs.get(1).copied(),
                    step: Some(*step),
                    expected: Some("at most one overflow retry per input".into()),
                    seen: Some(format!(
                        "{} retries: requests {}",
                        seqs.len(),
                        seqs.iter()
                            .map(u64::to_string)
                            .collect::<Vec<_>>()
                            .join(", ")
                    )),
                    note: format!("step {step} retried after overflow {} times", seqs.len()),
                    ..Default::default()
                });
            }
        }
        verdict(
            self.name(),
            format!(
                "{overflows} provider overflow(s), {retried} run(s) retried once; no input \
                 duplicated, no tool call repeated"
            ),
            failures,
        )
    }
}
