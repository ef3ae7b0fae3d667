//! Text primitives every section of the extractive summary shares: sentence splitting,
//! clipping, the engine's verification filter, occurrence keys, and
//! *specificity* — how many concrete values a piece of text names.
//!
//! Specificity is the engine's generic test for "this says something checkable": numbers,
//! versions, identifiers with `_`, `.`, `/` or inner capitals, constants in capitals,
//! command-line flags and quoted tokens. Ordinary prose names few of them; a statement of a
//! fact, a setting or a decision names at least one. It is a property of the text's shape,
//! not of any word list, so it holds for material nobody wrote this code against.

use std::sync::OnceLock;

use regex::Regex;

/// Longest sentence kept whole, in characters; longer ones are cut with an ellipsis.
pub const MAX_SENTENCE_CHARS: usize = 320;

/// Most specific tokens one text is credited with (a table row is not a hundred facts).
const MAX_SPECIFICS: u32 = 6;

/// Prose verification results ("tests pass", "build failed"): history, labelled as such.
pub(super) fn verification() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(r"(?i)\b(tests? (pass|passed|passing|fail|failed|failing)|all (tests )?green|build (succeeded|passed|failed)|ci (is )?(green|red))\b")
            .expect("static regex")
    })
}

/// `archive://…` references: the address of archived output, kept in every summary.
pub(crate) fn archive_refs() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| Regex::new(r"archive://[^\s)\]}>,;'`]+").expect("static regex"))
}

/// The label that frames a verification result as history. Its line already carries the
/// turn, so the label does not repeat it.
pub(super) fn historical(text: &str) -> String {
    format!("{HISTORICAL}{text}")
}

const HISTORICAL: &str = "(historical) ";

/// A summary text without its verification label, for ranking. Also reads the label of
/// checkpoints written before it was shortened (`(historical, turn N) `).
pub(super) fn unlabelled(s: &str) -> &str {
    if let Some(rest) = s.strip_prefix(HISTORICAL) {
        return rest;
    }
    match s.strip_prefix("(historical, turn ") {
        Some(rest) => rest.split_once(") ").map_or(s, |(_, t)| t),
        None => s,
    }
}

fn digits() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| Regex::new(r"[0-9]+").expect("static regex"))
}

/// A list marker standing alone (`1.`, `2)`, `(3)`, `a.`): not a sentence of its own.
fn list_marker() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| Regex::new(r"^\(?([0-9]{1,3}|[A-Za-z])[.)]$").expect("static regex"))
}

/// Quoted or backticked spans: a writer marking a literal value.
fn quoted() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| Regex::new(r#"`[^`\n]{1,80}`|"[^"\n]{1,80}""#).expect("static regex"))
}

/// Shortest line (characters) that can be wrapped prose: a shorter one is a list item or a
/// heading, whatever follows it.
const MIN_WRAPPED_LINE_CHARS: usize = 40;

/// Whether the line break after a line of `line_chars` characters, ending `sentence` so
/// far, only wraps prose: the line is long, stops mid-sentence (a word, a comma, a colon, a
/// closing bracket), and the next line goes on in lower case — or the line ends on a word
/// no sentence ends on ([`NON_FINAL_WORDS`]). Hard-wrapped text (a YAML block, a commit message,
/// an email) would otherwise be read as fragments, each ranked by what it happens to hold.
fn soft_wrap(
    sentence: &str,
    line_chars: usize,
    mut rest: std::iter::Peekable<std::str::Chars<'_>>,
) -> bool {
    let stops_mid =
        sentence.trim_end().chars().last().is_some_and(|c| {
            c.is_alphanumeric() || matches!(c, ',' | ':' | ')' | '"' | '\'' | '`')
        });
    if !stops_mid || line_chars < MIN_WRAPPED_LINE_CHARS {
        return false;
    }
    let next: String = rest
        .by_ref()
        .skip_while(|c| *c == ' ' || *c == '\t')
        .take_while(|c| *c != '\n')
        .collect();
    let Some(first) = next.chars().next() else {
        return false;
    };
    // A line that ends on a word no sentence ends on ("… before we touch the" / "UART code.")
    // goes on whatever the case of the next line, unless that line opens a list or a
    // heading of its own.
    let last_word = sentence
        .split_whitespace()
        .last()
        .map(|w| w.to_ascii_lowercase())
        .unwrap_or_default();
    first.is_lowercase()
        || (NON_FINAL_WORDS.contains(&last_word.as_str())
            && first.is_alphanumeric()
            && !next
                .split_whitespace()
                .next()
                .is_some_and(|t| list_marker().is_match(t)))
}

/// Words no English sentence ends on: articles, prepositions, conjunctions, auxiliaries
/// and subject pronouns. A line break after one is a wrap.
const NON_FINAL_WORDS: &[&str] = &[
    "a", "an", "the", "to", "of", "for", "in", "on", "at", "by", "with", "from", "into", "onto",
    "and", "or", "but", "nor", "than", "via", "per", "our", "your", "their", "its", "my", "we",
    "they", "is", "are", "was", "were", "will", "would", "should", "can", "could", "must", "may",
    "might", "shall", "if", "because", "when", "while", "whose", "which",
];

/// Split text into sentences (on `.`, `!`, `?` followed by whitespace, or a newline that
/// does not only wrap prose, see [`soft_wrap`]). A list marker (`1.`) stays with the item
/// it opens.
pub fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = text.chars().peekable();
    let flush = |cur: &mut String, out: &mut Vec<String>| {
        if !cur.trim().is_empty() {
            out.push(cur.trim().to_string());
        }
        cur.clear();
    };
    let mut line_chars = 0;
    while let Some(c) = chars.next() {
        if c == '\n' {
            let wrapped = soft_wrap(&cur, line_chars, chars.clone());
            line_chars = 0;
            if wrapped {
                cur.push(' ');
            } else {
                flush(&mut cur, &mut out);
            }
            continue;
        }
        line_chars += 1;
        cur.push(c);
        // A spaced ellipsis (`CREATE TYPE ... AS ENUM`) elides words mid-sentence; it
        // ends nothing.
        // A macro's bang before lower-case text (`the select! loop breaks`) ends nothing.
        let macro_bang = c == '!' && {
            let before = cur.chars().rev().nth(1);
            let mut ahead = chars.clone();
            before.is_some_and(|b| b.is_alphanumeric() || b == '_')
                && ahead.next().is_some_and(char::is_whitespace)
                && ahead.next().is_some_and(char::is_lowercase)
        };
        let terminated = matches!(c, '.' | '!' | '?')
            && chars.peek().is_none_or(|n| n.is_whitespace())
            && !list_marker().is_match(cur.trim())
            && !(cur.ends_with(" ...") && chars.peek().is_some())
            && !macro_bang;
        // A heading before a colon ("Context from the ticket: The …") is a sentence of its
        // own when a capitalised sentence follows it: a routine heading then repeats as
        // itself, and what follows ranks on its own.
        let heading = c == ':' && cur.split_whitespace().count() >= 2 && {
            let mut ahead = chars.clone();
            ahead.next().is_some_and(char::is_whitespace)
                && ahead.next().is_some_and(char::is_uppercase)
        };
        if terminated || heading {
            flush(&mut cur, &mut out);
        }
    }
    flush(&mut cur, &mut out);
    out
}

/// Longest part of an over-long sentence ([`parts_of_long`]), in characters.
const PART_CHARS: usize = 200;

/// `sentence` as the parts it is ranked in: itself when it fits [`MAX_SENTENCE_CHARS`];
/// otherwise its clauses (split after `;`, `,`, a dash, and before a capitalised word that
/// follows a lower-case one with no stop between — text pasted without its full stops —
/// and, where a clause has no boundary at all, between words), joined again up to
/// [`PART_CHARS`] each. A run-on sentence would otherwise be cut to its
/// first 320 characters, and whatever it says past them (a value stated at its end) lost;
/// its parts compete on their own, each by what it names.
pub(super) fn parts_of_long(sentence: &str) -> Vec<String> {
    if sentence.chars().count() <= MAX_SENTENCE_CHARS {
        return vec![sentence.to_string()];
    }
    // Clauses, each with its length in characters.
    let mut clauses: Vec<(String, usize)> = Vec::new();
    let mut cur = (String::new(), 0usize);
    let mut prev_lower_end = false;
    for w in sentence.split_whitespace() {
        let len = w.chars().count();
        let capitalised = {
            let mut c = w.chars();
            c.next().is_some_and(char::is_uppercase) && c.next().is_some_and(char::is_lowercase)
        };
        // A new clause before a capitalised word after a lower-case one, and wherever a
        // clause with no boundary at all would grow past a part.
        let too_long = cur.1 + 1 + len > PART_CHARS;
        if (capitalised && prev_lower_end || too_long) && cur.1 > 0 {
            clauses.push(std::mem::take(&mut cur));
        }
        if cur.1 > 0 {
            cur.0.push(' ');
            cur.1 += 1;
        }
        cur.0.push_str(w);
        cur.1 += len;
        prev_lower_end = w.chars().last().is_some_and(char::is_lowercase);
        if w.ends_with([';', ',']) || matches!(w, "—" | "–" | "-") {
            clauses.push(std::mem::take(&mut cur));
        }
    }
    if cur.1 > 0 {
        clauses.push(cur);
    }
    let mut parts: Vec<(String, usize)> = Vec::new();
    for (c, len) in clauses {
        match parts.last_mut() {
            Some(last) if last.1 + 1 + len <= PART_CHARS => {
                last.0.push(' ');
                last.0.push_str(&c);
                last.1 += 1 + len;
            }
            _ => parts.push((c, len)),
        }
    }
    parts.into_iter().map(|(p, _)| p).collect()
}

/// `s` cut to `max` characters, marked with an ellipsis when cut.
pub(super) fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max).collect();
        t.push('…');
        t
    }
}

/// One line: every whitespace run (newlines included) becomes a single space, so message
/// text cannot forge a summary line of its own.
pub(super) fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Characters whose long runs are decoration in tool output (`====== 14 passed ======`,
/// `------`, box drawing): a rule says nothing, and in a summary of a few hundred tokens
/// the two rules around a test outcome cost what a value would.
const RULE_CHARS: [char; 9] = ['=', '-', '_', '*', '#', '~', '─', '━', '═'];
/// A run at least this long is a rule (`---` and `**` stay: a diff marker, emphasis).
const MIN_RULE_RUN: usize = 4;

/// `s` without rules, runs of dots cut to three (a progress line keeps its `F`s), on one
/// line.
pub(super) fn undecorated(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let run = chars[i..].iter().take_while(|&&x| x == c).count();
        if run >= MIN_RULE_RUN && RULE_CHARS.contains(&c) {
            out.push(' ');
        } else if run >= MIN_RULE_RUN && c == '.' {
            out.push_str("...");
        } else {
            out.extend(std::iter::repeat_n(c, run));
        }
        i += run;
    }
    let cleaned = one_line(&out);
    if cleaned.is_empty() {
        one_line(s)
    } else {
        cleaned
    }
}

/// Words in `s`.
pub(super) fn words(s: &str) -> usize {
    s.split_whitespace().count()
}

/// The occurrence key of a sentence or line: lowercase, every number as `#`, whitespace
/// collapsed, trailing punctuation dropped. Texts with one key are occurrences of "the same
/// thing said again" (a routine request with a new module number, a re-read value).
pub(super) fn occurrence_key(s: &str) -> String {
    let lower = one_line(&s.to_lowercase());
    digits()
        .replace_all(lower.trim_end_matches(['.', '!', '?', ';', ',']), "#")
        .into_owned()
}

/// The tokens of `s` that name a concrete value ([`specifics`]'s tokens), without their
/// surrounding punctuation.
pub(super) fn specific_tokens(s: &str) -> Vec<&str> {
    s.split_whitespace()
        .filter(|w| specific_token(w))
        .map(|w| {
            let t = w.trim_matches(|c: char| ",;:()[]{}<>\"'`!?".contains(c));
            t.strip_suffix('.').unwrap_or(t)
        })
        .collect()
}

/// Whether one whitespace-separated token names a concrete value.
pub(super) fn specific_token(raw: &str) -> bool {
    let t = raw.trim_matches(|c: char| ",;:()[]{}<>\"'`!?".contains(c));
    let t = t.strip_suffix('.').unwrap_or(t);
    if t.is_empty() || t.chars().count() > 120 {
        return false;
    }
    if t.chars().any(|c| c.is_ascii_digit()) {
        return true;
    }
    if t.starts_with('-')
        && t.trim_start_matches('-')
            .starts_with(|c: char| c.is_alphabetic())
    {
        return true;
    }
    let inner = &t[t.char_indices().nth(1).map_or(t.len(), |(i, _)| i)..];
    if inner.contains(['_', '/', '=', '@']) || inner.contains("::") {
        return true;
    }
    // A dot inside a token (a file name, a module path, a domain), not an abbreviation
    // (`e.g`, `i.e`: every part a single letter).
    if t.contains('.') {
        let parts: Vec<&str> = t.split('.').collect();
        if parts.iter().all(|p| !p.is_empty()) && parts.iter().any(|p| p.chars().count() >= 2) {
            return true;
        }
    }
    let letters: Vec<char> = t.chars().filter(|c| c.is_alphabetic()).collect();
    // A CONSTANT or a long acronym; a two- or three-letter one (`FYI`, `PR`) is an ordinary
    // abbreviation, not a value.
    if letters.len() >= 4 && letters.iter().all(|c| c.is_uppercase()) {
        return true;
    }
    // camelCase / PascalCase: a lowercase letter followed by an uppercase one.
    t.chars()
        .zip(t.chars().skip(1))
        .any(|(a, b)| a.is_lowercase() && b.is_uppercase())
}

/// How many concrete values `s` names (capped): see the module docs. A plain word that
/// the sentence introduces as a name (`calling the module X`, see
/// [`introduced_names`](super::names::introduced_names)) counts too; capitalized proper
/// names are weaker evidence and are counted by [`names_a_name`], not here.
pub(super) fn specifics(s: &str) -> u32 {
    // A list marker (`1.`, `2)`) numbers an item; it is not a value the item names.
    let n = s
        .split_whitespace()
        .enumerate()
        .filter(|(k, w)| !(*k == 0 && list_marker().is_match(w)) && specific_token(w))
        .count() as u32;
    let coined = super::names::introduced_names(s)
        .iter()
        .filter(|name| !specific_token(name))
        .count() as u32;
    (n + coined + quoted().find_iter(s).count() as u32).min(MAX_SPECIFICS)
}

/// Whether `s` names someone or something by a proper name: exactly one run of capitalized
/// words in it that is not just a sentence's (or a clause's, after a colon) opening word —
/// `Maria Okafor owns …`, `… approved by Ana.`. Where capitals are common (titles, headings,
/// languages that capitalize nouns) there are several runs, and capitals mark no name.
pub(super) fn names_a_name(s: &str) -> bool {
    let mut runs = 0usize;
    // (length, starts at an opening) of the current run of capitalized words.
    let mut run: Option<(usize, bool)> = None;
    let mut opening = true;
    let close = |run: &mut Option<(usize, bool)>, runs: &mut usize| {
        if let Some((len, at_opening)) = run.take() {
            // A long run is a title, not a name.
            if len <= 3 && (!at_opening || len >= 2) {
                *runs += 1;
            }
        }
    };
    for w in s.split_whitespace() {
        let word = w.trim_matches(|c: char| !c.is_alphanumeric());
        let mut chars = word.chars();
        let capital = chars.next().is_some_and(char::is_uppercase)
            && word.chars().count() > 1
            && chars.all(|c| c.is_lowercase() || c == '-' || c == '\'');
        if capital {
            run = Some(match run {
                Some((len, at)) => (len + 1, at),
                None => (1, opening),
            });
        } else {
            close(&mut run, &mut runs);
        }
        opening = w.ends_with([':', '.', '!', '?']);
        if opening {
            close(&mut run, &mut runs);
        }
    }
    close(&mut run, &mut runs);
    runs == 1
}

/// Whether `s` is a question.
pub(super) fn is_question(s: &str) -> bool {
    s.trim_end_matches(['"', '\'', ')', '`']).ends_with('?')
}

/// Whether a message's `sentences` are a lead-in and a list of questions ("Answer each
/// question …:", then questions): the lead-in only says how to answer them.
pub(crate) fn opens_question_list(sentences: &[String]) -> bool {
    sentences.len() >= 2
        && sentences[0].trim_end().ends_with(':')
        && sentences[1..].iter().all(|s| is_question(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_go_and_values_stay() {
        assert_eq!(
            undecorated("============ 14 passed in 0.14s ============"),
            "14 passed in 0.14s"
        );
        assert_eq!(
            undecorated("tests/test_a.py ......F.......  [100%]"),
            "tests/test_a.py ...F... [100%]"
        );
        // Short runs are content: a diff marker, a relative path, emphasis.
        assert_eq!(
            undecorated("--- FAIL: TestX (2.01s)"),
            "--- FAIL: TestX (2.01s)"
        );
        assert_eq!(
            undecorated("../../lib/a.rs **bold**"),
            "../../lib/a.rs **bold**"
        );
        // A line that is only a rule stays what it was.
        assert_eq!(undecorated("--------"), "--------");
    }

    #[test]
    fn an_over_long_sentence_is_ranked_in_parts_and_loses_nothing() {
        let short = "Keep the cache TTL at 300 seconds.";
        assert_eq!(parts_of_long(short), vec![short.to_string()]);
        let filler = "word ".repeat(70);
        let long = format!(
            "{filler}and then to Over the next half hour, connection counts climbed until the pool was exhausted; the fault was a missing index on audit_events.actor_id, so the purge held a lock."
        );
        let parts = parts_of_long(&long);
        assert!(parts.len() >= 2, "{parts:?}");
        assert!(
            parts
                .iter()
                .all(|p| p.chars().count() <= MAX_SENTENCE_CHARS),
            "{parts:?}"
        );
        assert!(parts
            .iter()
            .any(|p| p.contains("audit_events.actor_id") && p.chars().count() <= PART_CHARS));
        // Every word survives, in order.
        assert_eq!(
            parts.join(" ").split_whitespace().collect::<Vec<_>>(),
            long.split_whitespace().collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_heading_before_a_colon_is_its_own_sentence_when_a_sentence_follows() {
        assert_eq!(
            sentences("Thinking about the pool (point 3): Files we keep. Done."),
            vec![
                "Thinking about the pool (point 3):",
                "Files we keep.",
                "Done."
            ]
        );
        // A colon inside a sentence is not a break.
        assert_eq!(
            sentences("Root cause: the cache is keyed by account id. Decision 1: we wait."),
            vec![
                "Root cause: the cache is keyed by account id.",
                "Decision 1: we wait."
            ]
        );
        assert_eq!(
            sentences("Please note: Keep it."),
            vec!["Please note:", "Keep it."]
        );
        // A one-word label stays with its sentence.
        assert_eq!(sentences("Note: Keep it."), vec!["Note: Keep it."]);
        assert_eq!(sentences("SYSTEM: policy v9"), vec!["SYSTEM: policy v9"]);
    }

    #[test]
    fn wrapped_prose_is_read_as_its_sentences() {
        let wrapped = "The processor timeouts are real but they are not the bug by\nthemselves: the writer waits 10 s per attempt.\nRetried charges miss the cache.\n- a list item that is long enough to wrap\nnext line";
        assert_eq!(
            sentences(wrapped),
            vec![
                "The processor timeouts are real but they are not the bug by themselves: the writer waits 10 s per attempt.",
                "Retried charges miss the cache.",
                "- a list item that is long enough to wrap next line",
            ]
        );
        // Short lines (a list without markers) and a capitalised next line stay apart.
        assert_eq!(
            sentences("Fix the lexer\nbump it"),
            vec!["Fix the lexer", "bump it"]
        );
        assert_eq!(
            sentences(
                "This line is long enough to be wrapped prose today\nThe next starts a sentence"
            ),
            vec![
                "This line is long enough to be wrapped prose today",
                "The next starts a sentence"
            ]
        );
    }

    #[test]
    fn a_line_ending_on_an_article_wraps_into_a_capitalised_line() {
        let wrapped =
            "Review driver module 5 for the same ISR-context pattern before we touch the\n\
                       UART code. Then stop.";
        assert_eq!(
            sentences(wrapped),
            vec![
                "Review driver module 5 for the same ISR-context pattern before we touch the UART code.",
                "Then stop."
            ]
        );
        // A list item on the next line is its own, whatever the line before ends on.
        let listed = "These are the steps we agreed on, in the order of the\n1. Fix it.";
        assert_eq!(sentences(listed).len(), 2);
    }

    #[test]
    fn sentences_split_on_terminators_and_newlines_keeping_list_markers() {
        assert_eq!(
            sentences("Use v1.2 now. Never SQLite!\nNext line? yes"),
            vec!["Use v1.2 now.", "Never SQLite!", "Next line?", "yes"]
        );
        assert_eq!(
            sentences("1. Fix the lexer. 2. Bump the version."),
            vec!["1. Fix the lexer.", "2. Bump the version."]
        );
        // A spaced ellipsis elides; an attached one still ends the sentence.
        assert_eq!(
            sentences("Never CREATE TYPE ... AS ENUM here. Wait... Then go."),
            vec!["Never CREATE TYPE ... AS ENUM here.", "Wait...", "Then go."]
        );
        // A macro's bang is no stop; an exclamation is.
        assert_eq!(
            sentences("Root cause: the select! loop breaks early. Great! Then go."),
            vec![
                "Root cause: the select! loop breaks early.",
                "Great!",
                "Then go."
            ]
        );
    }

    #[test]
    fn specificity_counts_values_not_prose() {
        for s in [
            "MAX_RETRIES = 7",
            "Set the timeout to 30s.",
            "Edit src/lib.rs please.",
            "Call parseConfig first.",
            "Pass --release to cargo.",
            "The region is us-east-2.",
            "Use `serde_json` here.",
        ] {
            assert!(specifics(s) >= 1, "{s}");
        }
        for s in [
            "FYI: the build is slow.",
            "We should probably think about this a little more.",
            "That sounds reasonable to me, thanks.",
            "e.g. this one.",
            "2. unknown",
        ] {
            assert_eq!(specifics(s), 0, "{s}");
        }
        assert_eq!(specifics("3. Pin numpy to 1.26."), 1);
        assert_eq!(occurrence_key("Refactor module 12."), "refactor module #");
        for s in [
            "Maria Okafor owns the billing module.",
            "The owner is Ana.",
            "Ask Priya Raman first.",
        ] {
            assert!(names_a_name(s), "{s}");
        }
        for s in [
            "Please fix the parser.",
            "Note: The build is slow.",
            "Hinweis: Die Freigabe für alle Deployments ist erteilt.",
            "Production Deploy Checklist For Release Day",
            "Meet Ana and then Bo.",
        ] {
            assert!(!names_a_name(s), "{s}");
        }
        assert_eq!(
            occurrence_key("refactor  module 3"),
            occurrence_key("Refactor module 12.")
        );
    }
}
