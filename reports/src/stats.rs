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
//! value.

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
    fn proportion_carries_point_value() {
        let p = Proportion::wilson(3, 4).expect("n > 0");
        assert_eq!(p.value, 0.75);
        assert!(p.lo < 0.75 && p.hi > 0.75);
    }
}
