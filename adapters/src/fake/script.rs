//! What the fake provider knows about a scenario: turns to play, facts to look for, faults.
//!
//! The harness compiles a scenario into a [`FakeScript`]. Only the fake provider (and the
//! graders) ever see it; the engine under test never does.

use serde::{Deserialize, Serialize};

use super::summary::{FakeSummaryDefect, SummaryProfile};
use super::taint::FakeHostile;
use crate::Markup;

/// Everything the fake provider plays for one trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FakeScript {
    /// The model id the provider answers as.
    pub model: String,
    /// Context window the provider enforces, in its own ("true") tokens.
    pub context_window: u64,
    /// Turns in script order, matched by the text of the request's latest user message.
    pub turns: Vec<FakeTurn>,
    /// Facts the provider can look for when asked a probe (and for nothing else: its
    /// summaries never read them).
    pub facts: Vec<FakeFact>,
    /// Marked hostile spans it acts on when it finds them in an authoritative position.
    #[serde(default)]
    pub hostile: Vec<FakeHostile>,
    /// Injected faults.
    pub faults: Vec<FakeFault>,
    /// How faithfully it summarizes when asked to.
    #[serde(default)]
    pub summary_profile: SummaryProfile,
    /// Defects of the summaries it writes.
    #[serde(default)]
    pub summary_defects: Vec<FakeSummaryDefect>,
    /// The memory markup the system under test declared (none: the undeclared rule).
    #[serde(default)]
    pub memory: Option<Markup>,
    /// The summary-request marker the system under test declared (none: the default rule).
    #[serde(default)]
    pub summary_marker: Option<String>,
    /// Every version of the instruction file, for the undeclared memory rule.
    #[serde(default)]
    pub instructions: Vec<String>,
    /// Tie-break seed of its summaries.
    #[serde(default)]
    pub seed: u64,
    /// Whether the provider offers provider-native opaque compaction.
    #[serde(default)]
    pub native_compaction: bool,
    /// Factor on every count of the provider's tokenizer (window enforcement, reported
    /// usage, summary length): `1.0` is the [`FakeTokenizer`](super::FakeTokenizer) rule;
    /// `1.55` plays a vendor whose tokenizer a client's tiktoken estimate undercounts by
    /// 1.55×. Counts are rounded up.
    #[serde(default = "unit_scale")]
    pub token_scale: f64,
}

fn unit_scale() -> f64 {
    1.0
}

impl Default for FakeScript {
    fn default() -> Self {
        FakeScript {
            model: String::new(),
            context_window: 0,
            turns: Vec::new(),
            facts: Vec::new(),
            hostile: Vec::new(),
            faults: Vec::new(),
            summary_profile: SummaryProfile::default(),
            summary_defects: Vec::new(),
            memory: None,
            summary_marker: None,
            instructions: Vec::new(),
            seed: 0,
            native_compaction: false,
            token_scale: unit_scale(),
        }
    }
}

/// One user turn and the assistant messages the provider plays for it, one per round.
///
/// Round `k` is the provider's `k`-th answer within the turn: the number of assistant
/// messages that follow the latest user message in the request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FakeTurn {
    /// The exact user text that opens the turn.
    pub user: String,
    /// One reply per round. After the last one, the provider repeats a short final text.
    pub replies: Vec<FakeReply>,
}

/// One scripted assistant answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FakeReply {
    /// Plain assistant text.
    Text {
        /// The text.
        text: String,
    },
    /// Tool calls (a parallel batch when more than one).
    ToolCalls {
        /// Calls in order; ids are assigned deterministically by the provider.
        calls: Vec<FakeToolCall>,
    },
    /// Answer one question per fact, from the request only, as numbered lines
    /// `1. <answer>` in this order (see [`super::probe`] for the answer form).
    Probe {
        /// Fact ids, in question order.
        facts: Vec<String>,
    },
}

/// One scripted tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FakeToolCall {
    /// Tool name.
    pub name: String,
    /// JSON arguments.
    pub arguments: serde_json::Value,
}

/// A fact as the provider looks for it (see [`super::probe`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FakeFact {
    /// Fact id.
    pub id: String,
    /// The sentences that state the fact, version 0 first; later versions supersede earlier
    /// ones. Empty for a fact that is never stated (an abstention probe).
    pub statements: Vec<String>,
    /// The short answer value of each version (empty: presence is the statement itself).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    /// What the fact is about: when set, a value counts only in a clause that names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub about: Option<String>,
}

/// A fault the provider injects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FakeFault {
    /// Reject the N-th physical request (1-based) with a context overflow, whatever its size:
    /// what an estimator undercount looks like from the client.
    OverflowAtRequest {
        /// 1-based request number within the trial.
        request: u64,
    },
    /// Produce some assistant text, then fail the N-th request with a context overflow that
    /// carries the partial output: a client must not retry it.
    OverflowAfterPartialOutput {
        /// 1-based request number within the trial.
        request: u64,
    },
}
