//! Rolling: a previous extractive summary's lines re-enter the competition.
//!
//! Each line a previous summary wrote (`- [N tag] …`) is parsed back into items of
//! the section it came from and ranked by the same rules as new material, with a small bonus
//! for having survived once. The newest request of an older checkpoint is no longer the
//! newest: it comes back as ordinary user statements. The file in flight is stale and is
//! dropped (the files line keeps it).

use super::answers::{answer_score, INFORMATIVE_ANSWER};
use super::collect::COMMAND_SCORE;
use super::rules::listed_with_rules;
use super::text::{occurrence_key, sentences, unlabelled};
use super::tool_lines::{key_lines, shortened_label};
use super::{user_rank, Item, Section, LINE_JOINER, OMISSION_MARKER};

/// What a previous checkpoint survived with earns in the next one.
const SURVIVED_BONUS: i64 = 10;

/// The parsed previous summary.
#[derive(Debug, Default)]
pub(super) struct Previous {
    pub items: Vec<Item>,
    pub files: Vec<String>,
    pub refs: Vec<String>,
    pub first_turn: Option<usize>,
}

/// A summary line's turn, tag, body and the joiner of its tool lines: `- [N tag] body`
/// (joined by [`LINE_JOINER`]), or `- [turn N · tag] body` as checkpoints were written
/// before the shorter form (joined by ` | `, rows' own pipes written `|`).
fn line_head(line: &str) -> Option<(&str, &str, &str, &'static str)> {
    let rest = line.strip_prefix("- [")?;
    let (head, body) = rest.split_once("] ")?;
    let (turn, tag, joiner) = match head.strip_prefix("turn ") {
        Some(old) => {
            let (turn, tag) = old.split_once(" · ")?;
            (turn, tag, " | ")
        }
        None => {
            let (turn, tag) = head.split_once(' ')?;
            (turn, tag, LINE_JOINER)
        }
    };
    Some((turn, tag, body, joiner))
}

/// Parse `summary` (written by this summarizer) into items; `seq` numbers them.
pub(super) fn previous(summary: &str, seq: &mut usize) -> Previous {
    let mut out = Previous::default();
    for line in summary.lines() {
        let Some((turn, tag, body, joiner)) = line_head(line) else {
            continue;
        };
        let Ok(turn) = turn.trim().parse::<usize>() else {
            continue;
        };
        out.first_turn = Some(out.first_turn.map_or(turn, |t| t.min(turn)));
        *seq += 1;
        let source = *seq;
        match tag.trim() {
            "files" => out.files.extend(body.split(", ").map(str::to_string)),
            "archive" => out.refs.extend(
                body.split(' ')
                    .filter(|s| s.starts_with("archive://"))
                    .map(str::to_string),
            ),
            "in-flight" => {}
            tag @ ("tool" | "command") => {
                // The last command stays the last command until a newer one is run
                // (`collect` demotes it then): its whole invocation, as task state.
                let command = tag == "command";
                let (label, lines) = match body.split_once("): ") {
                    Some((label, lines)) => (format!("{label})"), lines),
                    None if command && body.ends_with(')') => (body.to_string(), ""),
                    None => continue,
                };
                if command {
                    *seq += 1;
                    out.items.push(Item {
                        section: Section::Task,
                        turn,
                        tag: "command",
                        seq: *seq,
                        text: String::new(),
                        score: COMMAND_SCORE + 20,
                        source,
                        label: Some(label.clone()),
                        group: None,
                        whole: true,
                        routine: false,
                    });
                }
                for text in lines.split(joiner).filter(|t| !t.trim().is_empty()) {
                    *seq += 1;
                    let rank = key_lines(unlabelled(text)).first().map_or(5, |k| k.score);
                    out.items.push(Item {
                        section: if command {
                            Section::Task
                        } else {
                            Section::ToolLines
                        },
                        turn,
                        tag: if command { "command" } else { "tool" },
                        seq: *seq,
                        text: text.to_string(),
                        score: if command { COMMAND_SCORE } else { 30 } + 5 * rank + SURVIVED_BONUS,
                        source,
                        label: Some(if command {
                            label.clone()
                        } else {
                            shortened_label(&label)
                        }),
                        group: Some(format!("tool:{}", occurrence_key(unlabelled(text)))),
                        whole: command,
                        routine: false,
                    });
                }
            }
            tag @ ("assistant" | "answer") => {
                let tag = if tag == "answer" {
                    "answer"
                } else {
                    "assistant"
                };
                for s in sentences(body) {
                    *seq += 1;
                    if s == OMISSION_MARKER {
                        out.items.push(Item::omission(turn, tag, *seq, source));
                        continue;
                    }
                    let Some(score) = answer_score(unlabelled(&s), tag == "answer", false) else {
                        continue;
                    };
                    out.items.push(Item {
                        section: if score >= INFORMATIVE_ANSWER {
                            Section::Answers
                        } else {
                            Section::Other
                        },
                        turn,
                        tag,
                        seq: *seq,
                        group: Some(format!("assistant:{}", occurrence_key(unlabelled(&s)))),
                        text: s,
                        score: score + SURVIVED_BONUS,
                        source,
                        label: None,
                        whole: false,
                        routine: false,
                    });
                }
            }
            other => {
                let tag = match other {
                    "system" => "system",
                    "stated" => "stated",
                    _ => "user",
                };
                let list = sentences(body);
                let plain: Vec<String> = list.iter().map(|s| unlabelled(s).to_string()).collect();
                // A line keeps the sentences of one message; listed together they still are.
                let listed = tag == "stated" || listed_with_rules(&plain);
                for (s, plain) in list.into_iter().zip(plain) {
                    *seq += 1;
                    if s == OMISSION_MARKER {
                        out.items.push(Item::omission(turn, tag, *seq, source));
                        continue;
                    }
                    let (section, score) = user_rank(&plain, listed);
                    out.items.push(Item {
                        section,
                        turn,
                        tag,
                        seq: *seq,
                        group: Some(format!("user:{}", occurrence_key(&plain))),
                        score: score + SURVIVED_BONUS,
                        text: s,
                        source,
                        label: None,
                        whole: false,
                        routine: false,
                    });
                }
            }
        }
    }
    out
}
