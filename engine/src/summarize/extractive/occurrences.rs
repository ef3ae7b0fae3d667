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
//! An occurrence is a source (one message or previous-summary line), not an item: the parts
//! of one request share a key without being repetitions. Identical text outside user
//! messages (the same tool line read twice, the same acknowledgement) carries no turn-
//! specific meaning and keeps its newest instance only.

use std::collections::{HashMap, HashSet};

use super::Item;

/// Rank given up by the first kept older occurrence, and by the second.
const OLDER_PENALTY: [i64; 2] = [8, 12];

/// Whether an item is something the user said.
fn user_said(it: &Item) -> bool {
    matches!(it.tag, "user" | "stated" | "request" | "system")
}

/// The items that stay distinguishable. `newest_only` (mutant
/// `keep-newest-occurrence-only`): of a user sentence said several times only the newest
/// occurrence stays.
pub(super) fn keep_distinguishable(items: Vec<Item>, newest_only: bool) -> Vec<Item> {
    // Occurrences of each group, as sources in conversation order.
    let mut occurrences: HashMap<&str, Vec<(usize, usize)>> = HashMap::new();
    for it in &items {
        if let Some(g) = it.group.as_deref() {
            let list = occurrences.entry(g).or_default();
            match list.iter_mut().find(|(_, src)| *src == it.source) {
                Some(entry) => entry.0 = entry.0.min(it.seq),
                None => list.push((it.seq, it.source)),
            }
        }
    }
    // (group, source) → rank given up; absent → dropped.
    let mut kept: HashMap<(String, usize), i64> = HashMap::new();
    for (group, mut list) in occurrences {
        list.sort_unstable();
        let n = list.len();
        let user = group.starts_with("user:");
        for (k, &(_, src)) in list.iter().enumerate() {
            let penalty = if k + 1 == n {
                Some(0)
            } else if newest_only && user {
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
