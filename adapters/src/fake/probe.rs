//! How the fake model answers a probe: **only from the request**, by precedence, tolerant to
//! paraphrase.
//!
//! A probe asks for facts by id. The model knows each fact's versions (oldest first) and,
//! per version, what counts as its presence:
//!
//! * with a declared **answer value** (`value:` in the scenario), the version is present
//!   where its value occurs as whole words (case, spacing and quote marks aside) — and,
//!   when the fact names what it is **about**, that subject occurs in the same clause
//!   (`svc-3: 8003` is svc-3's port, not svc-4's);
//! * without one, where its statement occurs, case, spacing and final punctuation aside.
//!
//! It looks everywhere ([`places`]: instructions, the current user message, the
//! conversation, memory) and answers the **newest version** present: a knowledge update
//! supersedes what it updates wherever either sits — an instruction file's value changed
//! later in conversation is the changed value, and a stale copy in memory never outranks a
//! newer statement. Nothing anywhere: `unknown`. (Versions are the scenario's knowledge
//! updates, newest last; repeated requests whose answers should all stay retrievable are
//! separate facts, not versions.)
//!
//! **The answer names a version, never its text.** A probe reply line is
//! `N. [recall:TOKEN]` — TOKEN a digest of the fact id, version number and statement, which
//! the recall grader resolves ([`version_token`]) — or `N. unknown`. A reply therefore
//! carries no fact into the conversation: a later probe can only be answered from the
//! original statement or what the engine kept of it, so a probe's depth is its distance from
//! the statement, never from the previous probe.

use sha2::{Digest, Sha256};

use super::layout::{places, MemoryRule, Segment};
use super::text::{clauses, find_bounded, normalize, trim_terminal};
use super::FakeFact;
use crate::ModelRequest;

/// The answer a model gives to a probe whose fact is not in its context.
pub const UNKNOWN_ANSWER: &str = "unknown";

/// Prefix of a recalled-version token in a probe reply line.
pub const RECALL_PREFIX: &str = "[recall:";

/// What the model found for one probed fact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recalled {
    /// Version `version` (0 = the first statement) of the fact.
    Version(usize),
    /// No version in the request (or an id the script does not define).
    Unknown,
}

/// The token naming version `version` of fact `id` stated as `statement`: 12 hex digits.
pub fn version_token(id: &str, version: usize, statement: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"ctxbench.recall.v1\0");
    h.update(id.as_bytes());
    h.update(b"\0");
    h.update((version as u64).to_le_bytes());
    h.update(statement.as_bytes());
    hex::encode(&h.finalize()[..6])
}

/// The reply line text for one answer (without the `N. ` number).
pub fn answer_text(fact: Option<&FakeFact>, recalled: &Recalled) -> String {
    match (fact, recalled) {
        (Some(f), Recalled::Version(v)) => match f.statements.get(*v) {
            Some(s) => format!("{RECALL_PREFIX}{}]", version_token(&f.id, *v, s)),
            None => UNKNOWN_ANSWER.to_string(),
        },
        _ => UNKNOWN_ANSWER.to_string(),
    }
}

/// One occurrence of a version: (group position key, match length, version).
type Hit = ((usize, usize), usize, usize);

/// Occurrences of every version of `fact` in one message's pieces.
fn hits(fact: &FakeFact, group: &[Segment<'_>]) -> Vec<Hit> {
    let about = fact
        .about
        .as_deref()
        .map(normalize)
        .filter(|a| !a.is_empty());
    let mut out = Vec::new();
    for seg in group {
        let text = normalize(seg.text);
        // Values are looked for line by line: normalising the whole text would turn its line
        // ends into spaces, and a clause must end at a line end (a table row, a `key: value`
        // line) as the docs say — else `svc-3` on one row and `8003` on the next would count.
        let mut lined: Option<String> = None;
        for (v, statement) in fact.statements.iter().enumerate() {
            let value = fact
                .values
                .get(v)
                .map(|x| normalize(x))
                .filter(|x| !x.is_empty());
            match value {
                Some(value) => {
                    let lined = lined.get_or_insert_with(|| {
                        seg.text
                            .split('\n')
                            .map(normalize)
                            .collect::<Vec<_>>()
                            .join("\n")
                    });
                    for at in find_bounded(lined, &value) {
                        let end = at + value.len();
                        if let Some(about) = &about {
                            let clause = clauses(lined)
                                .into_iter()
                                .find(|&(s, e)| s <= at && end <= e);
                            let in_clause = clause.is_some_and(|(s, e)| {
                                !find_bounded(&lined[s..e], about).is_empty()
                            });
                            if !in_clause {
                                continue;
                            }
                        }
                        out.push(((seg.offset, end), value.len(), v));
                    }
                }
                None => {
                    let needle = normalize(trim_terminal(statement));
                    if needle.is_empty() {
                        continue;
                    }
                    for (at, _) in text.match_indices(needle.as_str()) {
                        out.push(((seg.offset, at + needle.len()), needle.len(), v));
                    }
                }
            }
        }
    }
    out
}

/// What the model finds for `fact` in `request` (see the module docs).
pub fn recall(request: &ModelRequest, fact: &FakeFact, rule: &MemoryRule) -> Recalled {
    places(request, rule)
        .iter()
        .flat_map(|(_, group)| hits(fact, group))
        .map(|(_, _, v)| v)
        .max()
        .map_or(Recalled::Unknown, Recalled::Version)
}

/// Answer the facts `ids` (in order) from `request` alone: one reply line text per id.
pub fn answer_probe(
    request: &ModelRequest,
    facts: &[FakeFact],
    ids: &[String],
    rule: &MemoryRule,
) -> Vec<String> {
    ids.iter()
        .map(|id| {
            let fact = facts.iter().find(|f| &f.id == id);
            let recalled = fact.map_or(Recalled::Unknown, |f| recall(request, f, rule));
            answer_text(fact, &recalled)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Markup, Message};

    fn req(messages: Vec<Message>) -> ModelRequest {
        ModelRequest {
            model: "fake-16k".into(),
            messages,
            tools: vec![],
            max_output_tokens: 100,
        }
    }

    fn fact(id: &str, statements: &[&str]) -> FakeFact {
        FakeFact {
            id: id.into(),
            statements: statements.iter().map(|s| s.to_string()).collect(),
            values: Vec::new(),
            about: None,
        }
    }

    fn rule() -> MemoryRule {
        MemoryRule {
            markup: Some(Markup {
                open: "<memory>".into(),
                close: "</memory>".into(),
            }),
            instructions: Vec::new(),
        }
    }

    fn memory(text: &str) -> String {
        format!("<memory>{text}</memory>")
    }

    fn found(r: &ModelRequest, f: &FakeFact) -> Recalled {
        recall(r, f, &rule())
    }

    const V0: &str = "The deploy window is Friday.";
    const V1: &str = "The deploy window is Tuesday.";

    #[test]
    fn found_in_conversation_case_and_spacing_aside() {
        let r = req(vec![
            Message::system("You are helpful."),
            Message::user("Note: the  deploy window is FRIDAY! Thanks."),
            Message::user("What is the deploy window?"),
        ]);
        assert_eq!(found(&r, &fact("w", &[V0, V1])), Recalled::Version(0));
    }

    #[test]
    fn abstains_when_absent_or_undefined() {
        let r = req(vec![Message::user("What is the deploy window?")]);
        let facts = [fact("w", &[V0, V1]), fact("never", &[])];
        let ids: Vec<String> = ["w", "never", "no-such-id"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            answer_probe(&r, &facts, &ids, &rule()),
            vec![UNKNOWN_ANSWER; 3]
        );
    }

    #[test]
    fn answers_name_the_version_not_its_text() {
        let r = req(vec![Message::user(V1), Message::user("q")]);
        let f = fact("w", &[V0, V1]);
        let a = answer_probe(&r, &[f], &["w".to_string()], &rule());
        assert_eq!(a, vec![format!("[recall:{}]", version_token("w", 1, V1))]);
        assert!(!a[0].contains("Tuesday"));
        assert_ne!(version_token("w", 0, V0), version_token("w", 1, V1));
    }

    #[test]
    fn the_newest_version_anywhere_answers() {
        let f = fact("w", &[V0, V1]);
        // An instruction's value updated later in conversation: the update.
        let r = req(vec![
            Message::system(format!("Policy: {V0}")),
            Message::assistant(V1),
            Message::user("What is the window?"),
        ]);
        assert_eq!(found(&r, &f), Recalled::Version(1));
        // A stale statement repeated later does not undo the update.
        let r = req(vec![
            Message::user(V1),
            Message::user(format!("As I said, {V0} Right?")),
        ]);
        assert_eq!(found(&r, &f), Recalled::Version(1));
        // Memory answers like any other place: the update kept there counts …
        let r = req(vec![
            Message::system(format!("Rules.{}", memory(V1))),
            Message::user(V0),
            Message::user("Which day?"),
        ]);
        assert_eq!(found(&r, &f), Recalled::Version(1));
        // … and memory alone answers too.
        let r = req(vec![
            Message::system(memory(V0)),
            Message::user("Which day?"),
        ]);
        assert_eq!(found(&r, &f), Recalled::Version(0));
    }

    #[test]
    fn tool_call_arguments_are_conversation() {
        let f = fact("cmd", &["cargo nextest run -p billing"]);
        let mut call = Message::assistant("");
        call.tool_calls = vec![crate::ToolCall {
            id: "c1".into(),
            name: "run".into(),
            arguments: serde_json::json!({"command": "cargo nextest run -p billing"}),
        }];
        let r = req(vec![call, Message::user("Which command ran last?")]);
        assert_eq!(found(&r, &f), Recalled::Version(0));
    }

    #[test]
    fn the_newest_version_wins_within_a_message() {
        let f = fact("w", &[V0, V1]);
        let r = req(vec![
            Message::user(V0),
            Message::user(V1),
            Message::tool_result("c", "log"),
            Message::user("Which day?"),
        ]);
        assert_eq!(found(&r, &f), Recalled::Version(1));
        let r = req(vec![
            Message::user(format!("First {V1} then later {V0}")),
            Message::user("q"),
        ]);
        assert_eq!(found(&r, &f), Recalled::Version(1));
    }

    #[test]
    fn values_are_paraphrase_tolerant_and_bounded() {
        let f = FakeFact {
            id: "port".into(),
            statements: vec![
                "The API listens on port 80.".into(),
                "Move the API to port 8080.".into(),
            ],
            values: vec!["80".into(), "8080".into()],
            about: None,
        };
        let r = req(vec![
            Message::system(memory("- api port: 8080 (moved)")),
            Message::user("q"),
        ]);
        assert_eq!(found(&r, &f), Recalled::Version(1));
        let r = req(vec![
            Message::user("nothing about ports, 180 or 808"),
            Message::user("q"),
        ]);
        assert_eq!(found(&r, &f), Recalled::Unknown);
    }

    #[test]
    fn about_must_share_the_clause_with_the_value() {
        let f = FakeFact {
            id: "svc3".into(),
            statements: vec!["The port of svc-3 is 8003.".into()],
            values: vec!["8003".into()],
            about: Some("svc-3".into()),
        };
        let r = req(vec![
            Message::user("svc-3: 8003; svc-4: 8004"),
            Message::user("q"),
        ]);
        assert_eq!(found(&r, &f), Recalled::Version(0));
        let r = req(vec![
            Message::user("svc-4: 8003; svc-3: 9000"),
            Message::user("q"),
        ]);
        assert_eq!(found(&r, &f), Recalled::Unknown);
        // A line end ends a clause: the subject on one row and the value on the next is
        // no presence.
        let r = req(vec![
            Message::tool_result("c1", "svc-3   up\nsvc-4   8003"),
            Message::user("q"),
        ]);
        assert_eq!(found(&r, &f), Recalled::Unknown);
        let r = req(vec![
            Message::tool_result("c1", "svc-4   9000\nsvc-3   8003"),
            Message::user("q"),
        ]);
        assert_eq!(found(&r, &f), Recalled::Version(0));
    }

    #[test]
    fn containing_statement_wins_over_contained_one() {
        let f = fact("port", &["The port is 80", "The port is 8080"]);
        let r = req(vec![Message::user("The port is 8080."), Message::user("q")]);
        assert_eq!(found(&r, &f), Recalled::Version(1));
    }
}
