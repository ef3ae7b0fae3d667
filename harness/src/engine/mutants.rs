//! Deliberately broken engine variants — test fixtures proving each grader can fail.
//!
//! A [`Mutation`] switches one decision of the reference engine to a known-bad behaviour
//! that real context managers have shipped. The graders' tests (and, later,
//! `ctxbench selftest`) run scenarios against each mutation and require the matching
//! grader to fail. The reference engine with no mutation is what every report measures.

use serde::{Deserialize, Serialize};

/// One known-bad behaviour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mutation {
    /// `warn` sends an over-budget request without a preceding `context.warning`.
    SilentOverBudget,
    /// `warn` sends a request whose mandatory context cannot fit instead of stopping.
    IgnoreMandatoryLimit,
    /// A context stop is reported without its typed reason.
    UntypedLimitReason,
    /// Earlier conversation is dropped from every request (only the current turn is sent).
    DropHistory,
    /// The instruction snapshot is left out of requests.
    DropInstructions,
}

impl Mutation {
    /// Every mutation.
    pub const ALL: [Mutation; 5] = [
        Mutation::SilentOverBudget,
        Mutation::IgnoreMandatoryLimit,
        Mutation::UntypedLimitReason,
        Mutation::DropHistory,
        Mutation::DropInstructions,
    ];

    /// kebab-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Mutation::SilentOverBudget => "silent-over-budget",
            Mutation::IgnoreMandatoryLimit => "ignore-mandatory-limit",
            Mutation::UntypedLimitReason => "untyped-limit-reason",
            Mutation::DropHistory => "drop-history",
            Mutation::DropInstructions => "drop-instructions",
        }
    }
}
