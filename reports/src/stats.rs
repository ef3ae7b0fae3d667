//! Statistics used by the report, in one documented place.
//!
//! # Proportions: Wilson score interval
//!
//! Pass rates and recall are proportions over small samples (often 5–30 trials per
//! mode), where the textbook normal ("Wald") interval `p ± z·√(p(1−p)/n)` is badly
//! behaved: it collapses to a zero-width interval at 0/n and n/n and can leave [0, 1].
//! The Wilson score interval (Wilson 1927; recommended by Brown, Cai & DasGupta 2001,
//! "Interval Estimation for a Binomial Proportion") inverts the score test instead:
//!
//! ```text
//! centre    = (p̂ + z²/2n) / (1 + z²/n)
//! halfwidth = z / (1 + z²/n) · √( p̂(1−p̂)/n + z²/4n² )
//! ```
//!
//! with `z` = [`Z_95`], the 0.975 quantile of the standard normal. It stays inside [0, 1]
//! and is non-degenerate at the extremes (0/10 → [0, 0.278]).
//!
//! # Percentiles
//!
//! Medians and p95s are computed by polars with [`QUANTILE_METHOD`] = linear
//! interpolation between closest ranks (Hyndman & Fan type 7, numpy's default), so a
//! researcher recomputing them from `requests.csv` with numpy or pandas gets the same
//! value. [`quantile_sorted`] is the same rule for the bootstrap below.
//!
//! # Paired pass/fail: McNemar's exact test
//!
//! Mode comparisons are paired: the same (scenario, trial) — same seed — runs in both
//! modes. Of `n` pairs, `a` pass in both, `b` pass only in the first mode, `c` only in the
//! second and `d` in neither. Only the discordant pairs carry evidence of a difference:
//! under "no difference" each of the `b + c` discordant pairs is equally likely to fall
//! either way, so `b ~ Binomial(b + c, ½)`. McNemar's exact (conditional) test is the
//! two-sided binomial test on it ([`mcnemar_exact`]):
//!
//! ```text
//! p = min(1, 2 · Σ_{k=0}^{min(b,c)} C(b+c, k) / 2^(b+c))        (p = 1 when b + c = 0)
//! ```
//!
//! (McNemar 1947; the exact form as in Fagerland, Lydersen & Laake 2013, "The McNemar
//! test for binary matched-pairs data", BMC Med Res Methodol 13:91). The sum is taken in
//! log space, so thousands of pairs neither overflow nor underflow.
//!
//! # Paired difference of pass rates: Newcombe's method 10
//!
//! The difference `θ = p₁ − p₂ = (b − c)/n` of two *paired* proportions gets the
//! Wilson-score-based interval of Newcombe (1998), "Improved confidence intervals for the
//! difference between binomial proportions based on paired data", Stat Med 17:2635–2650,
//! **method 10** (the "square-and-add" / MOVER interval with a correlation correction;
//! recommended by Fagerland, Lydersen & Laake 2014, "Recommended tests and confidence
//! intervals for paired binomial proportions", Stat Med 33:2850–2875).
//! [`newcombe_paired_difference`]:
//!
//! ```text
//! (l₁, u₁) = Wilson interval of p₁ = (a+b)/n      (l₂, u₂) = Wilson interval of p₂ = (a+c)/n
//! A = ad − bc;   A* = A − n/2 if A > n/2,  0 if 0 ≤ A ≤ n/2,  A if A < 0
//! φ = A* / √((a+b)(c+d)(a+c)(b+d))               (φ = 0 when a marginal total is 0)
//! L = θ − √( (p₁−l₁)² − 2φ(p₁−l₁)(u₂−p₂) + (u₂−p₂)² )
//! U = θ + √( (u₁−p₁)² − 2φ(u₁−p₁)(p₂−l₂) + (p₂−l₂)² )
//! ```
//!
//! Unlike the Wald interval it is not degenerate without discordant pairs, stays inside
//! [−1, 1] and is asymmetric where it should be.
//!
//! **Non-inferiority** (METRICS.md §Aggregates): the candidate is non-inferior to a
//! baseline at margin `m` when the *upper* bound of the 95% interval on
//! (pass rate baseline − pass rate candidate) is ≤ `m` ([`PairedDifference::non_inferior`]).
//! With few pairs that cannot be shown even when every trial passes: all `n` pairs
//! passing in both modes give `U = 1 − l₂ ≈ z²/(n + z²)`, which is ≤ 0.05 only from
//! n = 73 pairs on. That is the point of the check, not a flaw: "no failures in 10
//! trials" does not show that a regression is under 5 points.
//!
//! # Token reduction: cluster bootstrap of the median
//!
//! The median per-step input-token reduction has no simple closed-form interval, and its
//! steps are not independent: the steps of one (scenario, trial) share a conversation. So
//! the interval is a **percentile bootstrap over clusters** (Efron & Tibshirani 1993, *An
//! Introduction to the Bootstrap*, ch. 13; clusters resampled whole as in Davison &
//! Hinkley 1997, §3.8): each of [`BOOTSTRAP_RESAMPLES`] resamples draws as many
//! (scenario, trial) clusters as there are, with replacement, pools their steps and takes
//! the median; the interval is the 2.5% and 97.5% quantiles ([`quantile_sorted`]) of the
//! resampled medians ([`bootstrap_median`]).
//!
//! It is **deterministic**: the generator is ChaCha8 seeded with [`BOOTSTRAP_SEED`], and
//! indices are drawn with Lemire's unbiased multiply-and-reject method straight from its
//! 64-bit output (no `rand` distribution whose algorithm could change between versions),
//! so the same run always gives the same bytes. With fewer than two clusters there is no
//! interval (every resample would be the same cluster).

use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

/// The 0.975 quantile of the standard normal distribution (two-sided 95%).
pub const Z_95: f64 = 1.959_963_984_540_054;

/// Interpolation used for every median / percentile in the report.
pub const QUANTILE_METHOD: polars::prelude::QuantileMethod =
    polars::prelude::QuantileMethod::Linear;

/// A proportion with its Wilson 95% interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Proportion {
    /// Successes.
    pub successes: u64,
    /// Trials (denominator).
    pub total: u64,
    /// Point estimate `successes / total`.
    pub value: f64,
    /// Lower bound of the Wilson 95% interval.
    pub lo: f64,
    /// Upper bound of the Wilson 95% interval.
    pub hi: f64,
}

impl Proportion {
    /// The proportion `successes / total` with its Wilson 95% interval; `None` when
    /// `total` is 0 (no evidence — never reported as 0% or 100%).
    pub fn wilson(successes: u64, total: u64) -> Option<Proportion> {
        let (lo, hi) = wilson_interval(successes, total, Z_95)?;
        Some(Proportion {
            successes,
            total,
            value: successes as f64 / total as f64,
            lo,
            hi,
        })
    }
}

/// Wilson score interval for `successes` out of `total` at normal quantile `z`.
///
/// Returns `None` when `total` is 0. `successes` above `total` is clamped to `total`
/// (callers count both from the same rows, so it cannot happen; the clamp keeps the
/// function total).
pub fn wilson_interval(successes: u64, total: u64, z: f64) -> Option<(f64, f64)> {
    if total == 0 {
        return None;
    }
    let n = total as f64;
    let p = successes.min(total) as f64 / n;
    let z2 = z * z;
    let denom = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denom;
    let half = z / denom * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    // Rounding can push the bounds a hair outside [0, 1] at the extremes.
    Some(((centre - half).max(0.0), (centre + half).min(1.0)))
}

/// Linear interpolation between closest ranks (Hyndman & Fan type 7, the rule of
/// [`QUANTILE_METHOD`]) at `q` ∈ [0, 1] of an ascending slice; `None` when empty.
pub fn quantile_sorted(sorted: &[f64], q: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let h = last as f64 * q.clamp(0.0, 1.0);
    let lo = (h.floor() as usize).min(last);
    let hi = (lo + 1).min(last);
    Some(sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo]))
}

/// Median (type 7) of `values`, reordering them; `None` when empty. Linear time.
fn median_in_place(values: &mut [f64]) -> Option<f64> {
    let n = values.len();
    if n == 0 {
        return None;
    }
    let mid = n / 2;
    let (left, upper, _) = values.select_nth_unstable_by(mid, f64::total_cmp);
    let upper = *upper;
    if n % 2 == 1 {
        return Some(upper);
    }
    let lower = left.iter().copied().max_by(f64::total_cmp)?;
    Some(lower + 0.5 * (upper - lower))
}

/// Paired binary outcomes of the same units under two conditions (a paired 2×2 table).
///
/// In the report "first" is the baseline (`warn`) and "second" the candidate, so
/// [`PairedTable::difference`] is pass rate(baseline) − pass rate(candidate).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PairedTable {
    /// `a`: pass in both.
    pub both: u64,
    /// `b`: pass only in the first.
    pub first_only: u64,
    /// `c`: pass only in the second.
    pub second_only: u64,
    /// `d`: pass in neither.
    pub neither: u64,
}

impl PairedTable {
    /// Counts `(first passed, second passed)` pairs.
    pub fn from_pairs(pairs: impl IntoIterator<Item = (bool, bool)>) -> PairedTable {
        let mut t = PairedTable::default();
        for pair in pairs {
            match pair {
                (true, true) => t.both += 1,
                (true, false) => t.first_only += 1,
                (false, true) => t.second_only += 1,
                (false, false) => t.neither += 1,
            }
        }
        t
    }

    /// Number of pairs.
    pub fn n(&self) -> u64 {
        self.both + self.first_only + self.second_only + self.neither
    }

    /// Passes of the first (`a + b`).
    pub fn first_passed(&self) -> u64 {
        self.both + self.first_only
    }

    /// Passes of the second (`a + c`).
    pub fn second_passed(&self) -> u64 {
        self.both + self.second_only
    }

    /// `(b − c) / n`; `None` without pairs.
    pub fn difference(&self) -> Option<f64> {
        let n = self.n();
        (n > 0).then(|| (self.first_only as f64 - self.second_only as f64) / n as f64)
    }
}

/// McNemar's exact (conditional) two-sided p-value for `b` and `c` discordant pairs:
/// `min(1, 2 · P(X ≤ min(b, c)))` with `X ~ Binomial(b + c, ½)`; 1 when `b + c = 0`.
/// See the module docs.
pub fn mcnemar_exact(b: u64, c: u64) -> f64 {
    let n = b + c;
    if n == 0 {
        return 1.0;
    }
    let k = b.min(c);
    // ln(C(n, i) / 2^n) for i = 0..=k, by the ratio C(n, i) / C(n, i−1) = (n − i + 1) / i.
    let mut ln_terms = Vec::with_capacity(k as usize + 1);
    let mut ln_term = -(n as f64) * std::f64::consts::LN_2;
    ln_terms.push(ln_term);
    for i in 1..=k {
        ln_term += ((n - i + 1) as f64).ln() - (i as f64).ln();
        ln_terms.push(ln_term);
    }
    let max = ln_terms.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let sum: f64 = ln_terms.iter().map(|t| (t - max).exp()).sum();
    (2.0 * (max + sum.ln()).exp()).min(1.0)
}

/// A paired difference of proportions with its 95% interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PairedDifference {
    /// Point estimate `(b − c) / n`.
    pub value: f64,
    /// Lower bound.
    pub lo: f64,
    /// Upper bound.
    pub hi: f64,
}

impl PairedDifference {
    /// Non-inferiority at `margin`: the upper bound of (baseline − candidate) is ≤ `margin`.
    pub fn non_inferior(&self, margin: f64) -> bool {
        self.hi <= margin
    }
}

/// Newcombe (1998) method 10 interval for the difference of paired proportions
/// `(a+b)/n − (a+c)/n` at normal quantile `z` (see the module docs); `None` without pairs.
pub fn newcombe_paired_difference(t: &PairedTable, z: f64) -> Option<PairedDifference> {
    let n = t.n();
    let theta = t.difference()?;
    let nf = n as f64;
    let (e, f) = (t.first_passed(), n - t.first_passed());
    let (g, h) = (t.second_passed(), n - t.second_passed());
    let p1 = e as f64 / nf;
    let p2 = g as f64 / nf;
    let (l1, u1) = wilson_interval(e, n, z)?;
    let (l2, u2) = wilson_interval(g, n, z)?;
    let phi = if e == 0 || f == 0 || g == 0 || h == 0 {
        0.0
    } else {
        let a = t.both as f64 * t.neither as f64 - t.first_only as f64 * t.second_only as f64;
        let adjusted = if a > nf / 2.0 {
            a - nf / 2.0
        } else if a >= 0.0 {
            0.0
        } else {
            a
        };
        adjusted / (e as f64 * f as f64 * g as f64 * h as f64).sqrt()
    };
    let spread = |x: f64, y: f64| (x * x - 2.0 * phi * x * y + y * y).max(0.0).sqrt();
    let lo = theta - spread(p1 - l1, u2 - p2);
    let hi = theta + spread(u1 - p1, p2 - l2);
    Some(PairedDifference {
        value: theta,
        lo: lo.max(-1.0),
        hi: hi.min(1.0),
    })
}

/// Resamples of the token-reduction bootstrap.
pub const BOOTSTRAP_RESAMPLES: u32 = 2_000;

/// Seed of the token-reduction bootstrap ("ctxbench" in ASCII): fixed, so equal runs give
/// equal reports.
pub const BOOTSTRAP_SEED: u64 = u64::from_be_bytes(*b"ctxbench");

/// A percentile bootstrap interval and how it was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BootstrapInterval {
    /// Lower bound.
    pub lo: f64,
    /// Upper bound.
    pub hi: f64,
    /// Resamples drawn.
    pub resamples: u32,
    /// Clusters resampled (non-empty ones).
    pub clusters: usize,
    /// Generator seed.
    pub seed: u64,
}

/// Percentile bootstrap interval at `level` (e.g. 0.95) for the median of the pooled
/// values of `clusters`, resampling whole clusters (see the module docs). Empty clusters
/// and non-finite values are ignored; `None` with fewer than two non-empty clusters or
/// no resample.
pub fn bootstrap_median(
    clusters: &[Vec<f64>],
    resamples: u32,
    seed: u64,
    level: f64,
) -> Option<BootstrapInterval> {
    let clusters: Vec<Vec<f64>> = clusters
        .iter()
        .map(|c| c.iter().copied().filter(|v| v.is_finite()).collect())
        .filter(|c: &Vec<f64>| !c.is_empty())
        .collect();
    let k = clusters.len();
    if k < 2 || resamples == 0 {
        return None;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let largest = clusters.iter().map(Vec::len).max().unwrap_or(0);
    let mut pooled: Vec<f64> = Vec::with_capacity(largest * k);
    let mut medians: Vec<f64> = Vec::with_capacity(resamples as usize);
    for _ in 0..resamples {
        pooled.clear();
        for _ in 0..k {
            let i = index_below(&mut rng, k as u64) as usize;
            pooled.extend_from_slice(&clusters[i]);
        }
        medians.extend(median_in_place(&mut pooled));
    }
    medians.sort_unstable_by(f64::total_cmp);
    let tail = (1.0 - level.clamp(0.0, 1.0)) / 2.0;
    Some(BootstrapInterval {
        lo: quantile_sorted(&medians, tail)?,
        hi: quantile_sorted(&medians, 1.0 - tail)?,
        resamples,
        clusters: k,
        seed,
    })
}

/// Percentile bootstrap interval at `level` for the **mean** of `values` (one value per
/// independent unit, e.g. per scenario), resampling the units with replacement. Non-finite
/// values are ignored; `None` with fewer than two values or no resample.
pub fn bootstrap_mean(
    values: &[f64],
    resamples: u32,
    seed: u64,
    level: f64,
) -> Option<BootstrapInterval> {
    let values: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    let k = values.len();
    if k < 2 || resamples == 0 {
        return None;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut means: Vec<f64> = Vec::with_capacity(resamples as usize);
    for _ in 0..resamples {
        let mut sum = 0.0;
        for _ in 0..k {
            sum += values[index_below(&mut rng, k as u64) as usize];
        }
        means.push(sum / k as f64);
    }
    means.sort_unstable_by(f64::total_cmp);
    let tail = (1.0 - level.clamp(0.0, 1.0)) / 2.0;
    Some(BootstrapInterval {
        lo: quantile_sorted(&means, tail)?,
        hi: quantile_sorted(&means, 1.0 - tail)?,
        resamples,
        clusters: k,
        seed,
    })
}

/// Uniform integer in `0..n` (`n > 0`) from 64-bit generator output, without modulo bias:
/// Lemire (2019), "Fast random integer generation in an interval", ACM TOMACS 29(1).
fn index_below(rng: &mut impl RngCore, n: u64) -> u64 {
    let mut m = u128::from(rng.next_u64()) * u128::from(n);
    if (m as u64) < n {
        let threshold = n.wrapping_neg() % n;
        while (m as u64) < threshold {
            m = u128::from(rng.next_u64()) * u128::from(n);
        }
    }
    (m >> 64) as u64
}

/// Largest sample size the "smallest demonstrable n" searches consider.
const MAX_DEMONSTRABLE_N: u64 = 1_000_000;

/// The fewest probes with which a perfect record (n of n) has a lower Wilson 95% bound of at
/// least `min`: below it, a recall gate cannot pass whatever the system does, so it is
/// inconclusive rather than failed. `None` when no n up to a million suffices.
pub fn wilson_demonstrable_n(min: f64) -> Option<u64> {
    let ok = |n: u64| wilson_interval(n, n, Z_95).is_some_and(|(lo, _)| lo >= min);
    smallest(ok)
}

/// The fewest paired units with which identical results in both modes (all pass) give a
/// Newcombe 95% upper bound on the difference within `margin`: below it, non-inferiority
/// cannot be shown whatever the system does. `None` when no n up to a million suffices.
pub fn newcombe_demonstrable_n(margin: f64) -> Option<u64> {
    let ok = |n: u64| {
        let t = PairedTable {
            both: n,
            ..PairedTable::default()
        };
        newcombe_paired_difference(&t, Z_95).is_some_and(|d| d.hi <= margin)
    };
    smallest(ok)
}

/// Smallest n in 1..=[`MAX_DEMONSTRABLE_N`] with `ok(n)`, for a monotone `ok`.
fn smallest(ok: impl Fn(u64) -> bool) -> Option<u64> {
    if !ok(MAX_DEMONSTRABLE_N) {
        return None;
    }
    let (mut lo, mut hi) = (1u64, MAX_DEMONSTRABLE_N);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if ok(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Some(lo)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 5e-4
    }

    #[test]
    fn wilson_matches_published_values() {
        // 8/10: [0.490, 0.943] (e.g. Newcombe 1998, method 3; R binom.confint "wilson").
        let (lo, hi) = wilson_interval(8, 10, Z_95).expect("n > 0");
        assert!(close(lo, 0.4902) && close(hi, 0.9433), "{lo} {hi}");
        // 0/10: [0, 0.278].
        let (lo, hi) = wilson_interval(0, 10, Z_95).expect("n > 0");
        assert!(close(lo, 0.0) && close(hi, 0.2775), "{lo} {hi}");
        // 10/10: [0.722, 1].
        let (lo, hi) = wilson_interval(10, 10, Z_95).expect("n > 0");
        assert!(close(lo, 0.7225) && close(hi, 1.0), "{lo} {hi}");
        // 81/263 (Newcombe 1998 example): [0.2553, 0.3662].
        let (lo, hi) = wilson_interval(81, 263, Z_95).expect("n > 0");
        assert!(close(lo, 0.2553) && close(hi, 0.3662), "{lo} {hi}");
        // 1/1: [0.2065, 1].
        let (lo, hi) = wilson_interval(1, 1, Z_95).expect("n > 0");
        assert!(close(lo, 0.2065) && close(hi, 1.0), "{lo} {hi}");
    }

    #[test]
    fn wilson_without_evidence_is_none() {
        assert_eq!(wilson_interval(0, 0, Z_95), None);
        assert_eq!(Proportion::wilson(0, 0), None);
    }

    #[test]
    fn quantiles_match_numpy_linear() {
        // numpy.percentile([1, 2, 3, 4], [0, 50, 95, 100]) = [1, 2.5, 3.85, 4].
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile_sorted(&v, 0.0), Some(1.0));
        assert_eq!(quantile_sorted(&v, 0.5), Some(2.5));
        assert!(close(quantile_sorted(&v, 0.95).expect("q"), 3.85));
        assert_eq!(quantile_sorted(&v, 1.0), Some(4.0));
        assert_eq!(quantile_sorted(&[], 0.5), None);
        assert_eq!(median_in_place(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median_in_place(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median_in_place(&mut []), None);
    }

    #[test]
    fn mcnemar_exact_matches_published_values() {
        // Fagerland, Lydersen & Laake (2013, 2014): airway hyper-responsiveness before and
        // after stem-cell transplantation (Bentur et al. 2009), b = 1, c = 7:
        // exact conditional p = 0.070 (= 2 · 9/256).
        assert!((mcnemar_exact(1, 7) - 0.0703125).abs() < 1e-12);
        assert_eq!(mcnemar_exact(7, 1), mcnemar_exact(1, 7));
        // Complete response before and after consolidation therapy (Cavo et al. 2012),
        // b = 6, c = 16: exact conditional p = 0.052479 (Fagerland et al.; R package
        // `contingencytables`, McNemar_exact_cond_test_paired_2x2).
        assert!((mcnemar_exact(6, 16) - 0.052479).abs() < 5e-7);
        // No discordant pairs, or a perfect balance: no evidence of a difference.
        assert_eq!(mcnemar_exact(0, 0), 1.0);
        assert_eq!(mcnemar_exact(5, 5), 1.0);
        // All discordant pairs one way: 2 / 2^n.
        assert!((mcnemar_exact(0, 5) - 0.0625).abs() < 1e-12);
    }

    #[test]
    fn mcnemar_log_space_sum_equals_exact_integer_sum() {
        for b in 0..=30u64 {
            for c in 0..=30u64 {
                let n = b + c;
                let mut binom: u128 = 1;
                let mut sum: u128 = 0;
                for i in 0..=b.min(c) {
                    if i > 0 {
                        binom = binom * u128::from(n - i + 1) / u128::from(i);
                    }
                    sum += binom;
                }
                let exact = (2.0 * sum as f64 / 2f64.powi(n as i32)).min(1.0);
                let p = mcnemar_exact(b, c);
                assert!(
                    (p - exact).abs() < 1e-12 * exact.max(1e-300) + 1e-15,
                    "{b} {c}"
                );
            }
        }
        // Thousands of pairs: finite, tiny, no underflow to 0 or NaN.
        let p = mcnemar_exact(400, 600);
        assert!(p > 0.0 && p < 1e-8, "{p}");
        assert!(mcnemar_exact(5000, 5000) == 1.0);
    }

    fn newcombe(a: u64, b: u64, c: u64, d: u64) -> PairedDifference {
        let t = PairedTable {
            both: a,
            first_only: b,
            second_only: c,
            neither: d,
        };
        newcombe_paired_difference(&t, Z_95).expect("pairs")
    }

    #[test]
    fn newcombe_method_10_matches_published_values() {
        let check = |d: PairedDifference, lo: f64, hi: f64, tol: f64| {
            assert!(
                (d.lo - lo).abs() < tol && (d.hi - hi).abs() < tol,
                "{d:?} vs [{lo}, {hi}]"
            );
        };
        // Published values as checked by the R packages `ratesci` (tests/testthat/test3.R)
        // and `contingencytables` (tests/testthat/test-ch8.R).
        // Newcombe (1998) worked example (a, b, c, d) = (20, 12, 2, 16): θ = 0.2,
        // method 10 → [0.0562, 0.3292] (without the correlation term, method 8 style, it
        // would be [0.0618, 0.3242]).
        let d = newcombe(20, 12, 2, 16);
        assert!((d.value - 0.2).abs() < 1e-12);
        check(d, 0.0562, 0.3292, 5e-5);
        // Fagerland, Lydersen & Laake (2014), Bentur et al. data (1, 1, 7, 12):
        // θ = −0.286, Newcombe hybrid score [−0.507, −0.026].
        let d = newcombe(1, 1, 7, 12);
        assert!((d.value + 6.0 / 21.0).abs() < 1e-12);
        check(d, -0.507, -0.026, 5e-4);
        // Fagerland et al. (2017) ch. 8, Cavo et al. data (59, 6, 16, 80):
        // −0.0621 (−0.1186 to −0.0046).
        check(newcombe(59, 6, 16, 80), -0.1186, -0.0046, 5e-5);
        // Tang et al. (2010) example (8, 3, 1, 2), Newcombe method 10: [−0.1574, 0.4136].
        check(newcombe(8, 3, 1, 2), -0.1574, 0.4136, 5e-5);
    }

    #[test]
    fn newcombe_without_discordant_pairs_is_not_degenerate() {
        // 2 pairs passing in both: φ = 0 (a marginal is 0), bounds ±(1 − Wilson lo of 2/2).
        let d = newcombe(2, 0, 0, 0);
        assert_eq!(d.value, 0.0);
        assert!(close(d.hi, 0.6576) && close(d.lo, -0.6576), "{d:?}");
        assert!(!d.non_inferior(0.05));
        // Every pair passing in both shows non-inferiority at 5 points only from 73 pairs.
        assert!(!newcombe(72, 0, 0, 0).non_inferior(0.05));
        assert!(newcombe(73, 0, 0, 0).non_inferior(0.05));
        // The candidate winning every pair of two is non-inferior: U = −1 + √2 · 0.6576.
        let d = newcombe(0, 0, 2, 0);
        assert!(close(d.hi, -0.0700) && d.non_inferior(0.05), "{d:?}");
        assert_eq!(d.lo, -1.0);
        assert_eq!(
            newcombe_paired_difference(&PairedTable::default(), Z_95),
            None
        );
        let t =
            PairedTable::from_pairs([(true, true), (true, false), (false, true), (false, false)]);
        assert_eq!(
            (t.both, t.first_only, t.second_only, t.neither),
            (1, 1, 1, 1)
        );
    }

    #[test]
    fn bootstrap_is_seeded_and_deterministic() {
        let clusters: Vec<Vec<f64>> = (0..12)
            .map(|i| {
                (0..5)
                    .map(|j| ((i * 7 + j * 3) % 11) as f64 / 10.0)
                    .collect()
            })
            .collect();
        let a = bootstrap_median(&clusters, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, 0.95);
        let b = bootstrap_median(&clusters, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, 0.95);
        assert_eq!(a, b);
        let a = a.expect("interval");
        assert!(a.lo <= a.hi && a.clusters == 12 && a.resamples == 2_000);
        let other = bootstrap_median(&clusters, BOOTSTRAP_RESAMPLES, 1, 0.95).expect("interval");
        assert_eq!(other.seed, 1);
    }

    #[test]
    fn bootstrap_matches_exact_and_distribution_free_values() {
        // Two one-value clusters {0}, {1}: the exact bootstrap distribution of the median
        // is 0, 0.5, 1 with probabilities ¼, ½, ¼, so the 95% percentile interval is [0, 1].
        let two = vec![vec![0.0], vec![1.0]];
        let i = bootstrap_median(&two, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, 0.95).expect("ci");
        assert_eq!((i.lo, i.hi), (0.0, 1.0));
        // Equal clusters: no spread.
        let same = vec![vec![0.4, 0.6]; 5];
        let i = bootstrap_median(&same, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, 0.95).expect("ci");
        assert!(close(i.lo, 0.5) && close(i.hi, 0.5), "{i:?}");
        // 1..=100, one value per cluster: the distribution-free 95% interval for the median
        // is [x(40), x(61)] (Campbell & Gardner 1988, BMJ 296:1454, ranks n/2 ∓ 1.96√n/2);
        // the percentile bootstrap lands within a few ranks of it.
        let hundred: Vec<Vec<f64>> = (1..=100).map(|v| vec![f64::from(v)]).collect();
        let i = bootstrap_median(&hundred, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, 0.95).expect("ci");
        assert!(
            (i.lo - 40.0).abs() <= 3.0 && (i.hi - 61.0).abs() <= 3.0,
            "{i:?}"
        );
        // Too few clusters: no interval.
        assert_eq!(bootstrap_median(&[vec![1.0, 2.0]], 100, 0, 0.95), None);
        // The mean of per-unit values: deterministic, contains the sample mean, needs two.
        let m = bootstrap_mean(&[0.0, 0.1, 0.2, 0.3], 2000, 7, 0.95).expect("ci");
        assert!(
            m.lo <= 0.15 && 0.15 <= m.hi && m.lo >= 0.0 && m.hi <= 0.3,
            "{m:?}"
        );
        assert_eq!(
            bootstrap_mean(&[0.0, 0.1, 0.2, 0.3], 2000, 7, 0.95),
            Some(m)
        );
        assert_eq!(bootstrap_mean(&[1.0], 100, 0, 0.95), None);
        assert_eq!(bootstrap_median(&[vec![1.0], vec![]], 100, 0, 0.95), None);
    }

    #[test]
    fn index_below_is_uniform_and_in_range() {
        let mut rng = ChaCha8Rng::seed_from_u64(BOOTSTRAP_SEED);
        let mut counts = [0u32; 3];
        for _ in 0..30_000 {
            counts[index_below(&mut rng, 3) as usize] += 1;
        }
        for c in counts {
            assert!((9_500..=10_500).contains(&c), "{counts:?}");
        }
        assert_eq!(index_below(&mut rng, 1), 0);
    }

    #[test]
    fn proportion_carries_point_value() {
        let p = Proportion::wilson(3, 4).expect("n > 0");
        assert_eq!(p.value, 0.75);
        assert!(p.lo < 0.75 && p.hi > 0.75);
    }

    #[test]
    fn demonstrable_sizes_match_the_closed_forms() {
        // A perfect record's lower Wilson bound is n / (n + z²): ≥ 0.95 from n = 73.
        assert_eq!(wilson_demonstrable_n(0.95), Some(73));
        // All-concordant pairs: the upper bound is z² / (n + z²) ≤ 0.05 from n = 70.
        let n = newcombe_demonstrable_n(0.05).expect("reachable");
        let t = PairedTable {
            both: n,
            ..PairedTable::default()
        };
        assert!(newcombe_paired_difference(&t, Z_95).expect("ci").hi <= 0.05);
        let t = PairedTable {
            both: n - 1,
            ..PairedTable::default()
        };
        assert!(newcombe_paired_difference(&t, Z_95).expect("ci").hi > 0.05);
        assert_eq!(wilson_demonstrable_n(1.0), None);
    }
}
