//! `instructions-outrank-history`: fresh instructions always come first, and summaries sit
//! below them as labelled, untrusted memory (seed 000 invariant 1 and the request order of
//! §Context model; invariant 11 for which snapshot).
//!
//! For every sent turn request whose run has instructions:
//!
//! - the first message is a system message whose text hashes to the request's recorded
//!   `instruction_hash` — the frozen snapshot of this run, not an older one, and nothing
//!   (no memory, no history) above it;
//! - every other system message is labelled conversation memory (`MEMORY_OPEN`), so no
//!   summary or history text can pass for instructions.
//!
//! A run with an empty instruction file has no instruction message; then no system message
//! may appear except labelled memory.

use ctxbench_adapters::conventions::MEMORY_OPEN;
use ctxbench_adapters::Role;
use ctxbench_harness::storage::schema::{Evidence, Verdict};

use crate::common::{messages, redacted_excerpt, role, short, text_hash, turn_requests};
use crate::{verdict, GradeContext, Grader};

/// The instruction-precedence grader.
pub struct InstructionsOutrankHistory;

impl Grader for InstructionsOutrankHistory {
    fn name(&self) -> &'static str {
        "instructions-outrank-history"
    }

    fn grade(&self, ctx: &GradeContext<'_>) -> Verdict {
        let rec = ctx.record;
        let empty = text_hash("");
        let black_box = crate::common::black_box(rec);
        let mut failures = Vec::new();
        let mut checked = 0;
        for r in turn_requests(rec) {
            checked += 1;
            let msgs = messages(rec, r);
            // A black-box agent declares no snapshot: the instructions are the file as
            // ctxbench wrote it for this run, which its first system message must carry
            // (trimmed, possibly inside the runtime's own system prompt).
            let file = crate::common::instructions_at(ctx.scenario, rec, r.row.step);
            let observed;
            let expected = if black_box {
                observed = text_hash(file);
                observed.as_str()
            } else {
                r.row.instruction_hash.as_str()
            };
            let has_instructions = if black_box {
                !file.trim().is_empty()
            } else {
                !expected.is_empty() && expected != empty
            };
            let is_snapshot = |m: &ctxbench_adapters::Message| {
                if black_box {
                    crate::common::carries_instructions(&m.content, file)
                } else {
                    text_hash(&m.content) == expected
                }
            };
            let fail = |failures: &mut Vec<Evidence>, i: usize, exp: String, what: String| {
                let (h, m) = msgs[i];
                failures.push(Evidence {
                    request: Some(r.row.seq),
                    step: Some(r.row.step),
                    expected: Some(exp),
                    seen: Some(format!(
                        "message {i}: {} sha256:{}",
                        m.map(role).unwrap_or("?"),
                        m.map(|m| short(&text_hash(&m.content)).to_string())
                            .unwrap_or_default()
                    )),
                    excerpt: m.map(|m| redacted_excerpt(ctx.scenario, &m.content, 100)),
                    hashes: vec![expected.to_string(), h.to_string()],
                    note: format!("request {} (step {}): {what}", r.row.seq, r.row.step),
                });
            };
            let mut first_is_instructions = false;
            if has_instructions {
                match msgs.first() {
                    Some((_, Some(m))) if m.role == Role::System && is_snapshot(m) => {
                        first_is_instructions = true;
                    }
                    Some(_) => {
                        fail(
                            &mut failures,
                            0,
                            format!(
                                "the instruction snapshot sha256:{} as the first message",
                                short(expected)
                            ),
                            "the first message is not this run's instruction snapshot".into(),
                        );
                        continue;
                    }
                    None => continue,
                }
            }
            let skip = usize::from(first_is_instructions);
            if let Some(i) = msgs.iter().enumerate().skip(skip).find_map(|(i, (_, m))| {
                m.filter(|m| m.role == Role::System && !m.content.starts_with(MEMORY_OPEN))
                    .map(|_| i)
            }) {
                fail(
                    &mut failures,
                    i,
                    "only labelled conversation memory below the instructions".into(),
                    "a system message below the instructions is not labelled memory".into(),
                );
            }
        }
        verdict(
            self.name(),
            format!(
                "{checked} request(s): this run's instructions first, memory below them and \
                 labelled"
            ),
            failures,
        )
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::{grade_with, COMPACTING};
    use ctxbench_engine::mutants::Mutation;
    use ctxbench_harness::storage::schema::VerdictStatus;
    use ctxbench_harness::Mode;

    #[tokio::test]
    async fn reference_puts_instructions_first_and_misplaced_memory_fails() {
        let g = "instructions-outrank-history";
        let (_, v) = grade_with(COMPACTING, Mode::Compact, None, g).await;
        assert_eq!(v.status, VerdictStatus::Pass, "{v:?}");
        let (_, v) = grade_with(
            COMPACTING,
            Mode::Compact,
            Some(Mutation::MemoryAboveInstructions),
            g,
        )
        .await;
        assert_eq!(v.status, VerdictStatus::Fail, "{v:?}");
        assert_eq!(v.evidence[0].hashes.len(), 2, "{v:?}");
        let (_, v) = grade_with(COMPACTING, Mode::Warn, Some(Mutation::DropInstructions), g).await;
        assert_eq!(v.status, VerdictStatus::Fail, "{v:?}");
    }

    /// A black-box runtime may trim its instruction file and embed it in its own system
    /// prompt; what it may not do is put anything else first or leave the file out.
    #[tokio::test]
    async fn black_box_instructions_may_be_embedded_but_must_be_carried_first() {
        let (mut rec, _) = grade_with(COMPACTING, Mode::Off, None, "budget").await;
        rec.events.clear();
        let scenario = ctxbench_harness::scenario::load_str("test.yaml", COMPACTING).unwrap();
        let grade = |rec: &ctxbench_harness::record::TrialRecord| {
            let null = serde_json::Value::Null;
            let ctx = crate::GradeContext {
                scenario: &scenario,
                record: rec,
                params: &null,
            };
            (
                crate::grader("instructions-outrank-history")
                    .unwrap()
                    .grade(&ctx),
                crate::grader("instruction-hash-frozen")
                    .unwrap()
                    .grade(&ctx),
            )
        };
        let first = rec.requests[0].row.message_hashes[0].clone();
        let original = rec.messages[&first].content.clone();
        rec.messages.get_mut(&first).unwrap().content = format!(
            "You are RuntimeX.\n\n<project-instructions>\n{}\n</project-instructions>",
            original.trim()
        );
        let (outrank, frozen) = grade(&rec);
        assert_eq!(outrank.status, VerdictStatus::Pass, "{outrank:?}");
        assert_eq!(frozen.status, VerdictStatus::Pass, "{frozen:?}");
        rec.messages.get_mut(&first).unwrap().content = "You are RuntimeX.".into();
        let (outrank, frozen) = grade(&rec);
        assert_eq!(outrank.status, VerdictStatus::Fail, "{outrank:?}");
        assert_eq!(frozen.status, VerdictStatus::Fail, "{frozen:?}");
    }
}
