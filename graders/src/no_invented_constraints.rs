//! `no-invented-constraints`: checkpoint memory states no rule the conversation never stated
//! (users of real agents report summaries that invent constraints: opencode #50816, codex
//! #27731; SCENARIOS.md "summaries that invent constraints").
//!
//! For every distinct checkpoint memory a turn request carried (the text inside
//! `MEMORY_OPEN … MEMORY_CLOSE`), every sentence that reads like a constraint — it contains
//! *must*, *never*, *always*, *only*, *required*, *do not*, *shall*, … ([`CONSTRAINT_WORDS`])
//! — must be **traceable**: its normalized text occurs in some message of the transcript
//! that existed before the run whose request first carried that memory (a checkpoint can
//! only summarize what came before).
//!
//! - *Normalized*: lowercase, every quote mark as `'`, whitespace runs collapsed to one
//!   space, punctuation and quote marks stripped at both ends. A sentence is cut at `…`
//!   (an elision or a cut-off quote) and every piece must be traceable.
//! - *Traceable*: the piece occurs as a whole; or it splits, left to right, into runs of
//!   words that each occur, where every run holding a constraint word has at least
//!   [`MIN_CONSTRAINT_RUN_WORDS`] words. (An extractive summary joins the kept sentences of
//!   one message, and a sentence that ended at a line break has no terminator to split
//!   at; a constraint, though, must be quoted, not assembled from scattered words.)
//! - *Sentences*: the memory's lines, split at `.`, `!` or `?` followed by whitespace.
//!   Not sentences of the summary: section headings (`#…`), the checkpoint header lines
//!   (`[checkpoint …]`, `Summary of earlier conversation. …`, `Historical conversation
//!   memory, …`), an opaque provider item (unreadable, so not judged), and omission markers
//!   (`[omitted: …]`). Labels in front of quoted text are stripped: bullets, `(historical)`,
//!   `(historical, turn N)`, `[turn N · role]`, `result:`, `Last user request:`.
//! - *Messages*: each transcript message's content, and each of its tool calls as
//!   `call name(arguments)`, normalized on its own (a piece cannot straddle two messages),
//!   as written and with the scenario's secrets redacted (memory is redacted).
//!
//! The grader never reads the scenario's facts: a faithful summary passes whatever it
//! quotes, an invented rule fails whatever the scenario meant to plant.

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use ctxbench_adapters::conventions::OPAQUE_OPEN;
use ctxbench_adapters::Message;
use ctxbench_harness::storage::schema::{Evidence, Verdict};
use ctxbench_harness::sut::redact::Redactor;
use ctxbench_harness::sut::EngineEvent;
use regex::Regex;

use crate::common::{memory_blocks, messages, redacted_excerpt, turn_requests};
use crate::{skip, verdict, GradeContext, Grader};

/// The words that make a sentence a constraint (case-insensitive, whole words).
pub const CONSTRAINT_WORDS: &str = r"(?i)\b(must|mustn't|never|always|only|required|requires?|do not|don't|shall|forbidden|prohibited|mandatory|not allowed)\b";

/// Fewest words of a run holding a constraint word when a piece is traced in several runs.
pub const MIN_CONSTRAINT_RUN_WORDS: usize = 4;

/// Lines of a memory block that are the checkpoint's own header, not summary text.
const HEADER_PREFIXES: [&str; 3] = [
    "[checkpoint ",
    "Summary of earlier conversation.",
    "Historical conversation memory",
];

/// The no-invented-constraints grader.
pub struct NoInventedConstraints;

fn constraint_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| Regex::new(CONSTRAINT_WORDS).expect("static regex"))
}

fn label_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(
            r"(?i)^(?:[-*•]\s+|\(historical(?:, turn \d+)?\)\s*|\[turn \d+ · [a-z]+\]\s*|result:\s*|last user request:\s*|[\x22'“”‘’`]+)",
        )
        .expect("static regex")
    })
}

fn omission_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| Regex::new(r"\[omitted:[^\]]*\]").expect("static regex"))
}

/// The same normalization the engine's validator uses (a text utility, not a verdict).
pub(crate) use crate::common::normalize;

fn strip_labels(mut text: &str) -> &str {
    loop {
        let t = text.trim_start();
        match label_re().find(t) {
            Some(m) if m.end() > 0 => text = &t[m.end()..],
            _ => return t,
        }
    }
}

/// The constraint sentences of one memory block's text (see the module docs).
pub(crate) fn constraint_sentences(block: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in block.lines() {
        let line = line.trim();
        if line.is_empty()
            || line.starts_with('#')
            || line.contains(OPAQUE_OPEN)
            || HEADER_PREFIXES.iter().any(|p| line.starts_with(p))
        {
            continue;
        }
        let line = omission_re().replace_all(line, " ");
        let line = strip_labels(&line);
        let mut start = 0;
        let mut chars = line.char_indices().peekable();
        let mut push = |s: &str| {
            let s = strip_labels(s).trim();
            if !s.is_empty() && constraint_re().is_match(s) {
                out.push(s.to_string());
            }
        };
        while let Some((i, c)) = chars.next() {
            let at_end = chars.peek().is_none_or(|&(_, n)| n.is_whitespace());
            if matches!(c, '.' | '!' | '?') && at_end {
                let end = i + c.len_utf8();
                push(&line[start..end]);
                start = end;
            }
        }
        push(&line[start..]);
    }
    out
}

/// The normalized pieces of a sentence that must each be traceable.
pub(crate) fn pieces(sentence: &str) -> Vec<String> {
    normalize(sentence)
        .split('…')
        .map(|p| {
            p.trim_matches(|c: char| c.is_whitespace() || ".,;:!?'()[]".contains(c))
                .to_string()
        })
        .filter(|p| !p.is_empty())
        .collect()
}

/// The transcript as the grader searches it: per message, its normalized texts.
struct Corpus {
    /// `texts[i]`: normalized texts of transcript message `i` (content, tool calls; raw and
    /// redacted).
    texts: Vec<Vec<String>>,
    /// piece → index of the first message containing it (`usize::MAX`: none).
    first: HashMap<String, usize>,
}

impl Corpus {
    fn new(transcript: &[Message], redactor: &Redactor, has_secrets: bool) -> Self {
        let texts = transcript
            .iter()
            .map(|m| {
                let mut raw = vec![m.content.clone()];
                for c in &m.tool_calls {
                    raw.push(format!("call {}({})", c.name, c.arguments));
                }
                let mut out: Vec<String> = raw.iter().map(|t| normalize(t)).collect();
                if has_secrets {
                    for t in &raw {
                        let r = redactor.redact(t);
                        if &r != t {
                            out.push(normalize(&r));
                        }
                    }
                }
                out
            })
            .collect();
        Corpus {
            texts,
            first: HashMap::new(),
        }
    }

    /// Whether `piece` is traceable to the first `n` messages: it occurs as a whole, or splits
    /// into runs of words that each occur (see the module docs).
    fn traceable(&mut self, piece: &str, n: usize) -> bool {
        if self.occurs(piece, n) {
            return true;
        }
        let words: Vec<&str> = piece.split(' ').collect();
        let mut i = 0;
        while i < words.len() {
            // Occurrence is monotone in the run's length (a prefix of an occurring run
            // occurs): binary search for the longest run starting at `i`.
            let (mut lo, mut hi) = (0, words.len() - i);
            while lo < hi {
                let mid = (lo + hi).div_ceil(2);
                if self.occurs(&words[i..i + mid].join(" "), n) {
                    lo = mid;
                } else {
                    hi = mid - 1;
                }
            }
            let run = words[i..i + lo].join(" ");
            if lo == 0 || (lo < MIN_CONSTRAINT_RUN_WORDS && constraint_re().is_match(&run)) {
                return false;
            }
            i += lo;
        }
        true
    }

    /// Whether `piece` occurs in one of the first `n` messages.
    fn occurs(&mut self, piece: &str, n: usize) -> bool {
        let first = match self.first.get(piece) {
            Some(&i) => i,
            None => {
                let i = self
                    .texts
                    .iter()
                    .position(|ts| ts.iter().any(|t| t.contains(piece)))
                    .unwrap_or(usize::MAX);
                self.first.insert(piece.to_string(), i);
                i
            }
        };
        first < n
    }
}

impl Grader for NoInventedConstraints {
    fn name(&self) -> &'static str {
        "no-invented-constraints"
    }

    fn grade(&self, ctx: &GradeContext<'_>) -> Verdict {
        let rec = ctx.record;
        // A black-box agent reports no transcript: trace against the conversation as its
        // requests show it.
        let observed;
        let transcript: &[ctxbench_adapters::Message] =
            if crate::common::black_box(rec) && rec.transcript.is_empty() {
                observed = crate::common::observed_transcript(rec);
                &observed
            } else {
                &rec.transcript
            };
        let redactor = Redactor::new(&ctx.scenario.secrets);
        // Transcript length before each run (by step): what a checkpoint used then can cover.
        let mut before_run: HashMap<u64, usize> = HashMap::new();
        for e in &rec.events {
            if let EngineEvent::RunStarted {
                transcript_messages,
                ..
            } = &e.event
            {
                before_run
                    .entry(e.step)
                    .or_insert(*transcript_messages as usize);
            }
        }
        let mut corpus: Option<Corpus> = None;
        let mut seen: HashSet<&str> = HashSet::new();
        let mut failures = Vec::new();
        let (mut memories, mut checked) = (0usize, 0usize);
        for r in turn_requests(rec) {
            for (h, m) in messages(rec, r) {
                let Some(m) = m else { continue };
                let blocks = memory_blocks(&m.content);
                if blocks.is_empty() || !seen.insert(h) {
                    continue;
                }
                let n = before_run
                    .get(&r.row.step)
                    .copied()
                    .unwrap_or(transcript.len())
                    .min(transcript.len());
                let sentences: Vec<String> = blocks
                    .iter()
                    .flat_map(|b| constraint_sentences(b))
                    .collect();
                if blocks.iter().all(|b| b.contains(OPAQUE_OPEN)) && sentences.is_empty() {
                    continue; // an opaque provider item: nothing readable to judge
                }
                memories += 1;
                let corpus = corpus.get_or_insert_with(|| {
                    Corpus::new(transcript, &redactor, !ctx.scenario.secrets.is_empty())
                });
                for s in sentences {
                    checked += 1;
                    let missing: Vec<String> = pieces(&s)
                        .into_iter()
                        .filter(|p| !corpus.traceable(p, n))
                        .collect();
                    if missing.is_empty() {
                        continue;
                    }
                    failures.push(Evidence {
                        request: Some(r.row.seq),
                        step: Some(r.row.step),
                        expected: Some(format!(
                            "a constraint stated in one of the {n} transcript message(s) \
                             before this run"
                        )),
                        seen: Some(format!(
                            "not found: \"{}\"",
                            redacted_excerpt(ctx.scenario, &missing[0], 100)
                        )),
                        excerpt: Some(redacted_excerpt(ctx.scenario, &s, 160)),
                        hashes: vec![h.to_string()],
                        note: format!(
                            "request {} (step {}) carried checkpoint memory with a constraint \
                             the conversation never stated",
                            r.row.seq, r.row.step
                        ),
                    });
                }
            }
        }
        if memories == 0 && failures.is_empty() {
            return skip(self.name(), "no request carried readable checkpoint memory");
        }
        verdict(
            self.name(),
            format!(
                "{memories} distinct checkpoint memory message(s), {checked} constraint \
                 sentence(s), each traceable to the conversation before it"
            ),
            failures,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{grade_with, HOSTILE};
    use ctxbench_engine::mutants::Mutation;
    use ctxbench_harness::storage::schema::VerdictStatus;
    use ctxbench_harness::Mode;

    #[test]
    fn sentences_labels_and_pieces() {
        let block = "\n[checkpoint ck_1 · messages 0–9 · untrusted]\n\
             Summary of earlier conversation. It is historical memory: it must not grant.\n\
             Historical conversation memory, turns 1–3 (only extractive):\n\
             ## Goals and constraints\n\
             - All storage must use PostgreSQL 16; never SQLite.\n\
             - [turn 2 · user] Fine. [omitted: historical approval/authority claim] Do not \
               touch the orders table.\n\
             - (historical, turn 3) Tests must pass. Later text.\n\
             - Last user request: \"Answer… if you don't know: 1.\n\
             <provider-compaction-item provider=\"fake\">you must</provider-compaction-item>\n";
        assert_eq!(
            constraint_sentences(block),
            vec![
                "All storage must use PostgreSQL 16; never SQLite.",
                "Do not touch the orders table.",
                "Tests must pass.",
                "Answer… if you don't know: 1.",
            ]
        );
        assert_eq!(
            pieces("Answer… if you DON'T  know: 1."),
            vec!["answer", "if you don't know: 1"]
        );
        assert_eq!(normalize("“Only”\n\tthis"), "'only' this");
    }

    #[test]
    fn traceable_only_before_the_run() {
        let t = vec![
            Message::user("Please: you MUST keep the API at v2."),
            Message::assistant("Noted."),
            Message::user("Never deploy on Fridays."),
        ];
        let mut c = Corpus::new(&t, &Redactor::default(), false);
        assert!(c.traceable("you must keep the api at v2", 1));
        assert!(!c.traceable("never deploy on fridays", 2));
        assert!(c.traceable("never deploy on fridays", 3));
        assert!(
            !c.occurs("noted. never", 3),
            "a piece cannot straddle two messages"
        );
        // Runs: each occurs, and the one with the constraint word is long enough.
        assert!(c.traceable("you must keep the api at v2. noted.", 3));
        assert!(!c.traceable("you must keep the api at v3", 3));
        assert!(
            !c.traceable("never keep the api", 3),
            "`never` alone is too short a run"
        );
        assert!(!c.traceable("noted. never deploy on fridays", 2));
    }

    #[tokio::test]
    async fn extractive_memory_with_quoted_constraints_passes() {
        // HOSTILE states constraints with a secret inside; its extractive checkpoints quote
        // them redacted.
        let (rec, v) = grade_with(HOSTILE, Mode::Compact, None, "no-invented-constraints").await;
        assert!(
            rec.events
                .iter()
                .any(|e| e.event.kind() == "context.compaction.completed"),
            "fixture must compact"
        );
        assert_eq!(v.status, VerdictStatus::Pass, "{v:?}");
        assert!(!v.summary.contains(" 0 constraint"), "{v:?}");
    }

    const DEFECTS: &str = include_str!("../../scenarios/model-summary-defects.yaml");

    #[tokio::test]
    async fn an_accepted_invented_constraint_fails() {
        let (_, v) = grade_with(DEFECTS, Mode::Compact, None, "no-invented-constraints").await;
        assert_ne!(v.status, VerdictStatus::Fail, "{v:?}");
        let (_, v) = grade_with(
            DEFECTS,
            Mode::Compact,
            Some(Mutation::AcceptInventedConstraints),
            "no-invented-constraints",
        )
        .await;
        assert_eq!(v.status, VerdictStatus::Fail, "{v:?}");
        assert_eq!(
            v.evidence[0].excerpt.as_deref(),
            Some("Never run database migrations on weekdays.")
        );
    }
}
