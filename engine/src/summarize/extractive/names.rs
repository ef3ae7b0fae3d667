//! Names a sentence introduces: `calling the module X`, `a crate named X`, `rename it to
//! X`, `use X for …`, `I'd go with X.`
//!
//! Coding agents coin and pick names all the time (a module, a branch, a flag, a library)
//! and the name is usually a plain lowercase word — nothing in its shape says "value" the
//! way `MAX_RETRIES`, `v1.2` or `src/lib.rs` do. What marks it is the construction around
//! it: a naming verb with its object (`call the module X`), a passive naming (`named X`,
//! `called X`), or a choice verb whose object ends the clause (`use X.`, `go with X for …`).
//! Such a token is counted as a concrete value by
//! [`specifics`](super::text::specifics), so the sentence ranks like one that names a
//! version or a path.
//!
//! The constructions are grammatical, not a vocabulary of any project; a small list of
//! function words (pronouns, determiners, adverbs such as `again`) keeps `call it again`
//! or `use them here` from counting.

use std::sync::OnceLock;

use regex::Regex;

/// Words that can follow a naming or choice verb without being a name.
const NOT_NAMES: [&str; 58] = [
    "the",
    "a",
    "an",
    "it",
    "its",
    "this",
    "that",
    "these",
    "those",
    "them",
    "they",
    "one",
    "ones",
    "both",
    "all",
    "each",
    "either",
    "neither",
    "some",
    "any",
    "again",
    "twice",
    "once",
    "now",
    "then",
    "later",
    "here",
    "there",
    "instead",
    "too",
    "also",
    "first",
    "last",
    "next",
    "more",
    "less",
    "only",
    "just",
    "directly",
    "manually",
    "carefully",
    "anyway",
    "everything",
    "something",
    "nothing",
    "anything",
    "me",
    "you",
    "him",
    "her",
    "us",
    "what",
    "which",
    "whatever",
    "back",
    "out",
    "up",
    "so",
];

/// Where a chosen name may end: the clause ends, or a preposition of purpose or contrast
/// follows (`use X for the cache`, `go with X instead of Y`).
const CLAUSE_END: &str = r"(?:\s*(?:[.,;:!?)]|$)|\s+(?:for|as|instead|over|rather|because|since|here|everywhere|throughout|from now on)\b)";

/// The name token: a word of three or more characters (letters, digits, `_`, `-`).
const NAME: &str = r"([A-Za-z][\w-]{2,39})";

fn patterns() -> &'static [Regex; 3] {
    static R: OnceLock<[Regex; 3]> = OnceLock::new();
    R.get_or_init(|| {
        let build = |head: &str| {
            Regex::new(&format!("(?i){head}{NAME}{CLAUSE_END}")).expect("static regex")
        };
        [
            // Passive naming and renaming: `named X`, `called X`, `renamed to X`.
            build(r"\b(?:named|called|dubbed|titled|renamed\s+to|rename\s+(?:it|this|that)\s+to|renaming\s+(?:it|this|that)\s+to)\s+"),
            // A naming verb with its object first: `call it X`, `calling the module X`.
            build(r"\b(?:call|calls|calling|name|names|naming|dub|dubbing)\s+(?:it|this|that|them|(?:the|a|an|our|its|their|my|your|this|that)\s+(?:[\w-]+\s+){0,2}?[\w-]+)\s+"),
            // A choice whose object ends the clause: `use X.`, `go with X for …`.
            build(r"\b(?:use|using|go\s+with|going\s+with|went\s+with|pick|picked|choose|chose|prefer|switch\s+to|switched\s+to|adopt|opt\s+for|opted\s+for|settle\s+on|settled\s+on)\s+"),
        ]
    })
}

/// The names `s` introduces (distinct, in order), lowercase; see the module docs.
pub(super) fn introduced_names(s: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in patterns() {
        for c in r.captures_iter(s) {
            let name = c[1].trim_end_matches('-').to_lowercase();
            if name.chars().count() < 3 || NOT_NAMES.contains(&name.as_str()) {
                continue;
            }
            if !out.contains(&name) {
                out.push(name);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_introduced_by_its_construction() {
        for (s, name) in [
            (
                "For the cli crate I'd propose calling the helper crate tidewater.",
                "tidewater",
            ),
            ("Let's call it quillpen.", "quillpen"),
            ("The new branch is named hotfix-lanes.", "hotfix-lanes"),
            ("We will use zstd for the archives.", "zstd"),
            ("I would go with ripgrep instead of grep.", "ripgrep"),
            ("Rename it to ledgerline, please.", "ledgerline"),
        ] {
            assert_eq!(introduced_names(s), vec![name.to_string()], "{s}");
        }
        for s in [
            "It says what it keeps without naming the backend.",
            "Call it again after the build.",
            "Use them here.",
            "We should use the cache more often.",
            "I called the function and it returned.",
        ] {
            assert!(
                introduced_names(s).is_empty(),
                "{s}: {:?}",
                introduced_names(s)
            );
        }
    }
}
