//! Typed provider errors.
//!
//! The engine must tell a context overflow (recoverable by compaction, once) from
//! infrastructure failures (retried by the runner, counted apart from model failures).

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// What went wrong at the provider boundary.
#[derive(Debug, Clone, PartialEq, Eq, Error, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ProviderError {
    /// The request did not fit the model's context window (OpenAI `context_length_exceeded`,
    /// Anthropic `prompt is too long`).
    #[error("context overflow: {message}")]
    ContextOverflow {
        /// The window the provider enforces, when the error says so.
        limit: Option<u64>,
        /// Tokens the provider counted for the request (input + requested output), when reported.
        requested: Option<u64>,
        /// Input tokens alone, when reported.
        input_tokens: Option<u64>,
        /// The provider's message.
        message: String,
        /// Assistant text the provider produced before it failed (a streamed answer cut off
        /// by the overflow); `None` for a clean overflow, rejected before any output. A
        /// client must not blindly retry a request that already produced output.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        partial_output: Option<String>,
    },
    /// 429: slow down.
    #[error("rate limited (retry after {retry_after_ms:?} ms): {message}")]
    RateLimited {
        /// `Retry-After`, in milliseconds, when given.
        retry_after_ms: Option<u64>,
        /// The provider's message.
        message: String,
    },
    /// 5xx.
    #[error("server error {status}: {message}")]
    Server {
        /// HTTP status.
        status: u16,
        /// The provider's message.
        message: String,
    },
    /// No answer in time.
    #[error("timeout after {after_ms} ms")]
    Timeout {
        /// How long we waited.
        after_ms: u64,
    },
    /// The body could not be understood (truncated, not JSON, wrong shape).
    #[error("malformed response: {message}")]
    Malformed {
        /// What was wrong.
        message: String,
    },
    /// The provider could not be used at all: connection refused, a cassette without the
    /// request, a run cap reached. Infrastructure; a client may retry a refused
    /// connection, but a cassette miss never changes.
    #[error("provider unavailable: {message}")]
    Unavailable {
        /// What happened.
        message: String,
    },
    /// Any other 4xx the provider returned (bad request, auth).
    #[error("request rejected {status}: {message}")]
    Rejected {
        /// HTTP status.
        status: u16,
        /// The provider's message.
        message: String,
    },
}

impl ProviderError {
    /// A stable snake_case name for reports (`context_overflow`, `rate_limited`, …).
    pub fn kind(&self) -> &'static str {
        match self {
            ProviderError::ContextOverflow { .. } => "context_overflow",
            ProviderError::RateLimited { .. } => "rate_limited",
            ProviderError::Server { .. } => "server",
            ProviderError::Timeout { .. } => "timeout",
            ProviderError::Malformed { .. } => "malformed",
            ProviderError::Unavailable { .. } => "unavailable",
            ProviderError::Rejected { .. } => "rejected",
        }
    }

    /// Infrastructure failures are retried by the runner and never count as model failures.
    pub fn is_infrastructure(&self) -> bool {
        matches!(
            self,
            ProviderError::RateLimited { .. }
                | ProviderError::Server { .. }
                | ProviderError::Timeout { .. }
                | ProviderError::Malformed { .. }
                | ProviderError::Unavailable { .. }
        )
    }
}
