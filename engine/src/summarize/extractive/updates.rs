//! Updates: a later statement of the same thing with another value supersedes the earlier.
//!
//! Sessions change their facts ("the maintenance window is Sunday 02:00" … "ops moved the
//! maintenance window to Saturday 23:00"), and the newer statement is the one a resumed
//! agent must act on. Worded differently, it shares no occurrence key with the first, and
//! a checkpoint that rolled the first one over gives it a survivor's rank: the update lost
//! to the value it replaced. Here a later sentence that names the same subject — at least
//! [`MIN_SHARED`] of the session's rare words (`novelty.rs`), a quarter of the shorter
//! one's — and gives a value the earlier one does not, ranks above it, in its section; the
//! earlier one gives up a little.
//!
//! No cue word ("changed", "from now on") is needed: the test is the shared subject and
//! the differing value.

use std::collections::{HashMap, HashSet};

use super::novelty::Vocabulary;
use super::text::{is_question, unlabelled};
use super::tool_lines::setting;
use super::{Item, Section};

/// Rare subject words two statements must share to be about the same thing.
const MIN_SHARED: usize = 2;
/// …and at least one in this many of the shorter statement's subject words.
const SUBJECT_SHARE: usize = 4;
/// Rank the superseded statement gives up.
const SUPERSEDED_PENALTY: i64 = 10;
/// Earlier statements looked at per subject word (bounds the work on long sessions).
const MAX_PER_WORD: usize = 32;

fn prose(it: &Item) -> bool {
    matches!(
        it.tag,
        "user" | "stated" | "request" | "system" | "assistant" | "answer"
    ) && !it.text.is_empty()
        && it.score > 1
}

/// The value tokens of a sentence: words with a digit (`02:00` gives `02` and `00`).
pub(super) fn values(s: &str) -> HashSet<String> {
    s.split(|c: char| !(c.is_alphanumeric() || c == '.' || c == '_'))
        .filter(|w| w.chars().any(|c| c.is_ascii_digit()))
        .map(|w| w.trim_matches('.').to_lowercase())
        .filter(|w| !w.is_empty())
        .collect()
}

/// `text` without a leading list number (`2. `, `3) `).
fn without_enumerator(text: &str) -> &str {
    let t = text.trim_start();
    let digits = t.len() - t.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    match t[digits..].strip_prefix(['.', ')']) {
        Some(rest) if digits > 0 && rest.starts_with(' ') => rest,
        _ => t,
    }
}

/// Lower each tool setting a later sentence gives another value (`replicaCount: 4`, then
/// "bump the prod replicaCount to 6"): the sentence names the setting as a word and none of
/// its values is the setting's. The sentence is raised above it, as an update is.
fn supersede_settings(items: &mut [Item], vocabulary: &Vocabulary) {
    let settings: Vec<(usize, String, String)> = (0..items.len())
        .filter(|&i| items[i].tag == "tool")
        .filter_map(|i| {
            let (name, value) = setting(items[i].text.trim_start_matches("(historical) "))?;
            let name = name.rsplit('.').next().unwrap_or(&name).to_lowercase();
            (name.chars().count() >= 4).then(|| (i, name, value.to_lowercase()))
        })
        .collect();
    if settings.is_empty() {
        return;
    }
    // Each sentence that could set one: its words and its values, once.
    let sentences: Vec<(usize, HashSet<String>, HashSet<String>)> = (0..items.len())
        .filter(|&k| {
            let it = &items[k];
            prose(it) && !it.routine && !is_question(&it.text)
        })
        .filter_map(|k| {
            let text = unlabelled(&items[k].text).to_lowercase();
            let mut v = values(&text);
            v.retain(|w| !vocabulary.is_counter(w));
            let words = text
                .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
                .map(str::to_string)
                .collect();
            (!v.is_empty()).then_some((k, words, v))
        })
        .collect();
    let mut raises = Vec::new();
    for (i, name, value) in &settings {
        for (k, words, v) in &sentences {
            if items[*k].seq > items[*i].seq
                && words.contains(name)
                && !v.contains(value.trim_matches(['"', '\'']))
            {
                raises.push((*i, *k));
            }
        }
    }
    for (old, new) in raises {
        let old_score = items[old].score;
        let it = &mut items[new];
        it.score = it.score.max(old_score + 1);
        items[old].score -= SUPERSEDED_PENALTY;
    }
}

/// Raise each update above the statement it supersedes.
pub(super) fn supersede(items: &mut [Item], vocabulary: &Vocabulary) {
    supersede_settings(items, vocabulary);
    let mut order: Vec<usize> = (0..items.len()).filter(|&i| prose(&items[i])).collect();
    order.sort_by_key(|&i| items[i].seq);
    let facts: Vec<(usize, HashSet<String>, HashSet<String>)> = order
        .into_iter()
        .filter_map(|i| {
            let text = unlabelled(&items[i].text);
            if is_question(text) {
                return None; // A question states nothing, whatever it names.
            }
            // A loop's counter (`route_4.ts` after `route_3.ts`) is no new value.
            let mut v = values(without_enumerator(text));
            v.retain(|w| !vocabulary.is_counter(w));
            (!v.is_empty()).then(|| (i, vocabulary.subject_words(text), v))
        })
        .collect();
    let mut by_word: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut raises: Vec<(usize, usize)> = Vec::new();
    for (k, (i, subject, v)) in facts.iter().enumerate() {
        let mut shared: HashMap<usize, usize> = HashMap::new();
        for w in subject {
            for &earlier in by_word.get(w.as_str()).into_iter().flatten() {
                *shared.entry(earlier).or_default() += 1;
            }
        }
        for (earlier, n) in shared {
            let (e, es, ev) = &facts[earlier];
            // Two words in common between two long sentences is a shared topic, not a
            // shared subject: they must be a good part of the shorter one's.
            let smaller = es.len().min(subject.len());
            // A loop's newest round is routine, not news: it updates nothing.
            if n >= MIN_SHARED
                && n * SUBJECT_SHARE >= smaller
                && !items[*i].routine
                && items[*e].source != items[*i].source
                && !v.is_subset(ev)
            {
                raises.push((*e, *i));
            }
        }
        for w in subject {
            let list = by_word.entry(w.as_str()).or_default();
            if list.len() < MAX_PER_WORD {
                list.push(k);
            }
        }
    }
    for (old, new) in raises {
        let (old_score, old_section) = (items[old].score, items[old].section);
        let it = &mut items[new];
        it.score = it.score.max(old_score + 1);
        if it.section == Section::Other && old_section != Section::Other {
            it.section = old_section;
        }
        items[old].score -= SUPERSEDED_PENALTY;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(seq: usize, tag: &'static str, text: &str, score: i64) -> Item {
        Item {
            section: Section::Statements,
            turn: seq,
            tag,
            seq,
            text: text.into(),
            score,
            source: seq,
            label: None,
            group: None,
            whole: false,
            routine: false,
        }
    }

    #[test]
    fn a_later_value_for_the_same_subject_outranks_the_earlier() {
        let texts = [
            "The maintenance window is Sunday 02:00 UTC.",
            "Ops moved the maintenance window to Saturday 23:00 UTC this week.",
            "The replica lag must stay under 30 seconds.",
            "2. When is the maintenance window now?",
        ];
        let vocabulary = Vocabulary::of(texts);
        let mut items = vec![
            item(1, "user", texts[0], 80),
            item(2, "user", texts[1], 40),
            item(3, "user", texts[2], 60),
            item(4, "user", texts[3], 20),
        ];
        supersede(&mut items, &vocabulary);
        assert!(items[1].score > items[0].score, "{items:?}");
        assert_eq!(items[0].score, 80 - SUPERSEDED_PENALTY);
        // Another subject, and a question about the same one, change nothing.
        assert_eq!(items[2].score, 60);
        assert_eq!(items[3].score, 20);
        // The same value said again is no update.
        let again = [
            "The maintenance window is Sunday 02:00 UTC.",
            "Reminder: the maintenance window is Sunday 02:00.",
        ];
        let vocabulary = Vocabulary::of(again);
        let mut items = vec![item(1, "user", again[0], 80), item(2, "user", again[1], 40)];
        supersede(&mut items, &vocabulary);
        assert_eq!((items[0].score, items[1].score), (80, 40));
    }

    /// Two answers, the older ranked 60 and the newer 20, and their vocabulary.
    fn answers(texts: [&str; 2]) -> (Vocabulary, Vec<Item>) {
        let vocabulary = Vocabulary::of(texts);
        let items = vec![
            item(1, "answer", texts[0], 60),
            item(2, "answer", texts[1], 20),
        ];
        (vocabulary, items)
    }

    #[test]
    fn a_loop_round_or_a_shared_topic_supersedes_nothing() {
        let (vocabulary, mut items) = answers([
            "Diagnosis: the export view renders the whole report synchronously, so large reports outlive the proxy timeout and the browser gets a 504.",
            "Slice 3: the two largest exports ran past the proxy timeout and finished after the client had gone; everything under about 140 pages made it.",
        ]);
        supersede(&mut items, &vocabulary);
        assert_eq!((items[0].score, items[1].score), (60, 20));
        // Nor does a loop's round, however close its wording.
        let (vocabulary, mut items) = answers([
            "The nightly export took 41 minutes.",
            "The nightly export took 43 minutes.",
        ]);
        items[1].routine = true;
        supersede(&mut items, &vocabulary);
        assert_eq!((items[0].score, items[1].score), (60, 20));
        items[1].routine = false;
        supersede(&mut items, &vocabulary);
        assert!(items[1].score > items[0].score);
    }

    #[test]
    fn a_sentence_that_sets_a_read_setting_anew_supersedes_it() {
        let mut items = vec![
            Item {
                tag: "tool",
                ..item(1, "tool", "replicaCount: 4", 70)
            },
            item(
                2,
                "user",
                "For the sale bump the prod replicaCount to 6.",
                40,
            ),
            item(3, "user", "Keep replicaCount: 4 in staging.", 30),
        ];
        supersede(&mut items, &Vocabulary::of(["x"]));
        assert_eq!(items[0].score, 70 - SUPERSEDED_PENALTY);
        assert_eq!(items[1].score, 71);
        // The same value again is no update.
        assert_eq!(items[2].score, 30);
    }
}
