//! `recall`: every probed fact is answered correctly from what the context kept.
//!
//! The fake model answers a probe only from the request, one numbered line per fact, naming
//! the version it found (`[recall:TOKEN]`, resolved here by [`version_token`]) or saying
//! `unknown`; the answer is read from the provider's own reply, never from what the system
//! under test reports. The right answer is the version true at probe time: the newest one
//! placed before the probe (a knowledge update not yet made is not expected), or `unknown`
//! when none was — and always `unknown` for a fact never stated (abstention). A free-text
//! answer (a real model) is checked against the fact's expectation instead.

use ctxbench_adapters::fake::{version_token, RECALL_PREFIX, UNKNOWN_ANSWER};
use ctxbench_adapters::Role;
use ctxbench_harness::record::TrialRecord;
use ctxbench_harness::scenario::{AnswerCheck, Fact, Scenario};
use ctxbench_harness::storage::schema::{Evidence, RecallRow, Verdict};

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
                        .unwrap_or_else(|| "no answer (the model never answered the probe)".into())
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

/// The model's final text answer in script step `step`: the last answered turn request of
/// that step whose reply carries no tool call.
fn provider_answer(record: &TrialRecord, step: u64) -> Option<&str> {
    record
        .requests
        .iter()
        .filter(|r| r.row.sent && r.row.step == step && r.row.purpose == "turn")
        .filter_map(|r| r.response.as_ref())
        .filter(|resp| resp.message.role == Role::Assistant && resp.message.tool_calls.is_empty())
        .map(|resp| resp.message.content.as_str())
        .next_back()
}

/// What an answer line names: a fact version by token, or nothing resolvable.
fn resolve<'s>(scenario: &'s Scenario, answer: &str) -> Option<(&'s Fact, usize)> {
    let token = answer
        .trim()
        .strip_prefix(RECALL_PREFIX)?
        .trim_end_matches(']');
    scenario.facts.iter().find_map(|f| {
        f.statements
            .iter()
            .enumerate()
            .find(|(v, st)| version_token(&f.id, *v, st) == token)
            .map(|(v, _)| (f, v))
    })
}

/// One recall row per (probe turn, fact).
pub fn recall_rows(scenario: &Scenario, record: &TrialRecord) -> Vec<RecallRow> {
    let mut out = Vec::new();
    for turn in &record.turns {
        let Some(ids) = &turn.probe else { continue };
        let answers: Option<Vec<Option<String>>> =
            provider_answer(record, turn.step).map(|reply| parse_numbered(reply, ids.len()));
        for (i, id) in ids.iter().enumerate() {
            let Some(fact) = scenario.facts.iter().find(|f| &f.id == id) else {
                continue;
            };
            let line = answers.as_ref().and_then(|a| a[i].clone());
            // The version true at probe time.
            let wanted = newest_placed(scenario, record, fact, turn.step);
            let is_final = wanted.is_some_and(|k| k + 1 == fact.statements.len());
            let expected = match wanted {
                None => AnswerCheck::Abstain,
                Some(_) if is_final => fact.expect.clone(),
                Some(k) => AnswerCheck::Exact(fact.answer(k).unwrap_or_default().to_string()),
            };
            let (answer, correct) = match line.as_deref() {
                None => (None, false),
                Some(a) => match resolve(scenario, a) {
                    // A version token: right when it names the wanted version of this fact.
                    Some((f, v)) => {
                        let text = f.answer(v).unwrap_or_default().to_string();
                        (Some(text), f.id == fact.id && Some(v) == wanted)
                    }
                    // Free text (a real model): the check, and none of the excluded texts
                    // (a superseded value) when the newest version is wanted.
                    None => {
                        let excluded = is_final
                            && fact
                                .excludes
                                .iter()
                                .any(|x| a.to_lowercase().contains(&x.to_lowercase()));
                        (Some(a.to_string()), check(&expected, a) && !excluded)
                    }
                },
            };
            out.push(RecallRow {
                kind: fact.kind.as_str().to_string(),
                fact: id.clone(),
                step: turn.step,
                expected: describe(&expected),
                answer,
                correct,
            });
        }
    }
    out
}

/// Index of the newest statement of `fact` placed anywhere in the script before `step`
/// (instructions, user text, tool calls' arguments and results, replies, instruction edits).
fn newest_placed(
    scenario: &Scenario,
    record: &TrialRecord,
    fact: &Fact,
    step: u64,
) -> Option<usize> {
    use ctxbench_harness::scenario::Step;
    let mut texts: Vec<&str> = vec![scenario.instructions.as_str()];
    let mut args: Vec<String> = Vec::new();
    for s in record.steps.iter().take(step as usize) {
        match s {
            Step::Turn(t) => {
                texts.push(&t.user);
                if let Some(r) = &t.reply {
                    texts.push(r);
                }
                for c in t.tool_rounds.iter().flatten() {
                    texts.push(&c.result);
                    strings_of(&c.arguments, &mut args);
                }
            }
            Step::EditInstructions { text } => texts.push(text),
            _ => {}
        }
    }
    texts.extend(args.iter().map(String::as_str));
    fact.statements
        .iter()
        .enumerate()
        .rev()
        .find(|(_, st)| texts.iter().any(|t| t.contains(st.as_str())))
        .map(|(k, _)| k)
}

/// Every string leaf of a JSON value.
fn strings_of(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::String(s) => out.push(s.clone()),
        serde_json::Value::Array(a) => a.iter().for_each(|x| strings_of(x, out)),
        serde_json::Value::Object(o) => o.values().for_each(|x| strings_of(x, out)),
        _ => {}
    }
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

/// Whether a free-text answer satisfies a check (case-insensitive where documented).
pub fn check(expect: &AnswerCheck, answer: &str) -> bool {
    let a = answer.trim();
    let al = a.to_lowercase();
    match expect {
        AnswerCheck::Exact(s) => {
            al.trim_end_matches('.') == s.trim().to_lowercase().trim_end_matches('.')
        }
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
}
