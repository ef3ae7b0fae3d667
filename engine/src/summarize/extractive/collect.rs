//! Collection: every covered message (redacted) turned into candidate [`Item`]s of its
//! section, with files touched and archive references gathered on the side.

use std::collections::{HashMap, HashSet};

use ctxbench_adapters::{Message, Role};

use super::answers::{answer_score, asked_answer_score, INFORMATIVE_ANSWER};
use super::claims::claims;
use super::mentions::Mentions;
use super::novelty::Vocabulary;
use super::rolling::Previous;
use super::rules::{listed_with_rules, statement_score};
use super::task::{clip_part, part_limits, paths_in, request_parts};
use super::text::{
    archive_refs, clip, historical, is_question, occurrence_key, one_line, opens_question_list,
    parts_of_long, sentences, verification,
};
use super::tool_lines::{
    argument_strings, call_label, call_label_long, edited_settings, key_lines, runs_a_command,
    setting, shortened_label, top_lines, KeyLine, MAX_LINES_PER_RESULT, MAX_LINE_CHARS,
};
use super::updates::values;
use super::{user_rank, Breakage, Item, Section, LINE_JOINER, MAX_SENTENCE_CHARS};
use crate::summarize::SummaryRequest;

/// Summary size from which the newest call of every tool keeps its whole invocation.
const LONG_LABELS_FROM_TOKENS: u64 = 800;
/// Characters of tool result per key line it may contribute (about 150 tokens).
const CHARS_PER_KEY_LINE: usize = 600;
/// Most key lines kept from a tool result that is data (mostly key lines).
const MAX_DATA_LINES_PER_RESULT: usize = 64;
/// Line rank a setting gains in a result that shows it changed since an earlier result of
/// the covered turns (`RETRY_BACKOFF_MS = 250`, re-read after an edit as `= 1500`): the new
/// value is what the session did; the unchanged lines around it were already known.
const CHANGED_SETTING_BONUS: i64 = 6;
/// Line rank a key line gains when the conversation's prose names it (`mentions.rs`): of
/// look-alike settings or rows, the one the session talked about.
const MENTIONED_BONUS: i64 = 3;
/// Item rank per unit of a key line's rank.
const LINE_RANK_WEIGHT: i64 = 5;
/// What an answer sentence gives up per value it restates from a tool result (at most
/// [`MAX_RESTATED`]): half the credit a value earns. A restated value is already where the
/// key lines are taken from; what the answer adds is what no tool said (a cause, a fix, a
/// choice), and a recap of a file's numbers must not outrank the diagnosis of the turn.
const RESTATED_PENALTY: i64 = 5;
const MAX_RESTATED: usize = 4;

/// Rank of the newest request's parts: the task comes first.
const REQUEST_SCORE: i64 = 200;
/// Rank of the last command's lines.
pub(super) const COMMAND_SCORE: i64 = 150;
/// Rank of the file in flight: above the last command's lines (a short line, and "which
/// file were you editing?" is the first thing a resumed agent needs after the request).
const IN_FLIGHT_SCORE: i64 = 190;
/// Share of the budget (percent) the newest request's parts are clipped to fit, when they
/// must be clipped at all.
const REQUEST_SHARE_PERCENT: u64 = 20;
/// Characters per estimated token assumed when clipping to a token share (conservative).
const CHARS_PER_TOKEN: u64 = 3;

/// What collection produced.
pub(super) struct Collected {
    pub items: Vec<Item>,
    pub files: Vec<String>,
    pub refs: Vec<String>,
    /// First and last turn covered.
    pub turns: (usize, usize),
}

/// Whether `messages[i]` ends its turn's assistant work: no tool calls, and nothing of the
/// same turn follows but another user message.
fn is_final(messages: &[Message], turns: &[usize], i: usize) -> bool {
    messages[i].tool_calls.is_empty()
        && messages
            .get(i + 1)
            .is_none_or(|n| n.role == Role::User || turns.get(i + 1) != turns.get(i))
}

/// A sentence as the parts it is ranked in ([`parts_of_long`]), each with whether it is an
/// authority claim. A claim is judged on its whole sentence, and dropped whole: a claim
/// split across two parts must not slip through as two harmless halves.
fn ranked_parts(sentence: String) -> Vec<(String, bool)> {
    if claims().is_match(&sentence) {
        vec![(sentence, true)]
    } else {
        parts_of_long(&sentence)
            .into_iter()
            .map(|p| (p, false))
            .collect()
    }
}

/// Collect the candidates of the covered messages, after `previous`'s.
pub(super) fn collect(
    req: &SummaryRequest<'_>,
    broken: Breakage,
    previous: Previous,
    vocabulary: &Vocabulary,
    mut seq: usize,
) -> Collected {
    let Previous {
        mut items,
        mut files,
        mut refs,
        first_turn,
    } = previous;
    // The mutants' broken decisions hold for what a previous checkpoint carried too.
    items.retain(|it| {
        !(broken.tool_content && matches!(it.tag, "tool" | "command")
            || broken.assistant_text && matches!(it.tag, "assistant" | "answer"))
    });
    let messages: Vec<Message> = req
        .covered
        .iter()
        .map(|e| req.redactor.redact_message(&e.message))
        .collect();
    let turn_of = |i: usize| req.turn_numbers.get(i).copied().unwrap_or(0);
    let turns: Vec<usize> = (0..messages.len()).map(turn_of).collect();
    // What the tools returned, as values: an answer restating them recaps.
    let tool_values: HashSet<String> = messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .flat_map(|m| values(&m.content))
        .collect();
    // The value each setting had in the newest tool result that showed it, and the settings
    // an edit call has set since.
    let mut settings: HashMap<String, String> = HashMap::new();
    let mut edited: HashSet<String> = HashSet::new();
    let first = first_turn
        .into_iter()
        .chain(turns.first().copied())
        .min()
        .unwrap_or(0);
    let last = turns.iter().copied().max().unwrap_or(0).max(first);

    // Who made each call, and which calls were the last ones made.
    let mut labels: HashMap<&str, String> = HashMap::new();
    let mut last_calls: Vec<&str> = Vec::new();
    let mut last_call_message = None;
    let mut newest_of_tool = HashMap::new();
    let mut in_flight: Option<(usize, String)> = None;
    // The newest call that ran a command (message, call): what "the last command" is when
    // file reads followed it.
    let mut last_command: Option<(usize, &ctxbench_adapters::ToolCall)> = None;
    for (i, m) in messages.iter().enumerate() {
        if m.role != Role::Assistant || m.tool_calls.is_empty() {
            continue;
        }
        last_calls.clear();
        last_call_message = Some(i);
        let mut touched = Vec::new();
        for call in &m.tool_calls {
            if runs_a_command(&call.arguments) {
                last_command = Some((i, call));
            }
            labels.insert(call.id.as_str(), call_label(&call.name, &call.arguments));
            newest_of_tool.insert(call.name.as_str(), call);
            last_calls.push(call.id.as_str());
            paths_in(&call.arguments, &mut touched);
        }
        if let Some(p) = touched.last().filter(|_| !req.later.calls) {
            in_flight = Some((turns[i], p.clone()));
        }
        files.extend(touched);
    }
    // The last command is task state ("what did you run last?"): its label keeps the
    // whole invocation (up to a bound), not the short form every other call gets. So does
    // the newest call of each tool — the last shell command is often followed by reads —
    // when the summary has room for it: a long label is repeated on every line of its
    // result, and in a small summary it costs what a value would.
    // A later call (in the retained messages) is the last one: these are history.
    if req.later.calls {
        last_calls.clear();
        last_call_message = None;
    }
    // A previous checkpoint's last command is history once a newer one ran.
    let newer_command = req.later.commands || last_command.is_some();
    // …and a later command is the last one.
    let last_command = last_command.filter(|(i, c)| {
        let in_last_batch = Some(*i) == last_call_message && last_calls.contains(&c.id.as_str());
        !(req.later.commands || in_last_batch)
    });
    let mut commands = last_calls.clone();
    commands.extend(last_command.map(|(_, c)| c.id.as_str()));
    if newer_command {
        items.retain(|it| !(it.tag == "command" && it.text.is_empty()));
        for it in items.iter_mut().filter(|it| it.tag == "command") {
            it.tag = "tool";
            it.section = Section::ToolLines;
            it.score -= COMMAND_SCORE - 30;
            it.whole = false;
            it.label = it.label.as_deref().map(shortened_label);
        }
    }
    let last_batch = last_call_message
        .into_iter()
        .flat_map(|i| messages[i].tool_calls.iter());
    let newest_of_tool = newest_of_tool
        .into_values()
        .filter(|_| req.target_tokens >= LONG_LABELS_FROM_TOKENS);
    for call in newest_of_tool
        .chain(last_batch)
        .chain(last_command.map(|(_, c)| c))
    {
        labels.insert(
            call.id.as_str(),
            call_label_long(&call.name, &call.arguments),
        );
    }
    // A later request (in the retained messages) is the task: the covered one's parts
    // compete as what the user said.
    let newest_user = messages
        .iter()
        .rposition(|m| m.role == Role::User)
        .filter(|_| !req.later.request);
    let request_chars =
        (req.target_tokens * REQUEST_SHARE_PERCENT / 100 * CHARS_PER_TOKEN) as usize;

    // What the user and the agent talk about: the tool lines they name rank first.
    let mentions = Mentions::of(
        items
            .iter()
            .filter(|it| !matches!(it.tag, "tool" | "command" | "files" | "archive"))
            .map(|it| it.text.as_str())
            .chain(
                messages
                    .iter()
                    .filter(|m| matches!(m.role, Role::User | Role::Assistant))
                    .map(|m| m.content.as_str()),
            ),
    );
    // A previous checkpoint's tool lines keep the rank a mention gave them.
    let mut rolled: HashMap<usize, Vec<usize>> = HashMap::new();
    for (k, it) in items.iter().enumerate() {
        if it.tag == "tool" {
            rolled.entry(it.source).or_default().push(k);
        }
    }
    for members in rolled.into_values() {
        let texts: Vec<&str> = members.iter().map(|&k| items[k].text.as_str()).collect();
        let named = mentions.mentioned(&texts);
        for (k, named) in members.into_iter().zip(named) {
            if named {
                items[k].score += LINE_RANK_WEIGHT * MENTIONED_BONUS;
            }
        }
    }

    // Whether the newest user message so far asked a question: its turn's final answer is
    // what the user asked for.
    let mut asked = false;
    for (i, m) in messages.iter().enumerate() {
        let turn = turns[i];
        refs.extend(
            archive_refs()
                .find_iter(&m.content)
                .map(|r| r.as_str().to_string()),
        );
        seq += 1;
        let source = seq;
        match m.role {
            Role::Tool => {
                if broken.tool_content {
                    continue; // Mutant: nothing of tool results.
                }
                let id = m.tool_call_id.as_deref().unwrap_or("");
                let label = labels
                    .get(id)
                    .cloned()
                    .unwrap_or_else(|| "result()".to_string());
                let command = commands.contains(&id);
                if sentences(&m.content).iter().any(|s| claims().is_match(s)) {
                    seq += 1;
                    items.push(Item::omission(turn, "tool", seq, source));
                }
                // Data (a table, a settings listing) is all key lines: its rows compete by
                // rank under the section's share and the per-message cap, not a line count.
                // A long result holds more settings than a short one: one line per
                // `CHARS_PER_KEY_LINE` of it, at least `MAX_LINES_PER_RESULT`.
                let mut lines = key_lines(&m.content);
                let changed: Vec<usize> = m
                    .content
                    .lines()
                    .enumerate()
                    .filter_map(|(p, l)| {
                        let (name, value) = setting(l)?;
                        let was_edited = edited.remove(&name);
                        let before = settings.insert(name, value.clone());
                        (was_edited || before.is_some_and(|b| b != value)).then_some(p)
                    })
                    .collect();
                for line in lines.iter_mut().filter(|l| changed.contains(&l.position)) {
                    line.score += CHANGED_SETTING_BONUS;
                }
                let texts: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
                let named = mentions.mentioned(&texts);
                for (line, named) in lines.iter_mut().zip(named) {
                    if named {
                        line.score += MENTIONED_BONUS;
                    }
                }
                lines.sort_by(|a, b| b.score.cmp(&a.score).then(a.position.cmp(&b.position)));
                let max_lines = if super::is_data(&m.content, lines.len()) {
                    MAX_DATA_LINES_PER_RESULT
                } else {
                    (m.content.len() / CHARS_PER_KEY_LINE)
                        .clamp(MAX_LINES_PER_RESULT, MAX_DATA_LINES_PER_RESULT)
                };
                lines.truncate(max_lines);
                if lines.is_empty() && command {
                    // The last command's output says something even without key lines:
                    // its first line.
                    if let Some(head) = m.content.lines().map(str::trim).find(|l| !l.is_empty()) {
                        if !claims().is_match(head) {
                            lines = top_lines(&clip(&one_line(head), 120), 1);
                        }
                    }
                }
                // Rank by score (`key_lines` order: the best line of every result first),
                // written in the result's order.
                let mut ranked: Vec<(usize, KeyLine)> = lines.into_iter().enumerate().collect();
                ranked.sort_by_key(|(_, l)| l.position);
                for (rank, line) in ranked {
                    seq += 1;
                    // A row keeps its own ` | ` (psql, a log's fields): the lines of one
                    // result are joined with [`LINE_JOINER`], which a row does not contain,
                    // so the row is written as it was read and rolls back whole.
                    let line_text =
                        clip(&line.text.replace(LINE_JOINER.trim(), "|"), MAX_LINE_CHARS);
                    let text = if line.verification {
                        historical(&line_text)
                    } else {
                        line_text
                    };
                    let (section, tag, base) = if command {
                        (Section::Task, "command", COMMAND_SCORE)
                    } else {
                        (Section::ToolLines, "tool", 30)
                    };
                    items.push(Item {
                        section,
                        turn,
                        tag,
                        seq,
                        text,
                        // The k-th line of a result ranks a little below every result's
                        // (k−1)-th: results share the space (a parallel batch's second
                        // result is not starved by its first).
                        score: base + LINE_RANK_WEIGHT * line.score - 3 * rank as i64,
                        source,
                        label: Some(label.clone()),
                        group: Some(format!("tool:{}", occurrence_key(&line.text))),
                        whole: command,
                        routine: false,
                    });
                }
            }
            Role::Assistant => {
                for call in &m.tool_calls {
                    edited.extend(edited_settings(&call.arguments));
                }
                // The last command itself (its results join its line): the last batch's
                // calls, or the command file reads followed.
                let command_calls: Vec<&ctxbench_adapters::ToolCall> =
                    if Some(i) == last_call_message {
                        m.tool_calls.iter().collect()
                    } else {
                        last_command
                            .filter(|(k, _)| *k == i)
                            .map(|(_, c)| c)
                            .into_iter()
                            .collect()
                    };
                for call in command_calls {
                    seq += 1;
                    items.push(Item {
                        section: Section::Task,
                        turn,
                        tag: "command",
                        seq,
                        text: String::new(),
                        score: COMMAND_SCORE + 20,
                        source,
                        label: labels.get(call.id.as_str()).cloned(),
                        group: None,
                        whole: true,
                        routine: false,
                    });
                }
                if broken.assistant_text {
                    continue; // Mutant: no assistant text.
                }
                let is_final = is_final(&messages, &turns, i);
                let tag = if is_final { "answer" } else { "assistant" };
                let ranked = sentences(&m.content)
                    .into_iter()
                    .map(|s| vocabulary.cut_routine_lead(s))
                    .enumerate()
                    .flat_map(|(k, s)| ranked_parts(s).into_iter().map(move |(p, c)| (k, p, c)));
                let mut lead = is_final && asked;
                for (k, s, claim) in ranked {
                    seq += 1;
                    if claim {
                        items.push(Item::omission(turn, tag, seq, source));
                        continue;
                    }
                    let Some(mut score) = answer_score(&s, is_final, k == 0) else {
                        continue;
                    };
                    let restated = values(&s)
                        .iter()
                        .filter(|v| tool_values.contains(*v))
                        .count();
                    score -= RESTATED_PENALTY * restated.min(MAX_RESTATED) as i64;
                    // An everyday-words sentence (narration, filler) is no answer, asked
                    // or not.
                    if is_final && asked && !vocabulary.is_routine(&s) {
                        if let Some(a) = asked_answer_score(&s, score, lead) {
                            score = a;
                            lead = false;
                        }
                    }
                    let mut text = clip(&s, MAX_SENTENCE_CHARS);
                    if verification().is_match(&s) {
                        text = historical(&text);
                        score += 5;
                    }
                    let section = if score >= INFORMATIVE_ANSWER {
                        Section::Answers
                    } else {
                        Section::Other
                    };
                    items.push(Item {
                        section,
                        turn,
                        tag,
                        seq,
                        text,
                        score,
                        source,
                        label: None,
                        group: Some(format!("assistant:{}", occurrence_key(&s))),
                        whole: false,
                        routine: false,
                    });
                }
            }
            Role::User | Role::System => {
                let tag = if m.role == Role::User {
                    "user"
                } else {
                    "system"
                };
                let sentence_list = sentences(&m.content);
                if m.role == Role::User {
                    asked = sentence_list.iter().any(|s| is_question(s));
                }
                // What the agent's calls of this turn named (a path it read, a command).
                let acted: Vec<&str> = if m.role == Role::User {
                    messages[i + 1..]
                        .iter()
                        .take_while(|n| n.role != Role::User)
                        .flat_map(|n| n.tool_calls.iter())
                        .flat_map(|c| argument_strings(&c.arguments))
                        .collect()
                } else {
                    Vec::new()
                };
                if Some(i) == newest_user {
                    let request_text = without_routine_sentences(&m.content, vocabulary);
                    let request_sentences = sentences(&request_text);
                    let mut parts = request_parts(&request_text);
                    if broken.first_part_only {
                        parts.truncate(1); // Mutant: the later parts are forgotten.
                    }
                    // A part made only of the session's everyday words (filler,
                    // narration) is no part of the task: it does not take the task share
                    // from the parts that are, and competes as ordinary prose.
                    let mut routine: Vec<bool> = parts
                        .iter()
                        .map(|(_, p)| vocabulary.is_routine(p))
                        .collect();
                    // All routine, the request is still the request: its first part stays.
                    if !routine.contains(&false) {
                        if let Some(first) = routine.first_mut() {
                            *first = false;
                        }
                    }
                    let tasks: Vec<(usize, String)> = parts
                        .iter()
                        .zip(&routine)
                        .filter(|(_, r)| !**r)
                        .map(|(p, _)| p.clone())
                        .collect();
                    let mut limits = part_limits(&tasks, request_chars).into_iter();
                    for ((k, part), routine) in parts.into_iter().zip(routine) {
                        let limit = if routine {
                            0
                        } else {
                            limits.next().unwrap_or(0)
                        };
                        seq += 1;
                        let key = request_sentences
                            .get(k)
                            .map_or(part.as_str(), String::as_str);
                        if claims().is_match(&part) || claims().is_match(key) {
                            items.push(Item::omission(turn, "request", seq, source));
                            continue;
                        }
                        if part.chars().count() > limit {
                            // A part the task share cannot hold whole competes, whole, as
                            // what the user said: cut to its share it would keep neither
                            // its value nor its sense. So does a routine part.
                            let (section, score) = user_rank(&part, false);
                            items.push(Item {
                                section,
                                turn,
                                tag: "user",
                                seq,
                                text: clip(&part, MAX_SENTENCE_CHARS),
                                score,
                                source,
                                label: None,
                                group: Some(format!("user:{}", occurrence_key(key))),
                                whole: false,
                                routine: false,
                            });
                            continue;
                        }
                        items.push(Item {
                            section: Section::Task,
                            turn,
                            tag: "request",
                            seq,
                            text: clip_part(&part, limit),
                            // When not every part fits, the informative ones go first.
                            score: REQUEST_SCORE + statement_score(&part),
                            source,
                            label: None,
                            group: Some(format!("user:{}", occurrence_key(key))),
                            whole: true,
                            routine: false,
                        });
                    }
                    continue;
                }
                // No positional term: a sentence ranks by what it says, wherever it sits.
                // A list of rules, or a short message, is deliberate: each of its
                // sentences counts as a statement (tagged `stated`, so it still does when
                // the summary is rolled).
                let listed = m.role == Role::User
                    && (listed_with_rules(&sentence_list) || short_message(&m.content));
                let pasted = m.role == Role::User && m.content.lines().count() >= MIN_PASTE_LINES;
                let tag = if listed { "stated" } else { tag };
                // The lead-in of a list of questions ("Answer each question …:") only says
                // how to answer them; the answers that follow are what is worth keeping.
                let skip = usize::from(opens_question_list(&sentence_list));
                let sentence_list: Vec<String> = sentence_list
                    .into_iter()
                    .map(|s| vocabulary.cut_routine_lead(s))
                    .collect();
                for (s, claim) in sentence_list.into_iter().skip(skip).flat_map(ranked_parts) {
                    seq += 1;
                    if claim {
                        items.push(Item::omission(turn, tag, seq, source));
                        continue;
                    }
                    let (mut section, mut score) = user_rank(&s, listed);
                    if pasted && pasted_code(&s) {
                        // A line of pasted code is the user's material, not what they
                        // said: it ranks as a tool result's bulk does, unless it is a
                        // key line there too (`const MAX_RETRIES: u32 = 7;`).
                        section = Section::Other;
                        score -= PASTED_CODE_PENALTY;
                    }
                    if pointer(&s, &acted) {
                        section = Section::Other;
                        score -= POINTER_PENALTY;
                    }
                    let mut text = clip(&s, MAX_SENTENCE_CHARS);
                    if verification().is_match(&s) {
                        text = historical(&text);
                        score += 5;
                    }
                    items.push(Item {
                        section,
                        turn,
                        tag,
                        seq,
                        text,
                        score,
                        source,
                        label: None,
                        group: Some(format!("user:{}", occurrence_key(&s))),
                        whole: false,
                        routine: false,
                    });
                }
            }
        }
    }
    if let Some((turn, path)) = in_flight {
        let named = items.iter().any(|it| {
            it.tag == "command" && it.label.as_deref().is_some_and(|l| l.contains(&path))
        });
        if !named && !claims().is_match(&path) {
            seq += 1;
            items.push(Item {
                section: Section::Task,
                turn,
                tag: "in-flight",
                seq,
                text: clip(&path, 160),
                score: IN_FLIGHT_SCORE,
                source: seq,
                label: None,
                group: None,
                whole: true,
                routine: false,
            });
        }
    }
    Collected {
        items,
        files,
        refs,
        turns: (first, last),
    }
}

/// `content` without its sentences made only of the session's everyday words (filler
/// pasted around the request), unless that is all it says: the request's parts are then
/// what the user asked, not the filler a part would otherwise open with.
fn without_routine_sentences(content: &str, vocabulary: &Vocabulary) -> String {
    let mut out = content.to_string();
    let mut cut = false;
    for s in sentences(content) {
        if vocabulary.is_routine(&s) {
            if let Some(at) = out.find(s.as_str()) {
                out.replace_range(at..at + s.len(), "");
                cut = true;
            }
        }
    }
    if !cut || out.trim().is_empty() {
        return content.to_string();
    }
    out
}

/// Fewest lines of a user message that can hold a paste.
const MIN_PASTE_LINES: usize = 3;
/// Rank a line of pasted code gives up: below anything the user said in words.
const PASTED_CODE_PENALTY: i64 = 40;

/// Whether a line of a user's paste is code: it ends as a statement or block of code does
/// (`{`, `}`, `;`) or opens by closing one, and is no key line (a setting, an error, an
/// outcome) by the shapes tool output is read with.
fn pasted_code(line: &str) -> bool {
    let t = line.trim();
    let code = t.ends_with(['{', '}', ';']) || t.ends_with("},") || t.starts_with('}');
    code && key_lines(t).is_empty()
}

/// Most words of a user message that is short: a message typed as an instruction, not a
/// paste. Its sentences are deliberate.
const SHORT_MESSAGE_WORDS: usize = 80;

/// Whether a user message is short (see [`SHORT_MESSAGE_WORDS`]).
fn short_message(content: &str) -> bool {
    content.split_whitespace().count() <= SHORT_MESSAGE_WORDS
}

/// Rank a pointer gives up ([`pointer`]): below a remark that names something of its own.
const POINTER_PENALTY: i64 = 20;

/// Whether a user sentence only points the agent at something its calls of the same turn
/// then took as a whole argument (`Make the change in src/a/b.rs.`, `Compare x.rs with
/// y.rs.`, then `read_file(src/a/b.rs)`): every value it names is one of those arguments
/// and it states no rule (a value inside a longer command is not: a label clips it). What
/// it asked for is on the calls' lines and the files line; in a long session dozens of
/// these would hold the room a fact needs.
pub(crate) fn pointer(sentence: &str, acted: &[&str]) -> bool {
    let tokens = super::text::specific_tokens(sentence);
    !acted.is_empty()
        && super::text::words(sentence) <= MAX_POINTER_WORDS
        && !contrast().is_match(sentence)
        && !tokens.is_empty()
        && super::rules::rule_strength(sentence) == 0
        && tokens.iter().all(|t| acted.iter().any(|a| a.trim() == *t))
}

/// Most words of a pointer: a longer sentence says more than where to look.
const MAX_POINTER_WORDS: usize = 16;

/// A contrast or exception (`not in …`, `instead of …`, `only …`, `except …`): a sentence
/// that tells two named things apart is a constraint, however plainly worded.
fn contrast() -> &'static regex::Regex {
    static R: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    R.get_or_init(|| {
        regex::Regex::new(r"(?i)\b(not|never|no|don't|doesn't|isn't|instead|rather|only|except|but|unless|avoid|without)\b|n't\b")
            .expect("static regex")
    })
}

#[cfg(test)]
mod tests {
    use super::pointer;

    #[test]
    fn a_request_that_only_names_what_the_agent_then_opened_is_a_pointer() {
        let acted = ["src/cursor/snapshot_stream.rs", "src/a.rs"];
        assert!(pointer(
            "Make the change in src/cursor/snapshot_stream.rs.",
            &acted
        ));
        assert!(pointer(
            "Compare src/a.rs with src/cursor/snapshot_stream.rs.",
            &acted
        ));
        // A value the calls did not take whole, a rule, a contrast: not a pointer.
        assert!(!pointer("Set the pool to 37 in src/a.rs.", &acted));
        assert!(!pointer("Never touch src/a.rs.", &acted));
        assert!(!pointer(
            "Fix it in src/a.rs, not in src/cursor/snapshot_stream.rs.",
            &acted
        ));
        assert!(!pointer("Make the change in src/a.rs.", &[]));
        assert!(!pointer(
            "Run it.",
            &["cargo test -p vault-sync --features bundled-off"]
        ));
    }

    #[test]
    fn filler_sentences_are_no_part_of_the_newest_request() {
        let mut text = String::new();
        for v in ["passes", "merges", "records", "checks", "returns"] {
            for o in ["cache", "value", "request", "branch", "test", "reason"] {
                text.push_str(&format!("The module handler {v} the {o} before merging.\n"));
            }
        }
        let vocabulary = super::Vocabulary::of([text.as_str()]);
        let request = "The handler checks the cache before merging. Raise max_poll_records to 2000 in the consumer.";
        assert_eq!(
            super::without_routine_sentences(request, &vocabulary).trim(),
            "Raise max_poll_records to 2000 in the consumer."
        );
        // Nothing but filler: the request stays what it was.
        let all = "The handler checks the cache before merging.";
        assert_eq!(super::without_routine_sentences(all, &vocabulary), all);
    }
}
