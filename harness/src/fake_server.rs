//! Scripts for ctxbench's fake provider served over HTTP (`ctxbench serve-fake`, and the
//! loopback model an external agent talks to).
//!
//! The adapters crate serves the fake provider but knows no scenarios; this module turns a
//! trial key ([`crate::connect::trial_key`]: scenario id, trial seed, mode, trial) into the
//! same script the in-process fake would play for that trial, so a trial over HTTP sees
//! exactly the answers it would see in process. The key carries no answers — the facts
//! come from the suite the server was started with.

use std::collections::HashMap;
use std::sync::Arc;

use ctxbench_adapters::fake::{FakeScript, FakeTokenizer};
use ctxbench_adapters::serve::ScriptResolver;

use crate::connect::parse_trial_key;
use crate::scenario::Scenario;

/// Resolves trial keys against a suite.
pub struct SuiteScripts {
    scenarios: HashMap<String, Arc<Scenario>>,
    tokenizer: FakeTokenizer,
}

impl SuiteScripts {
    /// Serve the scripts of `scenarios`.
    pub fn new(scenarios: impl IntoIterator<Item = Arc<Scenario>>) -> Self {
        SuiteScripts {
            scenarios: scenarios.into_iter().map(|s| (s.id.clone(), s)).collect(),
            tokenizer: FakeTokenizer::new(),
        }
    }

    /// The script of trial `trial` of `scenario`, instantiated with `seed` (its trial seed)
    /// — varied as the scenario's `vary:` says, exactly as in process.
    pub fn script(&self, scenario: &str, seed: u64, trial: u32) -> Option<FakeScript> {
        let s = self.scenarios.get(scenario)?;
        Some(
            s.instantiate_trial(seed, trial, &|t: &str| self.tokenizer.count_text(t))
                .fake,
        )
    }
}

impl ScriptResolver for SuiteScripts {
    fn resolve(&self, key: &str) -> Option<FakeScript> {
        let (scenario, seed, _mode, trial) = parse_trial_key(key)?;
        self.script(&scenario, seed, trial)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connect::trial_key;

    #[test]
    fn keys_resolve_to_the_in_process_script() {
        let s = crate::scenario::load_str(
            "t.yaml",
            include_str!("../../scenarios/overflow-retry.yaml"),
        )
        .unwrap();
        let id = s.id.clone();
        let scripts = SuiteScripts::new([Arc::new(s.clone())]);
        let key = trial_key(&id, 99, crate::Mode::Compact, 0);
        let tok = FakeTokenizer::new();
        let direct = s.instantiate(99, &|t: &str| tok.count_text(t)).fake;
        assert_eq!(scripts.resolve(&key), Some(direct));
        assert_eq!(scripts.resolve("nope~1~compact~0"), None);
        // A varied trial resolves to its varied script.
        let v =
            crate::scenario::load_str("v.yaml", include_str!("../../scenarios/fits-window.yaml"))
                .unwrap();
        let scripts = SuiteScripts::new([Arc::new(v.clone())]);
        let key = trial_key(&v.id, 5, crate::Mode::Warn, 3);
        let varied = v.instantiate_trial(5, 3, &|t: &str| tok.count_text(t)).fake;
        assert_eq!(scripts.resolve(&key), Some(varied.clone()));
        assert_ne!(
            Some(varied),
            Some(v.instantiate(5, &|t: &str| tok.count_text(t)).fake)
        );
        assert_eq!(scripts.resolve("garbage"), None);
    }
}
