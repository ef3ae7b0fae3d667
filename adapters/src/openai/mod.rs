//! The OpenAI-compatible chat-completions provider: OpenAI itself, and through a base-URL
//! override DeepSeek, vLLM, llama.cpp's server, Ollama and ctxbench's own fake server.
//!
//! The wire mapping lives in [`wire`] as pure functions; this module adds the HTTP call,
//! the key (read from the environment only) and the classification of failures.

pub mod wire;

use std::time::{Duration, SystemTime};

use serde_json::Value;

use crate::transport::{
    client, excerpt, header_map, header_str, map_reqwest_error, parse_retry_after_ms, redact_error,
    ApiKey, ConfigError, TRIAL_HEADER,
};
use crate::{ModelRequest, ModelResponse, Provider, ProviderError};
pub use wire::MaxTokensField;

/// OpenAI's API root.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
/// DeepSeek's OpenAI-compatible API root.
pub const DEEPSEEK_BASE_URL: &str = "https://api.deepseek.com/v1";
/// Whole-request timeout when none is configured; [`crate::resilience::Resilient`] usually
/// enforces a tighter one per attempt.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// How to reach an OpenAI-compatible server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenAiConfig {
    /// Name for reports (`openai`, `deepseek`, `llama.cpp`, …).
    pub name: String,
    /// API root; requests go to `{base_url}/chat/completions`.
    pub base_url: String,
    /// Environment variable holding the key (`OPENAI_API_KEY`, `DEEPSEEK_API_KEY`, …);
    /// `None` for servers without auth (llama.cpp, Ollama, the fake server): no
    /// `Authorization` header is sent.
    pub api_key_env: Option<String>,
    /// Request field for the output allowance.
    pub max_tokens_field: MaxTokensField,
    /// Whole-request timeout (connect, send, read the body).
    pub timeout: Duration,
    /// Extra headers on every request (e.g. [`TRIAL_HEADER`]). Not for secrets.
    pub extra_headers: Vec<(String, String)>,
}

impl Default for OpenAiConfig {
    fn default() -> Self {
        OpenAiConfig {
            name: "openai".into(),
            base_url: OPENAI_BASE_URL.into(),
            api_key_env: Some("OPENAI_API_KEY".into()),
            max_tokens_field: MaxTokensField::MaxTokens,
            timeout: DEFAULT_TIMEOUT,
            extra_headers: Vec::new(),
        }
    }
}

impl OpenAiConfig {
    /// DeepSeek: its base URL and `DEEPSEEK_API_KEY`.
    pub fn deepseek() -> Self {
        OpenAiConfig {
            name: "deepseek".into(),
            base_url: DEEPSEEK_BASE_URL.into(),
            api_key_env: Some("DEEPSEEK_API_KEY".into()),
            ..OpenAiConfig::default()
        }
    }

    /// A keyless server at `base_url` (llama.cpp, vLLM, Ollama, the fake server), e.g.
    /// `http://127.0.0.1:8080/v1`.
    pub fn local(name: impl Into<String>, base_url: impl Into<String>) -> Self {
        OpenAiConfig {
            name: name.into(),
            base_url: base_url.into(),
            api_key_env: None,
            ..OpenAiConfig::default()
        }
    }
}

/// A [`Provider`] speaking OpenAI chat completions. Cheap to clone (the HTTP client and its
/// connection pool are shared), so one per trial is fine.
#[derive(Clone)]
pub struct OpenAiProvider {
    config: OpenAiConfig,
    key: Option<ApiKey>,
    client: reqwest::Client,
    headers: reqwest::header::HeaderMap,
}

impl std::fmt::Debug for OpenAiProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiProvider")
            .field("config", &self.config)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl OpenAiProvider {
    /// Build the provider, reading the key from `config.api_key_env` now so a missing key
    /// fails before any trial starts.
    pub fn new(config: OpenAiConfig) -> Result<Self, ConfigError> {
        let key = config
            .api_key_env
            .as_deref()
            .map(ApiKey::from_env)
            .transpose()?;
        let headers = header_map(&config.extra_headers)?;
        let client = client(config.timeout)?;
        Ok(OpenAiProvider {
            config,
            key,
            client,
            headers,
        })
    }

    /// A copy that also sends header `name: value` (sharing the connection pool).
    pub fn with_header(mut self, name: &str, value: &str) -> Result<Self, ConfigError> {
        let extra = header_map(&[(name.to_string(), value.to_string())])?;
        self.headers.extend(extra);
        self.config
            .extra_headers
            .push((name.to_string(), value.to_string()));
        Ok(self)
    }

    /// A copy that tags its requests with `x-ctxbench-trial: key`, so ctxbench's fake
    /// server routes them to that trial's script.
    pub fn with_trial_key(self, key: &str) -> Result<Self, ConfigError> {
        self.with_header(TRIAL_HEADER, key)
    }

    /// The configuration.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    /// `{base_url}/chat/completions`.
    pub fn endpoint(&self) -> String {
        format!(
            "{}/chat/completions",
            self.config.base_url.trim_end_matches('/')
        )
    }
}

#[async_trait::async_trait]
impl Provider for OpenAiProvider {
    fn name(&self) -> &str {
        &self.config.name
    }

    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        let body = wire::request_to_json_with(request, self.config.max_tokens_field);
        let key = self.key.as_ref();
        let timeout = self.config.timeout;
        let mut builder = self
            .client
            .post(self.endpoint())
            .headers(self.headers.clone())
            .json(&body);
        if let Some(k) = key {
            builder = builder.bearer_auth(k.expose());
        }
        let response = builder
            .send()
            .await
            .map_err(|e| map_reqwest_error(e, timeout, key))?;
        let status = response.status();
        let retry_after_ms = parse_retry_after_ms(
            header_str(response.headers(), "retry-after"),
            header_str(response.headers(), "retry-after-ms"),
            SystemTime::now(),
        );
        let bytes = response
            .bytes()
            .await
            .map_err(|e| map_reqwest_error(e, timeout, key))?;
        if !status.is_success() {
            return Err(redact_error(
                wire::error_from_http(status.as_u16(), retry_after_ms, &bytes),
                key,
            ));
        }
        let value: Value = serde_json::from_slice(&bytes).map_err(|e| {
            redact_error(
                ProviderError::Malformed {
                    message: format!("response is not JSON ({e}): {}", excerpt(&bytes, 200)),
                },
                key,
            )
        })?;
        wire::response_from_json(&value).map_err(|e| ProviderError::Malformed {
            message: format!("unexpected response shape: {e}"),
        })
    }
}
