//! Novelty: whether a sentence says anything the rest of the covered material does not.
//!
//! Long sessions are full of text that repeats one small vocabulary — boilerplate status
//! prose, routine narration, pasted templates — and that text is often worded like a rule
//! ("every step should check …"). Cue words cannot tell it from a constraint; its
//! vocabulary can. Every sentence and line of the covered messages (and of the previous
//! checkpoint) is a unit; a word is *common* when it occurs in many units. A sentence made
//! only of common words repeats what the session says everywhere: it ranks as ordinary
//! prose, below anything that names something rare. A sentence with rare words (a name, a
//! value, a term used once) gains a little rank.
//!
//! This is a property of the session's own text (document frequency, as in classic
//! extractive summarization), not of any word list: it holds for material nobody wrote
//! this code against, and changes nothing in a session whose sentences do not repeat.

use std::collections::{HashMap, HashSet};

use super::text::{occurrence_key, sentences, unlabelled};
use super::{Item, Section};

/// A word is common when at least this many units contain it…
const MIN_COMMON_UNITS: usize = 5;
/// …and at least one in this many units does.
const COMMON_FRACTION: usize = 200;
/// Fewest words a sentence must have for "only common words" to mean routine (a short
/// acknowledgement or a label is judged by the other rules).
const MIN_ROUTINE_WORDS: usize = 4;
/// Fewest common words before a capitalised one that make a lead of filler run into a
/// sentence.
const MIN_ROUTINE_LEAD: usize = 5;
/// Fewest common words that make a lead of filler when lower-case text is run into it
/// (stricter than [`MIN_ROUTINE_LEAD`]: no capital marks where the lead ends).
const MIN_LOWER_LEAD: usize = 7;
/// Most function words before the cut that stay with the rest.
const MAX_KEPT_FUNCTION_WORDS: usize = 2;

/// A short lower-case word (`the`, `a`, `of`, `and`): it may open what follows the cut.
fn function_word(token: &str) -> bool {
    let n = token.chars().count();
    (1..=3).contains(&n) && token.chars().all(|c| c.is_ascii_lowercase())
}

/// Fewest words the rest of a sentence must have for a routine lead to be cut: a routine
/// request that ends in a name ("… before we touch the UART code.") is one sentence, not a
/// lead and a two-word fragment.
const MIN_CUT_REST_WORDS: usize = 5;
/// Fewest units sharing a template that make an answer of that template routine.
const TEMPLATE_UNITS: usize = 3;
/// Rank a routine sentence gives up.
const ROUTINE_PENALTY: i64 = 25;
/// Rank per rare word (at most [`MAX_RARE_CREDIT`] of them).
const RARE_BONUS: i64 = 3;
const MAX_RARE_CREDIT: usize = 3;

/// The words of `s`: lowercase runs of letters, digits and `_`, of two characters or more
/// (or containing a digit).
fn words(s: &str) -> impl Iterator<Item = String> + '_ {
    s.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| w.chars().count() >= 2 || w.chars().any(|c| c.is_ascii_digit()))
        .map(str::to_lowercase)
}

/// The counter form of a word that mixes letters and digits (`file_8` → `file_#`): a
/// loop's `file_7`, `file_8`, `file_9` are each said once, yet together they are what
/// every iteration says, and a sentence naming only one of them is as routine as the loop.
/// Three units sharing the form make it common (as three remarks of one template are
/// routine): the end of a loop seen in one compaction may be only a few iterations long.
/// Words without letters (`37`, `2024`) are values, never counters; a hash (`4f1c9e2b7d`)
/// has a form of its own that nothing else shares.
fn counter(word: &str) -> Option<String> {
    if !(word.chars().any(|c| c.is_ascii_digit()) && word.chars().any(char::is_alphabetic)) {
        return None;
    }
    let mut form = String::from("#counter:");
    for c in word.chars() {
        if !c.is_ascii_digit() {
            form.push(c);
        } else if !form.ends_with('#') {
            form.push('#');
        }
    }
    Some(form)
}

/// How many units of the covered material contain each word.
#[derive(Debug, Default)]
pub(crate) struct Vocabulary {
    units: usize,
    frequency: HashMap<String, usize>,
    /// Units per template ([`template`]): how often one sentence is said of other names.
    templates: HashMap<String, usize>,
}

/// A sentence's words without the values it names (`\`queue_retry\` has a handful of call
/// sites` and `\`header_span\` has …` share one): the same remark made of other things.
fn template(s: &str) -> String {
    let plain: Vec<&str> = s
        .split_whitespace()
        .filter(|w| !super::text::specific_token(w))
        .collect();
    words(&plain.join(" ")).collect::<Vec<_>>().join(" ")
}

impl Vocabulary {
    /// The vocabulary of `texts`, each split into sentences and lines. A sentence said
    /// again with only its numbers changed is one unit: repetition of one thing does not
    /// make its words common.
    pub(crate) fn of<'a>(texts: impl IntoIterator<Item = &'a str>) -> Self {
        let mut v = Vocabulary::default();
        let mut seen_units = HashSet::new();
        for text in texts {
            for s in sentences(text) {
                if !seen_units.insert(occurrence_key(&s)) {
                    continue;
                }
                v.units += 1;
                *v.templates.entry(template(&s)).or_insert(0) += 1;
                let distinct: HashSet<String> = words(&s).collect();
                let counters: HashSet<String> =
                    distinct.iter().filter_map(|w| counter(w)).collect();
                for w in distinct.into_iter().chain(counters) {
                    *v.frequency.entry(w).or_insert(0) += 1;
                }
            }
        }
        v
    }

    fn common(&self, word: &str) -> bool {
        let threshold = MIN_COMMON_UNITS.max(self.units / COMMON_FRACTION);
        let seen = |w: &str, at_least: usize| self.frequency.get(w).is_some_and(|&n| n >= at_least);
        seen(word, threshold) || counter(word).is_some_and(|c| seen(&c, TEMPLATE_UNITS))
    }

    /// Whether a value token (`route_4.ts`) is a loop's counter: each of its words with a
    /// digit has a [`counter`] form the covered material says again and again. Such a
    /// value tells one round of a loop from the next; it states nothing that could change.
    pub(super) fn is_counter(&self, token: &str) -> bool {
        let mut numbered = words(token)
            .filter(|w| w.chars().any(|c| c.is_ascii_digit()))
            .peekable();
        numbered.peek().is_some()
            && numbered.all(|w| {
                counter(&w)
                    .is_some_and(|c| self.frequency.get(&c).is_some_and(|&n| n >= TEMPLATE_UNITS))
            })
    }

    /// (distinct rare words, words) of `s`.
    fn profile(&self, s: &str) -> (usize, usize) {
        let all: Vec<String> = words(s).collect();
        let rare: HashSet<&String> = all.iter().filter(|w| !self.common(w)).collect();
        (rare.len(), all.len())
    }

    /// `sentence` without a lead of everyday words run into it: text that lost its full
    /// stop ("… when loads update file small Also, nobody restarts the gateway …"), cut
    /// where a capitalised word follows at least [`MIN_ROUTINE_LEAD`] common words and
    /// begins a rest of at least [`MIN_CUT_REST_WORDS`].
    /// Unchanged when there is no such lead: a rule keeps its words, and the filler glued
    /// to it no longer dilutes its rank or costs room.
    ///
    /// A lead that opens as a sentence does (capitalised) and runs [`MIN_LOWER_LEAD`]
    /// common words or more is cut at its first word that is not common, too: the text run
    /// into it was typed in lower case ("… style machine each oh and before you suggest
    /// …"). The short function words just before that word (`the`, `a`) stay with it, so a
    /// statement that opens with one keeps its words.
    pub(super) fn without_routine_lead<'s>(&self, sentence: &'s str) -> &'s str {
        let tokens: Vec<(usize, &str)> = sentence
            .split_whitespace()
            .map(|t| (t.as_ptr() as usize - sentence.as_ptr() as usize, t))
            .collect();
        let cut_at = |k: usize| {
            let rest = &sentence[tokens[k].0..];
            if words(rest).count() >= MIN_CUT_REST_WORDS {
                rest
            } else {
                sentence
            }
        };
        let opens_capitalised = tokens
            .first()
            .is_some_and(|(_, t)| t.chars().next().is_some_and(char::is_uppercase));
        for (common_run, &(_, token)) in tokens.iter().enumerate() {
            let mut chars = token.chars();
            let capitalised = chars.next().is_some_and(char::is_uppercase)
                && chars.next().is_some_and(char::is_lowercase);
            if capitalised && common_run >= MIN_ROUTINE_LEAD {
                return cut_at(common_run);
            }
            let mut ws = words(token).peekable();
            if ws.peek().is_none() {
                // A one-letter word or a dash (`a`, `—`) is neither the lead's nor the text's.
                continue;
            }
            if !ws.all(|w| self.common(&w)) {
                if opens_capitalised && common_run >= MIN_LOWER_LEAD {
                    let mut k = common_run;
                    while k > common_run.saturating_sub(MAX_KEPT_FUNCTION_WORDS)
                        && function_word(tokens[k - 1].1)
                    {
                        k -= 1;
                    }
                    return cut_at(k);
                }
                return sentence;
            }
        }
        sentence
    }

    /// [`Self::without_routine_lead`] of an owned sentence, reusing it when nothing is cut.
    pub(super) fn cut_routine_lead(&self, sentence: String) -> String {
        let cut = sentence.len() - self.without_routine_lead(&sentence).len();
        if cut == 0 {
            sentence
        } else {
            sentence[cut..].to_string()
        }
    }

    /// Whether `sentence` is routine: long enough to say something, yet made only of
    /// words the covered material uses everywhere.
    pub(crate) fn is_routine(&self, sentence: &str) -> bool {
        let (rare, n) = self.profile(sentence);
        rare == 0 && n >= MIN_ROUTINE_WORDS
    }

    /// Whether `text` is the cut-off end of routine prose: a few everyday words with no
    /// full stop (`Module need should`), what is left where a pasted text was cut mid-
    /// sentence. Too short to be judged routine, it would otherwise pass for a terse rule.
    fn routine_fragment(&self, text: &str) -> bool {
        let (rare, n) = self.profile(text);
        rare == 0
            && n >= 1
            && !text
                .trim_end()
                .ends_with(['.', '!', '?', ':', ')', '`', '"'])
    }

    /// The rare words of `s` that name a subject (letters only, four or more): what two
    /// statements of the same thing share, whatever values they give.
    pub(super) fn subject_words(&self, s: &str) -> HashSet<String> {
        words(s)
            .filter(|w| w.chars().count() >= 4 && w.chars().all(char::is_alphabetic))
            .filter(|w| !self.common(w))
            .collect()
    }

    /// Whether an answer is a remark the agent made of several things in the same words
    /// (`\`x\` has a handful of call sites; none of them …` for one function after
    /// another): a routine report, whatever names it carries. Two near-identical answers
    /// stay apart (the first and the second); a third makes it routine.
    fn said_of_many(&self, it: &Item, text: &str) -> bool {
        if it.tag != "answer" {
            return false;
        }
        let t = template(text);
        t.split(' ').count() >= MIN_ROUTINE_WORDS
            && self.templates.get(&t).is_some_and(|&n| n >= TEMPLATE_UNITS)
    }

    /// Re-rank `it` by its novelty. The task state (the newest request, the last command,
    /// the file in flight) and omission markers keep their rank: they are kept for what
    /// they are, not for what they say.
    pub(super) fn rank(&self, it: &mut Item) {
        if it.section == Section::Task || it.text.is_empty() || it.score <= 1 {
            return;
        }
        let text = unlabelled(&it.text);
        let (rare, n) = self.profile(text);
        if rare == 0 && n >= MIN_ROUTINE_WORDS
            || self.said_of_many(it, text)
            || (matches!(it.tag, "user" | "stated" | "answer" | "assistant")
                && self.routine_fragment(text))
        {
            it.score -= ROUTINE_PENALTY;
            if matches!(it.section, Section::Statements | Section::Answers) {
                it.section = Section::Other;
            }
        } else {
            it.score += RARE_BONUS * rare.min(MAX_RARE_CREDIT) as i64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Thirty sentences of one small vocabulary: its words are common.
    fn routine_text() -> String {
        let mut text = String::new();
        let verbs = ["passes", "merges", "records", "checks", "returns"];
        let objects = ["cache", "value", "request", "branch", "test", "reason"];
        for v in verbs {
            for o in objects {
                text.push_str(&format!("The module handler {v} the {o} before merging.\n"));
            }
        }
        text
    }

    #[test]
    fn words_everyone_repeats_are_common_and_a_rare_term_is_not() {
        let mut text = routine_text();
        text.push_str("The module handler stores the cache under /var/lib/quokka.\n");
        let v = Vocabulary::of([text.as_str()]);
        assert_eq!(v.profile("The module handler checks the cache value.").0, 0);
        // stores, under, var, lib, quokka
        assert_eq!(
            v.profile("The handler stores the cache under /var/lib/quokka.")
                .0,
            5
        );
    }

    #[test]
    fn a_lead_of_everyday_words_run_into_a_sentence_is_cut() {
        let text = routine_text();
        let v = Vocabulary::of([text.as_str()]);
        let glued =
            "The handler checks the cache value Also, nobody restarts the gateway before 18:00.";
        assert_eq!(
            v.without_routine_lead(glued),
            "Also, nobody restarts the gateway before 18:00."
        );
        // A sentence that opens with its own words keeps them, proper nouns and all.
        let own = "The fixture computes the total with Math.round on a float.";
        assert_eq!(v.without_routine_lead(own), own);
        let short = "The cache Never expires.";
        assert_eq!(v.without_routine_lead(short), short);
        // A routine sentence that ends in a name is not cut to a fragment.
        let named = "The handler checks the cache value before the UART module.";
        assert_eq!(v.without_routine_lead(named), named);
        // Lower-case text run into a long lead is cut at its first own word, keeping the
        // function words just before it.
        let lower = "The module handler checks the cache value before the quota of every tenant has to stay below 90.";
        assert_eq!(
            v.without_routine_lead(lower),
            "the quota of every tenant has to stay below 90."
        );
        // A one-letter word in the lead does not end it.
        let with_a = "The handler checks the cache a Changed my mind: use the critical gate only.";
        assert_eq!(
            v.without_routine_lead(with_a),
            "Changed my mind: use the critical gate only."
        );
        let short_lead = "The handler checks oh and the gateway stays up until 18:00 today.";
        assert_eq!(v.without_routine_lead(short_lead), short_lead);
    }

    #[test]
    fn a_sentence_repeated_with_new_numbers_is_one_unit() {
        let text: String = (0..50)
            .map(|i| format!("Please rerun the flaky suite for shard {i}.\n"))
            .collect();
        let v = Vocabulary::of([text.as_str()]);
        assert_eq!(v.units, 1);
        assert!(v.profile("Please rerun the flaky suite for shard 3.").0 > 0);
    }

    #[test]
    fn a_loop_counter_in_a_name_is_common_and_a_hash_is_not() {
        // Each iteration says something else (a sentence said again with only its number
        // changed is one unit); only the counter's form is said every time.
        let verbs = [
            "checks", "merges", "records", "returns", "splits", "loads", "sends",
        ];
        let text: String = (0..42)
            .map(|i| {
                let verb = verbs[i % verbs.len()];
                let object = ["cache", "value", "queue", "entry", "branch", "index"][i % 6];
                format!("file_{i}.tf: the module handler {verb} the {object}.\n")
            })
            .collect();
        let v = Vocabulary::of([text.as_str()]);
        assert!(v.is_routine("file_43.tf: the module handler checks the value."));
        assert!(!v.is_routine("file_43.tf: the module handler checks 4f1c9e2b7d."));
        // A number is a value, whatever the loop counts.
        assert!(!v.common("37"));
        // The cut-off end of such prose is no terse rule; a short sentence of its own is
        // judged by the other rules.
        assert!(v.routine_fragment("module handler checks"));
        assert!(!v.routine_fragment("Module handler checks."));
    }

    fn answer(text: &str) -> Item {
        Item {
            section: Section::Answers,
            turn: 9,
            tag: "answer",
            seq: 1,
            text: text.into(),
            score: 60,
            source: 1,
            label: None,
            group: None,
            whole: false,
            routine: false,
        }
    }

    #[test]
    fn a_remark_made_of_three_things_in_the_same_words_is_routine() {
        let said = |names: &[&str]| -> String {
            names
                .iter()
                .map(|n| format!("`{n}` has a handful of call sites; none pass a buffer.\n"))
                .collect()
        };
        let twice = said(&["queue_retry", "header_span"]);
        let v = Vocabulary::of([twice.as_str()]);
        let mut it = answer("`queue_retry` has a handful of call sites; none pass a buffer.");
        v.rank(&mut it);
        assert_eq!(it.section, Section::Answers, "two stay apart");
        let thrice = said(&["queue_retry", "header_span", "tenant_worker"]);
        let v = Vocabulary::of([thrice.as_str()]);
        let mut it = answer("`queue_retry` has a handful of call sites; none pass a buffer.");
        v.rank(&mut it);
        assert_eq!(it.section, Section::Other, "{}", it.score);
        assert!(it.score < 60);
    }
}
