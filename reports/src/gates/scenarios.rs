//! The per-session comparisons of the candidate against `warn`: pass rate and completion
//! non-inferiority (METRICS.md §Mode comparisons), judged on the units the design makes
//! independent.
//!
//! **Units.** Trials of the deterministic fake playing the same script are near-copies, so a
//! *session* — not a trial — is one observation: a scenario's trials that played its script
//! as written form one unit, and each instance a scenario's `vary:` made (different sizes
//! and repeat counts: a different session) forms its own. Within a unit, a mode *passes*
//! when every one of its non-errored trials passed, and its *completion* is the mean over
//! those trials of turns completed ÷ turns scripted. Only units of scenarios whose baseline
//! (`warn`) is **expected to complete its script** (`expect.outcome` for `warn` is
//! `success`) enter the comparison: a scenario that fails `warn` by design would only pull
//! the difference in the candidate's favour.
//!
//! **Pass rate.** Newcombe's (method 10) 95% interval on the paired difference of scenario
//! pass rates, `warn − candidate`, with McNemar's exact p; non-inferiority when its upper
//! bound is within the margin.
//!
//! **Completion.** Seeded percentile bootstrap (95%) of the mean per-scenario difference
//! `warn − candidate`; non-inferiority when its upper bound is within the margin.
//!
//! **A broken baseline is no baseline.** An eligible session in which `warn` itself did
//! not complete (any of its trials ended other than `success`) has nothing to compare
//! against and leaves both comparisons; when such sessions exceed `max_baseline_misses` of
//! the eligible ones the comparisons are `not_evaluated`, naming them — a `warn` that
//! refuses everything cannot make non-inferiority free.
//!
//! Below `min_units` eligible sessions, or `min_scenarios` distinct scenarios among them,
//! the gate is `not_evaluated` and says how many it needs.
//!
//! **Candidate pass rate** (`candidate_pass_rate`): the candidate's own sessions whose
//! expected outcome in the candidate mode is definite (not `any`), judged on the lower
//! Wilson 95% bound of the share that passed — an absolute bar beside the comparisons.

use std::collections::{BTreeMap, BTreeSet};

use ctxbench_harness::scenario::AS_WRITTEN;
use ctxbench_harness::storage::schema::{OutcomeStatus, TrialRow};
use ctxbench_harness::Mode;

use super::{Bound, Ctx, GateResult, GateStatus, NonInferiority, PassRateGate};
use crate::stats::{
    bootstrap_mean, mcnemar_exact, newcombe_demonstrable_n, newcombe_paired_difference,
    wilson_demonstrable_n, PairedTable, Proportion, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, Z_95,
};

/// One mode's result on one scenario.
#[derive(Debug, Clone, Copy)]
struct ScenarioResult {
    passed: bool,
    completion: f64,
    /// Every non-errored trial ended `success`.
    completed: bool,
}

/// The sessions a comparison against `warn` is judged on.
struct Eligible {
    /// `(unit name, scenario, warn, candidate)` where `warn` is expected to complete and did.
    pairs: Vec<(String, String, ScenarioResult, ScenarioResult)>,
    /// Units run in both modes, eligible or not.
    both: usize,
    /// Eligible units in which `warn` itself did not complete.
    baseline_missed: Vec<String>,
}

impl Eligible {
    fn scenarios(&self) -> usize {
        self.pairs
            .iter()
            .map(|p| p.1.as_str())
            .collect::<BTreeSet<_>>()
            .len()
    }
}

/// A unit of comparison: a scenario, and the session instance its trials played.
type Unit<'a> = (&'a str, &'a str);

/// How a unit is named in details: the scenario id, plus `#instance` when `vary:` made it.
fn unit_name((scenario, instance): Unit<'_>) -> String {
    if instance == AS_WRITTEN {
        scenario.to_string()
    } else {
        format!("{scenario}#{instance}")
    }
}

/// Per unit, the result of `mode` over its non-errored trials (none: no entry).
fn by_unit<'a>(trials: impl Iterator<Item = &'a TrialRow>) -> BTreeMap<Unit<'a>, ScenarioResult> {
    let mut acc: BTreeMap<Unit<'a>, (bool, f64, u64, bool)> = BTreeMap::new();
    for t in trials.filter(|t| t.outcome.status != OutcomeStatus::Errored) {
        let e = acc
            .entry((t.scenario.as_str(), t.instance.as_str()))
            .or_insert((true, 0.0, 0, true));
        e.0 &= t.passed;
        e.1 += completion(t);
        e.2 += 1;
        e.3 &= t.outcome.status == OutcomeStatus::Success;
    }
    acc.into_iter()
        .map(|(s, (passed, sum, n, completed))| {
            (
                s,
                ScenarioResult {
                    passed,
                    completion: sum / n as f64,
                    completed,
                },
            )
        })
        .collect()
}

/// Turns completed ÷ turns scripted (1 for a script without turns).
pub(crate) fn completion(t: &TrialRow) -> f64 {
    if t.stats.turns_scripted == 0 {
        1.0
    } else {
        t.stats.turns_completed as f64 / t.stats.turns_scripted as f64
    }
}

impl Ctx<'_> {
    /// `(warn, candidate)` results on the units whose `warn` is expected to complete, and
    /// how many units ran in both modes in all.
    fn eligible(&self) -> Eligible {
        let warn_trials = || self.run.trials.iter().filter(|t| t.mode == Mode::Warn);
        let warn = by_unit(warn_trials());
        let cand = by_unit(self.cand.iter().copied());
        let expected_to_complete: BTreeSet<&str> = warn_trials()
            .filter(|t| t.expected_outcome == "success")
            .map(|t| t.scenario.as_str())
            .collect();
        let mut e = Eligible {
            pairs: Vec::new(),
            both: 0,
            baseline_missed: Vec::new(),
        };
        for (u, w) in &warn {
            let Some(c) = cand.get(u) else { continue };
            e.both += 1;
            if !expected_to_complete.contains(u.0) {
                continue;
            }
            if w.completed {
                e.pairs.push((unit_name(*u), u.0.to_string(), *w, *c));
            } else {
                e.baseline_missed.push(unit_name(*u));
            }
        }
        e
    }

    /// Why the comparison cannot be judged on `e`, if it cannot: a baseline that missed its
    /// own expected outcome too often, too few sessions, or too few scenarios.
    fn undecidable(&self, name: &str, t: NonInferiority, e: &Eligible) -> Option<GateResult> {
        let eligible = e.pairs.len() + e.baseline_missed.len();
        let missed = e.baseline_missed.len();
        let inconclusive =
            |detail: String| Some(Self::result(name, Bound::Max, t.max, None, detail));
        if missed > 0 && missed as f64 > t.max_baseline_misses * eligible as f64 {
            let mut shown: Vec<&str> = e.baseline_missed.iter().map(String::as_str).collect();
            shown.truncate(3);
            return inconclusive(format!(
                "inconclusive: the baseline `warn` itself did not complete {missed} of \
                 {eligible} session(s) it is expected to complete (more than the {:.0}% \
                 `max_baseline_misses` allows), so the comparison has no baseline: {}{} — fix \
                 the baseline mode (the candidate is judged on its own by \
                 `candidate_pass_rate`)",
                t.max_baseline_misses * 100.0,
                shown.join(", "),
                if missed > 3 {
                    format!(" (+{} more)", missed - 3)
                } else {
                    String::new()
                }
            ));
        }
        let n = e.pairs.len();
        if (n as u64) < t.min_units {
            return Some(self.too_few(name, t, n, e.both));
        }
        let scenarios = e.scenarios();
        if (scenarios as u64) < t.min_scenarios {
            return inconclusive(format!(
                "inconclusive: needs {} distinct scenario(s) whose `warn` is expected to \
                 complete, has {scenarios} ({n} session(s)): the instances `vary:` makes of \
                 one scenario are one design — add such scenarios",
                t.min_scenarios
            ));
        }
        None
    }

    /// `; warn did not complete: …` when eligible sessions left the comparison.
    fn baseline_note(e: &Eligible) -> String {
        if e.baseline_missed.is_empty() {
            return String::new();
        }
        format!(
            "; left out, `warn` did not complete them: {}",
            e.baseline_missed.join(", ")
        )
    }

    fn too_few(&self, name: &str, t: NonInferiority, n: usize, both: usize) -> GateResult {
        Self::result(
            name,
            Bound::Max,
            t.max,
            None,
            format!(
                "inconclusive: needs {} independent session(s) whose `warn` is expected to \
                 complete (expect.outcome `success` for warn) and did, has {n} (of {both} run \
                 in both modes): add such scenarios, or give them `vary:` and run more trials",
                t.min_units
            ),
        )
    }

    /// Pass-rate non-inferiority of the candidate against `warn`, by scenario.
    pub(super) fn pass_rate_regression(&self, t: NonInferiority) -> GateResult {
        let name = "pass_rate_regression_vs_warn";
        if self.cand.is_empty() {
            return Self::result(name, Bound::Max, t.max, None, self.no_candidate());
        }
        let e = self.eligible();
        if let Some(r) = self.undecidable(name, t, &e) {
            return r;
        }
        let (pairs, both) = (&e.pairs, e.both);
        let table = PairedTable::from_pairs(pairs.iter().map(|(_, _, w, c)| (w.passed, c.passed)));
        let Some(ci) = newcombe_paired_difference(&table, Z_95) else {
            return self.too_few(name, t, 0, both);
        };
        let n = table.n();
        let (pw, pc) = (table.first_passed(), table.second_passed());
        let non_inferior = ci.non_inferior(t.max);
        // Not shown non-inferior, but too few sessions for even identical results to show it,
        // and not shown worse either (the interval reaches 0): undecided.
        if let Some(need) = newcombe_demonstrable_n(t.max) {
            if !non_inferior && n < need && ci.lo <= 0.0 {
                return Self::result(
                    name,
                    Bound::Max,
                    t.max,
                    None,
                    format!(
                        "inconclusive: warn {pw}/{n} vs {} {pc}/{n} session(s) whose warn is \
                         expected to complete, but even identical results need {need} sessions \
                         to show non-inferiority within {:.1} pp: add such scenarios, or give \
                         them `vary:` and run more trials",
                        self.candidate,
                        t.max * 100.0
                    ),
                );
            }
        }
        let worse: Vec<&str> = pairs
            .iter()
            .filter(|(_, _, w, c)| w.passed && !c.passed)
            .map(|(s, _, _, _)| s.as_str())
            .collect();
        let pp = |v: f64| format!("{:+.1}", v * 100.0);
        let detail = format!(
            "by session (a scenario's copies aggregated: it passes when all its trials pass; \
             each instance `vary:` made is its own session), on {n} session(s) whose warn is \
             expected to complete: warn {pw}/{n} vs {cand} \
             {pc}/{n}; warn − {cand} {} pp, Newcombe 95% [{}, {}] pp: {} (upper bound {} the \
             {:.1} pp margin); McNemar exact p = {:.4}{}{}",
            pp(ci.value),
            pp(ci.lo),
            pp(ci.hi),
            if non_inferior {
                "non-inferior"
            } else {
                "non-inferiority not shown"
            },
            if non_inferior { "within" } else { "above" },
            t.max * 100.0,
            mcnemar_exact(table.first_only, table.second_only),
            if worse.is_empty() {
                String::new()
            } else {
                format!("; passed only in warn: {}", worse.join(", "))
            },
            Self::baseline_note(&e),
            cand = self.candidate,
        );
        let mut result = Self::result(name, Bound::Max, t.max, Some(ci.value), detail);
        result.status = if non_inferior {
            GateStatus::Pass
        } else {
            GateStatus::Fail
        };
        result
    }

    /// Completion non-inferiority of the candidate against `warn`, by scenario.
    pub(super) fn completion_regression(&self, t: NonInferiority) -> GateResult {
        let name = "completion_regression_vs_warn";
        if self.cand.is_empty() {
            return Self::result(name, Bound::Max, t.max, None, self.no_candidate());
        }
        let e = self.eligible();
        if let Some(r) = self.undecidable(name, t, &e) {
            return r;
        }
        let (pairs, both) = (&e.pairs, e.both);
        let diffs: Vec<f64> = pairs
            .iter()
            .map(|(_, _, w, c)| w.completion - c.completion)
            .collect();
        let mean = diffs.iter().sum::<f64>() / diffs.len() as f64;
        let Some(ci) = bootstrap_mean(&diffs, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, 0.95) else {
            return self.too_few(name, t, pairs.len(), both);
        };
        let non_inferior = ci.hi <= t.max;
        type Pair = (String, String, ScenarioResult, ScenarioResult);
        let mean_of =
            |f: &dyn Fn(&Pair) -> f64| pairs.iter().map(f).sum::<f64>() / pairs.len() as f64;
        let worse: Vec<String> = pairs
            .iter()
            .filter(|(_, _, w, c)| c.completion < w.completion)
            .map(|(s, _, w, c)| {
                format!(
                    "{s} ({:.0}% vs {:.0}%)",
                    c.completion * 100.0,
                    w.completion * 100.0
                )
            })
            .collect();
        let detail = format!(
            "turns completed ÷ scripted, mean over {} session(s) whose warn is expected to \
             complete: warn {:.1}% vs {cand} {:.1}%; warn − {cand} {:+.1} pp, bootstrap 95% \
             [{:+.1}, {:+.1}] pp ({} resamples of sessions, seed {:#x}): {}{}{}",
            pairs.len(),
            mean_of(&|p| p.2.completion) * 100.0,
            mean_of(&|p| p.3.completion) * 100.0,
            mean * 100.0,
            ci.lo * 100.0,
            ci.hi * 100.0,
            ci.resamples,
            ci.seed,
            if non_inferior {
                "non-inferior"
            } else {
                "non-inferiority not shown"
            },
            if worse.is_empty() {
                String::new()
            } else {
                format!("; fewer turns completed in: {}", worse.join(", "))
            },
            Self::baseline_note(&e),
            cand = self.candidate,
        );
        let mut result = Self::result(name, Bound::Max, t.max, Some(mean), detail);
        result.status = if non_inferior {
            GateStatus::Pass
        } else {
            GateStatus::Fail
        };
        result
    }

    /// The candidate's own pass rate by session, over sessions whose expected outcome in the
    /// candidate mode is definite (not `any`): the lower Wilson 95% bound ≥ `min`.
    pub(super) fn candidate_pass_rate(&self, t: PassRateGate) -> GateResult {
        let name = "candidate_pass_rate";
        let result = |observed, detail| Self::result(name, Bound::Min, t.min, observed, detail);
        if self.cand.is_empty() {
            return result(None, self.no_candidate());
        }
        let units = by_unit(
            self.cand
                .iter()
                .copied()
                .filter(|t| t.expected_outcome != "any"),
        );
        let n = units.len() as u64;
        let passed = units.values().filter(|r| r.passed).count() as u64;
        let scenarios = units.keys().map(|u| u.0).collect::<BTreeSet<_>>().len() as u64;
        let scope = format!(
            "session(s) of {scenarios} scenario(s) whose `{}` outcome is expected (not `any`)",
            self.candidate
        );
        if n < t.min_units || scenarios < t.min_scenarios {
            return result(
                None,
                format!(
                    "inconclusive: needs {} session(s) from {} distinct scenario(s) whose `{}` \
                     outcome is expected (not `any`), has {n} from {scenarios}: add scenarios, \
                     or give them `vary:` and run more trials",
                    t.min_units, t.min_scenarios, self.candidate
                ),
            );
        }
        let Some(p) = Proportion::wilson(passed, n) else {
            return result(None, format!("inconclusive: no {scope}"));
        };
        if let Some(need) = wilson_demonstrable_n(t.min) {
            if n < need && p.hi >= t.min {
                return result(
                    None,
                    format!(
                        "inconclusive: {passed}/{n} {scope} passed, but even all passing needs \
                         {need} sessions for a lower Wilson 95% bound of {:.1}%",
                        t.min * 100.0
                    ),
                );
            }
        }
        let failed: Vec<String> = units
            .iter()
            .filter(|(_, r)| !r.passed)
            .map(|(u, _)| unit_name(*u))
            .collect();
        let mut shown: Vec<&str> = failed.iter().map(String::as_str).collect();
        shown.truncate(5);
        result(
            Some(p.lo),
            format!(
                "lower Wilson 95% bound {:.3} of {passed}/{n} {scope} passed ({:.1}%, [{:.3}, \
                 {:.3}]; a session passes when all its trials do){}",
                p.lo,
                p.value * 100.0,
                p.lo,
                p.hi,
                if failed.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; failed: {}{}",
                        shown.join(", "),
                        if failed.len() > 5 {
                            format!(" (+{} more)", failed.len() - 5)
                        } else {
                            String::new()
                        }
                    )
                }
            ),
        )
    }
}
