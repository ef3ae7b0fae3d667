//! `secrets-redacted`: configured secrets are redacted before checkpoint generation (seed
//! 000 invariant 7; §Summary contract: summaries exclude credentials).
//!
//! No scenario `secrets:` value appears in:
//!
//! - any checkpoint memory a turn request carried (a labelled memory message, or any other
//!   system message that is not the run's instruction snapshot);
//! - any summarization request (what a model summarizer is shown);
//! - any engine event payload (events carry metadata and hashes, never content);
//! - any typed outcome the engine wrote (the reason and detail of a turn that did not
//!   complete, manual compact outcomes).
//!
//! A secret the user or a tool put into the conversation may legitimately stay in the
//! verbatim history; storage redaction is a separate concern. Evidence names the place and
//! the secret's position in the scenario's list, never the value.

use ctxbench_adapters::Role;
use ctxbench_harness::storage::schema::{Evidence, Verdict};
use ctxbench_harness::sut::TurnOutcome;

use crate::common::{messages, short, text_hash};
use crate::{skip, verdict, GradeContext, Grader};

/// The secret-redaction grader.
pub struct SecretsRedacted;

impl Grader for SecretsRedacted {
    fn name(&self) -> &'static str {
        "secrets-redacted"
    }

    fn grade(&self, ctx: &GradeContext<'_>) -> Verdict {
        let rec = ctx.record;
        let secrets: Vec<(usize, &str)> = ctx
            .scenario
            .secrets
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.is_empty())
            .map(|(i, s)| (i + 1, s.as_str()))
            .collect();
        if secrets.is_empty() {
            return skip(self.name(), "the scenario configures no secrets");
        }
        let find = |text: &str| secrets.iter().find(|(_, s)| text.contains(s)).map(|p| p.0);
        let mut failures = Vec::new();
        let mut places = 0usize;
        let leak = |failures: &mut Vec<Evidence>,
                    n: usize,
                    request: Option<u64>,
                    step: Option<u64>,
                    hash: Option<String>,
                    place: String| {
            failures.push(Evidence {
                request,
                step,
                expected: Some("no configured secret".into()),
                seen: Some(format!("secret #{n} (value withheld) in {place}")),
                hashes: hash.into_iter().collect(),
                note: format!("secret #{n} left redaction: it appears in {place}"),
                ..Default::default()
            });
        };
        let mut reported = std::collections::HashSet::new();
        for r in rec.requests.iter().filter(|r| r.row.sent) {
            let summary = r.row.purpose == "summary";
            for (i, (h, m)) in messages(rec, r).into_iter().enumerate() {
                let Some(m) = m else { continue };
                let memory = m.role == Role::System
                    && (i > 0 || text_hash(&m.content) != r.row.instruction_hash);
                if !(summary || memory) {
                    continue;
                }
                places += 1;
                if let Some(n) = find(&m.content) {
                    if reported.insert(h) {
                        let place = if summary {
                            format!("message {i} of summarization request {}", r.row.seq)
                        } else {
                            format!(
                                "checkpoint memory (message {i}, sha256:{}) of request {}",
                                short(h),
                                r.row.seq
                            )
                        };
                        leak(
                            &mut failures,
                            n,
                            Some(r.row.seq),
                            Some(r.row.step),
                            Some(h.to_string()),
                            place,
                        );
                    }
                }
            }
        }
        for e in &rec.events {
            places += 1;
            let payload = serde_json::to_string(&e.event).unwrap_or_default();
            if let Some(n) = find(&payload) {
                leak(
                    &mut failures,
                    n,
                    None,
                    Some(e.step),
                    None,
                    format!("event {} ({})", e.seq, e.event.kind()),
                );
            }
        }
        // Engine-written outcomes only: a completed turn's reply is the model's text.
        for t in rec
            .turns
            .iter()
            .filter(|t| !matches!(t.outcome, TurnOutcome::Completed { .. }))
        {
            places += 1;
            let outcome = serde_json::to_string(&t.outcome).unwrap_or_default();
            if let Some(n) = find(&outcome) {
                leak(
                    &mut failures,
                    n,
                    None,
                    Some(t.step),
                    None,
                    format!("the outcome of the turn at step {}", t.step),
                );
            }
        }
        for c in &rec.compactions {
            places += 1;
            let outcome = serde_json::to_string(&c.outcome).unwrap_or_default();
            if let Some(n) = find(&outcome) {
                leak(
                    &mut failures,
                    n,
                    None,
                    Some(c.step),
                    None,
                    format!("the outcome of the compact at step {}", c.step),
                );
            }
        }
        verdict(
            self.name(),
            format!(
                "{} secret(s) absent from {places} memory message(s), summarization \
                 message(s), events and outcomes",
                secrets.len()
            ),
            failures,
        )
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::{grade_with, HOSTILE};
    use ctxbench_engine::mutants::Mutation;
    use ctxbench_harness::storage::schema::VerdictStatus;
    use ctxbench_harness::Mode;

    #[tokio::test]
    async fn reference_redacts_and_an_unredacted_summary_fails() {
        let g = "secrets-redacted";
        let (rec, v) = grade_with(HOSTILE, Mode::Compact, None, g).await;
        assert_eq!(v.status, VerdictStatus::Pass, "{v:?}");
        assert!(
            rec.transcript
                .iter()
                .any(|m| m.content.contains("sk-test-9Zq4Lm2Xw8")),
            "the fixture's secret is in the conversation"
        );
        let (_, v) = grade_with(HOSTILE, Mode::Compact, Some(Mutation::LeakSecret), g).await;
        assert_eq!(v.status, VerdictStatus::Fail, "{v:?}");
        let e = &v.evidence[0];
        assert!(!format!("{e:?}").contains("sk-test-9Zq4Lm2Xw8"), "{e:?}");
        assert!(e.request.is_some());
    }
}
