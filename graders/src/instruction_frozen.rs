//! `instruction-hash-frozen`: instructions are reloaded at the start of every run and then
//! frozen for it (seed 000 invariant 11; §Instruction scope is deliberate).
//!
//! - Within one run (one script step), every physical attempt — every round, every retry,
//!   and a preflight stop — records the same `instruction_hash`, and it is the hash the
//!   run announced in `context.run_started`.
//! - An `edit_instructions` step takes effect at the next run: that run's hash is the
//!   SHA-256 of the new text (a run that kept the old snapshot did not reload).

use std::collections::BTreeMap;

use ctxbench_harness::scenario::Step;
use ctxbench_harness::storage::schema::{Evidence, Verdict};
use ctxbench_harness::sut::EngineEvent;

use crate::common::{short, text_hash};
use crate::{verdict, GradeContext, Grader};

/// The frozen-instructions grader.
pub struct InstructionHashFrozen;

impl Grader for InstructionHashFrozen {
    fn name(&self) -> &'static str {
        "instruction-hash-frozen"
    }

    fn grade(&self, ctx: &GradeContext<'_>) -> Verdict {
        let rec = ctx.record;
        if crate::common::black_box(rec) {
            return black_box(self.name(), ctx);
        }
        let mut failures = Vec::new();
        // The hash each run announced.
        let announced: BTreeMap<u64, &str> = rec
            .events
            .iter()
            .filter_map(|e| match &e.event {
                EngineEvent::RunStarted {
                    instruction_hash, ..
                } => Some((e.step, instruction_hash.as_str())),
                _ => None,
            })
            .collect();
        let mut first_seen: BTreeMap<u64, (u64, &str)> = BTreeMap::new();
        let mut attempts = 0;
        for r in rec.requests.iter().filter(|r| r.row.purpose == "turn") {
            let h = r.row.instruction_hash.as_str();
            if h.is_empty() {
                continue; // a preflight stop with no budget event carries no snapshot
            }
            attempts += 1;
            let step = r.row.step;
            let (first_req, first) = *first_seen.entry(step).or_insert((r.row.seq, h));
            let reference = announced.get(&step).copied().unwrap_or(first);
            if h != reference {
                failures.push(Evidence {
                    request: r.row.sent.then_some(r.row.seq),
                    step: Some(step),
                    expected: Some(format!(
                        "sha256:{} (the run's snapshot{})",
                        short(reference),
                        if announced.contains_key(&step) {
                            String::new()
                        } else {
                            format!(", as request {first_req}")
                        }
                    )),
                    seen: Some(format!(
                        "sha256:{} on round {} attempt {}",
                        short(h),
                        r.row.round,
                        r.row.attempt
                    )),
                    hashes: vec![reference.to_string(), h.to_string()],
                    note: format!(
                        "the instruction snapshot changed within the run at step {step} \
                         (request {})",
                        r.row.seq
                    ),
                    ..Default::default()
                });
            }
        }
        // An edit takes effect at the next run.
        let mut edits = 0;
        for (i, s) in rec.steps.iter().enumerate() {
            let Step::EditInstructions { text } = s else {
                continue;
            };
            edits += 1;
            let want = text_hash(text);
            let next_run = announced.range(i as u64 + 1..).next();
            let edited_again = rec.steps[i + 1..]
                .iter()
                .position(|s| matches!(s, Step::EditInstructions { .. }))
                .map(|k| i + 1 + k);
            if let Some((&step, &h)) = next_run {
                if edited_again.is_some_and(|k| (k as u64) < step) {
                    continue;
                }
                if h != want {
                    failures.push(Evidence {
                        step: Some(step),
                        expected: Some(format!(
                            "sha256:{} (the text written at step {i})",
                            short(&want)
                        )),
                        seen: Some(format!("sha256:{}", short(h))),
                        hashes: vec![want.clone(), h.to_string()],
                        note: format!(
                            "the run at step {step} did not reload the instructions edited at \
                             step {i}"
                        ),
                        ..Default::default()
                    });
                }
            }
        }
        verdict(
            self.name(),
            format!(
                "{attempts} attempt(s) over {} run(s), one snapshot per run; {edits} edit(s) \
                 took effect at the next run",
                first_seen.len()
            ),
            failures,
        )
    }
}

/// Without run events: the system message each request carries first must carry the
/// instruction file as ctxbench wrote it for that run (trimmed, possibly inside the
/// runtime's own system prompt; the edited text from the run after an edit on), and be
/// byte-identical for every attempt of the run — a runtime that re-reads or rebuilds its
/// instructions per request changes it within the run.
fn black_box(name: &str, ctx: &GradeContext<'_>) -> Verdict {
    let rec = ctx.record;
    let mut failures = Vec::new();
    let mut checked = 0;
    let mut run_snapshot: BTreeMap<u64, (u64, String)> = BTreeMap::new();
    for r in crate::common::turn_requests(rec) {
        let text = crate::common::instructions_at(ctx.scenario, rec, r.row.step);
        if text.trim().is_empty() {
            continue;
        }
        checked += 1;
        let expected = text_hash(text);
        let first = r
            .row
            .message_hashes
            .first()
            .and_then(|h| rec.messages.get(h))
            .filter(|m| m.role == ctxbench_adapters::Role::System);
        let Some(first) = first.filter(|m| crate::common::carries_instructions(&m.content, text))
        else {
            failures.push(Evidence {
                request: Some(r.row.seq),
                step: Some(r.row.step),
                expected: Some(format!(
                    "a first system message carrying sha256:{} (the instruction file of this run)",
                    short(&expected)
                )),
                seen: Some(match first {
                    Some(m) => format!("sha256:{}", short(&text_hash(&m.content))),
                    None => "no system message first".into(),
                }),
                note: format!(
                    "request {} (step {}): the instructions sent are not this run's file",
                    r.row.seq, r.row.step
                ),
                ..Default::default()
            });
            continue;
        };
        let h = text_hash(&first.content);
        let (first_req, reference) = run_snapshot
            .entry(r.row.step)
            .or_insert_with(|| (r.row.seq, h.clone()))
            .clone();
        if h != reference {
            failures.push(Evidence {
                request: Some(r.row.seq),
                step: Some(r.row.step),
                expected: Some(format!(
                    "sha256:{} (the run's instructions, as request {first_req})",
                    short(&reference)
                )),
                seen: Some(format!("sha256:{}", short(&h))),
                hashes: vec![reference.clone(), h.clone()],
                note: format!(
                    "the instruction snapshot changed within the run at step {} (request {})",
                    r.row.step, r.row.seq
                ),
                ..Default::default()
            });
        }
    }
    verdict(
        name,
        format!("black box (no run events): {checked} request(s) carry this run's instructions"),
        failures,
    )
}

#[cfg(test)]
mod tests {
    use crate::testing::grade_with;
    use ctxbench_engine::mutants::Mutation;
    use ctxbench_harness::storage::schema::VerdictStatus;
    use ctxbench_harness::Mode;

    /// Multi-round turns and an instruction edit.
    const ROUNDS: &str = r#"
id: rounds
title: Rounds
model: {context_window: 16384, max_output: 512}
context: {reserved_output_tokens: 512, buffer_tokens: 1024}
instructions: "You are a coding agent."
tools:
  - name: read_file
    description: Read a file.
    parameters: {type: object, properties: {path: {type: string}}, required: [path]}
script:
  - user: "Read two files."
  - tool_calls:
      - call: {name: read_file, args: {path: a.rs}}
        result: "fn a() {}"
  - tool_calls:
      - call: {name: read_file, args: {path: b.rs}}
        result: "fn b() {}"
  - assistant: "Read both."
  - edit_instructions: {set: "You are a careful coding agent."}
  - user: "And one more."
  - tool_calls:
      - call: {name: read_file, args: {path: c.rs}}
        result: "fn c() {}"
  - assistant: "Done."
expect:
  outcome: success
"#;

    #[tokio::test]
    async fn reference_freezes_per_run_and_rereading_per_request_fails() {
        let g = "instruction-hash-frozen";
        for mode in [Mode::Off, Mode::Warn, Mode::Compact] {
            let (_, v) = grade_with(ROUNDS, mode, None, g).await;
            assert_eq!(v.status, VerdictStatus::Pass, "{mode}: {v:?}");
        }
        let (_, v) = grade_with(
            ROUNDS,
            Mode::Compact,
            Some(Mutation::ReloadInstructionsPerAttempt),
            g,
        )
        .await;
        assert_eq!(v.status, VerdictStatus::Fail, "{v:?}");
        assert!(v.evidence[0].request.is_some());
        assert_eq!(v.evidence[0].hashes.len(), 2);
    }
}
