//! Mutation testing of the graders: run a suite against a system under test and against
//! each of its deliberately broken [`Variant`]s, and report which graders caught which
//! variant.
//!
//! Every variant declares the graders meant to catch it. A variant is **caught** only when
//! one of those graders fails on a trial where it passed against the unbroken system (same
//! scenario, mode and seed) and the variant's trial was not errored — or, for `recall` (a
//! measure, not an invariant), when the variant misses a probe the unbroken system answered
//! right on that trial, whatever else either of them missed. Any other grader that
//! starts failing is an *incidental* catch: reported, never counted — a variant that only
//! crashes, or trips an unrelated grader, proves nothing about the grader meant for it.
//!
//! A variant's trial without a matching reference trial (the reference trial errored or is
//! missing) is a harness problem and is reported as such, never treated as an empty
//! baseline. With zero variants there is no score at all.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use tokio::sync::Semaphore;

use crate::driver::{run_trial, ProviderSpec, TrialSpec};
use crate::runner::Judge;
use crate::scenario::Scenario;
use crate::storage::schema::{OutcomeStatus, VerdictStatus};
use ctxbench_sut::{Mode, Variant};

/// What one variant did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MutantResult {
    /// The variant.
    pub variant: Variant,
    /// Intended graders that caught it (failed where the reference passed).
    pub caught_by: BTreeSet<String>,
    /// Other graders that newly failed (reported, not counted).
    pub incidental: BTreeSet<String>,
    /// Trials where an intended grader caught it, e.g. `hostile-history/compact`.
    pub caught_in: BTreeSet<String>,
    /// Trials of this variant that errored (infrastructure or harness), which prove nothing.
    pub errored_in: BTreeSet<String>,
}

impl MutantResult {
    /// Whether an intended grader caught it.
    pub fn caught(&self) -> bool {
        !self.caught_by.is_empty()
    }
}

/// The selftest result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelftestReport {
    /// Trials run against the unbroken system.
    pub reference_trials: usize,
    /// `(trial, grader)` pairs where an invariant grader failed against the unbroken system
    /// (recall failures are data, not defects, and are not listed), and `(trial, "outcome
    /// (…)")` where its terminal outcome is not the one the scenario expects in that mode.
    pub reference_failures: Vec<(String, String)>,
    /// `(trial, detail)` of reference trials that errored: no baseline for that trial.
    pub reference_errors: Vec<(String, String)>,
    /// One result per variant, in the order given.
    pub mutants: Vec<MutantResult>,
}

impl SelftestReport {
    /// Variants caught by an intended grader / variants run; `None` with no variants.
    pub fn score(&self) -> Option<f64> {
        if self.mutants.is_empty() {
            return None;
        }
        let caught = self.mutants.iter().filter(|m| m.caught()).count();
        Some(caught as f64 / self.mutants.len() as f64)
    }

    /// Whether the unbroken system passed every invariant grader with no errored trial, and
    /// every variant (at least one) was caught by an intended grader.
    pub fn passed(&self) -> bool {
        self.reference_failures.is_empty()
            && self.reference_errors.is_empty()
            && !self.mutants.is_empty()
            && self.mutants.iter().all(MutantResult::caught)
    }
}

type Key = (String, Mode);

/// The recall grader's name.
const RECALL: &str = "recall";

/// One judged trial: its failing graders, or why it proves nothing.
struct Judged {
    failing: BTreeSet<String>,
    /// The probes answered right (fact, probe step), when the recall grader applies.
    recalled: Option<BTreeSet<(String, u64)>>,
    errored: Option<String>,
    /// The terminal outcome the scenario does not expect in this mode, described.
    unexpected: Option<String>,
}

/// The graders a variant's trial fails that the reference's trial (same scenario, mode and
/// seed) did not. Recall is a measure, not an invariant: a variant that misses a probe the
/// reference answered right fails it, even where the reference missed others and so failed
/// the grader too.
fn newly_failing(base: &Judged, judged: &Judged) -> BTreeSet<String> {
    let mut failing: BTreeSet<String> = judged.failing.difference(&base.failing).cloned().collect();
    if let (Some(b), Some(m)) = (&base.recalled, &judged.recalled) {
        if !b.is_subset(m) {
            failing.insert(RECALL.to_string());
        }
    }
    failing
}

/// Run the selftest of `sut` (its `variants`, by name). `modes` limits which modes run
/// (callers usually pass warn and compact: `off` has no context decisions to break). An
/// external system gets each variant through the protocol's test-only
/// `start.test.mutation`.
pub async fn selftest(
    scenarios: &[Arc<Scenario>],
    modes: &[Mode],
    variants: &[Variant],
    seed: u64,
    concurrency: usize,
    judge: Arc<dyn Judge>,
    sut: crate::external::SutSpec,
) -> SelftestReport {
    let services = crate::connect::Services::new(sut);
    let mut specs: Vec<(Option<usize>, TrialSpec)> = Vec::new();
    let names = std::iter::once(None).chain((0..variants.len()).map(Some));
    for v in names {
        for s in scenarios {
            for &mode in modes.iter().filter(|m| s.modes.contains(m)) {
                specs.push((
                    v,
                    TrialSpec {
                        scenario: s.clone(),
                        mode,
                        trial: 0,
                        run_seed: seed,
                        provider: ProviderSpec::Fake,
                        variant: v.map(|i| variants[i].name.clone()),
                        services: services.clone(),
                    },
                ));
            }
        }
    }
    let permits = Arc::new(Semaphore::new(concurrency.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    for (v, spec) in specs {
        let permits = permits.clone();
        let judge = judge.clone();
        tasks.spawn(async move {
            let _p = permits.acquire_owned().await.ok();
            let judged = match crate::runner::trial_workdir() {
                Ok(dir) => {
                    let record = run_trial(&spec, dir.path()).await;
                    let errored = (record.outcome.status == OutcomeStatus::Errored)
                        .then(|| format!("{}: {}", record.outcome.reason, record.outcome.detail));
                    let expected = spec.scenario.expect.outcome_for(spec.mode);
                    let unexpected = (!expected.admits(record.outcome.status)).then(|| {
                        format!(
                            "expected {}, got {:?} {}",
                            crate::runner::expected_text(expected),
                            record.outcome.status,
                            record.outcome.reason
                        )
                    });
                    let judgement = judge.judge(&spec.scenario, &record);
                    let recalled =
                        judgement
                            .verdicts
                            .iter()
                            .any(|v| v.grader == RECALL)
                            .then(|| {
                                judgement
                                    .recall
                                    .iter()
                                    .filter(|r| r.correct)
                                    .map(|r| (r.fact.clone(), r.step))
                                    .collect()
                            });
                    let failing = judgement
                        .verdicts
                        .into_iter()
                        .filter(|v| v.status == VerdictStatus::Fail)
                        .map(|v| v.grader)
                        .collect();
                    Judged {
                        failing,
                        recalled,
                        errored,
                        unexpected,
                    }
                }
                Err(e) => Judged {
                    failing: BTreeSet::new(),
                    recalled: None,
                    errored: Some(format!("no trial workspace: {e}")),
                    unexpected: None,
                },
            };
            (v, (spec.scenario.id.clone(), spec.mode), judged)
        });
    }
    let mut reference: BTreeMap<Key, Judged> = BTreeMap::new();
    let mut mutated: Vec<(usize, Key, Judged)> = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        // A panicking trial task is a harness bug; it must not vanish from the score.
        let Ok((v, key, judged)) = joined else {
            continue;
        };
        match v {
            None => {
                reference.insert(key, judged);
            }
            Some(i) => mutated.push((i, key, judged)),
        }
    }
    let mut reference_failures = Vec::new();
    let mut reference_errors = Vec::new();
    for ((scenario, mode), judged) in &reference {
        if let Some(e) = &judged.errored {
            reference_errors.push((format!("{scenario}/{mode}"), e.clone()));
        } else if let Some(u) = &judged.unexpected {
            // The unbroken system missing its own expected outcome is a defect of it (or of
            // the scenario), not data: listed like an invariant failure.
            reference_failures.push((format!("{scenario}/{mode}"), format!("outcome ({u})")));
        }
        for g in judged.failing.iter().filter(|g| g.as_str() != RECALL) {
            reference_failures.push((format!("{scenario}/{mode}"), g.clone()));
        }
    }
    let mutants = variants
        .iter()
        .enumerate()
        .map(|(i, variant)| {
            let mut result = MutantResult {
                variant: variant.clone(),
                caught_by: BTreeSet::new(),
                incidental: BTreeSet::new(),
                caught_in: BTreeSet::new(),
                errored_in: BTreeSet::new(),
            };
            for (_, key, judged) in mutated.iter().filter(|(x, _, _)| *x == i) {
                let trial = format!("{}/{}", key.0, key.1);
                let Some(base) = reference.get(key).filter(|b| b.errored.is_none()) else {
                    // No baseline: nothing this trial shows can count.
                    result
                        .errored_in
                        .insert(format!("{trial} (no reference result)"));
                    continue;
                };
                if judged.errored.is_some() {
                    result.errored_in.insert(trial);
                    continue;
                }
                for g in &newly_failing(base, judged) {
                    if variant.intended.iter().any(|i| i == g) {
                        result.caught_by.insert(g.clone());
                        result.caught_in.insert(trial.clone());
                    } else {
                        result.incidental.insert(g.clone());
                    }
                }
            }
            result
        })
        .collect();
    // A reference trial that never came back (its task panicked) is a missing baseline.
    for s in scenarios {
        for &mode in modes.iter().filter(|m| s.modes.contains(m)) {
            if !reference.contains_key(&(s.id.clone(), mode)) {
                reference_errors.push((format!("{}/{mode}", s.id), "no result".to_string()));
            }
        }
    }
    SelftestReport {
        reference_trials: reference.len(),
        reference_failures,
        reference_errors,
        mutants,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judged(failing: &[&str], recalled: Option<&[(&str, u64)]>) -> Judged {
        Judged {
            failing: failing.iter().map(|g| g.to_string()).collect(),
            recalled: recalled.map(|r| r.iter().map(|(f, s)| (f.to_string(), *s)).collect()),
            errored: None,
            unexpected: None,
        }
    }

    #[test]
    fn a_variant_that_loses_a_probe_the_reference_recalled_fails_recall() {
        // The reference missed `b` (so it failed recall too); the variant also misses `a`.
        let base = judged(&["recall"], Some(&[("a", 3)]));
        let worse = judged(&["recall"], Some(&[]));
        assert_eq!(
            newly_failing(&base, &worse),
            BTreeSet::from(["recall".to_string()])
        );
        // Missing only what the reference missed, or gaining a probe, is no catch.
        let same = judged(&["recall"], Some(&[("a", 3)]));
        assert!(newly_failing(&base, &same).is_empty());
        let better = judged(&[], Some(&[("a", 3), ("b", 3)]));
        assert!(newly_failing(&base, &better).is_empty());
        // Without the recall grader applied, probes are not compared.
        let unjudged = judged(&[], None);
        assert!(newly_failing(&base, &unjudged).is_empty());
        // Invariant graders count as before.
        let broke = judged(&["recall", "tool-pairs"], Some(&[("a", 3)]));
        assert_eq!(
            newly_failing(&base, &broke),
            BTreeSet::from(["tool-pairs".to_string()])
        );
    }
}
