//! Seed derivation: one run seed fans out into per-trial seeds.
//!
//! A trial's seed depends on the run seed, the scenario id and the trial index — not on the
//! mode — so the same step of the same trial sends byte-identical scripted content in every
//! mode and requests can be paired per step.

use sha2::{Digest, Sha256};

/// The seed of trial `trial` of `scenario` in a run seeded with `run_seed`.
pub fn trial_seed(run_seed: u64, scenario: &str, trial: u32) -> u64 {
    let mut h = Sha256::new();
    h.update(b"ctxbench.trial-seed.v1\0");
    h.update(run_seed.to_le_bytes());
    h.update(scenario.as_bytes());
    h.update([0]);
    h.update(trial.to_le_bytes());
    let d = h.finalize();
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[..8]);
    u64::from_le_bytes(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_and_distinct() {
        assert_eq!(trial_seed(7, "a", 0), trial_seed(7, "a", 0));
        assert_ne!(trial_seed(7, "a", 0), trial_seed(7, "a", 1));
        assert_ne!(trial_seed(7, "a", 0), trial_seed(8, "a", 0));
        assert_ne!(trial_seed(7, "a", 0), trial_seed(7, "b", 0));
    }
}
