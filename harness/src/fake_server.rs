//! Scripts for ctxbench's fake provider served over HTTP (`ctxbench serve-fake`, and the
//! loopback model an external agent talks to).
//!
//! The adapters crate serves the fake provider but knows no scenarios; this module turns a
//! trial key ([`crate::connect::trial_key`]: scenario id, trial seed, mode, trial) into the
//! same script the in-process fake would play for that trial, so a trial over HTTP sees
//! exactly the answers it would see in process. The key carries no answers — the facts
//! come from the suite the server was started with.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ctxbench_adapters::fake::{FakeScript, FakeTokenizer};
use ctxbench_adapters::serve::ScriptResolver;

use crate::connect::parse_trial_key;
use crate::scenario::Scenario;

/// Scripts kept by default ([`SuiteScripts::with_cache`]).
pub const DEFAULT_SCRIPT_CACHE: usize = 32;

/// Resolves trial keys against a suite.
///
/// The server asks for a trial's script on every request (it keeps only the trial's
/// position), so instantiated scripts — hundreds of kilobytes for a long session — are
/// kept in a small least-recently-used cache by (scenario, trial seed): the modes of one
/// trial share a script, and a trial in progress finds its script there. An evicted script
/// is rebuilt byte for byte when asked again (instantiation is deterministic).
pub struct SuiteScripts {
    scenarios: HashMap<String, Arc<Scenario>>,
    tokenizer: FakeTokenizer,
    cache: Mutex<ScriptCache>,
}

/// (scenario, seed, trial) → script and the tick of its latest use.
struct ScriptCache {
    capacity: usize,
    tick: u64,
    scripts: HashMap<(String, u64, u32), (Arc<FakeScript>, u64)>,
}

impl SuiteScripts {
    /// Serve the scripts of `scenarios`, caching [`DEFAULT_SCRIPT_CACHE`] of them.
    pub fn new(scenarios: impl IntoIterator<Item = Arc<Scenario>>) -> Self {
        Self::with_cache(scenarios, DEFAULT_SCRIPT_CACHE)
    }

    /// Serve the scripts of `scenarios`, caching at most `capacity` (0: none).
    pub fn with_cache(scenarios: impl IntoIterator<Item = Arc<Scenario>>, capacity: usize) -> Self {
        SuiteScripts {
            scenarios: scenarios.into_iter().map(|s| (s.id.clone(), s)).collect(),
            tokenizer: FakeTokenizer::new(),
            cache: Mutex::new(ScriptCache {
                capacity,
                tick: 0,
                scripts: HashMap::new(),
            }),
        }
    }

    /// The script of trial `trial` of `scenario` with `seed`, from the cache or
    /// instantiated (and cached).
    pub fn shared_script(&self, scenario: &str, seed: u64, trial: u32) -> Option<Arc<FakeScript>> {
        // The trial index matters only to a scenario whose `vary:` changes later trials.
        let varies = self.scenarios.get(scenario)?.vary.varies();
        let id = (scenario.to_string(), seed, if varies { trial } else { 0 });
        {
            let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            cache.tick += 1;
            let tick = cache.tick;
            if let Some((script, used)) = cache.scripts.get_mut(&id) {
                *used = tick;
                return Some(script.clone());
            }
        }
        // Instantiate outside the lock: concurrent trials of other scripts go on.
        let script = Arc::new(self.script(scenario, seed, trial)?);
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if cache.capacity == 0 {
            return Some(script);
        }
        if cache.scripts.len() >= cache.capacity && !cache.scripts.contains_key(&id) {
            let oldest = cache
                .scripts
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                cache.scripts.remove(&oldest);
            }
        }
        let tick = cache.tick;
        cache.scripts.insert(id, (script.clone(), tick));
        Some(script)
    }

    /// Scripts cached now.
    pub fn cached(&self) -> usize {
        self.cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .scripts
            .len()
    }

    /// The script of trial `trial` of `scenario`, instantiated with `seed` (its trial seed)
    /// — varied as the scenario's `vary:` says, exactly as in process.
    pub fn script(&self, scenario: &str, seed: u64, trial: u32) -> Option<FakeScript> {
        let s = self.scenarios.get(scenario)?;
        Some(
            s.instantiate_trial_separable(seed, trial, &|t: &str| self.tokenizer.count_text(t))
                .fake,
        )
    }
}

impl ScriptResolver for SuiteScripts {
    fn resolve(&self, key: &str) -> Option<FakeScript> {
        let (scenario, seed, _mode, trial) = parse_trial_key(key)?;
        self.script(&scenario, seed, trial)
    }

    fn script(&self, key: &str) -> Option<Arc<FakeScript>> {
        let (scenario, seed, _mode, trial) = parse_trial_key(key)?;
        self.shared_script(&scenario, seed, trial)
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

    #[test]
    fn scripts_are_shared_across_modes_and_the_cache_is_bounded() {
        let s = crate::scenario::load_str(
            "t.yaml",
            include_str!("../../scenarios/overflow-retry.yaml"),
        )
        .unwrap();
        let id = s.id.clone();
        let scripts = SuiteScripts::with_cache([Arc::new(s)], 2);
        let off =
            ScriptResolver::script(&scripts, &trial_key(&id, 1, crate::Mode::Off, 0)).unwrap();
        let compact =
            ScriptResolver::script(&scripts, &trial_key(&id, 1, crate::Mode::Compact, 0)).unwrap();
        assert!(Arc::ptr_eq(&off, &compact), "one script per trial seed");
        for seed in 2..10 {
            ScriptResolver::script(&scripts, &trial_key(&id, seed, crate::Mode::Off, 0)).unwrap();
        }
        assert_eq!(scripts.cached(), 2);
        // Rebuilt after eviction: equal, not the same allocation.
        let again =
            ScriptResolver::script(&scripts, &trial_key(&id, 1, crate::Mode::Off, 0)).unwrap();
        assert!(!Arc::ptr_eq(&off, &again));
        assert_eq!(*off, *again);
    }
}
