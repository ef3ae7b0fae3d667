//! `recall`: every probed fact is answered correctly from what the context kept.
//!
//! The fake provider answers a probe only from the request, one numbered line per fact, so
//! a fact the context manager dropped comes back as "unknown". Knowledge updates: the
//! expected answer matches the newest statement. Abstention: a fact never stated must be
//! answered "unknown".

use ctxbench_adapters::conventions::UNKNOWN_ANSWER;
use ctxbench_harness::record::TrialRecord;
use ctxbench_harness::scenario::{AnswerCheck, Scenario};
use ctxbench_harness::storage::schema::{Evidence, RecallRow, Verdict};
use ctxbench_harness::sut::TurnOutcome;

use crate::{skip, verdict, GradeContext, Grader};

/// The recall grader.
pub struct Recall;

impl Grader for Recall {
    fn name(&self) -> &'static str {
        "recall"
    }

    fn grade(&self, ctx: &GradeContext<'_>) -> Verdict {
        let rows = recall_rows(ctx.scenario, ctx.record);
        if rows.is_empty() {
            return skip(self.name(), "no probes in this scenario");
        }
        let correct = rows.iter().filter(|r| r.correct).count();
        let failures = rows
            .iter()
            .filter(|r| !r.correct)
            .map(|r| Evidence {
                step: Some(r.step),
                expected: Some(r.expected.clone()),
                seen: Some(r.answer.clone().unwrap_or_else(|| "(no answer)".into())),
                note: format!(
                    "fact `{}` at step {}: expected {}, got {}",
                    r.fact,
                    r.step,
                    r.expected,
                    r.answer
                        .as_deref()
                        .map(|a| crate::excerpt(a, 80))
                        .unwrap_or_else(|| "no answer (the probe turn did not complete)".into())
                ),
                ..Default::default()
            })
            .collect();
        verdict(
            self.name(),
            format!("{correct}/{} probed facts recalled", rows.len()),
            failures,
        )
    }
}

/// One recall row per (probe turn, fact).
pub fn recall_rows(scenario: &Scenario, record: &TrialRecord) -> Vec<RecallRow> {
    let mut out = Vec::new();
    for turn in &record.turns {
        let Some(ids) = &turn.probe else { continue };
        let answers: Option<Vec<Option<String>>> = match &turn.outcome {
            TurnOutcome::Completed { reply } => Some(parse_numbered(reply, ids.len())),
            _ => None,
        };
        for (i, id) in ids.iter().enumerate() {
            let Some(fact) = scenario.facts.iter().find(|f| &f.id == id) else {
                continue;
            };
            let answer = answers.as_ref().and_then(|a| a[i].clone());
            // The right answer is what was true at probe time: the newest statement
            // placed before the probe (a knowledge update not yet made is not expected).
            let expect = match newest_placed(scenario, record, fact, turn.step) {
                Some(k) if k + 1 < fact.statements.len() => {
                    AnswerCheck::Contains(fact.statements[k].clone())
                }
                None if !fact.statements.is_empty() => AnswerCheck::Abstain,
                _ => fact.expect.clone(),
            };
            let correct = answer
                .as_deref()
                .map(|a| check(&expect, a))
                .unwrap_or(false);
            out.push(RecallRow {
                fact: id.clone(),
                step: turn.step,
                expected: describe(&expect),
                answer,
                correct,
            });
        }
    }
    out
}

/// Index of the newest statement of `fact` placed anywhere in the script before `step`
/// (instructions, user text, tool results, replies, instruction edits).
fn newest_placed(
    scenario: &Scenario,
    record: &TrialRecord,
    fact: &ctxbench_harness::scenario::Fact,
    step: u64,
) -> Option<usize> {
    use ctxbench_harness::scenario::Step;
    let mut texts: Vec<&str> = vec![scenario.instructions.as_str()];
    for s in record.steps.iter().take(step as usize) {
        match s {
            Step::Turn(t) => {
                texts.push(&t.user);
                if let Some(r) = &t.reply {
                    texts.push(r);
                }
                for c in t.tool_rounds.iter().flatten() {
                    texts.push(&c.result);
                }
            }
            Step::EditInstructions { text } => texts.push(text),
            _ => {}
        }
    }
    fact.statements
        .iter()
        .enumerate()
        .rev()
        .find(|(_, st)| texts.iter().any(|t| t.contains(st.as_str())))
        .map(|(k, _)| k)
}

/// Parse `1. answer` lines; answer `k` is `None` when its line is missing.
pub fn parse_numbered(reply: &str, n: usize) -> Vec<Option<String>> {
    let mut out = vec![None; n];
    for line in reply.lines() {
        let line = line.trim();
        let Some((num, rest)) = line.split_once('.') else {
            continue;
        };
        if let Ok(k) = num.trim().parse::<usize>() {
            if k >= 1 && k <= n && out[k - 1].is_none() {
                out[k - 1] = Some(rest.trim().to_string());
            }
        }
    }
    out
}

/// Whether an answer satisfies a check (case-insensitive where documented).
pub fn check(expect: &AnswerCheck, answer: &str) -> bool {
    let a = answer.trim();
    let al = a.to_lowercase();
    match expect {
        AnswerCheck::Exact(s) => al == s.trim().to_lowercase(),
        AnswerCheck::Contains(s) => al.contains(&s.to_lowercase()),
        AnswerCheck::Regex(r) => regex::Regex::new(r)
            .map(|re| re.is_match(a))
            .unwrap_or(false),
        AnswerCheck::OneOf(opts) => opts.iter().any(|o| al.contains(&o.to_lowercase())),
        AnswerCheck::Abstain => al.trim_end_matches('.') == UNKNOWN_ANSWER,
    }
}

/// A check as text, e.g. `contains: PostgreSQL`.
pub fn describe(expect: &AnswerCheck) -> String {
    match expect {
        AnswerCheck::Exact(s) => format!("exact: {s}"),
        AnswerCheck::Contains(s) => format!("contains: {s}"),
        AnswerCheck::Regex(s) => format!("regex: {s}"),
        AnswerCheck::OneOf(v) => format!("one of: {}", v.join(" | ")),
        AnswerCheck::Abstain => "abstain (unknown)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{judge_with, SMALL_RECALL};
    use ctxbench_engine::mutants::Mutation;
    use ctxbench_harness::storage::schema::VerdictStatus;
    use ctxbench_harness::Mode;

    #[test]
    fn checks() {
        assert!(check(
            &AnswerCheck::Contains("postgres".into()),
            "Use PostgreSQL 16"
        ));
        assert!(check(&AnswerCheck::Exact("Yes".into()), " yes "));
        assert!(!check(&AnswerCheck::Exact("Yes".into()), "yes!"));
        assert!(check(&AnswerCheck::Abstain, "unknown."));
        assert!(!check(&AnswerCheck::Abstain, "PostgreSQL"));
        assert!(check(
            &AnswerCheck::OneOf(vec!["a1".into(), "b2".into()]),
            "it is B2"
        ));
        assert!(check(
            &AnswerCheck::Regex("^us-[a-z]+-\\d$".into()),
            "us-east-2"
        ));
        assert_eq!(
            parse_numbered("1. a\n2. b\n3. c", 2),
            vec![Some("a".into()), Some("b".into())]
        );
        assert_eq!(parse_numbered("2. b", 2), vec![None, Some("b".into())]);
    }

    #[tokio::test]
    async fn reference_engine_recalls_and_dropped_history_fails() {
        let (_, good) = judge_with(SMALL_RECALL, Mode::Warn, None).await;
        let v = good.verdicts.iter().find(|v| v.grader == "recall").unwrap();
        assert_eq!(v.status, VerdictStatus::Pass, "{v:?}");
        let (_, bad) = judge_with(SMALL_RECALL, Mode::Warn, Some(Mutation::DropHistory)).await;
        let v = bad.verdicts.iter().find(|v| v.grader == "recall").unwrap();
        assert_eq!(v.status, VerdictStatus::Fail, "{v:?}");
        assert!(v
            .evidence
            .iter()
            .any(|e| e.seen.as_deref() == Some("unknown")));
    }
}
