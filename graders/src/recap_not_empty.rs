//! `recap-not-empty`: history is never silently lost (seed 004 P2, the oversized newest
//! turn: a request must not shrink to the instructions and the current turn while earlier
//! turns exist; seed 000: never hide context loss to make a request appear successful).
//!
//! A sent turn request fails this grader when, before its current user message, it carries
//! nothing but the run's instruction snapshot — no checkpoint memory (labelled or not) and
//! no verbatim earlier message — although earlier turns exist in the session. Whatever the
//! engine does to fit, earlier turns must reach the model either verbatim or summarized;
//! if neither fits, the honest outcome is a typed stop, not an amnesiac request.

use ctxbench_adapters::Role;
use ctxbench_harness::storage::schema::{Evidence, Verdict};

use crate::common::{messages, short, text_hash, turn_requests};
use crate::{verdict, GradeContext, Grader};

/// The no-silent-amnesia grader.
pub struct RecapNotEmpty;

impl Grader for RecapNotEmpty {
    fn name(&self) -> &'static str {
        "recap-not-empty"
    }

    fn grade(&self, ctx: &GradeContext<'_>) -> Verdict {
        let rec = ctx.record;
        let mut failures = Vec::new();
        let mut checked = 0;
        for r in turn_requests(rec) {
            let Some(turn) = rec.turns.iter().find(|t| t.step == r.row.step) else {
                continue;
            };
            let earlier = rec.turns.iter().filter(|t| t.step < r.row.step).count();
            if earlier == 0 {
                continue;
            }
            checked += 1;
            let msgs = messages(rec, r);
            let Some(current) = msgs.iter().rposition(|(_, m)| {
                m.is_some_and(|m| m.role == Role::User && m.content == turn.user)
            }) else {
                continue;
            };
            let context_before = msgs[..current].iter().any(|(_, m)| match m {
                None => true,
                Some(m) if m.role == Role::System => {
                    text_hash(&m.content) != r.row.instruction_hash
                }
                Some(_) => true,
            });
            if !context_before {
                failures.push(Evidence {
                    request: Some(r.row.seq),
                    step: Some(r.row.step),
                    expected: Some(format!(
                        "the {earlier} earlier turn(s) verbatim or as checkpoint memory"
                    )),
                    seen: Some(format!(
                        "only the instructions (sha256:{}) before the current user message",
                        short(&r.row.instruction_hash)
                    )),
                    hashes: msgs.iter().map(|(h, _)| h.to_string()).collect(),
                    note: format!(
                        "request {} (step {}) silently dropped all {earlier} earlier turn(s): \
                         no history and no memory",
                        r.row.seq, r.row.step
                    ),
                    ..Default::default()
                });
            }
        }
        verdict(
            self.name(),
            format!("{checked} request(s) with earlier turns, each carried history or memory"),
            failures,
        )
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::grade_with;
    use ctxbench_engine::mutants::Mutation;
    use ctxbench_harness::storage::schema::VerdictStatus;
    use ctxbench_harness::Mode;

    /// Small turns, then a newest turn larger than the recent tail, then a compact.
    const OVERSIZED: &str = r#"
id: oversized
title: Oversized
model: {context_window: 8192, max_output: 256}
context: {reserved_output_tokens: 256, buffer_tokens: 512, recent_tail_tokens: 400, summary_target_tokens: 200}
instructions: "You are a coding agent."
facts:
  - id: db
    states: "All storage must use PostgreSQL 16."
    question: "Which database must all storage use?"
    expect: {contains: PostgreSQL}
tools:
  - name: read_file
    description: Read a file.
    parameters: {type: object, properties: {path: {type: string}}, required: [path]}
script:
  - user: "Ground rules: {fact:db}"
  - assistant: "Understood."
  - repeat: 4
    steps:
      - user: "Clean up module {i}. {filler:150}"
      - assistant: "Cleaned up module {i}."
  - user: "Read the whole build log."
  - tool_calls:
      - call: {name: read_file, args: {path: build.log}}
        result: {filler: {tokens: 1500, kind: code}}
  - assistant: "The build fails in the migration step."
  - compact: {}
  - probe: [db]
expect:
  outcome: any
"#;

    #[tokio::test]
    async fn reference_keeps_a_recap_and_dropping_history_fails() {
        let g = "recap-not-empty";
        let (rec, v) = grade_with(OVERSIZED, Mode::Compact, None, g).await;
        assert_eq!(v.status, VerdictStatus::Pass, "{v:?}");
        assert!(
            format!("{:?}", rec.compactions).contains("Compacted"),
            "fixture must compact: {:?}",
            rec.compactions
        );
        let (_, v) = grade_with(OVERSIZED, Mode::Compact, Some(Mutation::EmptyRecap), g).await;
        assert_eq!(v.status, VerdictStatus::Fail, "{v:?}");
        let (_, v) = grade_with(OVERSIZED, Mode::Warn, Some(Mutation::DropHistory), g).await;
        assert_eq!(v.status, VerdictStatus::Fail, "{v:?}");
    }
}
