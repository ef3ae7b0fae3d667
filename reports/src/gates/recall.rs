//! The recall gates: `seeded_recall` (durable constraints in long sessions, seed 000's
//! wording) and `probe_recall` (every seeded probe of every kind in every scenario).

use std::collections::{BTreeMap, BTreeSet};

use ctxbench_harness::storage::schema::{OutcomeStatus, RecallRow, TrialRow};

use super::{tagged_scenarios, Bound, Ctx, GateResult, ProbeRecallGate, RecallGate};
use crate::stats::{wilson_demonstrable_n, Proportion};

impl Ctx<'_> {
    pub(super) fn recall(&self, t: &RecallGate) -> GateResult {
        let name = "seeded_recall";
        if self.cand.is_empty() {
            return Self::result(name, Bound::Min, t.min, None, self.no_candidate());
        }
        let tagged = t.tag.as_deref().map(|tag| tagged_scenarios(self.run, tag));
        let in_scope = |tr: &TrialRow| {
            tagged
                .as_ref()
                .is_none_or(|s| s.contains(tr.scenario.as_str()))
        };
        // Every probe of a non-errored candidate trial, by kind; only the gate's kinds, in
        // the gate's scenarios, count.
        let mut by_kind: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        let (mut correct, mut total) = (0u64, 0u64);
        let mut scenarios: BTreeSet<&str> = BTreeSet::new();
        for tr in self.judged() {
            for p in &tr.recall {
                let kind = probe_kind(p);
                let e = by_kind.entry(kind.to_string()).or_default();
                e.0 += u64::from(p.correct);
                e.1 += 1;
                if in_scope(tr) && t.kinds.iter().any(|k| k == kind) {
                    correct += u64::from(p.correct);
                    total += 1;
                    scenarios.insert(tr.scenario.as_str());
                }
            }
        }
        let scope = format!(
            "{} probes{}",
            t.kinds.join("/"),
            t.tag
                .as_deref()
                .map(|tag| format!(" in scenarios tagged `{tag}`"))
                .unwrap_or_default()
        );
        let beside: Vec<String> = by_kind
            .iter()
            .map(|(k, (c, n))| format!("{k} {c}/{n}"))
            .collect();
        if total < t.min_probes {
            return Self::result(
                name,
                Bound::Min,
                t.min,
                None,
                format!(
                    "inconclusive: needs {} {scope}, has {total} (all kinds: {})",
                    t.min_probes,
                    beside.join(", ")
                ),
            );
        }
        if (scenarios.len() as u64) < t.min_scenarios {
            return Self::result(
                name,
                Bound::Min,
                t.min,
                None,
                format!(
                    "inconclusive: needs {scope} from {} distinct scenario(s), has {} ({total} \
                     probes): the instances `vary:` makes of one scenario are one design — add \
                     scenarios",
                    t.min_scenarios,
                    scenarios.len()
                ),
            );
        }
        let p = Proportion::wilson(correct, total).unwrap_or(Proportion {
            successes: 0,
            total: 0,
            value: 0.0,
            lo: 0.0,
            hi: 0.0,
        });
        // Too few probes for even a perfect record to reach the threshold: not shown below
        // it either (the upper bound clears it), so the run cannot decide.
        if let Some(need) = wilson_demonstrable_n(t.min) {
            if total < need && p.hi >= t.min {
                return Self::result(
                    name,
                    Bound::Min,
                    t.min,
                    None,
                    format!(
                        "inconclusive: {correct}/{total} {scope} correct, but even a perfect \
                         record needs {need} probes for a lower Wilson 95% bound of {:.1}%: run \
                         more trials of varied long sessions (all kinds: {})",
                        t.min * 100.0,
                        beside.join(", ")
                    ),
                );
            }
        }
        Self::result(
            name,
            Bound::Min,
            t.min,
            Some(p.lo),
            format!(
                "lower Wilson 95% bound {:.3} of {correct}/{total} {scope} correct ({:.1}%, \
                 [{:.3}, {:.3}]); all kinds: {}",
                p.lo,
                p.value * 100.0,
                p.lo,
                p.hi,
                beside.join(", ")
            ),
        )
    }

    /// Every seeded probe of every kind in every scenario, once per session: pooled lower
    /// Wilson bound ≥ `min`, and each kind with enough probes ≥ `min_per_kind`.
    pub(super) fn probe_recall(&self, t: &ProbeRecallGate) -> GateResult {
        let name = "probe_recall";
        let result = |observed, detail| Self::result(name, Bound::Min, t.min, observed, detail);
        if self.cand.is_empty() {
            return result(None, self.no_candidate());
        }
        // (scenario, instance, fact, step) → (kind, correct in every copy).
        let mut probes: BTreeMap<(&str, &str, &str, u64), (&str, bool)> = BTreeMap::new();
        for tr in self.judged() {
            for p in &tr.recall {
                let kind = probe_kind(p);
                let key = (
                    tr.scenario.as_str(),
                    tr.instance.as_str(),
                    p.fact.as_str(),
                    p.step,
                );
                probes.entry(key).or_insert((kind, true)).1 &= p.correct;
            }
        }
        let mut by_kind: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
        for (kind, ok) in probes.values() {
            let e = by_kind.entry(kind).or_default();
            e.0 += u64::from(*ok);
            e.1 += 1;
        }
        let total = probes.len() as u64;
        let correct = by_kind.values().map(|(c, _)| c).sum::<u64>();
        let scenarios = probes.keys().map(|k| k.0).collect::<BTreeSet<_>>().len() as u64;
        let kinds: Vec<(&str, u64, u64, Option<Proportion>)> = by_kind
            .iter()
            .map(|(k, (c, n))| (*k, *c, *n, Proportion::wilson(*c, *n)))
            .collect();
        // A kind is gated on its own once it has `min_kind_probes` probes and enough for a
        // perfect record to reach `min_per_kind`; fewer count in the pool only.
        let kind_needs = wilson_demonstrable_n(t.min_per_kind)
            .unwrap_or(u64::MAX)
            .max(t.min_kind_probes);
        let beside = kinds
            .iter()
            .map(|(k, c, n, p)| match p {
                Some(p) if *n >= kind_needs => {
                    format!("{k} {c}/{n} [{:.3}, {:.3}]", p.lo, p.hi)
                }
                _ => format!("{k} {c}/{n} (under {kind_needs}: pool only)"),
            })
            .collect::<Vec<_>>()
            .join(", ");
        if total < t.min_probes || scenarios < t.min_scenarios {
            return result(
                None,
                format!(
                    "inconclusive: needs {} probes from {} distinct scenario(s), has {total} \
                     from {scenarios} (by kind: {beside})",
                    t.min_probes, t.min_scenarios
                ),
            );
        }
        let Some(pool) = Proportion::wilson(correct, total) else {
            return result(None, "inconclusive: no probe".into());
        };
        if let Some(need) = wilson_demonstrable_n(t.min) {
            if total < need && pool.hi >= t.min {
                return result(
                    None,
                    format!(
                        "inconclusive: {correct}/{total} probes correct, but even a perfect \
                         record needs {need} probes for a lower Wilson 95% bound of {:.1}% (by \
                         kind: {beside})",
                        t.min * 100.0
                    ),
                );
            }
        }
        let weak: Vec<String> = kinds
            .iter()
            .filter(|(_, _, n, _)| *n >= kind_needs)
            .filter_map(|(k, _, _, p)| p.filter(|p| p.lo < t.min_per_kind).map(|p| (k, p)))
            .map(|(k, p)| format!("{k} ({:.3})", p.lo))
            .collect();
        // The observed value is the weakest of the pool and the gated kinds, each judged
        // against its own bar: reported as the pool's bound unless a kind fails.
        let mut r = result(
            Some(pool.lo),
            format!(
                "lower Wilson 95% bound {:.3} of {correct}/{total} probes correct in {scenarios} \
                 scenario(s) (all kinds, once per session; {:.1}%, [{:.3}, {:.3}]); every kind \
                 with at least {kind_needs} probes must reach {:.3}: {}; by kind: {beside}",
                pool.lo,
                pool.value * 100.0,
                pool.lo,
                pool.hi,
                t.min_per_kind,
                if weak.is_empty() {
                    "all do".to_string()
                } else {
                    format!("below it: {}", weak.join(", "))
                }
            ),
        );
        if !weak.is_empty() {
            r.status = super::GateStatus::Fail;
        }
        r
    }
}

impl Ctx<'_> {
    /// The candidate's trials that were judged (an errored trial has no evidence).
    fn judged(&self) -> impl Iterator<Item = &TrialRow> {
        self.cand
            .iter()
            .copied()
            .filter(|t| t.outcome.status != OutcomeStatus::Errored)
    }
}

/// A probe's fact kind; a fact that declares none is a durable constraint (the format's
/// default).
fn probe_kind(p: &RecallRow) -> &str {
    if p.kind.is_empty() {
        "constraint"
    } else {
        p.kind.as_str()
    }
}
