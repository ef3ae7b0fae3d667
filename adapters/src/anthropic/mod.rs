//! The Anthropic Messages API provider, with the exact `count_tokens` estimator.
//!
//! The wire mapping lives in [`wire`]; this module adds the HTTP calls, the key (from the
//! environment only, sent as `x-api-key`) and failure classification.

pub mod wire;

use std::time::{Duration, SystemTime};

use serde_json::Value;

use crate::transport::{
    client, excerpt, header_map, header_str, map_reqwest_error, parse_retry_after_ms, redact_error,
    ApiKey, ConfigError,
};
use crate::{ModelRequest, ModelResponse, Provider, ProviderError};

/// Anthropic's API root (paths start with `/v1`).
pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";
/// The API version this adapter speaks.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// How to reach the Messages API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnthropicConfig {
    /// Name for reports.
    pub name: String,
    /// API root; requests go to `{base_url}/v1/messages`.
    pub base_url: String,
    /// Environment variable holding the key (default `ANTHROPIC_API_KEY`); `None` sends no
    /// `x-api-key` (a proxy that adds it).
    pub api_key_env: Option<String>,
    /// `anthropic-version` header.
    pub version: String,
    /// Whole-request timeout.
    pub timeout: Duration,
    /// Extra headers on every request. Not for secrets.
    pub extra_headers: Vec<(String, String)>,
}

impl Default for AnthropicConfig {
    fn default() -> Self {
        AnthropicConfig {
            name: "anthropic".into(),
            base_url: ANTHROPIC_BASE_URL.into(),
            api_key_env: Some("ANTHROPIC_API_KEY".into()),
            version: ANTHROPIC_VERSION.into(),
            timeout: crate::openai::DEFAULT_TIMEOUT,
            extra_headers: Vec::new(),
        }
    }
}

/// A [`Provider`] speaking the Anthropic Messages API. Cheap to clone.
#[derive(Clone)]
pub struct AnthropicProvider {
    config: AnthropicConfig,
    key: Option<ApiKey>,
    client: reqwest::Client,
    headers: reqwest::header::HeaderMap,
}

impl std::fmt::Debug for AnthropicProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicProvider")
            .field("config", &self.config)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl AnthropicProvider {
    /// Build the provider, reading the key now so a missing key fails before any trial.
    pub fn new(config: AnthropicConfig) -> Result<Self, ConfigError> {
        let key = config
            .api_key_env
            .as_deref()
            .map(ApiKey::from_env)
            .transpose()?;
        let mut pairs = vec![("anthropic-version".to_string(), config.version.clone())];
        pairs.extend(config.extra_headers.iter().cloned());
        let headers = header_map(&pairs)?;
        let client = client(config.timeout)?;
        Ok(AnthropicProvider {
            config,
            key,
            client,
            headers,
        })
    }

    /// A copy that also sends header `name: value`.
    pub fn with_header(mut self, name: &str, value: &str) -> Result<Self, ConfigError> {
        self.headers
            .extend(header_map(&[(name.to_string(), value.to_string())])?);
        self.config
            .extra_headers
            .push((name.to_string(), value.to_string()));
        Ok(self)
    }

    /// The configuration.
    pub fn config(&self) -> &AnthropicConfig {
        &self.config
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.config.base_url.trim_end_matches('/'))
    }

    /// POST `body` to `path`; the parsed JSON of a 2xx answer, else the typed error.
    async fn post(&self, path: &str, body: &Value) -> Result<Value, ProviderError> {
        let key = self.key.as_ref();
        let timeout = self.config.timeout;
        let mut builder = self
            .client
            .post(self.url(path))
            .headers(self.headers.clone())
            .json(body);
        if let Some(k) = key {
            let mut value = reqwest::header::HeaderValue::from_str(k.expose()).map_err(|_| {
                ProviderError::Rejected {
                    status: 0,
                    message: "the API key is not a valid header value".into(),
                }
            })?;
            value.set_sensitive(true);
            builder = builder.header("x-api-key", value);
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
        serde_json::from_slice(&bytes).map_err(|e| {
            redact_error(
                ProviderError::Malformed {
                    message: format!("response is not JSON ({e}): {}", excerpt(&bytes, 200)),
                },
                key,
            )
        })
    }
}

#[async_trait::async_trait]
impl Provider for AnthropicProvider {
    fn name(&self) -> &str {
        &self.config.name
    }

    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        let value = self
            .post("/v1/messages", &wire::request_to_json(request))
            .await?;
        wire::response_from_json(&value).map_err(|e| ProviderError::Malformed {
            message: format!("unexpected response shape: {e}"),
        })
    }

    /// Anthropic's exact count (`POST /v1/messages/count_tokens`), which a budget can use
    /// instead of the conservative local estimate.
    async fn count_tokens(&self, request: &ModelRequest) -> Result<Option<u64>, ProviderError> {
        let value = self
            .post(
                "/v1/messages/count_tokens",
                &wire::count_tokens_json(request),
            )
            .await?;
        wire::count_from_json(&value)
            .map(Some)
            .map_err(|e| ProviderError::Malformed {
                message: format!("unexpected count_tokens shape: {e}"),
            })
    }
}
