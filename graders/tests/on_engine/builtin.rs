//! The graders on the built-in suite: the reference engine passes, each mutant is caught.

mod builtin_suite {
    use crate::support::judge_with;
    use ctxbench_engine::mutants::Mutation;
    use ctxbench_graders::{grader, GRADER_NAMES};
    use ctxbench_harness::storage::schema::VerdictStatus;
    use ctxbench_harness::Mode;

    const INSTRUCTION_CHANGE: &str = include_str!("../../../scenarios/instruction-change.yaml");
    const UNFIT: &str = include_str!("../../../scenarios/schema-pressure-unfit.yaml");
    const SCHEMA: &str = include_str!("../../../scenarios/schema-pressure.yaml");

    #[test]
    fn every_grader_the_loader_knows_exists() {
        let mut known: Vec<&str> = ctxbench_harness::scenario::KNOWN_GRADERS.to_vec();
        let mut ours: Vec<&str> = GRADER_NAMES.to_vec();
        known.sort();
        ours.sort();
        assert_eq!(known, ours);
        for n in GRADER_NAMES {
            assert_eq!(grader(n).map(|g| g.name()), Some(*n));
        }
    }

    #[tokio::test]
    async fn reference_engine_passes_the_builtin_scenarios_that_fit() {
        for (yaml, mode) in [
            (INSTRUCTION_CHANGE, Mode::Off),
            (INSTRUCTION_CHANGE, Mode::Warn),
            (SCHEMA, Mode::Warn),
            (UNFIT, Mode::Warn),
        ] {
            let (rec, j) = judge_with(yaml, mode, None).await;
            assert!(
                j.passed,
                "{} {mode}: {:?} {:?}",
                rec.scenario, rec.outcome, j.verdicts
            );
        }
    }

    #[tokio::test]
    async fn dropped_instructions_lose_the_newest_rule() {
        let (_, j) = judge_with(
            INSTRUCTION_CHANGE,
            Mode::Warn,
            Some(Mutation::DropInstructions),
        )
        .await;
        let v = j.verdicts.iter().find(|v| v.grader == "recall").unwrap();
        assert_eq!(v.status, VerdictStatus::Fail, "{v:?}");
        assert!(!j.passed);
    }
}

/// SCENARIOS.md §Graders must be able to fail: each invariant grader passes the reference
/// engine on a built-in scenario (compact mode) and fails the deliberately broken variant
/// made for it on the same scenario.
mod mutants_on_builtin_scenarios {
    use crate::support::grade_with;
    use ctxbench_engine::mutants::Mutation;
    use ctxbench_harness::storage::schema::VerdictStatus;
    use ctxbench_harness::Mode;

    async fn caught(yaml: &str, mutation: Mutation, grader: &str) {
        let (rec, v) = grade_with(yaml, Mode::Compact, None, grader).await;
        assert_ne!(
            v.status,
            VerdictStatus::Fail,
            "{}: the reference engine fails {grader}: {v:?}",
            rec.scenario
        );
        let (rec, v) = grade_with(yaml, Mode::Compact, Some(mutation), grader).await;
        assert_eq!(
            v.status,
            VerdictStatus::Fail,
            "{}: {grader} does not catch {}: {v:?}",
            rec.scenario,
            mutation.as_str()
        );
        assert!(!v.evidence.is_empty() && !v.evidence[0].note.is_empty());
    }

    macro_rules! caught {
        ($($name:ident: $file:literal, $mutation:ident, $grader:literal;)*) => {$(
            #[tokio::test]
            async fn $name() {
                caught(
                    include_str!(concat!("../../../scenarios/", $file, ".yaml")),
                    Mutation::$mutation,
                    $grader,
                )
                .await;
            }
        )*};
    }

    caught! {
        silent_over_budget_compact: "tool-pressure", SilentOverBudgetCompact, "budget";
        mutate_transcript: "failure-reason", MutateTranscript, "transcript-immutable";
        split_tool_pairs: "turn-atomicity", SplitToolPairs, "tool-pairs";
        keep_approval_claims: "hostile-history", KeepApprovalClaims, "no-authority-in-checkpoint";
        memory_above_instructions: "hostile-history", MemoryAboveInstructions, "instructions-outrank-history";
        drop_instructions: "instruction-change", DropInstructions, "instructions-outrank-history";
        reload_instructions: "instruction-change", ReloadInstructionsPerAttempt, "instruction-hash-frozen";
        retry_twice: "overflow-twice", RetryTwice, "overflow-no-duplicate";
        duplicate_input: "overflow-retry", DuplicateInputOnRetry, "overflow-no-duplicate";
        mistype_failure_reason: "no-safe-span", MistypeFailureReason, "typed-reason";
        trust_stale_checkpoint: "recovery", TrustStaleCheckpoint, "checkpoint-reuse-valid";
        empty_recap: "oversized-newest-turn", EmptyRecap, "recap-not-empty";
        drop_history: "oversized-newest-turn", DropHistory, "recap-not-empty";
        drop_archive_refs: "archive-refs", DropArchiveRefs, "archive-refs";
        accept_invented_constraints: "model-summary-defects", AcceptInventedConstraints, "no-invented-constraints";
        unbounded_summary_request: "summary-request-overflow", UnboundedSummaryRequest, "summary-request-fits";
    }
}
