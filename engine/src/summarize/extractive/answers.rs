//! Assistant answers and decisions: what the agent told the user.
//!
//! An assistant's final answer of a turn is information the user may ask about again
//! ("what did you say the limit was?"), so its informative sentences are kept — not only
//! those with a decision word. Informative means specific (see [`specifics`]): a sentence
//! that names a value, a file, an identifier or a name. Acknowledgements ("Done.",
//! "Understood.") name nothing and are dropped; narration between tool calls ("Let me read
//! the file.") ranks below a final answer. A decision, proposal or recommendation ("I
//! suggest calling it X", "we settled on X") ranks higher still, and a plain word it
//! introduces as a name counts as a value (see [`introduced_names`]); a bare reason
//! ("because …", "so that …") is not a decision — ordinary prose explains itself too.
//!
//! Attribution is per turn (`[12 answer]`), so the answers to two near-identical
//! requests stay distinguishable.

use std::sync::OnceLock;

use regex::Regex;

#[cfg(doc)]
use super::names::introduced_names;
use super::text::{is_question, specifics, verification, words};

/// A decision, proposal or recommendation the agent states: what it chose, suggests or
/// will do, and a stated cause or fix. What the user asked the agent for is usually one of
/// these, so they rank above any prose.
fn decision() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(
            r"(?i)\b(decided|decision|decide|chose|chosen|choose|went with|go with|going with|settled|switched to|picked|agreed|recommend\w*|suggest\w*|propos\w+|opt for|opted|we will|we'll|i will use|i'll use|the plan is|my (pick|choice|vote)|i would (use|go|pick|choose|call)|i'd (use|go|pick|choose|call)|the (cause|reason|fix|answer|result|root cause|culprit|problem|issue|bug) (is|was)|(is|was|are|were) caused by|(is|was) due to|turned out|it comes down to|settle on|settling on)\b|^(?:so|then|instead|from here),? we (?:should |can |could |need to )?(?:key|use|keep|move|switch|pin|drop|add|split|wrap|route|run|go|make|store|cache|retry|limit|cap|set)\b",
        )
        .expect("static regex")
    })
}

/// A conclusion the agent labels as one (`Root cause: …`, `Fix: …`, `So the decision: …`):
/// the agent's own marking of what the answer comes to, above the explanation around it.
fn labelled_conclusion() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(
            r"(?i)^(?:(?:so|then|and|but|ok|okay|thus|hence|net|in short|tl;?dr)[,:]?\s+)?(?:the )?(?:root cause|cause|fix|decision|conclusion|diagnosis|finding|verdict|outcome|plan|choice|culprit|recommendation|(?:current )?task|next steps?|status)s?(?:\s+[\w-]+){0,3}\s*:",
        )
        .expect("static regex")
    })
}

/// What a [`labelled_conclusion`] gains over a decision said in passing.
const LABELLED: i64 = 12;

/// A stated reason (`because`, `so that`). Weak evidence on its own — ordinary prose
/// explains itself too — so it adds a little rank to an informative sentence but never
/// makes a sentence informative.
fn reason() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(r"(?i)\b(because|so that|since|due to|which means)\b").expect("static regex")
    })
}

/// Whether a sentence is nothing but bracketed tokens and list numbers (`1. [ref:3f2a]
/// 2. [ref:9c1d]`): references without a word of prose say nothing a summary can keep.
fn only_brackets(sentence: &str) -> bool {
    let mut depth = 0usize;
    let mut bracketed = false;
    let mut letters_outside = false;
    for c in sentence.chars() {
        match c {
            '[' => {
                depth += 1;
                bracketed = true;
            }
            ']' => depth = depth.saturating_sub(1),
            c if depth == 0 && c.is_alphabetic() => letters_outside = true,
            _ => {}
        }
    }
    bracketed && !letters_outside
}

/// The rank of one sentence of an assistant message, or `None` when it says nothing worth
/// keeping. `final_answer`: the message ends its turn (no tool calls follow); `first`: it is
/// the message's first sentence (answers lead with the answer).
pub fn answer_score(sentence: &str, final_answer: bool, first: bool) -> Option<i64> {
    if only_brackets(sentence) {
        return None;
    }
    let spec = i64::from(specifics(sentence).min(4));
    let labelled = labelled_conclusion().is_match(sentence) && !is_question(sentence);
    let decided = labelled || (decision().is_match(sentence) && !is_question(sentence));
    // A verification result ("All tests pass.") is short and names nothing, yet it is the
    // outcome of the work: kept (and framed as history by the caller).
    let verified = verification().is_match(sentence);
    let informative = spec > 0 || decided || verified;
    if !informative && words(sentence) < 4 {
        return None;
    }
    // Prose that names nothing ranks below anything the user said.
    let mut score = if final_answer { 16 } else { 8 };
    score += spec * 10;
    if decided {
        score += 16;
    }
    if labelled {
        score += LABELLED;
    }
    if verified {
        score += 14;
    }
    let explains = informative && reason().is_match(sentence);
    if explains {
        score += 4;
    }
    if first && final_answer && informative {
        score += 6;
        // An answer that opens with a cause ("Bytes are lost because …") is the diagnosis
        // the turn was for: it ranks as a decision does.
        if explains && !decided {
            score += DIAGNOSIS;
        }
    }
    if is_question(sentence) {
        score -= 12;
    }
    Some(score)
}

/// What the causal lead of a final answer gains: as much as a decision, short of its
/// decision word.
const DIAGNOSIS: i64 = 12;

/// What an answer sentence gains when its turn's request asked a question: what the user
/// asked for is what they ask about again ("why did you say it was slow?"), whether or not
/// it names a value — a diagnosis is often plain prose.
const ASKED: i64 = 10;
/// What the lead of such an answer gains on top: the answer comes first, the explanation
/// after it.
const ASKED_LEAD: i64 = 6;
/// Fewest words of a sentence that can be the answer; a shorter one is a lead-in
/// ("I wouldn't.", "Here is my read.").
const MIN_ANSWER_WORDS: usize = 6;

/// The rank of a sentence of the final answer to a question, given its [`answer_score`]:
/// raised, so at least informative (what else it names still orders it), and the lead (`lead`: no earlier sentence of the answer was one)
/// ranked above the rest. `None` when the sentence is a lead-in.
pub fn asked_answer_score(sentence: &str, score: i64, lead: bool) -> Option<i64> {
    if words(sentence) < MIN_ANSWER_WORDS || is_question(sentence) {
        return None;
    }
    Some((score + ASKED).max(INFORMATIVE_ANSWER) + if lead { ASKED_LEAD } else { 0 })
}

/// Whether an assistant sentence of this score has a share of its own (it names a value, a
/// decision or an outcome); below it, it is ordinary prose.
pub const INFORMATIVE_ANSWER: i64 = 24;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn informative_answers_rank_above_narration_and_acknowledgements_go() {
        assert_eq!(answer_score("Done.", true, true), None);
        assert_eq!(answer_score("Understood.", true, true), None);
        assert_eq!(
            answer_score("1. [ref:3f2a] 2. [ref:9c1d]", true, true),
            None
        );
        assert!(answer_score("3.11.4", true, true).is_some());
        let value = answer_score("The retry limit is 7, set in config.py.", true, true);
        let narration = answer_score("Let me read the file first.", false, true);
        let prose = answer_score(
            "That went well overall and nothing else changed.",
            true,
            false,
        );
        assert!(
            value > prose && prose > narration,
            "{value:?} {prose:?} {narration:?}"
        );
        let decided = answer_score("We decided to keep the old parser.", true, false);
        assert!(decided > prose);
        // A labelled conclusion is one.
        let labelled = answer_score(
            "Root cause: the currency cache is keyed by account id instead of by ISO code.",
            true,
            false,
        );
        assert!(labelled >= Some(INFORMATIVE_ANSWER), "{labelled:?}");
        // …also after a connective that leads into it.
        for led in [
            "So root cause: identity-api writes every session key with no TTL.",
            "Then fix: give session keys an expiry at write time.",
            "So we key the limiter on the X-Api-Key header, falling back to the first hop.",
        ] {
            let score = answer_score(led, true, false);
            assert!(score >= Some(INFORMATIVE_ANSWER), "{led}: {score:?}");
        }
        // A labelled fix outranks the explanation around it, code names and all.
        let fix = answer_score("Fix: Session inherits std::enable_shared_from_this<Session> and every async handler captures self = shared_from_this().", true, false);
        let around = answer_score("The pool switches to `shared_ptr<Session>`; `reap()` additionally calls `socket_.cancel()` so pending reads complete with `operation_aborted`.", true, false);
        assert!(fix > around, "{fix:?} {around:?}");
        let unlabelled = answer_score("So the cause of this remains open for now.", true, false);
        assert!(unlabelled < Some(INFORMATIVE_ANSWER), "{unlabelled:?}");
        // A diagnosis is a conclusion the user asked for, named or not.
        let diagnosis = answer_score(
            "The flaky test is caused by a race between the warmer and the first request.",
            true,
            false,
        );
        assert!(diagnosis > prose, "{diagnosis:?} {prose:?}");
    }

    #[test]
    fn the_answer_to_a_question_is_informative_and_its_lead_ranks_first() {
        let lead = "Retried charges reach the processor after the cache has forgotten the key.";
        let base = answer_score(lead, true, true).unwrap();
        assert!(base < INFORMATIVE_ANSWER, "{base}");
        let asked = asked_answer_score(lead, base, true).unwrap();
        let rest = asked_answer_score(lead, base, false).unwrap();
        assert!(asked > rest && rest > INFORMATIVE_ANSWER, "{asked} {rest}");
        // A lead-in is not the answer.
        assert_eq!(asked_answer_score("Here is my read.", 16, true), None);
    }
}
