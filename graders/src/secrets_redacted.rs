//! `secrets-redacted`: configured secrets are redacted before checkpoint generation (seed
//! 000 invariant 7; §Summary contract: summaries exclude credentials).
//!
//! No scenario `secrets:` value appears in:
//!
//! - any memory a turn request carried (by the system's declared markup, or the default rule:
//!   system text that is not the instruction file);
//! - any summarization request (what a model summarizer is shown);
//! - any engine event payload (events carry metadata and hashes, never content);
//! - any typed outcome the engine wrote (the reason and detail of a turn that did not
//!   complete, manual compact outcomes).
//!
//! A secret the user or a tool put into the conversation may legitimately stay in the
//! verbatim history; storage redaction is a separate concern. Evidence names the place and
//! the secret's position in the scenario's list, never the value.

use ctxbench_adapters::fake::layout::Place;
use ctxbench_harness::storage::schema::{Evidence, Verdict};
use ctxbench_harness::sut::TurnOutcome;

use crate::common::short;
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
            if r.row.purpose == "summary" {
                for (i, (h, m)) in ctx.read.messages(r).iter().enumerate() {
                    let Some(m) = m else { continue };
                    places += 1;
                    if let Some(n) = find(&m.content) {
                        if reported.insert(h.to_string()) {
                            leak(
                                &mut failures,
                                n,
                                Some(r.row.seq),
                                Some(r.row.step),
                                Some(h.to_string()),
                                format!("message {i} of summarization request {}", r.row.seq),
                            );
                        }
                    }
                }
                continue;
            }
            for seg in ctx.read.pieces(r, Place::Memory) {
                places += 1;
                let Some(n) = find(seg.text) else { continue };
                let h = r
                    .row
                    .message_hashes
                    .get(seg.message)
                    .cloned()
                    .unwrap_or_default();
                if reported.insert(h.clone()) {
                    leak(
                        &mut failures,
                        n,
                        Some(r.row.seq),
                        Some(r.row.step),
                        Some(h.clone()),
                        format!(
                            "memory (message {}, sha256:{}) of request {}",
                            seg.message,
                            short(&h),
                            r.row.seq
                        ),
                    );
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
