//! `instructions-outrank-history`: fresh instructions always come first, and history never
//! passes for instructions (seed 000 invariant 1 and the request order of §Context model;
//! invariant 11 for which version).
//!
//! Judged from the requests alone, for any system under test:
//!
//! - the system prompt of every sent turn request (its leading run of system messages: wire
//!   formats split one prompt into several) carries the instruction file **as ctxbench wrote
//!   it for that run** (its trimmed text; a runtime may embed it in its own prompt) — nothing,
//!   no memory and no history, above it;
//! - no history sits in an instruction position: system text that is neither memory (by the
//!   declared markup, or the default rule) nor the instruction file shares no run of
//!   [`HISTORY_RUN_WORDS`] words with the conversation ctxbench played (user texts, tool
//!   results, the model's replies).
//!
//! A run with an empty instruction file has no instructions to put first; the second check
//! still applies.

use std::collections::HashSet;

use ctxbench_adapters::fake::layout::Place;
use ctxbench_adapters::fake::text::words;
use ctxbench_harness::storage::schema::{Evidence, Verdict};

use crate::common::{
    instruction_message, instruction_versions, instructions_at, memory_rule_words, played,
    redacted_excerpt, role, short, text_hash, turn_requests,
};
use crate::{verdict, GradeContext, Grader};

/// A run of this many words shared with the played conversation makes system text history.
pub const HISTORY_RUN_WORDS: usize = 8;

/// The instruction-precedence grader.
pub struct InstructionsOutrankHistory;

fn runs(text: &str) -> Vec<String> {
    let w = words(text);
    if w.len() < HISTORY_RUN_WORDS {
        return Vec::new();
    }
    w.windows(HISTORY_RUN_WORDS).map(|g| g.join(" ")).collect()
}

impl Grader for InstructionsOutrankHistory {
    fn name(&self) -> &'static str {
        "instructions-outrank-history"
    }

    fn grade(&self, ctx: &GradeContext<'_>) -> Verdict {
        let rec = ctx.record;
        let rule = ctx.read.rule();
        let versions: Vec<String> = instruction_versions(ctx.scenario, rec);
        let file_runs: HashSet<String> = versions.iter().flat_map(|v| runs(v)).collect();
        // Built on first need: most systems keep every non-memory system text = the file.
        let mut history_runs: Option<HashSet<String>> = None;
        let mut failures = Vec::new();
        let mut checked = 0;
        for r in turn_requests(rec) {
            checked += 1;
            let msgs = ctx.read.messages(r);
            let file = instructions_at(ctx.scenario, rec, r.row.step);
            let evidence = |i: usize, expected: String, note: String| {
                let m = msgs.get(i).and_then(|(_, m)| *m);
                Evidence {
                    request: Some(r.row.seq),
                    step: Some(r.row.step),
                    expected: Some(expected),
                    seen: Some(format!(
                        "message {i}: {} sha256:{}",
                        m.map(role).unwrap_or("?"),
                        m.map(|m| short(&text_hash(&m.content)).to_string())
                            .unwrap_or_default()
                    )),
                    excerpt: m.map(|m| redacted_excerpt(ctx.scenario, &m.content, 100)),
                    hashes: msgs
                        .get(i)
                        .map(|(h, _)| h.to_string())
                        .into_iter()
                        .collect(),
                    note: format!("request {} (step {}): {note}", r.row.seq, r.row.step),
                }
            };
            let req = ctx.read.request(r);
            // Messages before `above` sit above the instruction file in the system prompt.
            let mut above = 0;
            if !file.trim().is_empty() {
                let Some(k) = instruction_message(req.messages.iter().map(Some), file) else {
                    failures.push(evidence(
                        0,
                        format!(
                            "a system prompt (the leading system messages) carrying this \
                             run's instruction file (sha256:{})",
                            short(&text_hash(file))
                        ),
                        "the system prompt does not carry this run's instructions".into(),
                    ));
                    continue;
                };
                above = k;
            }
            for seg in ctx.read.segments(r) {
                let is_above = seg.message < above;
                if is_above && rule.markup.is_some() && seg.place == Place::Memory {
                    failures.push(evidence(
                        seg.message,
                        "memory only below the instructions".into(),
                        format!(
                            "declared memory sits above this run's instructions (message {above})"
                        ),
                    ));
                    break;
                }
                // Without declared markup, system text other than the file counts as memory
                // (a runtime's own preamble, a header); above the file only what repeats the
                // conversation is judged, as history.
                if !is_above && seg.place != Place::Instructions {
                    continue;
                }
                let candidate: Vec<String> = runs(seg.text)
                    .into_iter()
                    .filter(|g| !file_runs.contains(g))
                    .collect();
                if candidate.is_empty() {
                    continue;
                }
                let history = history_runs.get_or_insert_with(|| {
                    played(rec).iter().flat_map(|p| runs(&p.text)).collect()
                });
                if let Some(g) = candidate.iter().find(|g| history.contains(*g)) {
                    failures.push(evidence(
                        seg.message,
                        "history only below the instructions, as memory".into(),
                        if is_above {
                            format!(
                                "text above this run's instructions (message {above}) repeats \
                                 the conversation (\"{g}\")"
                            )
                        } else {
                            format!(
                                "system text that is not memory repeats the conversation \
                                 (\"{g}\")"
                            )
                        },
                    ));
                    break;
                }
            }
        }
        verdict(
            self.name(),
            format!(
                "{checked} request(s): this run's instructions first, no history in an \
                 instruction position ({})",
                memory_rule_words(rec)
            ),
            failures,
        )
    }
}
