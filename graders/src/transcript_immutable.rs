//! `transcript-immutable`: compaction changes the active view, never the canonical
//! transcript (seed 000 invariant 6; §Lossless record, bounded active view).
//!
//! - **Every earlier view is a view of the final transcript.** For each sent turn request,
//!   the verbatim conversation it carried (every user, assistant and tool message; not the
//!   instruction or memory system messages; a tool result whose content differs — a
//!   projection — by its call id) must occur in the final transcript, in the same order, by
//!   content-hash equality. A
//!   message a request once carried that is missing from the final transcript was rewritten
//!   or deleted after it was sent.
//! - **The transcript never shrinks.** The message counts the engine reports
//!   (`context.run_started` before each run's input is admitted, `session.restored` after a
//!   restart) never go down, and the final transcript is at least as long as the last one.
//! - **The reported hash chain matches the content.** The chain head in the trial stats
//!   and every `session.restored` hash are recomputed from the final transcript and the
//!   turn boundaries (one admitted user message opens each turn; its outcome closes it) with
//!   the session ledger's chain rule (`ctxbench.session/2`). A mismatch means the messages
//!   the engine holds are not the ones its ledger committed.

use ctxbench_adapters::{ContentHash, Role};
use ctxbench_harness::record::TrialRecord;
use ctxbench_harness::storage::schema::{Evidence, Verdict};
use ctxbench_harness::sut::{EngineEvent, TurnOutcome};
use sha2::{Digest, Sha256};

use crate::common::{redacted_excerpt, role, short, turn_requests};
use crate::{verdict, GradeContext, Grader};

/// The transcript-immutability grader.
pub struct TranscriptImmutable;

impl Grader for TranscriptImmutable {
    fn name(&self) -> &'static str {
        "transcript-immutable"
    }

    fn grade(&self, ctx: &GradeContext<'_>) -> Verdict {
        // The check needs the system's transcript (in process, or `bye.transcript`);
        // events are not needed: the run and restore checks use them when reported.
        let rec = ctx.record;
        if rec.transcript.is_empty()
            && (!rec.turns.is_empty() || rec.requests.iter().any(|r| r.row.sent))
        {
            return crate::skip(
                self.name(),
                "not-applicable: the system under test reported no transcript",
            );
        }
        let rec = ctx.record;
        let mut failures = Vec::new();
        let checked = views_are_prefixes(ctx, &mut failures);
        never_shrinks(rec, &mut failures);
        let chain = chain_matches(rec, &mut failures);
        verdict(
            self.name(),
            format!(
                "{checked} request view(s) found verbatim and in order in the final transcript \
                 of {} message(s); never shrank; {chain}",
                rec.transcript.len()
            ),
            failures,
        )
    }
}

/// Check every request's verbatim conversation against the final transcript.
fn views_are_prefixes(ctx: &GradeContext<'_>, failures: &mut Vec<Evidence>) -> usize {
    let rec = ctx.record;
    let transcript: Vec<String> = rec
        .transcript
        .iter()
        .map(|m| m.content_hash().to_hex())
        .collect();
    let mut checked = 0;
    for r in turn_requests(rec) {
        checked += 1;
        let mut pos = 0usize;
        for (i, (h, m)) in ctx.read.messages(r).iter().enumerate() {
            let Some(m) = m else { continue };
            if m.role == Role::System {
                continue;
            }
            let found = (pos..transcript.len())
                .find(|&k| transcript[k] == *h)
                .or_else(|| {
                    // A tool result may be projected (bounded) in the active view: it stands for
                    // the result with the same call id.
                    (m.role == Role::Tool && m.tool_call_id.is_some())
                        .then(|| {
                            (pos..rec.transcript.len()).find(|&k| {
                                rec.transcript[k].role == Role::Tool
                                    && rec.transcript[k].tool_call_id == m.tool_call_id
                            })
                        })
                        .flatten()
                });
            match found {
                Some(k) => pos = k + 1,
                None => {
                    let elsewhere = transcript.iter().position(|t| t == h);
                    failures.push(Evidence {
                        request: Some(r.row.seq),
                        step: Some(r.row.step),
                        expected: Some(format!(
                            "message {i} ({}, sha256:{}) in the final transcript at or after \
                             position {pos}",
                            role(m),
                            short(h)
                        )),
                        seen: Some(match elsewhere {
                            Some(k) => format!("only at position {k} (out of order)"),
                            None => "absent: rewritten or deleted after it was sent".into(),
                        }),
                        excerpt: Some(redacted_excerpt(ctx.scenario, &m.content, 100)),
                        hashes: vec![h.to_string()],
                        note: format!(
                            "request {} (step {}) carried a {} message the final transcript no \
                             longer holds in order",
                            r.row.seq,
                            r.row.step,
                            role(m)
                        ),
                    });
                    break;
                }
            }
        }
    }
    checked
}

/// Reported message counts never go down.
fn never_shrinks(rec: &TrialRecord, failures: &mut Vec<Evidence>) {
    let mut known: Option<(u64, u64, &'static str)> = None; // (count, step, source)
    for e in &rec.events {
        let (count, next, what) = match &e.event {
            EngineEvent::RunStarted {
                transcript_messages,
                ..
            } => (
                *transcript_messages,
                *transcript_messages + 1,
                "context.run_started",
            ),
            EngineEvent::SessionRestored { messages, .. } => {
                (*messages, *messages, "session.restored")
            }
            _ => continue,
        };
        if let Some((before, step, source)) = known {
            if count < before {
                failures.push(Evidence {
                    step: Some(e.step),
                    expected: Some(format!(
                        "≥ {before} messages ({source} at step {step}, plus the admitted input)"
                    )),
                    seen: Some(format!("{count} messages ({what})")),
                    note: format!(
                        "the transcript shrank at step {}: {what} reports {count} messages",
                        e.step
                    ),
                    ..Default::default()
                });
            }
        }
        known = Some((next, e.step, what));
    }
    if let Some((before, step, source)) = known {
        let len = rec.transcript.len() as u64;
        if len < before {
            failures.push(Evidence {
                expected: Some(format!("≥ {before} messages ({source} at step {step})")),
                seen: Some(format!("{len} messages in the final transcript")),
                note: "the final transcript is shorter than an earlier one".into(),
                ..Default::default()
            });
        }
    }
}

/// One step of the session ledger's hash chain (`session.rs`, schema `ctxbench.session/2`).
fn chain_next(prev: &ContentHash, tag: &[u8], item: &[u8]) -> ContentHash {
    let mut h = Sha256::new();
    h.update(prev.0);
    h.update(tag);
    h.update(item);
    ContentHash(h.finalize().into())
}

/// The chain head after each admitted turn, recomputed from `transcript` and the turn
/// starts and outcomes: a turn-start record, its messages, a turn-end record.
pub fn recompute_chain(
    transcript: &[ctxbench_adapters::Message],
    turns: &[(usize, bool)],
) -> Vec<(usize, ContentHash)> {
    let mut chain = ContentHash([0; 32]);
    let mut out = Vec::with_capacity(turns.len());
    for (k, &(start, completed)) in turns.iter().enumerate() {
        let end = turns
            .get(k + 1)
            .map(|t| t.0)
            .unwrap_or(transcript.len())
            .min(transcript.len());
        chain = chain_next(&chain, b"s", &(start as u64).to_le_bytes());
        for m in &transcript[start.min(end)..end] {
            chain = chain_next(&chain, b"m", &m.content_hash().0);
        }
        chain = chain_next(&chain, b"e", if completed { b"c" } else { b"i" });
        out.push((end, chain));
    }
    out
}

/// Recompute the chain and compare it with what the engine reported.
fn chain_matches(rec: &TrialRecord, failures: &mut Vec<Evidence>) -> String {
    if rec
        .turns
        .iter()
        .any(|t| matches!(t.outcome, TurnOutcome::Errored { .. }))
    {
        return "hash chain not recomputed (a turn errored)".into();
    }
    let starts: Vec<usize> = rec
        .transcript
        .iter()
        .enumerate()
        .filter(|(_, m)| m.role == Role::User)
        .map(|(i, _)| i)
        .collect();
    if starts.len() != rec.turns.len() {
        failures.push(Evidence {
            expected: Some(format!(
                "{} user message(s), one per admitted turn",
                rec.turns.len()
            )),
            seen: Some(format!("{} user message(s)", starts.len())),
            note: "the transcript's user messages do not match the admitted turns".into(),
            ..Default::default()
        });
        return "hash chain not recomputed (turn boundaries unclear)".into();
    }
    let turns: Vec<(usize, bool)> = starts
        .iter()
        .zip(&rec.turns)
        .map(|(&s, t)| (s, matches!(t.outcome, TurnOutcome::Completed { .. })))
        .collect();
    let heads = recompute_chain(&rec.transcript, &turns);
    let head_after = |n: usize| -> String {
        if n == 0 {
            ContentHash([0; 32]).to_hex()
        } else {
            heads[n - 1].1.to_hex()
        }
    };
    let final_head = head_after(heads.len());
    // Only a hash the system reported is its claim; ctxbench's own digest is not a chain.
    if rec.transcript_hash_reported && rec.stats.transcript_hash != final_head {
        failures.push(Evidence {
            expected: Some(format!("chain head {}", short(&final_head))),
            seen: Some(format!("reported {}", short(&rec.stats.transcript_hash))),
            hashes: vec![final_head.clone(), rec.stats.transcript_hash.clone()],
            note: "the reported transcript hash does not match the final transcript's messages"
                .into(),
            ..Default::default()
        });
    }
    // Each restart happens between turns: compare with the chain after the turns before it.
    let mut restores = 0;
    for e in &rec.events {
        let EngineEvent::SessionRestored {
            messages,
            transcript_hash,
        } = &e.event
        else {
            continue;
        };
        restores += 1;
        let before = rec.turns.iter().filter(|t| t.step < e.step).count();
        let expected = head_after(before);
        let expected_len = if before == 0 { 0 } else { heads[before - 1].0 };
        if *transcript_hash != expected || *messages != expected_len as u64 {
            failures.push(Evidence {
                step: Some(e.step),
                expected: Some(format!(
                    "{expected_len} messages, chain {} (recomputed from the final transcript)",
                    short(&expected)
                )),
                seen: Some(format!(
                    "{messages} messages, chain {}",
                    short(transcript_hash)
                )),
                hashes: vec![expected, transcript_hash.clone()],
                note: format!(
                    "the transcript restored at step {} is not a prefix of the final transcript",
                    e.step
                ),
                ..Default::default()
            });
        }
    }
    format!("hash chain matches (final head and {restores} restore(s))")
}
