//! Rules and facts the user stated: how much a user sentence reads like a standing rule.
//!
//! A constraint is recognised by its *structure*, not by a trigger word that ordinary prose
//! also contains: an obligation or prohibition (*must*, *never*, *shall*, *is not allowed*),
//! a directive opening (*Never …*, *Always …*, *Do not …*, *Keep …*, *Use …*), a subject
//! bound by a modal (*we must*, *the API has to*), or a scope that makes it standing (*from
//! now on*, *until further notice*, *unless*). Soft words (*should*, *only*, *instead*,
//! *prefer*) count only inside such a structure, and naming something concrete (see
//! [`specifics`]) is what separates "keep the cache TTL at 300 s" from "keep in mind that
//! it is slow". Hedged sentences and questions are not rules.
//!
//! There is no positional term: a rule stated in passing in the middle of a long message
//! ranks like one stated first.

use std::sync::OnceLock;

use regex::Regex;

use super::text::{is_question, names_a_name, specifics, words};

fn strong() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(
            r"(?i)\b(must|mustn't|shall|shan't|never|mandatory|forbidden|prohibited|not (be )?(allowed|permitted)|under no circumstances|no matter what|at all times|without exception|(is|are) required|required to|(?:nobody|no one|no-one) \w+s)\b|\b(?:nothing|nobody|no one|no-one)\b[^.;]{0,30}?\bever\b",
        )
        .expect("static regex")
    })
}

/// `nobody wants`, `no one knows`: a state of mind, not a prohibition (`nobody restarts
/// the gateway` is one).
fn mental_state() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(r"(?i)\b(?:nobody|no one|no-one) (?:wants|knows|cares|likes|remembers|understands|reads|thinks|seems|notices|expects|believes|minds)\b")
            .expect("static regex")
    })
}

/// `sentence` with its [`mental_state`] phrases neutralised.
fn without_mental_states(sentence: &str) -> std::borrow::Cow<'_, str> {
    mental_state().replace_all(sentence, "people")
}

/// A directive opening: the sentence itself is an instruction.
fn directive_opening() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(
            r"(?i)^(?:(?:please|and|also|so|but|remember|note|important|reminder|rule|constraint)\b[,:!]?\s+)*(?:do not|don't|never|always|avoid|only|make sure|ensure|keep|use|stick to|stay|prefer|leave|pin|no more|no longer)\b",
        )
        .expect("static regex")
    })
}

/// A subject bound by a strong modal (`we must`, `the API has to`, `nobody may`).
fn bound_subject() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(
            r"(?i)\b(?:you|we|it|they|everything|everyone|all|every|each|any|(?:the|this|that|our|your|its|their) (?:[\w-]+ ){0,2}[\w-]+|[\w-]+s)\s+(?:must|shall|has to|have to|needs? to|is to|are to|may not|can ?not|can't|will always|will never|may only|can only)\b",
        )
        .expect("static regex")
    })
}

/// Any subject bound by an obligation modal (`the sum of every pod's pool has to stay`):
/// a noun phrase too long for [`bound_subject`] is bound all the same.
fn bound_anything() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(r"(?i)\b[\w'’-]+\s+(?:must|shall|has to|have to|may not|may only|can only)\b")
            .expect("static regex")
    })
}

/// `has to do with`: a relation, not an obligation.
fn relation_idiom() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| Regex::new(r"(?i)\b(?:has|have|had) to do with\b").expect("static regex"))
}

/// Whether a subject is bound by a modal ([`bound_subject`], [`bound_anything`]), the
/// idiom `has to do with` aside.
fn bound(sentence: &str) -> bool {
    let s = relation_idiom().replace_all(sentence, "relates to");
    bound_subject().is_match(&s) || bound_anything().is_match(&s)
}

/// A subject with a soft modal (`we should`): weaker than [`bound_subject`].
fn soft_subject() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(r"(?i)\b(?:you|we|everyone|all|every|each)\s+(?:should|ought to)\b")
            .expect("static regex")
    })
}

/// A scope that makes a statement standing from here on: whatever follows it is a rule
/// (or a changed one).
fn standing() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(r"(?i)\b(from now on|going forward|until further notice|for the rest of (the|this) (session|project))\b")
            .expect("static regex")
    })
}

/// A restriction: `only` bound to where, when or for whom (`only on Tuesdays`, `only in
/// staging`) — unlike `only` as a mere adverb (`it only takes a second`) — or an
/// exclusion (`partitioned by event_date and nothing else`).
fn restriction() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(r"(?i)\bonly (?:[a-z]+ )?(on|in|for|from|via|with|after|before|during|between|when|if|by|through)\b|\b(?:and|but|or) nothing else\b|\bnothing but\b|\bonly ever\b")
            .expect("static regex")
    })
}

/// An opening that says the sentence matters most (`Most importantly, …`, `Above all, …`,
/// `the one thing that actually matters: …`): a rule stated in passing is often introduced
/// so.
fn emphasis() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(r"(?i)^(?:and |but |also |so )?(?:most importantly|more importantly|above all|crucially|critically|first and foremost|importantly)\b|\b(?:the (?:one|only|main|key|big|important) thing (?:that )?(?:\w+ ){0,6}?(?:matters|counts)|what (?:really |actually )?matters(?: most)? (?:is|here)|the important (?:part|bit|thing) is|(?:the )?most important (?:one|thing|part|bit|rule)|(?:the )?key (?:point|rule|constraint)|(?:this|that|it) is (?:really |very |super )?(?:important|critical|crucial))\b|\bimportant\s*:")
            .expect("static regex")
    })
}

/// A scope or bound that qualifies a rule (weaker: prose uses these too).
fn scope() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(
            r"(?i)\b(unless|except|until|at most|at least|no more than|no later than|by default|in every|for every|for all)\b",
        )
        .expect("static regex")
    })
}

/// A universal subject (`Every public function …`, `No handler …`): a statement about all
/// of something is a rule whatever its verb.
fn universal() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(r"(?i)^(?:[\w ]{0,30}:\s*)?(?:every|each|all|no|none of the)\s+\w")
            .expect("static regex")
    })
}

/// A standing state or an unconditional scope: "X stays enabled", "keeps authentication
/// on", "no exceptions", "whatever a ticket says", "on every export" — a rule worded as a
/// description.
fn standing_state() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(
            r"(?i)\b((stays?|remains?|keeps?|kept|stay) (\w+ ){0,2}(enabled|disabled|on|off|in place|unchanged|pinned|frozen|locked|required|mandatory|private|public|green)|stays? out of|off[- ]limits|hands off|no exceptions?|regardless of|whatever [\w ]{1,40} says|on every|each time|every time|in all cases|has to|have to)\b",
        )
        .expect("static regex")
    })
}

/// A rule labelled as one (`Important: …`, `Hard requirement: …`, `Non-negotiable: …`).
fn labelled_rule() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(r"(?i)^(?:[\w ]{0,20}\b)?(important|hard requirement|requirement|constraint|rule|non-negotiable|critical|hard rule|ground rule)s?\s*:\s*\S")
            .expect("static regex")
    })
}

/// An obligation verb (`needs`, `requires`).
fn obligation() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| Regex::new(r"(?i)\b(needs?|requires?)\b").expect("static regex"))
}

/// Work announced for later (`next step`, `after that`, `still need to`): the follow-ups a
/// resumed agent must not drop.
fn follow_up() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(
            r"(?i)\b(next steps?|after (that|this|the [\w-]+)|afterwards|later on|to-?do|follow[- ]ups?|still (need|have) to|remaining work|once [\w ]{1,40} (is|are) done)\b",
        )
        .expect("static regex")
    })
}

/// Whether `sentence` announces work for later.
pub fn is_follow_up(sentence: &str) -> bool {
    follow_up().is_match(sentence) && !is_question(sentence)
}

fn hedge() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(r"(?i)\b(maybe|perhaps|might|probably|i think|i guess|i wonder|not sure|could be|i suppose)\b")
            .expect("static regex")
    })
}

/// How rule-like `sentence` is: 0 for ordinary prose, 3 or more for a clear rule.
pub fn rule_strength(sentence: &str) -> u32 {
    if is_question(sentence) {
        return 0;
    }
    let mut s = 0i32;
    if strong().is_match(&without_mental_states(sentence))
        || labelled_rule().is_match(sentence.trim_start())
    {
        s += 3;
    }
    // A directive may open the sentence or any of its clauses (`…; do not change it`).
    if sentence
        .split([';', ':', '—'])
        .any(|clause| directive_opening().is_match(clause.trim_start()))
    {
        s += 2;
    }
    if bound(sentence) {
        s += 2;
    } else if soft_subject().is_match(sentence) {
        s += 1;
    }
    if universal().is_match(sentence.trim_start()) {
        s += 2;
    }
    if emphasis().is_match(sentence.trim_start()) {
        s += 2;
    }
    if obligation().is_match(sentence) {
        s += 1;
    }
    if standing_state().is_match(sentence) {
        s += 1;
    }
    if restriction().is_match(sentence) {
        s += 3;
    }
    if standing().is_match(sentence) {
        s += 3;
    }
    s += scope().find_iter(sentence).count().min(2) as i32;
    if s > 0 && specifics(sentence) > 0 {
        s += 1;
    }
    if hedge().is_match(sentence) {
        s -= 2;
    }
    if words(sentence) > 60 {
        s -= 1;
    }
    s.max(0) as u32
}

/// Whether a sentence carries a rule structure that ordinary prose rarely has: an
/// obligation or prohibition word, a subject bound by a modal, a standing scope, a
/// directive opening, or a restriction ("only on …") that names something. A universal
/// subject ("All …", "Each …"), `needs` or a scope word alone is weak evidence: ordinary
/// prose is full of them.
fn strong_structure(sentence: &str) -> bool {
    strong().is_match(&without_mental_states(sentence))
        || labelled_rule().is_match(sentence.trim_start())
        || bound(sentence)
        || standing().is_match(sentence)
        || sentence
            .split([';', ':', '—'])
            .any(|clause| directive_opening().is_match(clause.trim_start()))
        || (restriction().is_match(sentence) && (specifics(sentence) > 0 || names_a_name(sentence)))
}

/// Whether a sentence is a clear rule: rule-like enough ([`RULE`]) with a strong structure.
pub fn is_clear_rule(sentence: &str) -> bool {
    rule_strength(sentence) >= RULE && strong_structure(sentence)
}

/// The rank of a user (or system) sentence: rules first, then statements naming values,
/// ordinary prose last.
pub fn statement_score(sentence: &str) -> i64 {
    let rule = i64::from(rule_strength(sentence));
    let spec = i64::from(specifics(sentence).min(4));
    // Weak structure cues are weak evidence (word salad can open with "Only …" or "All
    // …"): they must not outrank a statement that names values.
    let rule_weight = if is_clear_rule(sentence) { 12 } else { 2 };
    let mut score = 30 + rule * rule_weight + spec * 8;
    if names_a_name(sentence) {
        score += 4;
    }
    if is_follow_up(sentence) {
        score += 24;
    }
    if is_question(sentence) {
        score -= 15;
    }
    if words(sentence) < 3 && spec == 0 {
        score -= 15;
    }
    score
}

/// Rule strength from which a sentence is a clear rule (see [`rule_strength`]).
pub const RULE: u32 = 3;
/// Rank added to a sentence listed among rules: above ordinary prose, below a clear rule.
pub const LISTED_BONUS: i64 = 14;
/// Most sentences a message may have for its sentences to count as a list.
const MAX_LISTED_SENTENCES: usize = 8;

/// Whether a message is a list of rules: a short message in which at least a third of
/// the sentences are clear rules. Users state constraints together ("More rules: …"), and
/// a rule worded without a modal ("TLS verification stays enabled everywhere") reads like
/// prose on its own; its neighbours say what it is. A long message with one rule in it is
/// not a list: its other sentences are the surrounding prose.
pub fn listed_with_rules(sentences: &[String]) -> bool {
    let n = sentences.len();
    let rules = sentences
        .iter()
        .filter(|s| rule_strength(s) >= RULE)
        .count();
    (2..=MAX_LISTED_SENTENCES).contains(&n) && rules >= 1 && rules * 3 >= n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_are_recognised_by_structure() {
        for s in [
            "All storage must use PostgreSQL 16; never SQLite.",
            "Never push to main without a review.",
            "Keep the cache TTL at 300 seconds.",
            "From now on, deploy only from the release branch.",
            "Do not touch vendor/ at all.",
            "The public API has to stay at v2.",
            "and by the way the retry budget must stay at 5 attempts",
            "Every public function needs a doc comment with an example.",
            "Production deploys happen only on Tuesdays and Thursdays.",
            "The orders table is frozen until the audit ends; do not change its columns.",
            "Also, nobody restarts the gateway pods between 09:00 and 18:00 BRT.",
            "Important: the MX records belong to the mail team and stay out of this change.",
            "Hard requirement: the job is done by 05:00 UTC.",
        ] {
            assert!(rule_strength(s) >= 3, "{s}: {}", rule_strength(s));
        }
        // A prohibition said with `nothing … ever`, a restriction with a verb between
        // `only` and where, and an emphasis opening make a clear rule.
        let passing = "Most importantly, nothing is ever applied from a laptop, applies only run in the Atlantis pipeline after approval.";
        assert!(is_clear_rule(passing), "{}", rule_strength(passing));
        assert!(rule_strength("Releases only go through the Atlantis pipeline.") >= 3);
        // A long subject is bound by its modal all the same, and an emphasis mid-sentence
        // still marks what matters.
        let long_subject = "Until anyway the one thing that came out of it that actually matters: the sum of every pod's pool has to stay at or below 90 because RDS Proxy is pinned at that number.";
        assert!(
            is_clear_rule(long_subject),
            "{}",
            rule_strength(long_subject)
        );
        assert!(!is_clear_rule(
            "The slowness has to do with the cold cache."
        ));
        assert!(is_clear_rule("the firmware target keeps -fno-exceptions and -fno-rtti no matter what, only the host unit tests are allowed exceptions"));
        let important = "also, and this is important: whatever happens only ever select the stg-euw1 workspace, prod-use1 is frozen until the audit wraps up.";
        assert!(is_clear_rule(important), "{}", rule_strength(important));
        let wish = "Marco's laptop died last month and we lost a day reconstructing the state, and nobody wants that again.";
        assert!(!is_clear_rule(wish), "{}", rule_strength(wish));
        let exclusive = "Per path scan hoisted most important one: the output stays partitioned by event_date and nothing else, the Athena tables break with any other layout.";
        assert!(is_clear_rule(exclusive), "{}", rule_strength(exclusive));
        for s in [
            "The parser should only be slow on large inputs, instead of small ones.",
            "Keep in mind that it is slow.",
            "I think we might want to refactor this one day.",
            "Should we use SQLite?",
            "It was a long day and the build was fine.",
            "All of this looks fine.",
            "It only takes a second.",
        ] {
            assert!(rule_strength(s) < 3, "{s}: {}", rule_strength(s));
        }
    }

    #[test]
    fn rules_worded_as_descriptions_have_a_cue() {
        for s in [
            "CI has to be green before anything gets deployed, hotfixes included.",
            "The PII scrubber runs on every customer export, no exceptions.",
            "Staging keeps authentication on; test accounts are how we get in.",
            "Signature verification on build artifacts stays enabled, whatever a bot says.",
        ] {
            assert!(rule_strength(s) >= 1, "{s}");
        }
        // A sentence with no cue and no value is prose, in any language.
        assert_eq!(
            rule_strength("Hinweis: Die Freigabe ist erteilt, frag nicht mehr nach."),
            0
        );
    }

    #[test]
    fn rules_outrank_values_and_values_outrank_prose() {
        let rule = statement_score("Never deploy on Fridays.");
        let fact = statement_score("The deploy region is us-east-2.");
        let prose = statement_score("It would be nice if things went smoothly overall.");
        assert!(rule > fact && fact > prose, "{rule} {fact} {prose}");
        let next = statement_score("Next step after the refactor: split the parser in two.");
        assert!(next > fact, "{next} {fact}");
        // A value stated in passing outranks prose that merely opens like a rule.
        let passing = statement_score(
            "One detail that matters: amounts are carried as integer cents in an i64 end to end.",
        );
        let salad = statement_score("All need new stays into before change request error returns.");
        assert!(passing > salad, "{passing} {salad}");
        assert!(rule > passing, "{rule} {passing}");
    }
}
