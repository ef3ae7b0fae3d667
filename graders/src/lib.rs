//! # ctxbench-graders — verdicts with evidence
//!
//! A grader is a pure function from a [`TrialRecord`] (plus its [`Scenario`]) to a
//! [`Verdict`] a person can follow: request number, step, excerpt, expected vs seen. Graders
//! read the scenario's facts, marked spans and expectations, which the engine never sees.
//!
//! Graders own no I/O and no aggregation: the runner calls [`Graders`] (its [`Judge`]) after
//! each trial, and `ctxbench-reports` aggregates the stored verdicts.
//!
//! | grader | checks |
//! | --- | --- |
//! | [`recall`] | every probed fact is answered correctly (newest statement; "unknown" when never stated) |
//! | [`budget`] | against the scenario's declared budget: in `warn` none over budget without a preceding warning; in `compact` none over budget at all |
//! | [`limit_honest`] | stops carry a protocol reason that what ctxbench saw supports (no refusal of work that fits); a request whose mandatory context cannot fit is never sent (`warn`/`compact`); an expected `limit_reached` happens before any provider call |
//! | [`transcript_immutable`] | every request's verbatim history is in the final transcript in order; the transcript never shrinks; the reported hash chain matches (inv. 6) |
//! | [`tool_pairs`] | every tool call has exactly one result right after it; no orphan result, no split batch (inv. 5) |
//! | [`no_authority`] | marked hostile spans never reach memory, instructions or derived content; never acted on (inv. 2) |
//! | [`instructions_outrank`] | this run's instruction file comes first; no history in an instruction position (inv. 1) |
//! | [`instruction_frozen`] | one byte-identical instruction message per run across all attempts, carrying the file as written for the run (inv. 11) |
//! | [`overflow_no_duplicate`] | one overflow retry per input, input admitted once, no tool call repeated, no retry after visible output (inv. 10) |
//! | [`no_thrash`] | observed compactions per input bounded, each reclaiming enough (no-progress guard) |
//! | [`typed_reason`] | compaction outcomes carry true reasons; manual compact outcomes match their events (seed 004 P3) |
//! | [`secrets_redacted`] | no configured secret in memory, summarization requests, events or outcomes (inv. 7) |
//! | [`checkpoint_reuse`] | a reused checkpoint is the one written and is used; a damaged one is rejected and never used |
//! | [`recap_not_empty`] | no request silently drops every earlier turn (seed 004 oversized newest turn) |
//! | [`archive_refs`] | an `archive://` reference seen in a tool result stays in every later request (seed 004 P1) |
//! | [`no_invented_constraints`] | no rule the model's summaries invented reaches a later request |
//! | [`script_adherence`] | the fake model stayed on script: the user's messages arrived, no improvised reply, every scripted tool call of a completed turn played |
//! | [`summary_request_fits`] | no summarization request is sent that cannot fit the window (claude-code #9400, #23047) |
//!
//! Every grader is proven able to fail by a deliberately broken engine variant
//! (`ctxbench_harness::sut::mutants`) in its tests.
#![deny(missing_docs)]

pub mod archive_refs;
pub mod budget;
pub mod checkpoint_reuse;
pub(crate) mod common;
pub mod instruction_frozen;
pub mod instructions_outrank;
pub mod limit_honest;
pub mod no_authority;
pub mod no_invented_constraints;
pub mod no_thrash;
pub mod opaque_hashed;
pub mod overflow_no_duplicate;
pub mod read_back;
pub mod recall;
pub mod recap_not_empty;
pub mod script_adherence;
pub mod secrets_redacted;
pub mod summary_request_fits;
pub mod tool_pairs;
pub mod transcript_immutable;
pub mod typed_reason;
pub mod verification_historical;

use ctxbench_harness::record::TrialRecord;
use ctxbench_harness::runner::{Judge, Judgement};
use ctxbench_harness::scenario::{ExpectedOutcome, Scenario};
use ctxbench_harness::storage::schema::{Evidence, OutcomeStatus, Verdict, VerdictStatus};

/// What a grader sees.
pub struct GradeContext<'a> {
    /// The scenario (facts, expectations).
    pub scenario: &'a Scenario,
    /// The trial.
    pub record: &'a TrialRecord,
    /// The grader's parameters from the scenario (`null` when none).
    pub params: &'a serde_json::Value,
    /// The trial's requests as the model read them, shared by every grader of the trial.
    pub read: &'a read_back::ReadBack<'a>,
}

/// One grader.
pub trait Grader: Send + Sync {
    /// Its name in scenario files, e.g. `recall`.
    fn name(&self) -> &'static str;
    /// Grade one trial.
    fn grade(&self, ctx: &GradeContext<'_>) -> Verdict;
    /// Grade one trial on its own, outside the standard judge (tests, tools): the trial's
    /// read-back is built for this grader alone.
    fn grade_trial(
        &self,
        scenario: &Scenario,
        record: &TrialRecord,
        params: &serde_json::Value,
    ) -> Verdict {
        let rebuilt = read_back::rebuilt(record);
        let read = read_back::ReadBack::new(scenario, record, &rebuilt);
        self.grade(&GradeContext {
            scenario,
            record,
            params,
            read: &read,
        })
    }
}

/// Names of every grader, in registry order.
pub const GRADER_NAMES: &[&str] = &[
    "recall",
    "budget",
    "limit-honest",
    "transcript-immutable",
    "tool-pairs",
    "no-authority-in-checkpoint",
    "instructions-outrank-history",
    "instruction-hash-frozen",
    "overflow-no-duplicate",
    "no-thrash",
    "typed-reason",
    "secrets-redacted",
    "checkpoint-reuse-valid",
    "recap-not-empty",
    "archive-refs",
    "no-invented-constraints",
    "summary-request-fits",
    "verification-historical",
    "opaque-items-hashed",
    "script-adherence",
];

/// The grader with this name.
pub fn grader(name: &str) -> Option<Box<dyn Grader>> {
    match name {
        "recall" => Some(Box::new(recall::Recall)),
        "budget" => Some(Box::new(budget::Budget)),
        "limit-honest" => Some(Box::new(limit_honest::LimitHonest)),
        "transcript-immutable" => Some(Box::new(transcript_immutable::TranscriptImmutable)),
        "tool-pairs" => Some(Box::new(tool_pairs::ToolPairs)),
        "no-authority-in-checkpoint" => Some(Box::new(no_authority::NoAuthorityInCheckpoint)),
        "instructions-outrank-history" => {
            Some(Box::new(instructions_outrank::InstructionsOutrankHistory))
        }
        "instruction-hash-frozen" => Some(Box::new(instruction_frozen::InstructionHashFrozen)),
        "overflow-no-duplicate" => Some(Box::new(overflow_no_duplicate::OverflowNoDuplicate)),
        "no-thrash" => Some(Box::new(no_thrash::NoThrash)),
        "typed-reason" => Some(Box::new(typed_reason::TypedReason)),
        "secrets-redacted" => Some(Box::new(secrets_redacted::SecretsRedacted)),
        "checkpoint-reuse-valid" => Some(Box::new(checkpoint_reuse::CheckpointReuseValid)),
        "recap-not-empty" => Some(Box::new(recap_not_empty::RecapNotEmpty)),
        "archive-refs" => Some(Box::new(archive_refs::ArchiveRefs)),
        "no-invented-constraints" => Some(Box::new(no_invented_constraints::NoInventedConstraints)),
        "summary-request-fits" => Some(Box::new(summary_request_fits::SummaryRequestFits)),
        "opaque-items-hashed" => Some(Box::new(opaque_hashed::OpaqueItemsHashed)),
        "script-adherence" => Some(Box::new(script_adherence::ScriptAdherence)),
        "verification-historical" => {
            Some(Box::new(verification_historical::VerificationHistorical))
        }
        _ => None,
    }
}

/// Evidence items kept per verdict: enough to follow, bounded for big runs.
pub const MAX_EVIDENCE: usize = 10;

/// Build a verdict from failures found (empty → pass).
pub(crate) fn verdict(grader: &str, pass_summary: String, failures: Vec<Evidence>) -> Verdict {
    if failures.is_empty() {
        Verdict {
            grader: grader.into(),
            status: VerdictStatus::Pass,
            summary: pass_summary,
            evidence: Vec::new(),
        }
    } else {
        let n = failures.len();
        let first = failures[0].note.clone();
        Verdict {
            grader: grader.into(),
            status: VerdictStatus::Fail,
            summary: format!("{n} violation(s); first: {first}"),
            evidence: failures.into_iter().take(MAX_EVIDENCE).collect(),
        }
    }
}

/// A verdict for a grader with nothing to check.
pub(crate) fn skip(grader: &str, why: &str) -> Verdict {
    Verdict {
        grader: grader.into(),
        status: VerdictStatus::Skip,
        summary: why.into(),
        evidence: Vec::new(),
    }
}

/// A short, single-line excerpt of a text (first `max` chars).
pub(crate) fn excerpt(text: &str, max: usize) -> String {
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= max {
        one_line
    } else {
        let mut s: String = one_line.chars().take(max).collect();
        s.push('…');
        s
    }
}

/// The standard judge: applies the scenario's graders (filtered by mode) and the expected
/// outcome.
#[derive(Debug, Default, Clone, Copy)]
pub struct Graders;

impl Judge for Graders {
    fn judge(&self, scenario: &Scenario, record: &TrialRecord) -> Judgement {
        let null = serde_json::Value::Null;
        let rebuilt = read_back::rebuilt(record);
        let read = read_back::ReadBack::new(scenario, record, &rebuilt);
        let mut verdicts = Vec::new();
        for spec in &scenario.expect.graders {
            if !spec.modes.is_empty() && !spec.modes.contains(&record.mode) {
                continue;
            }
            let v = match grader(&spec.name) {
                Some(g) => g.grade(&GradeContext {
                    scenario,
                    record,
                    params: if spec.params.is_null() {
                        &null
                    } else {
                        &spec.params
                    },
                    read: &read,
                }),
                None => Verdict {
                    grader: spec.name.clone(),
                    status: VerdictStatus::Fail,
                    summary: format!("unknown grader `{}`", spec.name),
                    evidence: Vec::new(),
                },
            };
            verdicts.push(v);
        }
        // Every other grader applies too, with no parameters: the invariants hold for any
        // scenario, and a custom suite should not have to remember to ask for them.
        for name in GRADER_NAMES {
            if scenario.expect.graders.iter().any(|g| g.name == *name) {
                continue;
            }
            if let Some(g) = grader(name) {
                verdicts.push(g.grade(&GradeContext {
                    scenario,
                    record,
                    params: &null,
                    read: &read,
                }));
            }
        }
        let recall = recall::recall_rows(scenario, record);
        let outcome_ok = outcome_matches(
            scenario.expect.outcome_for(record.mode),
            record.outcome.status,
        );
        // A crash, hang or protocol break of the system under test is never expected.
        let passed = record.outcome.status != OutcomeStatus::Errored
            && !record.outcome.sut_fault
            && outcome_ok
            && verdicts.iter().all(|v| v.status != VerdictStatus::Fail);
        Judgement {
            verdicts,
            recall,
            passed,
        }
    }
}

/// Whether a terminal status satisfies the expected outcome.
pub fn outcome_matches(expected: &ExpectedOutcome, status: OutcomeStatus) -> bool {
    expected.admits(status)
}
