//! Repetition: the same thing said again.
//!
//! Items with one occurrence key (the text with its numbers masked, see
//! [`occurrence_key`](super::text::occurrence_key)) are occurrences of one thing: a routine
//! request repeated with a new module number, a value re-read from the same file, a
//! question asked twice. Of each, the **first, second and newest** occurrence stay, each with
//! its turn, so "what did you answer the second time?" and "what did I ask first?" stay
//! answerable; the occurrences in between go, so a long routine cannot evict a rare rule.
//! The older kept occurrences rank a little below the newest.
//!
//! A **count** is different: a user or assistant sentence said three or more times whose
//! one changing number steps by one (`Review driver file 6.`, `… file 7.`, `… file 8.`;
//! `File 7: nothing to change.`) is a loop over numbered work, and its older occurrences
//! say no more than where the loop started.
//! Only its newest stays, as ordinary prose ranked below any one-off remark (or as the
//! task, when it is the current request): a loop of forty turns would otherwise hold
//! three lines of a small summary.
//! The counter may sit inside a name (`handler_7.kt`, `web-3`): a loop over numbered files
//! or hosts is still a loop. Values that change without stepping by one (seeds 41, 52, 97)
//! are not a count: those occurrences stay.
//!
//! A loop's tool output counts with it: a tool line that every round of a counted loop
//! returns, or that four results or more return in one shape (`took=3.4s report=8841 …`
//! each hour), keeps its newest round only, as routine (a changed setting excepted).
//!
//! A **changed setting** is the other way round: a tool line `name = value` whose newest
//! occurrence sets another value than the one before (a file re-read after an edit) ranks
//! above the unchanged lines read with it.
//!
//! An occurrence is a source (one message or previous-summary line), not an item: the parts
//! of one request share a key without being repetitions. Identical text outside user
//! messages (the same tool line read twice, the same acknowledgement) carries no turn-
//! specific meaning and keeps its newest instance only.

use std::collections::{HashMap, HashSet};

use super::tool_lines::setting;
use super::{Item, Section};

/// Rank given up by the first kept older occurrence, and by the second.
const OLDER_PENALTY: [i64; 2] = [8, 12];

/// Most rank a later line of one shape in one message gives up (1 per line before it).
const MAX_PASTE_REPEAT_PENALTY: i64 = 3;

/// Fewest occurrences that make a count.
const COUNT_OCCURRENCES: usize = 3;

/// Fewest results returning a line of one shape that make it routine output, loop or not:
/// the first, second and newest of two or three stay apart (a measurement re-run, a
/// file re-read), a fourth is a routine.
const ROUTINE_RESULTS: usize = 4;

/// Rank a count's newest occurrence gives up: it is routine, below a one-off remark.
const COUNT_PENALTY: i64 = 30;

/// Rank a setting's newest value gains when it differs from the value read before
/// (`RETRY_BACKOFF_MS = 250`, later `= 1500`): a changed value is what the session did, and
/// a re-read file's unchanged lines would otherwise tie with it.
const CHANGED_BONUS: i64 = 25;

/// Whether `newer` sets the same name as `older` to another value: both are settings
/// ([`setting`]: `name = value`, `name: value`, a directive) of one name with literal values
/// that differ. A row of several fields (`took=3.4s report=8841 format=csv`) is no setting:
/// each round of a loop returns another, and none of them is a change.
fn changed_setting(older: &str, newer: &str) -> bool {
    let split = |t: &str| setting(t.trim_start_matches("(historical) "));
    match (split(older), split(newer)) {
        (Some((k1, v1)), Some((k2, v2))) => {
            k1 == k2 && k1.chars().any(char::is_alphabetic) && v1 != v2
        }
        _ => false,
    }
}

/// The numbers of `text` (`file 12.`, `handler_7.kt`, `web-3`), in order.
fn counters(text: &str) -> Vec<u64> {
    text.split(|c: char| !c.is_ascii_digit())
        .filter(|t| !t.is_empty() && t.len() <= 18)
        .filter_map(|t| t.parse().ok())
        .collect()
}

/// Whether occurrences (their texts, in order) count: every number that changes never
/// decreases and steps by exactly one at least twice (one counter, or several that move
/// together: `ticket 5` of `part_5.go`).
fn is_count(texts: &[&str]) -> bool {
    if texts.len() < COUNT_OCCURRENCES {
        return false;
    }
    let numbers: Vec<Vec<u64>> = texts.iter().map(|t| counters(t)).collect();
    let len = numbers[0].len();
    if len == 0 || numbers.iter().any(|n| n.len() != len) {
        return false;
    }
    let changing: Vec<usize> = (0..len)
        .filter(|&i| numbers.iter().any(|n| n[i] != numbers[0][i]))
        .collect();
    // Several numbers may step together (`ticket 5: … part_5.go`): each of them counts.
    !changing.is_empty()
        && changing.iter().all(|&i| {
            let steps: Vec<(u64, u64)> = numbers.windows(2).map(|w| (w[0][i], w[1][i])).collect();
            steps.iter().all(|(a, b)| b > a)
                && steps.iter().filter(|(a, b)| *b == a + 1).count() >= 2
        })
}

/// Whether an item is something the user said.
fn user_said(it: &Item) -> bool {
    matches!(it.tag, "user" | "stated" | "request" | "system")
}

/// The items that stay distinguishable. `newest_only` (mutant
/// `keep-newest-occurrence-only`): of a user sentence said several times only the newest
/// occurrence stays.
pub(super) fn keep_distinguishable(items: Vec<Item>, newest_only: bool) -> Vec<Item> {
    // Occurrences of each group, as sources in conversation order, and the text of each
    // occurrence (its first item).
    let mut occurrences: HashMap<&str, Vec<(usize, usize)>> = HashMap::new();
    let mut text_of: HashMap<(&str, usize), &str> = HashMap::new();
    for it in &items {
        if let Some(g) = it.group.as_deref() {
            let list = occurrences.entry(g).or_default();
            match list.iter_mut().find(|(_, src)| *src == it.source) {
                Some(entry) => entry.0 = entry.0.min(it.seq),
                None => list.push((it.seq, it.source)),
            }
            text_of.entry((g, it.source)).or_insert(it.text.as_str());
        }
    }
    // (group, source) → rank given up; absent → dropped.
    let mut kept: HashMap<(String, usize), i64> = HashMap::new();
    let mut counts: HashSet<String> = HashSet::new();
    let mut groups: Vec<(&str, Vec<(usize, usize)>)> = occurrences.into_iter().collect();
    for (_, list) in &mut groups {
        list.sort_unstable();
    }
    let texts_of = |group: &str, list: &[(usize, usize)]| -> Vec<&str> {
        list.iter()
            .map(|&(_, src)| text_of.get(&(group, src)).copied().unwrap_or(""))
            .collect()
    };
    // The turns of a loop: those whose request is an occurrence of a count.
    let turn_of: HashMap<usize, usize> = items.iter().map(|it| (it.source, it.turn)).collect();
    let loop_turns: HashSet<usize> = groups
        .iter()
        .filter(|(g, list)| g.starts_with("user:") && is_count(&texts_of(g, list)))
        .flat_map(|(_, list)| list.iter().filter_map(|(_, src)| turn_of.get(src).copied()))
        .collect();
    for (group, list) in groups {
        let n = list.len();
        let user = group.starts_with("user:");
        let texts = texts_of(group, &list);
        let changed =
            group.starts_with("tool:") && n >= 2 && changed_setting(texts[n - 2], texts[n - 1]);
        // A tool line every round of a loop returns is the loop's output, however its
        // numbers change (`took=3.4s report=8841 …` each hour): it counts with the loop.
        // So does a line of one shape returned [`ROUTINE_RESULTS`] times or more (a rolled
        // checkpoint no longer holds the loop's older requests).
        let looped = group.starts_with("tool:")
            && !changed
            && (n >= ROUTINE_RESULTS
                || (n >= COUNT_OCCURRENCES
                    && list
                        .iter()
                        .all(|(_, src)| turn_of.get(src).is_some_and(|t| loop_turns.contains(t)))));
        let count = ((user || group.starts_with("assistant:")) && is_count(&texts)) || looped;
        if count {
            counts.insert(group.to_string());
        }
        for (k, &(_, src)) in list.iter().enumerate() {
            let penalty = if k + 1 == n {
                Some(if changed { -CHANGED_BONUS } else { 0 })
            } else if (newest_only && user) || count {
                None
            } else if k < OLDER_PENALTY.len() {
                Some(OLDER_PENALTY[k])
            } else {
                None
            };
            if let Some(p) = penalty {
                kept.insert((group.to_string(), src), p);
            }
        }
    }
    // Identical text outside user messages: newest instance only.
    let mut newest_text: HashMap<(&'static str, &str), usize> = HashMap::new();
    for it in items
        .iter()
        .filter(|it| !user_said(it) && !it.text.is_empty())
    {
        let e = newest_text
            .entry((it.section_key(), it.text.as_str()))
            .or_insert(it.seq);
        *e = (*e).max(it.seq);
    }
    let newest_text: HashSet<usize> = newest_text.into_values().collect();
    // Lines of one shape within one pasted message (a log's repeated error): one
    // occurrence, but the earliest is where it began, the one asked about ("when did it
    // start?"); the later ones give up a little, in order.
    let mut in_paste: HashMap<(String, usize), i64> = HashMap::new();
    items
        .iter()
        .filter(|it| user_said(it) || it.text.is_empty() || newest_text.contains(&it.seq))
        .filter_map(|it| {
            let penalty = match &it.group {
                None => 0,
                Some(g) => *kept.get(&(g.clone(), it.source))?,
            };
            let mut it = it.clone();
            it.score -= penalty;
            if let (Some(g), "user" | "stated") = (&it.group, it.tag) {
                let k = in_paste.entry((g.clone(), it.source)).or_insert(0);
                it.score -= (*k).min(MAX_PASTE_REPEAT_PENALTY);
                *k += 1;
            }
            if it.section != Section::Task && it.group.as_ref().is_some_and(|g| counts.contains(g))
            {
                it.section = Section::Other;
                it.score -= COUNT_PENALTY;
                it.routine = true;
            }
            Some(it)
        })
        .collect()
}

impl Item {
    /// The kind of text for identical-text deduplication.
    fn section_key(&self) -> &'static str {
        match self.tag {
            "tool" | "command" => "tool",
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loop_counter_is_a_count_and_values_are_not() {
        assert!(is_count(&[
            "Review driver file 6 of the HAL.",
            "Review driver file 7 of the HAL.",
            "Review driver file 8 of the HAL.",
        ]));
        // A counter that skips (a previous summary kept the first two) still counts.
        assert!(is_count(&[
            "Check 1.", "Check 2.", "Check 6.", "Check 7.", "Check 8."
        ]));
        // Seeds, ports and versions are values, not a count.
        assert!(!is_count(&["Seed 41.", "Seed 52.", "Seed 97."]));
        // Two changing numbers, one of them a value, are not a count either.
        assert!(!is_count(&["Run 1 on 10.", "Run 2 on 20.", "Run 3 on 30."]));
        // Two that step together are one counter written twice.
        assert!(is_count(&[
            "Ticket 5: tidy part_5.go.",
            "Ticket 6: tidy part_6.go.",
            "Ticket 7: tidy part_7.go.",
        ]));
        // A counter inside a name is.
        assert!(is_count(&[
            "Read src/consumer/handler_7.kt.",
            "Read src/consumer/handler_8.kt.",
            "Read src/consumer/handler_9.kt."
        ]));
        // Two occurrences are not a loop.
        assert!(!is_count(&["Part 1.", "Part 2."]));
    }

    fn tool(turn: usize, text: &str) -> Item {
        Item {
            section: Section::ToolLines,
            turn,
            tag: "tool",
            seq: turn,
            text: text.into(),
            score: 60,
            source: turn,
            label: Some("run()".into()),
            group: Some(format!("tool:{}", super::super::text::occurrence_key(text))),
            whole: false,
            routine: false,
        }
    }

    #[test]
    fn the_first_line_of_a_pasted_log_outranks_its_repeats() {
        let paste: Vec<Item> = ["03:17:44", "03:17:45", "03:18:02"]
            .iter()
            .enumerate()
            .map(|(k, t)| Item {
                tag: "user",
                section: Section::Statements,
                seq: k,
                source: 1,
                group: Some(format!(
                    "user:{}",
                    super::super::text::occurrence_key(&format!("{t} ERROR session write failed"))
                )),
                ..tool(1, &format!("{t} ERROR session write failed"))
            })
            .collect();
        let kept = keep_distinguishable(paste, false);
        let scores: Vec<i64> = kept.iter().map(|it| it.score).collect();
        assert_eq!(scores, [60, 59, 58], "{kept:?}");
    }

    #[test]
    fn a_line_every_round_returns_is_routine_and_a_line_read_twice_is_not() {
        let rounds: Vec<Item> = (1..=5)
            .map(|t| tool(t, &format!("took={t}.4s report=88{t}1 format=csv")))
            .collect();
        let kept = keep_distinguishable(rounds, false);
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert_eq!(kept[0].turn, 5);
        assert!(kept[0].routine && kept[0].section == Section::Other);
        assert_eq!(kept[0].score, 60 - COUNT_PENALTY);
        // Two reads of a setting that changed: both stay, the newer ranked up.
        let kept =
            keep_distinguishable(vec![tool(1, "RETRIES = 3"), tool(2, "RETRIES = 7")], false);
        assert_eq!(kept.len(), 2);
        assert!(kept.iter().all(|it| !it.routine));
        assert_eq!(kept[1].score, 60 + CHANGED_BONUS);
        // A row of several fields is no setting: its next round is no change.
        assert!(!changed_setting(
            "took=3.3s report=8831",
            "took=3.4s report=8841"
        ));
    }
}
