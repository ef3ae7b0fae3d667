//! Plumbing shared by the HTTP providers ([`crate::openai`], [`crate::anthropic`]) and the
//! fake server ([`crate::serve`]): API keys that never leak, `Retry-After` parsing, the
//! numbers inside context-overflow messages, and mapping transport failures to typed
//! [`ProviderError`]s.
//!
//! Kept in one place so every provider classifies the same failure the same way: a
//! context overflow is recovered by the engine, infrastructure failures are retried by
//! [`crate::resilience`], and nothing else is.

use std::sync::LazyLock;
use std::time::{Duration, SystemTime};

use regex::Regex;
use thiserror::Error;

use crate::ProviderError;

/// The header that carries ctxbench's opaque per-trial key to its own fake server
/// (harmless to any other server, which ignores unknown headers).
pub const TRIAL_HEADER: &str = "x-ctxbench-trial";

/// Header with which ctxbench tells its own fake server (`ctxbench serve-fake`) what the
/// system under test declared about its request format: hex of the JSON
/// `{"memory": {"open", "close"}, "summary_request": …}` (see [`encode_declaration`]). Sent
/// only to loopback base URLs.
pub const DECLARE_HEADER: &str = "x-ctxbench-declare";

/// A declaration as the [`DECLARE_HEADER`] value: hex of `(memory markup, summary marker)`
/// as JSON, so any bytes travel in a header.
pub fn encode_declaration(memory: Option<&crate::Markup>, summary_marker: Option<&str>) -> String {
    let json = serde_json::json!({ "memory": memory, "summary_request": summary_marker });
    hex::encode(json.to_string())
}

/// The `(memory markup, summary marker)` a [`DECLARE_HEADER`] value carries, if it parses.
pub fn decode_declaration(value: &str) -> Option<(Option<crate::Markup>, Option<String>)> {
    let bytes = hex::decode(value.trim()).ok()?;
    let v: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let memory = serde_json::from_value(v.get("memory")?.clone()).ok()?;
    let marker = v
        .get("summary_request")
        .and_then(|m| m.as_str())
        .map(str::to_string);
    Some((memory, marker))
}

/// Why a provider could not be constructed. Never contains a key's value.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfigError {
    /// The environment variable that should hold the API key is unset or empty.
    #[error("API key environment variable `{var}` is not set")]
    MissingApiKey {
        /// The variable's name.
        var: String,
    },
    /// An extra header's name or value is not valid HTTP.
    #[error("invalid extra header `{name}`")]
    InvalidHeader {
        /// The header name as given.
        name: String,
    },
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {message}")]
    Client {
        /// What failed.
        message: String,
    },
}

/// An API key read from the environment.
///
/// Its `Debug` is `ApiKey([REDACTED])` and it has no `Display`, so it cannot end up in a
/// log line, an error or a panic by accident; [`ApiKey::redact`] scrubs it from text that
/// came back from a server.
#[derive(Clone)]
pub struct ApiKey(String);

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey([REDACTED])")
    }
}

impl ApiKey {
    /// Read the key from environment variable `var` (the only place keys come from).
    pub fn from_env(var: &str) -> Result<Self, ConfigError> {
        match std::env::var(var) {
            Ok(v) if !v.trim().is_empty() => Ok(ApiKey(v.trim().to_string())),
            _ => Err(ConfigError::MissingApiKey {
                var: var.to_string(),
            }),
        }
    }

    /// The secret, for the one header that carries it.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }

    /// `text` with every occurrence of the key replaced by `[REDACTED]`.
    pub fn redact(&self, text: &str) -> String {
        if self.0.is_empty() {
            text.to_string()
        } else {
            text.replace(&self.0, "[REDACTED]")
        }
    }
}

/// Redact `key` (if any) from `text`.
pub(crate) fn redact(key: Option<&ApiKey>, text: &str) -> String {
    match key {
        Some(k) => k.redact(text),
        None => text.to_string(),
    }
}

/// The headers a server sends with a 429 that asked for a wait: `retry-after` in whole
/// seconds (rounded up, the standard) and `retry-after-ms` (so a sub-second wait survives);
/// the inverse of [`parse_retry_after_ms`]. Empty for any other error.
pub fn retry_after_headers(err: &ProviderError) -> Vec<(String, String)> {
    match err {
        ProviderError::RateLimited {
            retry_after_ms: Some(ms),
            ..
        } => vec![
            ("retry-after".to_string(), ms.div_ceil(1000).to_string()),
            ("retry-after-ms".to_string(), ms.to_string()),
        ],
        _ => Vec::new(),
    }
}

/// The wait a server asked for, in milliseconds: `retry-after-ms` (OpenAI's precise header)
/// when it parses, else `Retry-After` as delay-seconds (fractions accepted) or an HTTP-date
/// relative to `now` (a date in the past means 0).
pub fn parse_retry_after_ms(
    retry_after: Option<&str>,
    retry_after_ms: Option<&str>,
    now: SystemTime,
) -> Option<u64> {
    if let Some(ms) = retry_after_ms.and_then(|v| v.trim().parse::<f64>().ok()) {
        if ms.is_finite() && ms >= 0.0 {
            return Some(ms.ceil() as u64);
        }
    }
    let v = retry_after?.trim();
    if let Ok(secs) = v.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| (secs * 1000.0).ceil() as u64);
    }
    let date =
        time::OffsetDateTime::parse(v, &time::format_description::well_known::Rfc2822).ok()?;
    let at = SystemTime::UNIX_EPOCH.checked_add(Duration::from_secs(
        u64::try_from(date.unix_timestamp()).ok()?,
    ))?;
    Some(
        at.duration_since(now)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
    )
}

/// The numbers a context-overflow message states, when it states them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OverflowNumbers {
    /// The window the provider enforces.
    pub limit: Option<u64>,
    /// Input plus requested output, as the provider counted it.
    pub requested: Option<u64>,
    /// Input tokens alone.
    pub input_tokens: Option<u64>,
}

struct OverflowPatterns {
    limit: Vec<Regex>,
    requested: Vec<Regex>,
    input: Vec<Regex>,
    /// Anthropic's `input length and max_tokens exceed context limit: I + O > L`.
    sum: Option<Regex>,
}

static OVERFLOW: LazyLock<OverflowPatterns> = LazyLock::new(|| {
    // Constant patterns covered by tests; a pattern that failed to compile would only
    // leave a number unparsed, never misclassify an error.
    let re = |p: &str| Regex::new(p).ok();
    let all = |ps: &[&str]| ps.iter().filter_map(|p| re(p)).collect::<Vec<_>>();
    OverflowPatterns {
        limit: all(&[
            r"(?i)maximum context length is ([\d,]+)",
            r"(?i)exceeds the available context size \(([\d,]+) tokens?\)",
            r"(?i)tokens? > ([\d,]+) maximum",
            r"(?i)context (?:window|size|length) (?:is|of) ([\d,]+)",
        ]),
        requested: all(&[r"(?i)you requested ([\d,]+) tokens"]),
        input: all(&[
            r"(?i)\(([\d,]+) in the messages",
            r"(?i)your request has ([\d,]+) input tokens",
            r"(?i)your messages resulted in ([\d,]+) tokens",
            r"(?i)prompt is too long: ([\d,]+) tokens",
            r"(?i)request \(([\d,]+) tokens?\) exceeds the available context size",
        ]),
        sum: re(r"(?i)exceed context limit: ([\d,]+) \+ ([\d,]+) > ([\d,]+)"),
    }
});

fn number(s: &str) -> Option<u64> {
    s.replace(',', "").parse().ok()
}

fn first_capture(patterns: &[Regex], text: &str) -> Option<u64> {
    patterns
        .iter()
        .find_map(|re| re.captures(text).and_then(|c| number(c.get(1)?.as_str())))
}

/// Parse the window, the requested total and the input tokens out of an overflow message in
/// any of the wordings this crate knows (OpenAI, vLLM, DeepSeek, llama.cpp, Anthropic).
pub fn parse_overflow_numbers(message: &str) -> OverflowNumbers {
    let p = &*OVERFLOW;
    if let Some(c) = p.sum.as_ref().and_then(|re| re.captures(message)) {
        let input = c.get(1).and_then(|m| number(m.as_str()));
        let output = c.get(2).and_then(|m| number(m.as_str()));
        return OverflowNumbers {
            limit: c.get(3).and_then(|m| number(m.as_str())),
            requested: input.zip(output).map(|(i, o)| i + o),
            input_tokens: input,
        };
    }
    OverflowNumbers {
        limit: first_capture(&p.limit, message),
        requested: first_capture(&p.requested, message),
        input_tokens: first_capture(&p.input, message),
    }
}

/// Whether an error message says the request did not fit the context window.
pub fn looks_like_overflow(message: &str) -> bool {
    const NEEDLES: &[&str] = &[
        "maximum context length",
        "context_length_exceeded",
        "context length exceeded",
        "exceeds the available context size",
        "exceed_context_size",
        "context size has been exceeded",
        "exceeds the context window",
        "exceeds the model's context",
        "prompt is too long",
        "exceed context limit",
    ];
    let lower = message.to_lowercase();
    NEEDLES.iter().any(|n| lower.contains(n))
}

/// `err` with the key (if any) scrubbed from every message it carries.
pub(crate) fn redact_error(err: ProviderError, key: Option<&ApiKey>) -> ProviderError {
    let Some(key) = key else { return err };
    match err {
        ProviderError::ContextOverflow {
            limit,
            requested,
            input_tokens,
            message,
            partial_output,
        } => ProviderError::ContextOverflow {
            limit,
            requested,
            input_tokens,
            message: key.redact(&message),
            partial_output: partial_output.map(|p| key.redact(&p)),
        },
        ProviderError::RateLimited {
            retry_after_ms,
            message,
        } => ProviderError::RateLimited {
            retry_after_ms,
            message: key.redact(&message),
        },
        ProviderError::Server { status, message } => ProviderError::Server {
            status,
            message: key.redact(&message),
        },
        ProviderError::Unavailable { message } => ProviderError::Unavailable {
            message: key.redact(&message),
        },
        ProviderError::Malformed { message } => ProviderError::Malformed {
            message: key.redact(&message),
        },
        ProviderError::Rejected { status, message } => ProviderError::Rejected {
            status,
            message: key.redact(&message),
        },
        t @ ProviderError::Timeout { .. } => t,
    }
}

/// A transport failure as a typed error. A timeout is [`ProviderError::Timeout`]; a body
/// that broke off or did not decode is [`ProviderError::Malformed`]; a connection that
/// could not be made, or that was reset or closed before any answer arrived, is
/// [`ProviderError::Unavailable`]: the provider never answered, so there is no status to
/// blame on its server (a `server` retry means a 5xx it sent). The URL is dropped and the
/// key redacted from the message.
pub(crate) fn map_reqwest_error(
    err: reqwest::Error,
    timeout: Duration,
    key: Option<&ApiKey>,
) -> ProviderError {
    let err = err.without_url();
    let mut message = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    let message = redact(key, &message);
    if err.is_timeout() {
        ProviderError::Timeout {
            after_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        }
    } else if err.is_body() || err.is_decode() {
        ProviderError::Malformed {
            message: format!("response body unreadable: {message}"),
        }
    } else if err.is_connect() {
        ProviderError::Unavailable {
            message: format!("cannot connect: {message}"),
        }
    } else if err.is_builder() {
        ProviderError::Rejected { status: 0, message }
    } else {
        ProviderError::Unavailable {
            message: format!("connection reset or closed before an answer: {message}"),
        }
    }
}

/// Build a header map from `(name, value)` pairs.
pub(crate) fn header_map(
    pairs: &[(String, String)],
) -> Result<reqwest::header::HeaderMap, ConfigError> {
    let mut map = reqwest::header::HeaderMap::new();
    for (name, value) in pairs {
        let invalid = || ConfigError::InvalidHeader { name: name.clone() };
        let n = reqwest::header::HeaderName::from_bytes(name.as_bytes()).map_err(|_| invalid())?;
        let v = reqwest::header::HeaderValue::from_str(value).map_err(|_| invalid())?;
        map.insert(n, v);
    }
    Ok(map)
}

/// A header as text, when present and ASCII.
pub(crate) fn header_str<'a>(
    headers: &'a reqwest::header::HeaderMap,
    name: &str,
) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Build a reqwest client with a whole-request timeout.
pub(crate) fn client(timeout: Duration) -> Result<reqwest::Client, ConfigError> {
    reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .map_err(|e| ConfigError::Client {
            message: e.without_url().to_string(),
        })
}

/// A body excerpt for error messages: at most `max` characters.
pub(crate) fn excerpt(body: &[u8], max: usize) -> String {
    let text = String::from_utf8_lossy(body);
    let mut out: String = text.chars().take(max).collect();
    if text.chars().count() > max {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_forms() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777); // Sun, 06 Nov 1994 08:49:37 GMT
        assert_eq!(parse_retry_after_ms(Some("2"), None, now), Some(2_000));
        assert_eq!(parse_retry_after_ms(Some("0.25"), None, now), Some(250));
        assert_eq!(parse_retry_after_ms(Some("2"), Some("150"), now), Some(150));
        assert_eq!(
            parse_retry_after_ms(Some("3"), Some("junk"), now),
            Some(3_000)
        );
        assert_eq!(
            parse_retry_after_ms(Some("Sun, 06 Nov 1994 08:49:47 GMT"), None, now),
            Some(10_000)
        );
        assert_eq!(
            parse_retry_after_ms(Some("Sun, 06 Nov 1994 08:49:00 GMT"), None, now),
            Some(0)
        );
        assert_eq!(parse_retry_after_ms(Some("soon"), None, now), None);
        assert_eq!(parse_retry_after_ms(Some("-1"), None, now), None);
        assert_eq!(parse_retry_after_ms(None, None, now), None);
    }

    #[test]
    fn overflow_numbers_in_every_known_wording() {
        let openai = "This model's maximum context length is 16384 tokens. However, you \
                      requested 17000 tokens (12904 in the messages, 4096 in the completion). \
                      Please reduce the length of the messages or completion.";
        assert!(looks_like_overflow(openai));
        assert_eq!(
            parse_overflow_numbers(openai),
            OverflowNumbers {
                limit: Some(16_384),
                requested: Some(17_000),
                input_tokens: Some(12_904)
            }
        );
        let vllm = "'max_tokens' or 'max_completion_tokens' is too large: 4096. This model's \
                    maximum context length is 4096 tokens and your request has 100 input \
                    tokens (4096 > 4096 - 100).";
        assert_eq!(
            parse_overflow_numbers(vllm),
            OverflowNumbers {
                limit: Some(4_096),
                requested: None,
                input_tokens: Some(100)
            }
        );
        let llama = "request (8300 tokens) exceeds the available context size (8192 tokens), \
                     try increasing it";
        assert!(looks_like_overflow(llama));
        assert_eq!(
            parse_overflow_numbers(llama),
            OverflowNumbers {
                limit: Some(8_192),
                requested: None,
                input_tokens: Some(8_300)
            }
        );
        let old_llama = "the request exceeds the available context size, try increasing it";
        assert!(looks_like_overflow(old_llama));
        assert_eq!(
            parse_overflow_numbers(old_llama),
            OverflowNumbers::default()
        );
        let anthropic = "prompt is too long: 208310 tokens > 200000 maximum";
        assert!(looks_like_overflow(anthropic));
        assert_eq!(
            parse_overflow_numbers(anthropic),
            OverflowNumbers {
                limit: Some(200_000),
                requested: None,
                input_tokens: Some(208_310)
            }
        );
        let sum = "input length and `max_tokens` exceed context limit: 198000 + 8192 > 200000, \
                   decrease input length or `max_tokens` and try again";
        assert!(looks_like_overflow(sum));
        assert_eq!(
            parse_overflow_numbers(sum),
            OverflowNumbers {
                limit: Some(200_000),
                requested: Some(206_192),
                input_tokens: Some(198_000)
            }
        );
        assert!(!looks_like_overflow(
            "Rate limit reached for gpt-4o on tokens per min (TPM)"
        ));
    }

    #[test]
    fn api_key_never_shows() {
        let key = ApiKey("sk-canary-123".into());
        assert_eq!(format!("{key:?}"), "ApiKey([REDACTED])");
        assert_eq!(
            key.redact("bad key sk-canary-123 given"),
            "bad key [REDACTED] given"
        );
        let var = "CTXBENCH_TEST_SURELY_UNSET_KEY_VAR";
        let err = ApiKey::from_env(var).unwrap_err();
        assert_eq!(
            err,
            ConfigError::MissingApiKey {
                var: var.to_string()
            }
        );
    }
}

#[cfg(test)]
mod connection_tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// A loopback server that reads the start of one request and then hangs up without a
    /// byte of answer: with `reset`, an RST (linger 0); otherwise an orderly close.
    async fn hang_up(reset: bool) -> std::net::SocketAddr {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 16];
            let _ = stream.read(&mut buf).await;
            if reset {
                // Deprecated because a non-zero linger blocks the thread on drop; zero
                // linger returns at once and is how a peer sends an RST.
                #[allow(deprecated)]
                stream.set_linger(Some(Duration::ZERO)).unwrap();
            }
            drop(stream);
        });
        addr
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_reset_or_closed_connection_is_unavailable_not_a_server_error() {
        for reset in [true, false] {
            let addr = hang_up(reset).await;
            let timeout = Duration::from_secs(30);
            let err = client(timeout)
                .unwrap()
                .post(format!("http://{addr}/v1/chat/completions"))
                .body("{}")
                .send()
                .await
                .unwrap_err();
            let typed = map_reqwest_error(err, timeout, None);
            assert_eq!(typed.kind(), "unavailable", "reset={reset}: {typed:?}");
            assert!(typed.is_infrastructure());
            assert!(
                typed.to_string().contains("before an answer"),
                "reset={reset}: {typed}"
            );
        }
    }
}
