//! Deliberately broken engine variants — test fixtures proving each grader can fail.
//!
//! A [`Mutation`] switches one decision of the reference engine to a known-bad behaviour
//! that real context managers have shipped. The graders' tests (and, later,
//! `ctxbench selftest`) run scenarios against each mutation and require the matching
//! grader to fail. The reference engine with no mutation is what every report measures:
//! every hook is a small `if mutation == Some(…)` branch at one decision point, and with
//! `None` the engine's behaviour is unchanged.
//!
//! | mutation | broken decision | grader that must fail |
//! | --- | --- | --- |
//! | `silent-over-budget` | `warn` sends over budget without a warning | `budget` |
//! | `silent-over-budget-compact` | `compact` sends over budget without compacting | `budget` |
//! | `ignore-mandatory-limit` | mandatory context that cannot fit is sent | `limit-honest` |
//! | `untyped-limit-reason` | a context stop has no reason | `limit-honest` |
//! | `drop-history` | only the current turn is sent | `recall` |
//! | `drop-instructions` | the instruction snapshot is left out | `recall`, `instructions-outrank-history` |
//! | `mutate-transcript` | compaction rewrites the summarized messages in the ledger | `transcript-immutable` |
//! | `split-tool-pairs` | the verbatim tail starts mid-turn, after a tool call | `tool-pairs` |
//! | `keep-approval-claims` | the extractive summarizer keeps claim sentences | `no-authority-in-checkpoint` |
//! | `memory-above-instructions` | the checkpoint is placed first, unlabelled | `instructions-outrank-history` |
//! | `reload-instructions-per-attempt` | instructions are re-read before every request | `instruction-hash-frozen` |
//! | `retry-twice` | a second provider overflow is recovered too | `overflow-no-duplicate` |
//! | `duplicate-input-on-retry` | the user message is appended again before a retry | `overflow-no-duplicate` |
//! | `loop-compaction` | the no-progress guards are off | `no-thrash` |
//! | `mistype-failure-reason` | every compaction failure is reported `summarizer_failed` | `typed-reason` |
//! | `leak-secret` | the summarizer gets no redaction | `secrets-redacted` |
//! | `trust-stale-checkpoint` | a checkpoint rejected on open is reused anyway | `checkpoint-reuse-valid` |
//! | `empty-recap` | when no verbatim turn fits the tail (an oversized newest turn), the checkpoint is left out too | `recap-not-empty` |
//! | `drop-archive-refs` | summaries and tool projections drop `archive://` references | `archive-refs` |
//! | `wrap-full-transcript` | the Codex wrapper serializes the whole transcript, not the active view | `recall` (the engine can only stop) |
//! | `unlabelled-verification` | verification results in memory lose their historical label | `verification-historical` |
//! | `opaque-in-trace` | a trace event carries an opaque item's payload | `opaque-items-hashed` |
//! | `accept-invented-constraints` | the model summarizer does not check that a summary's constraints are traceable to the conversation | `no-invented-constraints` |
//! | `unbounded-summary-request` | the model summarizer sends its request however large: no input bound, and the summary it asks for is sized by the configured target alone, not by what the window leaves | `summary-request-fits` |
//! | `drop-tool-result-content` | the extractive checkpoint keeps nothing of tool results | `recall` |
//! | `drop-assistant-text` | the extractive checkpoint keeps no assistant text | `recall` |
//! | `keep-newest-occurrence-only` | of a user sentence said several times, only the newest occurrence survives in the checkpoint | `recall` |
//! | `forget-later-request-parts` | of the newest (multi-part) user request only the first part survives compaction | `recall` |

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
    /// `compact` sends an over-budget request as it is, without pruning or compacting.
    SilentOverBudgetCompact,
    /// A completed compaction rewrites the messages it summarized in the canonical ledger
    /// (destructive compaction; seed 000 invariant 6).
    MutateTranscript,
    /// Compaction picks a verbatim tail that starts inside a turn, right after an assistant
    /// tool call, so its results lose their call (seed 000 invariant 5, seed 004 turn
    /// atomicity).
    SplitToolPairs,
    /// The extractive summarizer keeps approval/authority claims verbatim (invariant 2).
    KeepApprovalClaims,
    /// The checkpoint memory is placed above the instructions, without its untrusted label
    /// (invariant 1).
    MemoryAboveInstructions,
    /// The instruction file is re-read before every physical request, and each re-read is
    /// stamped with the round and attempt, so the snapshot changes within a run
    /// (invariant 11).
    ReloadInstructionsPerAttempt,
    /// A second provider overflow in the same turn is recovered (compact and retry) too
    /// (invariant 10: one retry per input).
    RetryTwice,
    /// Overflow recovery appends the admitted user message again before retrying
    /// (invariant 10: no duplicated input).
    DuplicateInputOnRetry,
    /// The no-progress guards are off: compaction runs however little it reclaims, on a
    /// source already compacted, and past the per-input limit (seed 000 §No-progress guard).
    LoopCompaction,
    /// Every compaction failure is reported as `summarizer_failed` (seed 004 P3).
    MistypeFailureReason,
    /// The summarizer is handed no redaction, so secrets reach the checkpoint
    /// (invariant 7).
    LeakSecret,
    /// A stored checkpoint rejected on open is reused anyway (validation skipped).
    TrustStaleCheckpoint,
    /// When the verbatim tail comes out empty (the newest turn alone exceeds the tail
    /// budget), requests carry neither the tail nor the checkpoint — only the instructions
    /// and the current turn (seed 004: an oversized newest turn empties the session recap).
    EmptyRecap,
    /// Summaries and tool-output projections drop `archive://` references (seed 004 P1).
    DropArchiveRefs,
    /// The model summarizer skips the traceability check, so a summary that invents a
    /// constraint becomes checkpoint memory (opencode #50816, codex #27731).
    AcceptInventedConstraints,
    /// The model summarizer sends its summarization request without checking it against its
    /// input bound: a request that cannot fit the window is sent anyway (claude-code #9400,
    /// #23047: the compaction request itself overflows).
    UnboundedSummaryRequest,
    /// The "Codex wrapper" serializes the whole transcript into its prompt instead of the
    /// bounded active view (seed 000 §Forge engine coverage).
    WrapFullTranscript,
    /// The extractive summarizer drops the "historical" label of verification results
    /// (seed 000 invariant 3).
    UnlabelledVerification,
    /// `context.compaction.completed` carries an opaque provider item's payload instead of
    /// its hash (seed 000 invariant 12).
    OpaqueInTrace,
    /// The extractive checkpoint keeps nothing of tool results: no key lines (settings,
    /// versions, test outcomes, errors), not even the last command's output — how
    /// summarizers that treat tool output as noise lose a value the agent looked up.
    DropToolResultContent,
    /// The extractive checkpoint keeps no assistant text: what the agent answered and
    /// decided is gone after compaction (only what the user said survives).
    DropAssistantText,
    /// Of a user sentence said several times (equal but for its numbers), only the newest
    /// occurrence survives in the extractive checkpoint: "what did I ask first?" and the
    /// turns of earlier occurrences are lost.
    KeepNewestOccurrenceOnly,
    /// Of the newest user request covered by a compaction, only its first part (sentence or
    /// enumerated item) survives in the extractive checkpoint: a multi-part request loses
    /// its later parts.
    ForgetLaterRequestParts,
}

impl Mutation {
    /// Every mutation.
    pub const ALL: [Mutation; 28] = [
        Mutation::SilentOverBudget,
        Mutation::IgnoreMandatoryLimit,
        Mutation::UntypedLimitReason,
        Mutation::DropHistory,
        Mutation::DropInstructions,
        Mutation::SilentOverBudgetCompact,
        Mutation::MutateTranscript,
        Mutation::SplitToolPairs,
        Mutation::KeepApprovalClaims,
        Mutation::MemoryAboveInstructions,
        Mutation::ReloadInstructionsPerAttempt,
        Mutation::RetryTwice,
        Mutation::DuplicateInputOnRetry,
        Mutation::LoopCompaction,
        Mutation::MistypeFailureReason,
        Mutation::LeakSecret,
        Mutation::TrustStaleCheckpoint,
        Mutation::EmptyRecap,
        Mutation::DropArchiveRefs,
        Mutation::AcceptInventedConstraints,
        Mutation::UnboundedSummaryRequest,
        Mutation::WrapFullTranscript,
        Mutation::UnlabelledVerification,
        Mutation::OpaqueInTrace,
        Mutation::DropToolResultContent,
        Mutation::DropAssistantText,
        Mutation::KeepNewestOccurrenceOnly,
        Mutation::ForgetLaterRequestParts,
    ];

    /// kebab-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Mutation::SilentOverBudget => "silent-over-budget",
            Mutation::IgnoreMandatoryLimit => "ignore-mandatory-limit",
            Mutation::UntypedLimitReason => "untyped-limit-reason",
            Mutation::DropHistory => "drop-history",
            Mutation::DropInstructions => "drop-instructions",
            Mutation::SilentOverBudgetCompact => "silent-over-budget-compact",
            Mutation::MutateTranscript => "mutate-transcript",
            Mutation::SplitToolPairs => "split-tool-pairs",
            Mutation::KeepApprovalClaims => "keep-approval-claims",
            Mutation::MemoryAboveInstructions => "memory-above-instructions",
            Mutation::ReloadInstructionsPerAttempt => "reload-instructions-per-attempt",
            Mutation::RetryTwice => "retry-twice",
            Mutation::DuplicateInputOnRetry => "duplicate-input-on-retry",
            Mutation::LoopCompaction => "loop-compaction",
            Mutation::MistypeFailureReason => "mistype-failure-reason",
            Mutation::LeakSecret => "leak-secret",
            Mutation::TrustStaleCheckpoint => "trust-stale-checkpoint",
            Mutation::EmptyRecap => "empty-recap",
            Mutation::DropArchiveRefs => "drop-archive-refs",
            Mutation::AcceptInventedConstraints => "accept-invented-constraints",
            Mutation::UnboundedSummaryRequest => "unbounded-summary-request",
            Mutation::WrapFullTranscript => "wrap-full-transcript",
            Mutation::UnlabelledVerification => "unlabelled-verification",
            Mutation::OpaqueInTrace => "opaque-in-trace",
            Mutation::DropToolResultContent => "drop-tool-result-content",
            Mutation::DropAssistantText => "drop-assistant-text",
            Mutation::KeepNewestOccurrenceOnly => "keep-newest-occurrence-only",
            Mutation::ForgetLaterRequestParts => "forget-later-request-parts",
        }
    }

    /// The broken decision, in one line (the table above).
    pub fn description(self) -> &'static str {
        match self {
            Mutation::SilentOverBudget => "warn sends over budget without a warning",
            Mutation::SilentOverBudgetCompact => "compact sends over budget without compacting",
            Mutation::IgnoreMandatoryLimit => "mandatory context that cannot fit is sent",
            Mutation::UntypedLimitReason => "a context stop has no reason",
            Mutation::DropHistory => "only the current turn is sent",
            Mutation::DropInstructions => "the instruction snapshot is left out",
            Mutation::MutateTranscript => "compaction rewrites the summarized messages in the ledger",
            Mutation::SplitToolPairs => "the verbatim tail starts mid-turn, after a tool call",
            Mutation::KeepApprovalClaims => "the extractive summarizer keeps claim sentences",
            Mutation::MemoryAboveInstructions => "the checkpoint is placed first, unlabelled",
            Mutation::ReloadInstructionsPerAttempt => "instructions are re-read before every request",
            Mutation::RetryTwice => "a second provider overflow is recovered too",
            Mutation::DuplicateInputOnRetry => "the user message is appended again before a retry",
            Mutation::LoopCompaction => "the no-progress guards are off",
            Mutation::MistypeFailureReason => "every compaction failure is reported summarizer_failed",
            Mutation::LeakSecret => "the summarizer gets no redaction",
            Mutation::TrustStaleCheckpoint => "a checkpoint rejected on open is reused anyway",
            Mutation::EmptyRecap => "when no verbatim turn fits the tail (an oversized newest turn), the checkpoint is left out too",
            Mutation::DropArchiveRefs => "summaries and tool projections drop archive:// references",
            Mutation::WrapFullTranscript => "the Codex wrapper serializes the whole transcript, not the active view",
            Mutation::UnlabelledVerification => "verification results in memory lose their historical label",
            Mutation::OpaqueInTrace => "a trace event carries an opaque item's payload",
            Mutation::AcceptInventedConstraints => "the model summarizer does not check that a summary's constraints are traceable to the conversation",
            Mutation::UnboundedSummaryRequest => "the model summarizer sends its request however large: no input bound, and the summary it asks for is sized by the configured target alone, not by what the window leaves",
            Mutation::DropToolResultContent => "the extractive checkpoint keeps nothing of tool results",
            Mutation::DropAssistantText => "the extractive checkpoint keeps no assistant text",
            Mutation::KeepNewestOccurrenceOnly => "of a user sentence said several times, only the newest occurrence survives in the checkpoint",
            Mutation::ForgetLaterRequestParts => "of the newest multi-part user request only the first part survives compaction",
        }
    }

    /// The graders meant to catch this mutant (the table above). `selftest` counts a catch
    /// by any other grader as incidental, not as proof.
    pub fn intended_graders(self) -> &'static [&'static str] {
        match self {
            Mutation::SilentOverBudget | Mutation::SilentOverBudgetCompact => &["budget"],
            Mutation::IgnoreMandatoryLimit | Mutation::UntypedLimitReason => &["limit-honest"],
            Mutation::DropHistory
            | Mutation::WrapFullTranscript
            | Mutation::DropToolResultContent
            | Mutation::DropAssistantText
            | Mutation::KeepNewestOccurrenceOnly
            | Mutation::ForgetLaterRequestParts => &["recall"],
            Mutation::DropInstructions => &["recall", "instructions-outrank-history"],
            Mutation::MutateTranscript => &["transcript-immutable"],
            Mutation::SplitToolPairs => &["tool-pairs"],
            Mutation::KeepApprovalClaims => &["no-authority-in-checkpoint"],
            Mutation::MemoryAboveInstructions => &["instructions-outrank-history"],
            Mutation::ReloadInstructionsPerAttempt => &["instruction-hash-frozen"],
            Mutation::RetryTwice | Mutation::DuplicateInputOnRetry => &["overflow-no-duplicate"],
            Mutation::LoopCompaction => &["no-thrash"],
            Mutation::MistypeFailureReason => &["typed-reason"],
            Mutation::LeakSecret => &["secrets-redacted"],
            Mutation::TrustStaleCheckpoint => &["checkpoint-reuse-valid"],
            Mutation::EmptyRecap => &["recap-not-empty"],
            Mutation::DropArchiveRefs => &["archive-refs"],
            Mutation::UnlabelledVerification => &["verification-historical"],
            Mutation::OpaqueInTrace => &["opaque-items-hashed"],
            Mutation::AcceptInventedConstraints => &["no-invented-constraints"],
            Mutation::UnboundedSummaryRequest => &["summary-request-fits"],
        }
    }

    /// The mutation with this kebab-case name.
    pub fn from_name(name: &str) -> Option<Mutation> {
        Mutation::ALL.into_iter().find(|m| m.as_str() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_match_serde() {
        let mut seen = std::collections::HashSet::new();
        for m in Mutation::ALL {
            assert!(seen.insert(m.as_str()), "duplicate name {}", m.as_str());
            assert_eq!(Mutation::from_name(m.as_str()), Some(m));
            assert_eq!(
                serde_json::to_value(m).unwrap(),
                serde_json::Value::String(m.as_str().into())
            );
        }
        assert_eq!(Mutation::from_name("no-such-mutation"), None);
    }
}
