//! HTTP answers in each wire's shape: responses (JSON or server-sent events), errors and
//! injected faults. Everything here is a pure function of what it is given, so the same
//! request gets byte-identical answers.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Frame};
use hyper::header::{HeaderName, HeaderValue, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Response, StatusCode};
use serde_json::{json, Value};

use super::faults::HttpFault;
use super::observe::HttpFailureKind;
use crate::anthropic::wire as anthropic_wire;
use crate::openai::wire as openai_wire;
use crate::{FinishReason, Message, ModelResponse, ProviderError, Usage};

pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;
pub(crate) type Body = BoxBody<Bytes, BoxError>;

/// Which wire format an endpoint speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wire {
    /// OpenAI chat completions.
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
}

/// A streamed answer was asked for (`stream: true`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StreamOptions {
    /// OpenAI's `stream_options.include_usage` (Anthropic streams always carry usage).
    pub(crate) include_usage: bool,
}

/// What to do for an injected fault.
pub(crate) enum FaultAnswer {
    /// Send this response.
    Respond(Response<Body>),
    /// Send nothing for this many milliseconds, then close the connection.
    Hang(u64),
}

fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never: Infallible| match never {})
        .boxed()
}

fn status_code(status: u16) -> StatusCode {
    StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

pub(crate) fn json_response(
    status: u16,
    headers: &[(String, String)],
    body: &Value,
) -> Response<Body> {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let mut resp = Response::new(full(bytes));
    *resp.status_mut() = status_code(status);
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    for (name, value) in headers {
        if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            resp.headers_mut().insert(n, v);
        }
    }
    resp
}

/// A body that yields its chunks one frame each and then ends — or, when `cut`, pauses once
/// and fails, so the client sees what was sent and then a connection cut mid-body. The
/// pause matters: hyper flushes what it has written when the body is not ready, and drops
/// unflushed bytes when the body fails, so without it the client would see no answer at
/// all. No size hint: a stream goes out chunked, as a real SSE stream does.
struct Frames {
    chunks: VecDeque<Bytes>,
    cut: bool,
    paused: bool,
}

impl hyper::body::Body for Frames {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if let Some(b) = self.chunks.pop_front() {
            return Poll::Ready(Some(Ok(Frame::data(b))));
        }
        if !self.cut {
            return Poll::Ready(None);
        }
        if !self.paused {
            self.paused = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        Poll::Ready(Some(Err("connection cut by fault injection".into())))
    }
}

fn frames(chunks: impl IntoIterator<Item = Bytes>, cut: bool) -> Body {
    Frames {
        chunks: chunks.into_iter().collect(),
        cut,
        paused: false,
    }
    .boxed()
}

fn sse_headers(resp: &mut Response<Body>) {
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    resp.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
}

/// A 200 event stream, one frame per event.
fn sse_response(events: Vec<String>) -> Response<Body> {
    let mut resp = Response::new(frames(events.into_iter().map(Bytes::from), false));
    sse_headers(&mut resp);
    resp
}

/// The answer a truncated or malformed fault pretends to be cutting off.
fn fault_response() -> ModelResponse {
    ModelResponse {
        message: Message::assistant(
            "This answer was cut off by an injected fault before it could finish.",
        ),
        usage: Usage {
            input_tokens: 1,
            output_tokens: 1,
        },
        finish_reason: FinishReason::Stop,
    }
}

/// The body a malformed-body fault sends: what a misconfigured proxy answers.
const MALFORMED: &str = "<html><body><h1>502 Bad Gateway</h1> (injected by ctxbench)</body></html>";

/// The first half of `events` and half of the next one: a stream cut mid-event, as a
/// connection cut mid-write leaves it.
fn half_of(events: &[String]) -> String {
    let k = events.len() / 2;
    let mut out = events[..k].concat();
    if let Some(next) = events.get(k) {
        let mut cut = next.len() / 2;
        while !next.is_char_boundary(cut) {
            cut -= 1;
        }
        out.push_str(&next[..cut]);
    }
    out
}

impl Wire {
    fn id(self, n: u64) -> String {
        match self {
            Wire::OpenAi => format!("chatcmpl-ctxbench-{n}"),
            Wire::Anthropic => format!("msg_ctxbench_{n}"),
        }
    }

    /// `err` as this wire's HTTP error.
    pub(crate) fn error_response(self, err: &ProviderError) -> Response<Body> {
        let http = match self {
            Wire::OpenAi => openai_wire::error_to_http(err),
            Wire::Anthropic => anthropic_wire::error_to_http(err),
        };
        json_response(http.status, &http.headers, &http.body)
    }

    /// An error that is not a provider error (routing, parsing) in this wire's shape.
    pub(crate) fn plain_error(
        self,
        status: u16,
        kind: &HttpFailureKind,
        message: &str,
    ) -> Response<Body> {
        match self {
            Wire::OpenAi => {
                // The codes the server has always answered with, so clients that match on
                // them keep working.
                let code = match kind {
                    HttpFailureKind::MalformedJson => "invalid_json",
                    HttpFailureKind::BodyTooLarge => "request_too_large",
                    HttpFailureKind::UnknownRoute => "unknown_url",
                    other => other.as_str(),
                };
                json_response(
                    status,
                    &[],
                    &json!({"error": {"message": message, "type": "invalid_request_error", "param": null, "code": code}}),
                )
            }
            Wire::Anthropic => json_response(
                status,
                &[],
                &anthropic_wire::error_body(anthropic_wire::error_type_for_status(status), message),
            ),
        }
    }

    /// A successful answer: the JSON body, or the event stream when one was asked for.
    pub(crate) fn answer(
        self,
        response: &ModelResponse,
        model: &str,
        n: u64,
        stream: Option<StreamOptions>,
    ) -> Response<Body> {
        let id = self.id(n);
        match (self, stream) {
            (Wire::OpenAi, None) => json_response(
                200,
                &[],
                &openai_wire::response_to_json(response, model, &id),
            ),
            (Wire::OpenAi, Some(s)) => sse_response(openai_wire::response_to_sse_events(
                response,
                model,
                &id,
                s.include_usage,
            )),
            (Wire::Anthropic, None) => json_response(
                200,
                &[],
                &anthropic_wire::response_to_json(response, model, &id),
            ),
            (Wire::Anthropic, Some(_)) => {
                sse_response(anthropic_wire::response_to_sse_events(response, model, &id))
            }
        }
    }

    /// A provider error. Before any output it is a plain HTTP error, streamed or not (what
    /// both APIs do); an error that comes after output — a context overflow with partial
    /// output — is, on a stream, that output followed by an error event.
    pub(crate) fn failure(
        self,
        err: &ProviderError,
        model: &str,
        n: u64,
        stream: Option<StreamOptions>,
    ) -> Response<Body> {
        let after_output = matches!(
            err,
            ProviderError::ContextOverflow { partial_output: Some(p), .. } if !p.is_empty()
        );
        match stream {
            Some(s) if after_output => {
                let id = self.id(n);
                sse_response(match self {
                    Wire::OpenAi => {
                        openai_wire::failure_to_sse_events(err, model, &id, s.include_usage)
                    }
                    Wire::Anthropic => anthropic_wire::failure_to_sse_events(err, model, &id),
                })
            }
            _ => self.error_response(err),
        }
    }

    /// The answer for an injected fault, in this wire's shape; `stream` when the request
    /// asked for a stream (a truncated stream is cut mid-event, a malformed one carries an
    /// event that is not JSON).
    pub(crate) fn fault(self, fault: &HttpFault, stream: bool) -> FaultAnswer {
        FaultAnswer::Respond(match *fault {
            HttpFault::Hang { ms } => return FaultAnswer::Hang(ms),
            HttpFault::RateLimit { retry_after_ms } => {
                let message = match self {
                    Wire::OpenAi => "Rate limit reached for requests (injected by ctxbench).",
                    Wire::Anthropic => {
                        "Number of requests has exceeded your rate limit (injected by ctxbench)."
                    }
                };
                self.error_response(&ProviderError::RateLimited {
                    retry_after_ms: Some(retry_after_ms),
                    message: message.into(),
                })
            }
            HttpFault::ServerError { status } => match self {
                Wire::OpenAi => json_response(
                    status,
                    &[],
                    &json!({"error": {
                        "message": "The server had an error while processing your request (injected by ctxbench).",
                        "type": "server_error", "param": null, "code": null,
                    }}),
                ),
                Wire::Anthropic => {
                    let message = if status == 529 {
                        "Overloaded (injected by ctxbench)."
                    } else {
                        "Internal server error (injected by ctxbench)."
                    };
                    json_response(
                        status,
                        &[],
                        &anthropic_wire::error_body(
                            anthropic_wire::error_type_for_status(status),
                            message,
                        ),
                    )
                }
            },
            HttpFault::TruncatedBody if stream => {
                let r = fault_response();
                let events = match self {
                    Wire::OpenAi => {
                        openai_wire::response_to_sse_events(&r, "fake", &self.id(0), true)
                    }
                    Wire::Anthropic => {
                        anthropic_wire::response_to_sse_events(&r, "fake", &self.id(0))
                    }
                };
                let mut resp = Response::new(frames([Bytes::from(half_of(&events))], true));
                sse_headers(&mut resp);
                resp
            }
            HttpFault::TruncatedBody => {
                let r = fault_response();
                let document = match self {
                    Wire::OpenAi => openai_wire::response_to_json(&r, "fake", &self.id(0)),
                    Wire::Anthropic => anthropic_wire::response_to_json(&r, "fake", &self.id(0)),
                }
                .to_string();
                let full_len = document.len();
                let mut cut = Bytes::from(document);
                cut.truncate(full_len / 2);
                let mut resp = Response::new(frames([cut], true));
                resp.headers_mut()
                    .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                // The full length is declared, so the client knows the body was cut.
                resp.headers_mut()
                    .insert(CONTENT_LENGTH, HeaderValue::from(full_len));
                resp
            }
            HttpFault::MalformedBody if stream => {
                let mut resp = Response::new(full(format!("data: {MALFORMED}\n\n")));
                sse_headers(&mut resp);
                resp
            }
            HttpFault::MalformedBody => {
                let mut resp = Response::new(full(MALFORMED));
                resp.headers_mut()
                    .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                resp
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_stream_ends_mid_event() {
        let events: Vec<String> = ["data: aaaa\n\n", "data: bbbb\n\n", "data: €€\n\n"]
            .map(String::from)
            .to_vec();
        assert_eq!(half_of(&events), "data: aaaa\n\ndata: ");
        // Never inside a character.
        assert_eq!(half_of(&events[2..]), "data: ");
        assert_eq!(half_of(&[]), "");
        // The canned answers a truncated fault cuts are readable in full, and not once cut.
        let r = fault_response();
        let events = openai_wire::response_to_sse_events(&r, "fake", "i", true);
        assert_eq!(openai_wire::response_from_sse(&events.concat()).unwrap(), r);
        assert!(openai_wire::response_from_sse(&half_of(&events)).is_err());
        let events = anthropic_wire::response_to_sse_events(&r, "fake", "i");
        assert!(anthropic_wire::response_from_sse(&half_of(&events)).is_err());
    }

    #[test]
    fn faults_answer_in_each_wires_shape() {
        let status = |a: FaultAnswer| match a {
            FaultAnswer::Respond(r) => Some(r.status().as_u16()),
            FaultAnswer::Hang(_) => None,
        };
        for wire in [Wire::OpenAi, Wire::Anthropic] {
            for stream in [false, true] {
                assert_eq!(
                    status(wire.fault(&HttpFault::RateLimit { retry_after_ms: 5 }, stream)),
                    Some(429)
                );
                assert_eq!(
                    status(wire.fault(&HttpFault::ServerError { status: 529 }, stream)),
                    Some(529)
                );
                assert_eq!(status(wire.fault(&HttpFault::Hang { ms: 1 }, stream)), None);
                assert_eq!(
                    status(wire.fault(&HttpFault::TruncatedBody, stream)),
                    Some(200)
                );
                assert_eq!(
                    status(wire.fault(&HttpFault::MalformedBody, stream)),
                    Some(200)
                );
            }
        }
        let FaultAnswer::Respond(r) = Wire::Anthropic.fault(&HttpFault::TruncatedBody, true) else {
            panic!("a truncated fault answers");
        };
        assert_eq!(r.headers()[CONTENT_TYPE], "text/event-stream");
        assert!(r.headers().get(CONTENT_LENGTH).is_none());
    }
}
