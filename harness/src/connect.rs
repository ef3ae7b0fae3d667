//! Which provider a trial talks to, and the run-level plumbing trials share to reach it.
//!
//! A [`ProviderSpec`] is plain data (it goes into the manifest, minus any key, so
//! `--resume` reconnects the same way). [`Services`] holds what is built once per run and
//! shared: the HTTP clients with their adaptive concurrency limiter, and the cassette.

use std::sync::Arc;

use ctxbench_adapters::capabilities::{self, ModelCapabilities};

use crate::cassette::Cassette;
use crate::storage::schema::ProviderConfig;

/// The wire format of a real provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// OpenAI-compatible chat completions (OpenAI, DeepSeek, vLLM, llama.cpp, Ollama, and
    /// ctxbench's own `serve-fake`).
    OpenAi,
    /// Anthropic messages.
    Anthropic,
}

/// A provider reached over HTTP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpSpec {
    /// Wire format.
    pub wire: Wire,
    /// Model to request; `None` sends each scenario's own model name (for `serve-fake`
    /// and servers that ignore the name, like llama.cpp's).
    pub model: Option<String>,
    /// Base URL override (`…/v1` for OpenAI-compatible servers).
    pub base_url: Option<String>,
    /// Environment variable holding the key; `None` sends no key (local servers).
    pub key_env: Option<String>,
}

/// Which provider a trial talks to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderSpec {
    /// The in-process deterministic fake provider.
    Fake,
    /// A provider over HTTP.
    Http(HttpSpec),
}

impl ProviderSpec {
    /// The provider's report name: `fake`, `openai` or `anthropic`.
    pub fn name(&self) -> &'static str {
        match self {
            ProviderSpec::Fake => "fake",
            ProviderSpec::Http(h) => match h.wire {
                Wire::OpenAi => "openai",
                Wire::Anthropic => "anthropic",
            },
        }
    }

    /// Set the base URL (`--base-url`); an error for the in-process fake.
    pub fn with_base_url(self, url: Option<String>) -> Result<Self, String> {
        match (self, url) {
            (spec, None) => Ok(spec),
            (ProviderSpec::Fake, Some(_)) => Err(
                "--base-url needs an HTTP provider, e.g. `--provider openai` against `ctxbench serve-fake`"
                    .into(),
            ),
            (ProviderSpec::Http(mut h), Some(url)) => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(format!(
                        "--base-url `{url}`: expected an http:// or https:// URL"
                    ));
                }
                h.base_url = Some(url.trim_end_matches('/').to_string());
                Ok(ProviderSpec::Http(h))
            }
        }
    }

    /// The manifest record (never a key, only the variable's name).
    pub fn config(&self) -> ProviderConfig {
        match self {
            ProviderSpec::Fake => ProviderConfig {
                kind: "fake".into(),
                ..ProviderConfig::default()
            },
            ProviderSpec::Http(h) => ProviderConfig {
                kind: self.name().into(),
                model: h.model.clone(),
                base_url: h.base_url.clone(),
                key_env: h.key_env.clone(),
            },
        }
    }

    /// Rebuild a spec from its manifest record (`--resume`).
    pub fn from_config(c: &ProviderConfig) -> Result<Self, String> {
        let wire = match c.kind.as_str() {
            "fake" => return Ok(ProviderSpec::Fake),
            "openai" => Wire::OpenAi,
            "anthropic" => Wire::Anthropic,
            other => return Err(format!("unknown provider kind `{other}` in the manifest")),
        };
        Ok(ProviderSpec::Http(HttpSpec {
            wire,
            model: c.model.clone(),
            base_url: c.base_url.clone(),
            key_env: c.key_env.clone(),
        }))
    }

    /// The model capabilities a trial of `scenario_model` budgets against: the scenario's
    /// own on the fake; on a real model, its table entry with the window capped at the
    /// scenario's (a scenario's small window is what makes compaction happen at all — a
    /// runtime configured below its model's limit).
    pub fn effective_model(&self, scenario_model: &ModelCapabilities) -> ModelCapabilities {
        match self {
            ProviderSpec::Http(HttpSpec {
                model: Some(model), ..
            }) => {
                let mut caps = capabilities::lookup(model);
                caps.context_window = caps.context_window.min(scenario_model.context_window);
                caps.max_output_tokens =
                    caps.max_output_tokens.min(scenario_model.max_output_tokens);
                caps.native_compaction = capabilities::NativeCompaction::Unsupported;
                caps
            }
            _ => scenario_model.clone(),
        }
    }
}

impl std::str::FromStr for ProviderSpec {
    type Err = String;
    /// `fake`, `openai[:MODEL]`, `anthropic:MODEL`, `deepseek:MODEL`, `ollama:MODEL`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (kind, model) = match s.split_once(':') {
            Some((k, m)) if !m.trim().is_empty() => (k, Some(m.trim().to_string())),
            Some((k, _)) => (k, None),
            None => (s, None),
        };
        let http = |wire, base: Option<&str>, key: Option<&str>| {
            ProviderSpec::Http(HttpSpec {
                wire,
                model: model.clone(),
                base_url: base.map(str::to_string),
                key_env: key.map(str::to_string),
            })
        };
        let spec = match kind {
            "fake" if model.is_none() => ProviderSpec::Fake,
            "openai" => http(Wire::OpenAi, None, Some("OPENAI_API_KEY")),
            "anthropic" => http(Wire::Anthropic, None, Some("ANTHROPIC_API_KEY")),
            "deepseek" => http(
                Wire::OpenAi,
                Some("https://api.deepseek.com/v1"),
                Some("DEEPSEEK_API_KEY"),
            ),
            "ollama" => http(Wire::OpenAi, Some("http://127.0.0.1:11434/v1"), None),
            _ => {
                return Err(format!(
                    "unknown provider `{s}` (expected fake, openai[:MODEL], anthropic:MODEL, \
                     deepseek:MODEL or ollama:MODEL)"
                ))
            }
        };
        if let ProviderSpec::Http(h) = &spec {
            if h.wire == Wire::Anthropic && h.model.is_none() {
                return Err("`anthropic` needs a model, e.g. anthropic:claude-sonnet-4-0".into());
            }
        }
        Ok(spec)
    }
}

/// What every trial of a run shares to reach its provider.
#[derive(Debug, Clone, Default)]
pub struct Services {
    /// A cassette being recorded or replayed.
    pub cassette: Option<Arc<Cassette>>,
}

impl Services {
    /// Build what a run's trials share to reach `provider`: checks the key's environment
    /// variable up front (unless every answer comes from a replayed cassette), so a missing
    /// key stops the run before its first trial instead of erroring every trial.
    pub fn connect(
        provider: &ProviderSpec,
        cassette: Option<Arc<Cassette>>,
    ) -> Result<Self, String> {
        let replaying = cassette.as_ref().is_some_and(|c| c.replaying());
        if let (ProviderSpec::Http(h), false) = (provider, replaying) {
            if let Some(var) = &h.key_env {
                let local = h.base_url.as_deref().is_some_and(|u| {
                    u.starts_with("http://127.") || u.starts_with("http://localhost")
                });
                if std::env::var_os(var).is_none() && !local {
                    return Err(format!(
                        "provider `{}` needs an API key in the environment variable {var}",
                        provider.name()
                    ));
                }
            }
        }
        Ok(Services { cassette })
    }

    /// The provider one trial talks to over HTTP. `model` is the effective model name;
    /// `trial_key` identifies the trial to ctxbench's own fake server.
    pub fn http_provider(
        &self,
        http: &HttpSpec,
        model: &str,
        trial_key: &str,
    ) -> Result<Box<dyn ctxbench_adapters::Provider>, String> {
        let _ = (http, model, trial_key);
        Err("HTTP providers are not connected yet".into())
    }
}

/// The opaque key that tells ctxbench's fake server which trial a request belongs to
/// (header `x-ctxbench-trial`, or the `/t/{key}/v1` path): scenario id, trial seed, mode
/// and trial. It carries no answers — the server derives the script from the suite itself.
pub fn trial_key(scenario: &str, seed: u64, mode: crate::Mode, trial: u32) -> String {
    format!("{scenario}~{seed}~{mode}~{trial}")
}

/// Split a [`trial_key`] back into `(scenario, seed, mode, trial)`.
pub fn parse_trial_key(key: &str) -> Option<(String, u64, crate::Mode, u32)> {
    let mut parts = key.split('~');
    let scenario = parts.next()?.to_string();
    let seed = parts.next()?.parse().ok()?;
    let mode = parts.next()?.parse().ok()?;
    let trial = parts.next()?.parse().ok()?;
    if parts.next().is_some() || scenario.is_empty() {
        return None;
    }
    Some((scenario, seed, mode, trial))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_round_trip_through_the_manifest() {
        for s in [
            "fake",
            "openai",
            "openai:gpt-4o-mini",
            "anthropic:claude-sonnet-4-0",
            "deepseek:deepseek-chat",
            "ollama:llama3",
        ] {
            let spec: ProviderSpec = s.parse().unwrap();
            assert_eq!(ProviderSpec::from_config(&spec.config()).unwrap(), spec);
        }
        assert!("anthropic".parse::<ProviderSpec>().is_err());
        assert!("gemini:x".parse::<ProviderSpec>().is_err());
        let local = "openai"
            .parse::<ProviderSpec>()
            .unwrap()
            .with_base_url(Some("http://127.0.0.1:9/v1/".into()))
            .unwrap();
        assert_eq!(
            local.config().base_url.as_deref(),
            Some("http://127.0.0.1:9/v1")
        );
        assert!(ProviderSpec::Fake
            .with_base_url(Some("http://x".into()))
            .is_err());
    }

    #[test]
    fn trial_keys_round_trip() {
        let k = trial_key("long-recall", 42, crate::Mode::Compact, 3);
        assert_eq!(
            parse_trial_key(&k),
            Some(("long-recall".into(), 42, crate::Mode::Compact, 3))
        );
        assert_eq!(parse_trial_key("x~1~compact"), None);
        assert_eq!(parse_trial_key("x~y~compact~1"), None);
    }
}
