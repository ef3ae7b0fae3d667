//! Mutation testing of the graders: run a suite against the reference engine and against
//! every deliberately broken variant ([`Mutation`]), and report which graders caught which
//! mutant. A mutant is *caught* by a grader when that grader fails on some trial where it
//! passed against the reference engine (same scenario, mode and seed). The mutation score
//! is the share of mutants caught by at least one grader; a grader suite that scores below
//! 100% has a blind spot, and a custom scenario suite that scores low is not sensitive.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use tokio::sync::Semaphore;

use crate::driver::{run_trial, ProviderSpec, TrialSpec};
use crate::engine::mutants::Mutation;
use crate::mode::Mode;
use crate::runner::Judge;
use crate::scenario::Scenario;
use crate::storage::schema::VerdictStatus;

/// What one mutant did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MutantResult {
    /// The mutation.
    pub mutation: Mutation,
    /// Graders that caught it (failed where the reference passed).
    pub caught_by: BTreeSet<String>,
    /// Trials where it was caught, e.g. `hostile-history/compact`.
    pub caught_in: BTreeSet<String>,
}

/// The selftest result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelftestReport {
    /// Trials run against the reference engine.
    pub reference_trials: usize,
    /// `(trial, grader)` pairs where an invariant grader failed against the reference
    /// engine (recall failures are data, not defects, and are not listed).
    pub reference_failures: Vec<(String, String)>,
    /// One result per mutant, in [`Mutation::ALL`] order.
    pub mutants: Vec<MutantResult>,
}

impl SelftestReport {
    /// Mutants caught / mutants run.
    pub fn score(&self) -> f64 {
        if self.mutants.is_empty() {
            return 1.0;
        }
        self.mutants
            .iter()
            .filter(|m| !m.caught_by.is_empty())
            .count() as f64
            / self.mutants.len() as f64
    }

    /// Whether the reference engine passed every invariant grader and every mutant was
    /// caught.
    pub fn passed(&self) -> bool {
        self.reference_failures.is_empty() && self.mutants.iter().all(|m| !m.caught_by.is_empty())
    }
}

type Key = (String, Mode);

/// Run the selftest. `modes` limits which modes run (default callers pass warn and
/// compact: `off` has no context decisions to break).
pub async fn selftest(
    scenarios: &[Arc<Scenario>],
    modes: &[Mode],
    mutations: &[Mutation],
    seed: u64,
    concurrency: usize,
    judge: Arc<dyn Judge>,
) -> SelftestReport {
    selftest_on(
        scenarios,
        modes,
        mutations,
        seed,
        concurrency,
        judge,
        crate::external::SutSpec::Reference,
    )
    .await
}

/// [`selftest`] against a chosen system under test (an external agent gets each mutation
/// through the protocol's test-only `start.test.mutation`).
pub async fn selftest_on(
    scenarios: &[Arc<Scenario>],
    modes: &[Mode],
    mutations: &[Mutation],
    seed: u64,
    concurrency: usize,
    judge: Arc<dyn Judge>,
    sut: crate::external::SutSpec,
) -> SelftestReport {
    let mut services = crate::connect::Services::default();
    services.sut = sut;
    let mut specs: Vec<TrialSpec> = Vec::new();
    for variant in std::iter::once(None).chain(mutations.iter().copied().map(Some)) {
        for s in scenarios {
            for &mode in modes {
                if s.modes.contains(&mode) {
                    specs.push(TrialSpec {
                        scenario: s.clone(),
                        mode,
                        trial: 0,
                        run_seed: seed,
                        provider: ProviderSpec::Fake,
                        mutation: variant,
                        services: services.clone(),
                    });
                }
            }
        }
    }
    let permits = Arc::new(Semaphore::new(concurrency.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    for spec in specs {
        let permits = permits.clone();
        let judge = judge.clone();
        tasks.spawn(async move {
            let _p = permits.acquire_owned().await.ok();
            let dir = crate::runner::trial_workdir().ok();
            let failing: BTreeSet<String> = match &dir {
                Some(d) => {
                    let record = run_trial(&spec, d.path()).await;
                    judge
                        .judge(&spec.scenario, &record)
                        .verdicts
                        .into_iter()
                        .filter(|v| v.status == VerdictStatus::Fail)
                        .map(|v| v.grader)
                        .collect()
                }
                // No temporary directory: count it as a harness failure of every grader
                // so it cannot pass silently.
                None => ["harness".to_string()].into_iter().collect(),
            };
            (
                spec.mutation,
                (spec.scenario.id.clone(), spec.mode),
                failing,
            )
        });
    }
    let mut reference: BTreeMap<Key, BTreeSet<String>> = BTreeMap::new();
    let mut mutated: Vec<(Mutation, Key, BTreeSet<String>)> = Vec::new();
    while let Some(Ok((mutation, key, failing))) = tasks.join_next().await {
        match mutation {
            None => {
                reference.insert(key, failing);
            }
            Some(m) => mutated.push((m, key, failing)),
        }
    }
    let mut reference_failures = Vec::new();
    for ((scenario, mode), failing) in &reference {
        for g in failing.iter().filter(|g| g.as_str() != "recall") {
            reference_failures.push((format!("{scenario}/{mode}"), g.clone()));
        }
    }
    let mutants = mutations
        .iter()
        .map(|&m| {
            let mut caught_by = BTreeSet::new();
            let mut caught_in = BTreeSet::new();
            for (_, key, failing) in mutated.iter().filter(|(x, _, _)| *x == m) {
                let base = reference.get(key).cloned().unwrap_or_default();
                for g in failing.difference(&base) {
                    caught_by.insert(g.clone());
                    caught_in.insert(format!("{}/{}", key.0, key.1));
                }
            }
            MutantResult {
                mutation: m,
                caught_by,
                caught_in,
            }
        })
        .collect();
    SelftestReport {
        reference_trials: reference.len(),
        reference_failures,
        mutants,
    }
}
