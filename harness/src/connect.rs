//! Which provider a trial talks to, and the run-level plumbing trials share to reach it.
//!
//! A [`ProviderSpec`] is plain data (it goes into the manifest, minus any key, so
//! `--resume` reconnects the same way). [`Services`] holds what is built once per run and
//! shared: the HTTP clients with their adaptive concurrency limiter, and the cassette.

use std::sync::Arc;
use std::time::Duration;

use ctxbench_adapters::anthropic::{AnthropicConfig, AnthropicProvider};
use ctxbench_adapters::capabilities::{self, ModelCapabilities};
use ctxbench_adapters::openai::{OpenAiConfig, OpenAiProvider};
use ctxbench_adapters::resilience::{AdaptiveLimiter, Resilient, RetryPolicy};
use ctxbench_adapters::Provider;

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
    /// `fake`, `openai[:MODEL]`, `anthropic[:MODEL]`, `deepseek:MODEL`, `ollama:MODEL`.
    /// Without a model, each scenario's own model name is sent — meant for
    /// `ctxbench serve-fake` (Anthropic's real API needs one: see [`Services::connect`]).
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
        Ok(spec)
    }
}

/// What every trial of a run shares to reach its provider.
#[derive(Clone)]
pub struct Services {
    /// A cassette being recorded or replayed.
    pub cassette: Option<Arc<Cassette>>,
    /// The system under test.
    pub sut: crate::external::SutSpec,
    /// HTTP clients (one connection pool) and the adaptive limiter every trial shares.
    http: Option<Arc<HttpShared>>,
}

impl Services {
    /// Services for `sut` with the in-process fake provider (no cassette, no HTTP).
    pub fn new(sut: crate::external::SutSpec) -> Self {
        Services {
            cassette: None,
            sut,
            http: None,
        }
    }

    /// Services for an in-process system built by `factory`.
    pub fn in_process(factory: Arc<dyn ctxbench_sut::SutFactory>) -> Self {
        Services::new(crate::external::SutSpec::InProcess(factory))
    }
}

impl std::fmt::Debug for Services {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Services")
            .field("cassette", &self.cassette)
            .field("sut", &self.sut)
            .field("http", &self.http.is_some())
            .finish()
    }
}

/// How hard a run tries to get an answer out of a flaky provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpSettings {
    /// Most requests in flight at once (the adaptive limiter's ceiling; it halves on 429).
    pub max_in_flight: usize,
    /// Attempts per request (first included).
    pub max_attempts: u32,
    /// Timeout of one attempt.
    pub attempt_timeout: Duration,
    /// Seed of the backoff jitter.
    pub jitter_seed: u64,
    /// Cap on an honoured `Retry-After` (`--max-retry-after`).
    pub max_retry_after: Duration,
}

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            max_in_flight: 4,
            max_attempts: 5,
            attempt_timeout: Duration::from_secs(180),
            jitter_seed: 0,
            max_retry_after: ctxbench_adapters::resilience::DEFAULT_MAX_RETRY_AFTER,
        }
    }
}

enum HttpBase {
    OpenAi(OpenAiProvider),
    Anthropic(AnthropicProvider),
}

struct HttpShared {
    base: HttpBase,
    policy: RetryPolicy,
    limiter: Arc<AdaptiveLimiter>,
}

fn is_loopback(url: &str) -> bool {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .unwrap_or(url);
    rest.starts_with("127.") || rest.starts_with("localhost") || rest.starts_with("[::1]")
}

impl Services {
    /// Build what a run's trials share to reach `provider`. The key is read from the
    /// environment here, once, so a missing key stops the run before its first trial; a
    /// run replaying a cassette needs no key and opens no connection. A loopback server
    /// without the key variable set gets no key (llama.cpp, `serve-fake`).
    pub fn connect(
        sut: crate::external::SutSpec,
        provider: &ProviderSpec,
        cassette: Option<Arc<Cassette>>,
        settings: &HttpSettings,
    ) -> Result<Self, String> {
        let replaying = cassette.as_ref().is_some_and(|c| c.replaying());
        let ProviderSpec::Http(h) = provider else {
            return Ok(Services {
                cassette,
                sut,
                http: None,
            });
        };
        if replaying {
            return Ok(Services {
                cassette,
                sut,
                http: None,
            });
        }
        if h.wire == Wire::Anthropic && h.model.is_none() && h.base_url.is_none() {
            return Err(
                "`anthropic` needs a model, e.g. anthropic:claude-sonnet-4-0 (without one, each \
                 scenario's model name is sent, which only a --base-url such as \
                 `ctxbench serve-fake` knows)"
                    .into(),
            );
        }
        let local = h.base_url.as_deref().is_some_and(is_loopback);
        let key_env = h
            .key_env
            .clone()
            .filter(|var| !(local && std::env::var_os(var).is_none()));
        let timeout = settings.attempt_timeout + Duration::from_secs(5);
        let base = match h.wire {
            Wire::OpenAi => {
                let mut cfg = OpenAiConfig {
                    api_key_env: key_env,
                    timeout,
                    ..OpenAiConfig::default()
                };
                if let Some(url) = &h.base_url {
                    cfg.base_url = url.clone();
                }
                HttpBase::OpenAi(OpenAiProvider::new(cfg).map_err(|e| e.to_string())?)
            }
            Wire::Anthropic => {
                let mut cfg = AnthropicConfig {
                    api_key_env: key_env,
                    timeout,
                    ..AnthropicConfig::default()
                };
                if let Some(url) = &h.base_url {
                    cfg.base_url = url.clone();
                }
                HttpBase::Anthropic(AnthropicProvider::new(cfg).map_err(|e| e.to_string())?)
            }
        };
        let policy = RetryPolicy {
            max_attempts: settings.max_attempts.max(1),
            attempt_timeout: Some(settings.attempt_timeout),
            jitter_seed: settings.jitter_seed,
            max_retry_after: settings.max_retry_after,
            ..RetryPolicy::default()
        };
        Ok(Services {
            cassette,
            sut,
            http: Some(Arc::new(HttpShared {
                base,
                policy,
                limiter: Arc::new(AdaptiveLimiter::new(settings.max_in_flight.max(1))),
            })),
        })
    }

    /// The provider one trial talks to over HTTP: the shared client tagged with the trial's
    /// key (so ctxbench's fake server plays that trial's script), behind retries, backoff
    /// and the shared adaptive limiter. The model travels in each request, not here.
    pub fn http_provider(
        &self,
        http: &HttpSpec,
        trial_key: &str,
        declaration: &ctxbench_sut::Declaration,
    ) -> Result<Box<dyn Provider>, String> {
        let shared = self.http.as_ref().ok_or_else(|| {
            format!(
                "no connection to `{}` was set up for this run",
                http_name(http)
            )
        })?;
        let with_key = |e: ctxbench_adapters::transport::ConfigError| e.to_string();
        // ctxbench's own fake server (loopback) is told what the system under test declared,
        // as the in-process fake is; a real provider is told nothing.
        let declare = http.base_url.as_deref().is_some_and(is_loopback).then(|| {
            ctxbench_adapters::transport::encode_declaration(
                declaration.memory.as_ref(),
                declaration.summary_request.as_deref(),
            )
        });
        Ok(match &shared.base {
            HttpBase::OpenAi(p) => {
                let mut p = p.clone().with_trial_key(trial_key).map_err(with_key)?;
                if let Some(d) = &declare {
                    p = p
                        .with_header(ctxbench_adapters::transport::DECLARE_HEADER, d)
                        .map_err(with_key)?;
                }
                Box::new(Resilient::new(
                    p,
                    shared.policy.clone(),
                    shared.limiter.clone(),
                ))
            }
            HttpBase::Anthropic(p) => {
                let mut p = p
                    .clone()
                    .with_header(ctxbench_adapters::transport::TRIAL_HEADER, trial_key)
                    .map_err(with_key)?;
                if let Some(d) = &declare {
                    p = p
                        .with_header(ctxbench_adapters::transport::DECLARE_HEADER, d)
                        .map_err(with_key)?;
                }
                Box::new(Resilient::new(
                    p,
                    shared.policy.clone(),
                    shared.limiter.clone(),
                ))
            }
        })
    }
}

fn http_name(h: &HttpSpec) -> &'static str {
    match h.wire {
        Wire::OpenAi => "openai",
        Wire::Anthropic => "anthropic",
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
        // Without a model only against a --base-url (ctxbench serve-fake).
        let bare: ProviderSpec = "anthropic".parse().unwrap();
        let settings = HttpSettings {
            max_in_flight: 1,
            max_attempts: 1,
            attempt_timeout: Duration::from_secs(1),
            jitter_seed: 0,
            max_retry_after: Duration::from_secs(1),
        };
        let sut = crate::external::SutSpec::External(crate::external::ExternalSpec {
            argv: vec!["true".into()],
            timeout: Duration::from_secs(1),
        });
        let err = Services::connect(sut.clone(), &bare, None, &settings).unwrap_err();
        assert!(err.contains("needs a model"), "{err}");
        let local = bare
            .with_base_url(Some("http://127.0.0.1:9".into()))
            .unwrap();
        assert!(Services::connect(sut.clone(), &local, None, &settings).is_ok());
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
