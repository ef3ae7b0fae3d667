//! What the server tells an [`super::ExchangeObserver`] about requests that never reached
//! the backend: injected faults, bodies that do not parse, unknown trials and routes.
//!
//! An agent runtime's failed requests are evidence too (a runtime that sends malformed JSON
//! or retries a faulted request three times behaves measurably differently from one that
//! does not), so the server reports them with the same trial key as its exchanges.

use serde::{Deserialize, Serialize};

use super::faults::HttpFault;
use crate::ModelRequest;

/// Which API a request was addressed to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Endpoint {
    /// `POST /v1/chat/completions`: the OpenAI wire.
    ChatCompletions,
    /// `POST /v1/messages`: the Anthropic wire.
    Messages,
    /// `POST /v1/messages/count_tokens`: the Anthropic wire, counting only.
    CountTokens,
    /// `GET /v1/models`.
    Models,
}

impl Endpoint {
    /// A stable snake_case name for records.
    pub fn as_str(self) -> &'static str {
        match self {
            Endpoint::ChatCompletions => "chat_completions",
            Endpoint::Messages => "messages",
            Endpoint::CountTokens => "count_tokens",
            Endpoint::Models => "models",
        }
    }

    /// The endpoint a route (the path after any `/t/{key}/` prefix, without leading or
    /// trailing `/`) names; the `v1/` prefix is optional, as clients differ on whether
    /// their base URL includes it.
    pub(crate) fn of_route(route: &str) -> Option<Endpoint> {
        match route.strip_prefix("v1/").unwrap_or(route) {
            "chat/completions" => Some(Endpoint::ChatCompletions),
            "messages" => Some(Endpoint::Messages),
            "messages/count_tokens" => Some(Endpoint::CountTokens),
            "models" => Some(Endpoint::Models),
            _ => None,
        }
    }
}

/// Why a request did not reach the backend.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum HttpFailureKind {
    /// The fault plan injected this HTTP fault.
    Fault {
        /// The fault.
        fault: HttpFault,
    },
    /// The body is not JSON.
    MalformedJson,
    /// The body is JSON but not a request of the endpoint's wire format.
    InvalidRequest,
    /// The resolver knows no backend for the trial key.
    UnknownTrial,
    /// The body is larger than the server accepts.
    BodyTooLarge,
    /// The body could not be read (the client went away mid-request).
    UnreadableBody,
    /// A known route with the wrong method.
    MethodNotAllowed,
    /// No such route.
    UnknownRoute,
    /// The backend does not offer the operation (`count_tokens` on a backend without an
    /// exact count).
    Unsupported,
    /// The trial's state was evicted ([`super::TrialLimits`]) while its session went on:
    /// its script position is lost, so the request cannot be answered as the trial expects.
    EvictedTrial,
    /// A new trial key while every one of [`super::TrialLimits::max_trials`] trials has a
    /// request in flight.
    TooManyTrials,
    /// A trial key (or a declaration header) larger than the server keeps.
    TooLarge,
}

impl HttpFailureKind {
    /// A stable snake_case name for records (`fault`, `malformed_json`, …).
    pub fn as_str(&self) -> &'static str {
        match self {
            HttpFailureKind::Fault { .. } => "fault",
            HttpFailureKind::MalformedJson => "malformed_json",
            HttpFailureKind::InvalidRequest => "invalid_request",
            HttpFailureKind::UnknownTrial => "unknown_trial",
            HttpFailureKind::BodyTooLarge => "body_too_large",
            HttpFailureKind::UnreadableBody => "unreadable_body",
            HttpFailureKind::MethodNotAllowed => "method_not_allowed",
            HttpFailureKind::UnknownRoute => "unknown_route",
            HttpFailureKind::Unsupported => "unsupported",
            HttpFailureKind::EvictedTrial => "evicted_trial",
            HttpFailureKind::TooManyTrials => "too_many_trials",
            HttpFailureKind::TooLarge => "too_large",
        }
    }
}

/// One request the server answered without the backend answering it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HttpFailure {
    /// The HTTP status sent; `None` when no answer was sent (a hang fault closes the
    /// connection). A truncated or malformed-body fault is a 200 that fails on reading.
    pub status: Option<u16>,
    /// Why.
    pub kind: HttpFailureKind,
    /// The endpoint addressed; `None` for an unknown route.
    pub endpoint: Option<Endpoint>,
    /// What the client was told (no header values: keys never reach a record).
    pub message: String,
    /// The request, when the body parsed as one.
    pub request: Option<ModelRequest>,
    /// The trial's completion-request number (1-based, the number faults are scheduled
    /// by), when the request was counted: a completion request to a known trial (faulted,
    /// or refused because its body is not a request).
    pub request_index: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_name_endpoints_with_or_without_v1() {
        for (route, want) in [
            ("v1/chat/completions", Some(Endpoint::ChatCompletions)),
            ("chat/completions", Some(Endpoint::ChatCompletions)),
            ("v1/messages", Some(Endpoint::Messages)),
            ("messages", Some(Endpoint::Messages)),
            ("v1/messages/count_tokens", Some(Endpoint::CountTokens)),
            ("messages/count_tokens", Some(Endpoint::CountTokens)),
            ("v1/models", Some(Endpoint::Models)),
            ("models", Some(Endpoint::Models)),
            ("v1/v1/messages", None),
            ("v1/responses", None),
            ("", None),
        ] {
            assert_eq!(Endpoint::of_route(route), want, "{route}");
        }
    }

    #[test]
    fn failures_serialize_with_stable_names() {
        let f = HttpFailure {
            status: Some(429),
            kind: HttpFailureKind::Fault {
                fault: HttpFault::RateLimit { retry_after_ms: 60 },
            },
            endpoint: Some(Endpoint::Messages),
            message: "m".into(),
            request: None,
            request_index: Some(1),
        };
        let v = serde_json::to_value(&f).unwrap();
        assert_eq!(v["kind"]["kind"], "fault");
        assert_eq!(v["kind"]["fault"]["type"], "rate_limit");
        assert_eq!(v["endpoint"], "messages");
        assert_eq!(serde_json::from_value::<HttpFailure>(v).unwrap(), f);
        let kinds = [
            HttpFailureKind::MalformedJson,
            HttpFailureKind::InvalidRequest,
            HttpFailureKind::UnknownTrial,
            HttpFailureKind::BodyTooLarge,
            HttpFailureKind::UnreadableBody,
            HttpFailureKind::MethodNotAllowed,
            HttpFailureKind::UnknownRoute,
            HttpFailureKind::Unsupported,
        ];
        for k in kinds {
            let v = serde_json::to_value(&k).unwrap();
            assert_eq!(v["kind"], k.as_str());
        }
        assert_eq!(Endpoint::CountTokens.as_str(), "count_tokens");
    }
}
