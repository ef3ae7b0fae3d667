//! The deterministic extractive summarizer (the default strategy; no model call).
//!
//! Seed 000's first shipped checkpoint, hardened against what real agents lose after a
//! compaction. It reads the covered messages (redacted first) and keeps, within
//! `summary_target_tokens`, five kinds of material, each with its own share of the budget
//! (`layout.rs`) so one kind cannot crowd out the others:
//!
//! 1. **task state** (`task.rs`): the newest request with *all* its parts, the last command
//!    and what it returned, the file in flight;
//! 2. **rules and facts the user stated** (`rules.rs`): ranked by rule-like structure and
//!    by the concrete values they name, wherever they sit in a message;
//! 3. **key lines of tool results** (`tool_lines.rs`): settings, constants, versions, test
//!    outcomes, errors, exit codes, flags, paths — bounded per result, attributed to the call,
//!    the lines the conversation's prose names first (`mentions.rs`);
//! 4. **assistant answers and decisions** (`answers.rs`): the informative sentences of each
//!    turn's answer, attributed per turn;
//! 5. everything else, by rank, in what is left.
//!
//! Repetition (`occurrences.rs`): a sentence or line said again with only numbers changed is
//! one thing said several times; its first, second and newest occurrence stay (each with its
//! turn, so "the second time I asked" stays answerable) and the ones in between go, so a
//! routine cannot evict a rare rule.
//!
//! Safety, unchanged: secrets are redacted before anything else; a sentence or line that
//! claims approval, authority or an instruction override is replaced by
//! [`OMISSION_MARKER`]; verification results are framed as history
//! (`(historical)`); every `archive://` reference in the covered material is kept
//! on a fixed line so archived output stays addressable (seed 004 P1).
//!
//! The summary is written in conversation order, one line per turn and kind
//! (`- [N tag] …`). Rolling (`rolling.rs`): the previous checkpoint's lines compete
//! with the new ones under the same rules.

mod answers;
mod claims;
mod collect;
mod frames;
mod headings;
mod layout;
mod mentions;
mod names;
mod novelty;
mod occurrences;
mod outliers;
mod revisions;
mod rolling;
mod rules;
mod task;
mod text;
mod tool_lines;
mod updates;

#[cfg(test)]
mod tests;

use ctxbench_adapters::Provider;

use super::{SummarizeError, Summarizer, SummaryContent, SummaryRequest, SummaryResult};
use crate::mutants::Mutation;
use ctxbench_sut::SummaryStrategy;

pub(crate) use claims::claims;
pub(crate) use collect::pointer;
pub(crate) use novelty::Vocabulary;
pub(crate) use rules::is_clear_rule;
pub(crate) use text::archive_refs as archive_ref_pattern;
pub(crate) use text::opens_question_list;
pub use text::sentences;
pub(crate) use tool_lines::{argument_strings, runs_a_command};

/// Whether a sentence names a concrete value (a number, a path, an identifier, a quoted
/// string): what the model strategy checks its summary kept (`model::carry`).
pub(crate) fn names_a_value(sentence: &str) -> bool {
    text::specifics(sentence) > 0
}
use text::{archive_refs, MAX_SENTENCE_CHARS};
pub(crate) use tool_lines::top_lines as tool_key_lines;

/// Whether at least half the lines of a tool result are key lines: data to keep, not
/// bulk to project.
pub(crate) fn mostly_key_lines(content: &str) -> bool {
    is_data(content, tool_lines::key_lines(content).len())
}

/// [`mostly_key_lines`], given how many key lines `content` has.
fn is_data(content: &str, key_lines: usize) -> bool {
    let filled = content.lines().filter(|l| !l.trim().is_empty()).count();
    filled >= 2 && key_lines * 2 >= filled
}

/// Rank a user sentence that revises a standing instruction gains (`revisions.rs`): as
/// much as a rule's cue word gives.
const REVISION_BONUS: i64 = 25;

/// Joins the key lines of one tool result on its summary line. Not ` | `: a table row or a
/// log's fields hold that, and a row must be written as it was read (a later question
/// quotes it) and come back whole when a rolled checkpoint splits the line.
const LINE_JOINER: &str = " ‖ ";

/// Replaces an authority claim in memory.
pub const OMISSION_MARKER: &str = "[omitted: historical approval/authority claim]";

/// The extractive summarizer.
#[derive(Debug, Default, Clone, Copy)]
pub struct ExtractiveSummarizer;

#[async_trait::async_trait]
impl Summarizer for ExtractiveSummarizer {
    fn strategy(&self) -> SummaryStrategy {
        SummaryStrategy::Extractive
    }

    async fn summarize(
        &self,
        request: SummaryRequest<'_>,
        _provider: &dyn Provider,
    ) -> Result<SummaryResult, SummarizeError> {
        Ok(SummaryResult {
            content: SummaryContent::Text(extract(&request)),
            model_calls: 0,
            model_id: "extractive".into(),
        })
    }
}

/// **Mutant only**: the extractive summarizer with one known-bad behaviour (see
/// [`Mutation`]: `KeepApprovalClaims`, `DropArchiveRefs`, `UnlabelledVerification`,
/// `DropToolResultContent`, `DropAssistantText`, `KeepNewestOccurrenceOnly`,
/// `ForgetLaterRequestParts`). Any other mutation behaves exactly like
/// [`ExtractiveSummarizer`]. Only the engine's mutation switch constructs it.
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct MutantExtractive(pub Mutation);

impl MutantExtractive {
    /// Whether `m` changes the extractive summarizer (the engine then builds this one).
    pub fn applies(m: Mutation) -> bool {
        matches!(
            m,
            Mutation::KeepApprovalClaims
                | Mutation::DropArchiveRefs
                | Mutation::UnlabelledVerification
        ) || Breakage::of(Some(m)) != Breakage::default()
    }
}

#[async_trait::async_trait]
impl Summarizer for MutantExtractive {
    fn strategy(&self) -> SummaryStrategy {
        SummaryStrategy::Extractive
    }

    async fn summarize(
        &self,
        request: SummaryRequest<'_>,
        _provider: &dyn Provider,
    ) -> Result<SummaryResult, SummarizeError> {
        let mut text = extract_with(&request, Breakage::of(Some(self.0)));
        match self.0 {
            Mutation::KeepApprovalClaims => {
                for (i, entry) in request.covered.iter().enumerate() {
                    let turn = request.turn_numbers.get(i).copied().unwrap_or(0);
                    let m = request.redactor.redact_message(&entry.message);
                    for s in sentences(&m.content) {
                        if claims().is_match(&s) {
                            text.push_str(&format!(
                                "\n- [{}] {s}",
                                layout::line_head(turn, m.role.as_str())
                            ));
                        }
                    }
                }
            }
            Mutation::DropArchiveRefs => {
                text = text
                    .lines()
                    .filter(|l| !l.contains(" archive] "))
                    .map(|l| archive_refs().replace_all(l, "").into_owned())
                    .collect::<Vec<_>>()
                    .join("\n");
            }
            Mutation::UnlabelledVerification => {
                // Mutant: old verification results read as current truth.
                text = verification_label().replace_all(&text, "").into_owned();
            }
            _ => {}
        }
        Ok(SummaryResult {
            content: SummaryContent::Text(text),
            model_calls: 0,
            model_id: "extractive".into(),
        })
    }
}

fn verification_label() -> &'static regex::Regex {
    static R: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    R.get_or_init(|| regex::Regex::new(r"\(historical(?:, turn \d+)?\) ").expect("static regex"))
}

/// Which decisions of the summarizer a mutant breaks (all `false`: the reference).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Breakage {
    /// Nothing of tool results is kept (`drop-tool-result-content`).
    tool_content: bool,
    /// No assistant text is kept (`drop-assistant-text`).
    assistant_text: bool,
    /// Of a repeated user sentence only the newest occurrence is kept
    /// (`keep-newest-occurrence-only`).
    newest_only: bool,
    /// Of the newest request only the first part is kept (`forget-later-request-parts`).
    first_part_only: bool,
}

impl Breakage {
    fn of(m: Option<Mutation>) -> Self {
        Breakage {
            tool_content: m == Some(Mutation::DropToolResultContent),
            assistant_text: m == Some(Mutation::DropAssistantText),
            newest_only: m == Some(Mutation::KeepNewestOccurrenceOnly),
            first_part_only: m == Some(Mutation::ForgetLaterRequestParts),
        }
    }
}

/// The share of the budget a kind of material is given before the rest is filled by rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Section {
    /// Newest request, last command, file in flight.
    Task,
    /// Rules and facts the user stated.
    Statements,
    /// Key lines of tool results.
    ToolLines,
    /// Informative assistant sentences.
    Answers,
    /// Everything else (ordinary prose, omission markers).
    Other,
}

/// One candidate piece of the summary.
#[derive(Debug, Clone)]
struct Item {
    section: Section,
    /// Turn (1-based) it came from.
    turn: usize,
    /// How its line is labelled: `user`, `request`, `assistant`, `answer`, `tool`,
    /// `command`, `in-flight`, `system`.
    tag: &'static str,
    /// Conversation order.
    seq: usize,
    text: String,
    /// Rank (higher first).
    score: i64,
    /// The message (or previous-summary line) it came from: the per-source cap, and the
    /// line a tool result's key lines share.
    source: usize,
    /// The call a tool or command line belongs to (`read_file(src/a.rs)`).
    label: Option<String>,
    /// Occurrence key: items with one key are the same thing said again.
    group: Option<String>,
    /// Exempt from the per-source cap (the parts of the newest request).
    whole: bool,
    /// The newest occurrence of a loop (`occurrences.rs`): routine, so it supersedes
    /// nothing (`updates.rs`) however it is worded.
    routine: bool,
}

impl Item {
    /// The marker that stands where a claim was.
    fn omission(turn: usize, tag: &'static str, seq: usize, source: usize) -> Item {
        Item {
            section: Section::Other,
            turn,
            tag,
            seq,
            text: OMISSION_MARKER.into(),
            score: 1,
            source,
            label: None,
            group: Some(format!("{tag}:omitted")),
            whole: false,
            routine: false,
        }
    }
}

/// The section a user sentence competes in: a rule or a statement of a value has a share of
/// its own; ordinary prose competes for what is left.
fn user_section(sentence: &str) -> Section {
    // A question states nothing, whatever it names: the answer that follows is what is
    // worth keeping (the newest request's parts are task state, ranked apart).
    if text::is_question(sentence) {
        return Section::Other;
    }
    if rules::rule_strength(sentence) >= 3
        || text::specifics(sentence) > 0
        || rules::is_follow_up(sentence)
    {
        Section::Statements
    } else {
        Section::Other
    }
}

/// The section and rank of a user sentence; `listed`: its message is a list of rules or a
/// short message (deliberate), so a sentence in it that has any rule cue, names a value or
/// a name is a statement, however weakly worded. A sentence with neither (an aside, a greeting, or
/// a claim in words no filter knows) is not promoted: memory is no place for it.
fn user_rank(sentence: &str, listed: bool) -> (Section, i64) {
    let score = rules::statement_score(sentence);
    let content = rules::rule_strength(sentence) > 0
        || text::specifics(sentence) > 0
        || text::names_a_name(sentence);
    if listed && content && !rules::is_clear_rule(sentence) && !text::is_question(sentence) {
        (Section::Statements, score + rules::LISTED_BONUS)
    } else {
        (user_section(sentence), score)
    }
}

/// Build the extractive summary text.
pub fn extract(req: &SummaryRequest<'_>) -> String {
    extract_with(req, Breakage::default())
}

/// The extractive summary of what `held` does not already hold: an item whose text `held`
/// accepts is left out before the budget is allocated, so the room goes to the rest (the
/// model strategy's supplement to a model-written summary).
pub fn extract_missing(req: &SummaryRequest<'_>, held: &dyn Fn(&str) -> bool) -> String {
    extract_filtered(req, Breakage::default(), held)
}

/// The summary, with the decisions `broken` names broken (mutants only).
fn extract_with(req: &SummaryRequest<'_>, broken: Breakage) -> String {
    extract_filtered(req, broken, &|_| false)
}

/// [`extract_with`], leaving out the items `held` accepts.
fn extract_filtered(
    req: &SummaryRequest<'_>,
    broken: Breakage,
    held: &dyn Fn(&str) -> bool,
) -> String {
    let mut seq = 0usize;
    let previous = req
        .previous
        .and_then(|p| p.summary.as_deref())
        .map(|s| rolling::previous(s, &mut seq))
        .unwrap_or_default();
    let vocabulary = novelty::Vocabulary::of(
        previous
            .items
            .iter()
            .map(|it| it.text.as_str())
            .chain(req.covered.iter().map(|e| e.message.content.as_str())),
    );
    let collected = collect::collect(req, broken, previous, &vocabulary, seq);
    let mut items = occurrences::keep_distinguishable(collected.items, broken.newest_only);
    let instructions = revisions::Instructions::of(req.instructions);
    for it in &mut items {
        if matches!(it.tag, "user" | "stated") && instructions.revised_by(&it.text) {
            it.section = Section::Statements;
            it.score += REVISION_BONUS;
        }
    }
    items.retain(|it| it.text.is_empty() || !held(&it.text));
    for it in &mut items {
        vocabulary.rank(it);
    }
    updates::supersede(&mut items, &vocabulary);
    layout::write(
        req,
        items,
        &collected.files,
        &collected.refs,
        collected.turns,
    )
}
