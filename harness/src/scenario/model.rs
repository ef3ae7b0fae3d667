//! The validated, not yet expanded script: what [`super::Scenario`] keeps between loading and
//! [`super::Scenario::instantiate`].
//!
//! Every reference in here has been checked at load time (facts exist, tools exist, repeat
//! counts are bounded, turn grouping is valid), so instantiation cannot fail.

use super::compiled::Corruption;
use super::template::{FillerKind, Template};

/// A text: literal with placeholders, or generated filler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Content {
    /// Text with placeholders.
    Text(Template),
    /// About `tokens` tokens of seeded filler.
    Filler { tokens: u64, kind: FillerKind },
}

/// One scripted tool call of a round.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CallSpec {
    /// Tool name (exists in the catalogue).
    pub(crate) name: String,
    /// JSON arguments; string leaves are templates, substituted per trial.
    pub(crate) args: ArgValue,
    /// What the tool returns.
    pub(crate) result: Content,
}

/// A JSON value whose strings carry placeholders.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ArgValue {
    /// A non-string JSON leaf, kept as is.
    Plain(serde_json::Value),
    /// A string leaf.
    Text(Template),
    /// An array.
    Array(Vec<ArgValue>),
    /// An object; keys in their source order.
    Object(Vec<(String, ArgValue)>),
}

/// How an `edit_instructions` step changes the instruction text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum InstructionEdit {
    /// Replace the whole text.
    Set(Template),
    /// Append on a new line.
    Append(Template),
}

/// One step of the unexpanded script.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ScriptStep {
    /// A user message; opens a turn.
    User(Template),
    /// A probe of these facts; a whole turn by itself.
    Probe(Vec<String>),
    /// The assistant's final text; closes the open turn.
    Assistant(Content),
    /// One round of tool calls (a parallel batch when several) in the open turn.
    ToolCalls(Vec<CallSpec>),
    /// Persist, drop memory, reload.
    Restart,
    /// Change the instruction file.
    EditInstructions(InstructionEdit),
    /// A manual compact command; `dry_run` only previews.
    Compact { dry_run: bool },
    /// Damage the persisted checkpoint before a later restart.
    CorruptCheckpoint(Corruption),
    /// `times` copies of `steps`; `{i}` inside is the 1-based copy number.
    Repeat { times: u64, steps: Vec<ScriptStep> },
}
