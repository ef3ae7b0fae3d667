//! Revisions: a user sentence that changes one of the standing instructions.
//!
//! The instruction file is reloaded for every request, so a resumed agent always sees it,
//! and sees it as current. When the user changed one of its rules in conversation ("we
//! lint with make lint now", "target Python 3.12 from now on"), the sentence that did is
//! the only record that the file is stale on that point: a checkpoint that drops it sends
//! the agent back to the old rule. Such a sentence is kept as a rule is.
//!
//! A sentence revises an instruction when it says that something changed — a word of
//! change or of time (*now* past a sentence's first word, *from now on*, *instead*, *no
//! longer*, *moved*, *switched*, *renamed*, *bumped*, *dropped*, …) — and names what an
//! instruction line names: a word of four characters or more, outside everyday words,
//! that the line uses too. The test reads the instructions the engine sends, never a
//! scenario's facts.

use std::collections::HashSet;
use std::sync::OnceLock;

use regex::Regex;

/// Everyday words that name nothing an instruction is about.
const EVERYDAY: [&str; 44] = [
    "this",
    "that",
    "with",
    "from",
    "into",
    "when",
    "what",
    "have",
    "will",
    "your",
    "they",
    "them",
    "then",
    "than",
    "there",
    "their",
    "were",
    "been",
    "before",
    "after",
    "every",
    "each",
    "only",
    "also",
    "just",
    "some",
    "more",
    "most",
    "make",
    "sure",
    "should",
    "must",
    "never",
    "always",
    "keep",
    "using",
    "unless",
    "otherwise",
    "about",
    "which",
    "here",
    "where",
    "does",
    "like",
];

/// A word of change: the sentence says something is no longer as it was.
fn change() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(
            r"(?i)\b(from now on|from here on|going forward|any ?more|no longer|instead|moved|switched|changed|renamed|bumped|upgraded|downgraded|dropped|replaced|stale|outdated|this time)\b",
        )
        .expect("static regex")
    })
}

/// The words of `s` that can name a subject: lowercase, four characters or more, not
/// everyday words.
fn subject_words(s: &str) -> impl Iterator<Item = String> + '_ {
    s.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
        .map(|w| w.trim_matches('-').to_lowercase())
        .filter(|w| w.chars().count() >= 4 && !EVERYDAY.contains(&w.as_str()))
}

/// The subjects of each line of the current instructions.
#[derive(Debug, Default)]
pub(super) struct Instructions {
    lines: Vec<HashSet<String>>,
}

impl Instructions {
    /// The instruction lines of `text`.
    pub(super) fn of(text: &str) -> Self {
        Instructions {
            lines: text
                .lines()
                .map(|l| subject_words(l).collect::<HashSet<_>>())
                .filter(|w| !w.is_empty())
                .collect(),
        }
    }

    /// Whether `sentence` (something the user said) revises one of the instructions.
    pub(super) fn revised_by(&self, sentence: &str) -> bool {
        // A question asks how things stand; it changes nothing.
        if self.lines.is_empty() || super::text::is_question(sentence) {
            return false;
        }
        // "Now" opening a sentence moves the work on ("Now put …"), and "right now", "for
        // now" and "just now" say when; otherwise it dates a fact ("we lint with X now").
        let words: Vec<String> = sentence
            .split_whitespace()
            .map(|w| {
                w.trim_matches(|c: char| !c.is_alphanumeric())
                    .to_lowercase()
            })
            .collect();
        let dated = (1..words.len()).any(|k| {
            words[k] == "now"
                && !matches!(words[k - 1].as_str(), "right" | "for" | "just" | "until")
        });
        if !(dated || change().is_match(sentence)) {
            return false;
        }
        let words: HashSet<String> = subject_words(sentence).collect();
        self.lines.iter().any(|line| !line.is_disjoint(&words))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_rule_revises_the_instruction_it_names() {
        let i = Instructions::of(
            "- Service: hookd (Go 1.22).\n- Lint with golangci-lint run ./... before every commit.\n\
             - Target runtime: Python 3.11.\n",
        );
        assert!(
            i.revised_by("Small process change: we lint with make lint now, so use that instead.")
        );
        assert!(i.revised_by("The platform team bumped the runtime image to 3.12."));
        // No word of change, or nothing an instruction names: no revision.
        assert!(!i.revised_by("Lint the new package too."));
        assert!(!i.revised_by("Now put the backoff schedule in its own file."));
        assert!(!i.revised_by("We moved the meeting to Friday."));
        assert!(!i.revised_by("How long does the lint take right now?"));
        assert!(!i.revised_by("Keep the lint quiet for now."));
        assert!(!Instructions::of("").revised_by("Lint with make lint from now on."));
    }
}
