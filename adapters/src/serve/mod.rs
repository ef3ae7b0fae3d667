//! The fake provider — or any [`Provider`] — over HTTP, in the OpenAI chat-completions and
//! the Anthropic Messages wire formats (PRODUCT.md §The fake provider: "one implementation,
//! two transports").
//!
//! Routes (each also under `/t/{key}/…`, and each with or without the `v1/` prefix, as
//! clients differ on whether their base URL includes it):
//! * `POST /v1/chat/completions` — OpenAI wire; `stream: true` answers with
//!   `text/event-stream` `chat.completion.chunk` events as OpenAI does (usage in a last
//!   chunk when `stream_options.include_usage`, then `data: [DONE]`);
//! * `POST /v1/messages` — Anthropic wire; `stream: true` answers with Anthropic's events
//!   (`message_start` … `message_stop`);
//! * `POST /v1/messages/count_tokens` — `{"input_tokens": N}`, the backend's own count
//!   (the fake's is the count it enforces its window with). Counting is not a completion:
//!   it moves no script cursor, counts for neither [`FakeServerHandle::requests`] nor
//!   [`FakeServerHandle::provider_requests`], and is never faulted;
//! * `GET /v1/models` — the backend's model, in a list both SDKs read.
//!
//! The trial key comes from the path, else the [`TRIAL_HEADER`] header, else the
//! configured default key. The server knows nothing about scenarios: a [`BackendResolver`]
//! turns a key into a [`Backend`] (a [`ScriptResolver`] is one: a [`FakeProvider`] per key
//! playing the key's script), created on first use and kept, so the fake's script cursor
//! advances across that trial's requests. Requests, responses and errors use
//! [`crate::openai::wire`] and [`crate::anthropic::wire`], the same functions the clients
//! use, so a conversation over loopback is the conversation played in process (on the
//! Anthropic wire: the conversation as that wire normalizes it, system messages joined).
//! Streaming renders the backend's complete answer as events; errors before any output
//! are plain HTTP errors with the non-streaming status, as both APIs do, and a context
//! overflow after partial output streams that output and then an error event. Headers such
//! as `authorization`, `x-api-key` and `anthropic-version` are accepted and ignored; the
//! server never logs or records a header.
//!
//! HTTP faults ([`HttpFault`]) are injected *before* the backend sees the request, in the
//! addressed wire's shape (a truncated stream is cut mid-event): the provider's request
//! counter and cursor do not move, so a retried request gets exactly the answer the
//! fault-free one would have. Native compaction and opaque items do not travel over HTTP.
//!
//! An [`ExchangeObserver`] sees every answered exchange (the parsed [`ModelRequest`] and the
//! backend's result, whichever wire carried it) and every request that never reached the
//! backend ([`HttpFailure`]: injected faults, unparsable bodies, unknown trials and routes).
//!
//! The server binds loopback unless the caller hands it another listener.

pub mod faults;

mod backend;
mod observe;
mod render;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, LengthLimitError, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

pub use backend::{Backend, BackendResolver};
pub use faults::{FaultPlan, HttpFault, RandomFaults, ScheduledFault};
pub use observe::{Endpoint, HttpFailure, HttpFailureKind};

use crate::anthropic::wire as anthropic_wire;
use crate::fake::{FakeProvider, FakeScript};
use crate::openai::wire as openai_wire;
pub use crate::transport::TRIAL_HEADER;
use crate::{ModelRequest, Provider, ProviderError};
use backend::ScriptBackends;
use render::{json_response, Body, BoxError, FaultAnswer, StreamOptions, Wire};

/// Turns an opaque trial key into the script the fake provider plays for it.
pub trait ScriptResolver: Send + Sync {
    /// The script for `key`, or `None` for an unknown key (answered with a 404).
    fn resolve(&self, key: &str) -> Option<FakeScript>;

    /// HTTP faults for this key, on top of the server's [`FaultPlan`]. None by default.
    fn http_faults(&self, key: &str) -> Vec<ScheduledFault> {
        let _ = key;
        Vec::new()
    }
}

impl<F> ScriptResolver for F
where
    F: Fn(&str) -> Option<FakeScript> + Send + Sync,
{
    fn resolve(&self, key: &str) -> Option<FakeScript> {
        self(key)
    }
}

/// Sees what an agent runtime sends: every exchange the backend answers (the request as
/// parsed from either wire and the backend's answer or error, before the HTTP response is
/// written) and every request that never reaches the backend. ctxbench records what an
/// external agent actually sends through this hook.
pub trait ExchangeObserver: Send + Sync {
    /// One answered exchange for trial `key`; `latency_ms` is the backend's time.
    fn exchange(
        &self,
        key: &str,
        request: &crate::ModelRequest,
        result: &Result<crate::ModelResponse, ProviderError>,
        latency_ms: u64,
    );

    /// A request for trial `key` (the key as routed, known to the resolver or not) that the
    /// server answered without the backend answering it: an injected fault, a body that is
    /// not a request, an unknown trial or route. Called before the answer is written (for a
    /// hang, before the hang). Ignored by default.
    fn http_failure(&self, key: &str, failure: &HttpFailure) {
        let _ = (key, failure);
    }
}

/// The key used when neither the path nor the header names one.
pub const DEFAULT_TRIAL_KEY: &str = "default";
/// Largest request body accepted by default ([`FakeServer::with_max_body_bytes`]).
pub const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

/// Server-wide settings.
#[derive(Debug, Clone, PartialEq)]
pub struct FakeServerConfig {
    /// Key for requests that name none.
    pub default_key: String,
    /// HTTP faults.
    pub faults: FaultPlan,
}

impl Default for FakeServerConfig {
    fn default() -> Self {
        FakeServerConfig {
            default_key: DEFAULT_TRIAL_KEY.into(),
            faults: FaultPlan::default(),
        }
    }
}

/// One trial's state on the server.
struct Trial {
    backend: Backend,
    faults: Vec<ScheduledFault>,
    /// Completion requests received, faulted ones included: the number faults go by.
    http_requests: AtomicU64,
    /// Completion requests forwarded to the backend.
    forwarded: AtomicU64,
}

struct Shared {
    backends: Arc<dyn BackendResolver>,
    config: FakeServerConfig,
    observer: Option<Arc<dyn ExchangeObserver>>,
    max_body_bytes: usize,
    trials: Mutex<HashMap<String, Arc<Trial>>>,
    faults_injected: AtomicU64,
    shutdown: watch::Receiver<bool>,
}

impl Shared {
    fn trials(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Trial>>> {
        self.trials.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The trial for `key`, created on first use; `None` when the resolver does not know it.
    fn trial(&self, key: &str) -> Option<Arc<Trial>> {
        if let Some(t) = self.trials().get(key) {
            return Some(t.clone());
        }
        // Resolve outside the lock (a resolver may be slow); first insert wins.
        let backend = self.backends.backend(key)?;
        let trial = Arc::new(Trial {
            backend,
            faults: self.backends.http_faults(key),
            http_requests: AtomicU64::new(0),
            forwarded: AtomicU64::new(0),
        });
        Some(
            self.trials()
                .entry(key.to_string())
                .or_insert(trial)
                .clone(),
        )
    }

    fn notify(&self, key: &str, failure: &HttpFailure) {
        if let Some(observer) = &self.observer {
            observer.http_failure(key, failure);
        }
    }

    /// Answer `failure` with a plain error in `wire`'s shape, and report it.
    fn reject(&self, key: &str, wire: Wire, status: u16, failure: HttpFailure) -> Response<Body> {
        let resp = wire.plain_error(status, &failure.kind, &failure.message);
        self.notify(
            key,
            &HttpFailure {
                status: Some(resp.status().as_u16()),
                ..failure
            },
        );
        resp
    }
}

/// An [`HttpFailure`] before its status is known (set by [`Shared::reject`]).
fn failure(
    kind: HttpFailureKind,
    endpoint: Option<Endpoint>,
    message: String,
    request: Option<ModelRequest>,
) -> HttpFailure {
    HttpFailure {
        status: None,
        kind,
        endpoint,
        message,
        request,
        request_index: None,
    }
}

/// The fake provider (or any backend) over HTTP. Build with [`FakeServer::new`] (scripts)
/// or [`FakeServer::with_backends`] (any provider), then [`FakeServer::spawn`] (loopback,
/// ephemeral port) or [`FakeServer::spawn_on`] (a listener of your choice).
pub struct FakeServer {
    backends: Arc<dyn BackendResolver>,
    config: FakeServerConfig,
    observer: Option<Arc<dyn ExchangeObserver>>,
    max_body_bytes: usize,
}

/// A running [`FakeServer`]: its address, per-key counters and shutdown.
pub struct FakeServerHandle {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for FakeServerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeServerHandle")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl FakeServer {
    /// A server playing the fake provider: `resolver` turns each key into a script, and the
    /// key gets its own [`FakeProvider`].
    pub fn new(resolver: Arc<dyn ScriptResolver>, config: FakeServerConfig) -> Self {
        Self::with_backends(Arc::new(ScriptBackends(resolver)), config)
    }

    /// A server forwarding each key's requests to the backend `backends` resolves it to.
    pub fn with_backends(backends: Arc<dyn BackendResolver>, config: FakeServerConfig) -> Self {
        FakeServer {
            backends,
            config,
            observer: None,
            max_body_bytes: MAX_BODY_BYTES,
        }
    }

    /// Report every answered exchange and every failed request to `observer`.
    pub fn with_observer(mut self, observer: Arc<dyn ExchangeObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Refuse request bodies over `bytes` with a 413 (default [`MAX_BODY_BYTES`]).
    pub fn with_max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    /// Bind `127.0.0.1:0` and serve in a background task.
    pub async fn spawn(self) -> std::io::Result<(SocketAddr, FakeServerHandle)> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        self.spawn_on(listener)
    }

    /// Serve on `listener` in a background task (needs a tokio runtime).
    pub fn spawn_on(
        self,
        listener: TcpListener,
    ) -> std::io::Result<(SocketAddr, FakeServerHandle)> {
        let addr = listener.local_addr()?;
        let (tx, rx) = watch::channel(false);
        let shared = Arc::new(Shared {
            backends: self.backends,
            config: self.config,
            observer: self.observer,
            max_body_bytes: self.max_body_bytes,
            trials: Mutex::new(HashMap::new()),
            faults_injected: AtomicU64::new(0),
            shutdown: rx,
        });
        let task = tokio::spawn(accept_loop(listener, shared.clone()));
        Ok((
            addr,
            FakeServerHandle {
                addr,
                shared,
                shutdown: tx,
                task,
            },
        ))
    }
}

impl FakeServerHandle {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://{addr}/v1`: the base URL for an OpenAI client (default key or header key).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// `http://{addr}/t/{key}/v1`: a base URL that routes every request to trial `key`.
    pub fn trial_base_url(&self, key: &str) -> String {
        format!("http://{}/t/{key}/v1", self.addr)
    }

    /// `http://{addr}`: the base URL for an Anthropic client, which appends `/v1/messages`
    /// itself (default key or header key).
    pub fn anthropic_base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://{addr}/t/{key}`: an Anthropic client's base URL for trial `key`.
    pub fn trial_anthropic_base_url(&self, key: &str) -> String {
        format!("http://{}/t/{key}", self.addr)
    }

    /// Completion requests received for `key` on either wire (faulted ones included;
    /// `count_tokens` excluded).
    pub fn requests(&self, key: &str) -> u64 {
        self.shared
            .trials()
            .get(key)
            .map_or(0, |t| t.http_requests.load(Ordering::SeqCst))
    }

    /// Requests the backend of `key` actually saw (faulted ones excluded): for the fake
    /// provider its own request counter, for any other backend the completions the server
    /// forwarded to it.
    pub fn provider_requests(&self, key: &str) -> u64 {
        self.shared.trials().get(key).map_or(0, |t| {
            t.backend.as_fake().map_or_else(
                || t.forwarded.load(Ordering::SeqCst),
                FakeProvider::requests_seen,
            )
        })
    }

    /// Faults injected so far, all keys.
    pub fn faults_injected(&self) -> u64 {
        self.shared.faults_injected.load(Ordering::SeqCst)
    }

    /// Drop the state of a finished trial (its next request would start a fresh backend).
    pub fn forget(&self, key: &str) {
        self.shared.trials().remove(key);
    }

    /// Stop accepting, cut hanging requests, let in-flight answers finish, and wait.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        let _ = self.task.await;
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut shutdown = shared.shutdown.clone();
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = shutdown.changed() => break,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else {
                    // Out of descriptors or similar: back off instead of spinning.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                let shared = shared.clone();
                connections.spawn(serve_connection(stream, shared));
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    while connections.join_next().await.is_some() {}
}

async fn serve_connection(stream: tokio::net::TcpStream, shared: Arc<Shared>) {
    let mut shutdown = shared.shutdown.clone();
    let service_shared = shared.clone();
    let service = hyper::service::service_fn(move |req| handle(service_shared.clone(), req));
    let conn =
        hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = shutdown.changed() => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

/// `(key from the path, rest of the path)`.
fn split_path(path: &str) -> (Option<&str>, &str) {
    if let Some(rest) = path.strip_prefix("/t/") {
        if let Some((key, tail)) = rest.split_once('/') {
            if !key.is_empty() {
                return (Some(key), tail);
            }
        }
    }
    (None, path.trim_start_matches('/'))
}

impl Endpoint {
    fn wire(self) -> Wire {
        match self {
            Endpoint::ChatCompletions | Endpoint::Models => Wire::OpenAi,
            Endpoint::Messages | Endpoint::CountTokens => Wire::Anthropic,
        }
    }

    fn method(self) -> Method {
        match self {
            Endpoint::Models => Method::GET,
            _ => Method::POST,
        }
    }
}

async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Result<Response<Body>, BoxError> {
    let path = req.uri().path().to_string();
    let (path_key, rest) = split_path(&path);
    let key = path_key
        .map(str::to_string)
        .or_else(|| {
            req.headers()
                .get(TRIAL_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        })
        .unwrap_or_else(|| shared.config.default_key.clone());
    let Some(endpoint) = Endpoint::of_route(rest.trim_end_matches('/')) else {
        let f = failure(
            HttpFailureKind::UnknownRoute,
            None,
            format!("unknown route {path}"),
            None,
        );
        return Ok(shared.reject(&key, Wire::OpenAi, 404, f));
    };
    if req.method() != endpoint.method() {
        let f = failure(
            HttpFailureKind::MethodNotAllowed,
            Some(endpoint),
            format!("method not allowed: {path} takes {}", endpoint.method()),
            None,
        );
        return Ok(shared.reject(&key, endpoint.wire(), 405, f));
    }
    match endpoint {
        Endpoint::Models => Ok(models(&shared, &key)),
        Endpoint::ChatCompletions | Endpoint::Messages => {
            complete(shared, key, endpoint, req).await
        }
        Endpoint::CountTokens => count_tokens(shared, key, req).await,
    }
}

/// `GET /v1/models`: one object both SDKs read — OpenAI's list (`object`, `data[].id`,
/// `owned_by`) with Anthropic's fields (`data[].type`, `display_name`, `created_at`,
/// `has_more`, `first_id`, `last_id`) — listing the backend's model, if it names one.
fn models(shared: &Shared, key: &str) -> Response<Body> {
    let model = shared
        .trial(key)
        .and_then(|t| t.backend.model().map(str::to_string));
    let data: Vec<Value> = model
        .iter()
        .map(|id| {
            json!({
                "id": id,
                "object": "model",
                "created": 0,
                "owned_by": "ctxbench",
                "type": "model",
                "display_name": id,
                "created_at": "1970-01-01T00:00:00Z",
            })
        })
        .collect();
    json_response(
        200,
        &[],
        &json!({
            "object": "list",
            "data": data,
            "has_more": false,
            "first_id": model,
            "last_id": model,
        }),
    )
}

/// A request body read and parsed as far as it goes.
struct Parsed {
    /// The request, or why the body is not one.
    request: Result<ModelRequest, (HttpFailureKind, String)>,
    /// `Some` when the body asked for a stream.
    stream: Option<StreamOptions>,
}

fn parse(wire: Wire, bytes: &[u8]) -> Parsed {
    let value: Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => {
            return Parsed {
                request: Err((
                    HttpFailureKind::MalformedJson,
                    format!("request body is not JSON: {e}"),
                )),
                stream: None,
            }
        }
    };
    let stream =
        (value.get("stream").and_then(Value::as_bool) == Some(true)).then(|| StreamOptions {
            include_usage: value
                .pointer("/stream_options/include_usage")
                .and_then(Value::as_bool)
                == Some(true),
        });
    let request = match wire {
        Wire::OpenAi => openai_wire::request_from_json(&value),
        Wire::Anthropic => anthropic_wire::request_from_json(&value),
    }
    .map_err(|e| (HttpFailureKind::InvalidRequest, e.message));
    Parsed { request, stream }
}

/// The body, or the failure to report: too large (413) or unreadable (400).
async fn read_body(
    req: Request<Incoming>,
    limit: usize,
) -> Result<Bytes, (u16, HttpFailureKind, String)> {
    match Limited::new(req.into_body(), limit).collect().await {
        Ok(b) => Ok(b.to_bytes()),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => Err((
            413,
            HttpFailureKind::BodyTooLarge,
            format!("request body is larger than {limit} bytes"),
        )),
        Err(e) => Err((
            400,
            HttpFailureKind::UnreadableBody,
            format!("request body unreadable: {e}"),
        )),
    }
}

/// Read and parse a request body for `endpoint`, and find the trial: the parsed body and
/// the trial, or the rejection already reported.
async fn admit(
    shared: &Shared,
    key: &str,
    endpoint: Endpoint,
    req: Request<Incoming>,
) -> Result<(Parsed, Arc<Trial>), Response<Body>> {
    let wire = endpoint.wire();
    let bytes = match read_body(req, shared.max_body_bytes).await {
        Ok(b) => b,
        Err((status, kind, message)) => {
            let f = failure(kind, Some(endpoint), message, None);
            return Err(shared.reject(key, wire, status, f));
        }
    };
    let parsed = parse(wire, &bytes);
    let Some(trial) = shared.trial(key) else {
        let f = failure(
            HttpFailureKind::UnknownTrial,
            Some(endpoint),
            format!("no backend for trial key `{key}`"),
            parsed.request.as_ref().ok().cloned(),
        );
        return Err(shared.reject(key, wire, 404, f));
    };
    Ok((parsed, trial))
}

/// `POST /v1/chat/completions` and `POST /v1/messages`.
async fn complete(
    shared: Arc<Shared>,
    key: String,
    endpoint: Endpoint,
    req: Request<Incoming>,
) -> Result<Response<Body>, BoxError> {
    let wire = endpoint.wire();
    // What the system under test declared, when ctxbench's own client says so.
    let declared = req
        .headers()
        .get(crate::transport::DECLARE_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let (parsed, trial) = match admit(&shared, &key, endpoint, req).await {
        Ok(admitted) => admitted,
        Err(rejected) => return Ok(rejected),
    };
    if let (Some(fake), Some(declared)) = (trial.backend.as_fake(), declared.as_deref()) {
        if let Some((memory, marker)) = crate::transport::decode_declaration(declared) {
            fake.declare(memory, marker);
        }
    }
    let n = trial.http_requests.fetch_add(1, Ordering::SeqCst) + 1;
    if let Some(fault) = shared.config.faults.pick(&key, n, &trial.faults) {
        shared.faults_injected.fetch_add(1, Ordering::SeqCst);
        return inject(&shared, &key, endpoint, parsed, fault, n).await;
    }
    let request = match parsed.request {
        Ok(r) => r,
        Err((kind, message)) => {
            let f = HttpFailure {
                request_index: Some(n),
                ..failure(kind, Some(endpoint), message, None)
            };
            return Ok(shared.reject(&key, wire, 400, f));
        }
    };
    trial.forwarded.fetch_add(1, Ordering::SeqCst);
    let t0 = std::time::Instant::now();
    let result = trial.backend.provider().complete(&request).await;
    if let Some(observer) = &shared.observer {
        observer.exchange(&key, &request, &result, t0.elapsed().as_millis() as u64);
    }
    Ok(match result {
        Ok(response) => wire.answer(&response, &request.model, n, parsed.stream),
        Err(err) => wire.failure(&err, &request.model, n, parsed.stream),
    })
}

/// Answer request `n` of `key` with `fault` (reported first), in the endpoint's wire.
async fn inject(
    shared: &Shared,
    key: &str,
    endpoint: Endpoint,
    parsed: Parsed,
    fault: HttpFault,
    n: u64,
) -> Result<Response<Body>, BoxError> {
    let answer = endpoint.wire().fault(&fault, parsed.stream.is_some());
    let status = match &answer {
        FaultAnswer::Respond(r) => Some(r.status().as_u16()),
        FaultAnswer::Hang(_) => None,
    };
    shared.notify(
        key,
        &HttpFailure {
            status,
            message: format!("injected fault at request {n}"),
            kind: HttpFailureKind::Fault { fault },
            endpoint: Some(endpoint),
            request: parsed.request.ok(),
            request_index: Some(n),
        },
    );
    match answer {
        FaultAnswer::Respond(resp) => Ok(resp),
        FaultAnswer::Hang(ms) => {
            let mut shutdown = shared.shutdown.clone();
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(ms)) => {}
                _ = shutdown.changed() => {}
            }
            // An error from the service makes hyper close the connection unanswered.
            Err("hung by fault injection".into())
        }
    }
}

/// `POST /v1/messages/count_tokens`: the backend's count of the request's input. Not a
/// completion: not counted, not faulted, not an exchange.
async fn count_tokens(
    shared: Arc<Shared>,
    key: String,
    req: Request<Incoming>,
) -> Result<Response<Body>, BoxError> {
    let endpoint = Endpoint::CountTokens;
    let wire = endpoint.wire();
    let (parsed, trial) = match admit(&shared, &key, endpoint, req).await {
        Ok(admitted) => admitted,
        Err(rejected) => return Ok(rejected),
    };
    let request = match parsed.request {
        Ok(r) => r,
        Err((kind, message)) => {
            let f = failure(kind, Some(endpoint), message, None);
            return Ok(shared.reject(&key, wire, 400, f));
        }
    };
    let tokens = match trial.backend.as_fake() {
        Some(fake) => fake.true_input_tokens(&request),
        None => match trial.backend.provider().count_tokens(&request).await {
            Ok(Some(n)) => n,
            Ok(None) => {
                let f = failure(
                    HttpFailureKind::Unsupported,
                    Some(endpoint),
                    format!(
                        "backend `{}` offers no token count",
                        trial.backend.provider().name()
                    ),
                    Some(request),
                );
                return Ok(shared.reject(&key, wire, 404, f));
            }
            Err(err) => return Ok(wire.error_response(&err)),
        },
    };
    Ok(json_response(
        200,
        &[],
        &anthropic_wire::count_to_json(tokens),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_split_into_key_and_route() {
        assert_eq!(
            split_path("/v1/chat/completions"),
            (None, "v1/chat/completions")
        );
        assert_eq!(
            split_path("/t/run1-trial-7/v1/chat/completions"),
            (Some("run1-trial-7"), "v1/chat/completions")
        );
        assert_eq!(split_path("/t//v1/models"), (None, "t//v1/models"));
        assert_eq!(split_path("/chat/completions"), (None, "chat/completions"));
    }
}
