//! The fake provider over HTTP, in the OpenAI chat-completions wire format (PRODUCT.md
//! §The fake provider: "one implementation, two transports").
//!
//! Routes:
//! * `POST /v1/chat/completions` (also `/chat/completions`) and the per-trial
//!   `POST /t/{key}/v1/chat/completions`;
//! * `GET /v1/models` (also `/t/{key}/v1/models`).
//!
//! The trial key comes from the path, else the [`TRIAL_HEADER`] header, else the
//! configured default key. The server knows nothing about scenarios: a [`ScriptResolver`]
//! turns a key into a [`FakeScript`], and one [`FakeProvider`] per key is created on first
//! use and kept, so the script cursor advances across that trial's requests. Requests,
//! responses and errors use [`crate::openai::wire`], the same functions the client uses, so
//! a conversation over loopback is the conversation played in process.
//!
//! HTTP faults ([`HttpFault`]) are injected *before* the fake provider sees the request:
//! the provider's request counter and cursor do not move, so a retried request gets exactly
//! the answer the fault-free one would have. Native compaction and opaque items do not
//! travel over HTTP.
//!
//! The server binds loopback unless the caller hands it another listener.

pub mod faults;

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Frame, Incoming};
use hyper::header::{HeaderName, HeaderValue, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

pub use faults::{FaultPlan, HttpFault, RandomFaults, ScheduledFault};

use crate::fake::{FakeProvider, FakeScript};
use crate::openai::wire;
pub use crate::transport::TRIAL_HEADER;
use crate::{Provider, ProviderError};

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Body = BoxBody<Bytes, BoxError>;

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

/// Sees every exchange the fake provider answers: the request as parsed from the wire and
/// the provider's answer (or error), before the HTTP response is written. Faulted requests
/// never reach the provider and are not observed. ctxbench records what an external agent
/// actually sends through this hook.
pub trait ExchangeObserver: Send + Sync {
    /// One answered exchange for trial `key`; `latency_ms` is the provider's time.
    fn exchange(
        &self,
        key: &str,
        request: &crate::ModelRequest,
        result: &Result<crate::ModelResponse, ProviderError>,
        latency_ms: u64,
    );
}

/// The key used when neither the path nor the header names one.
pub const DEFAULT_TRIAL_KEY: &str = "default";
/// Largest request body accepted.
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
    provider: FakeProvider,
    faults: Vec<ScheduledFault>,
    http_requests: AtomicU64,
}

struct Shared {
    resolver: Arc<dyn ScriptResolver>,
    config: FakeServerConfig,
    observer: Option<Arc<dyn ExchangeObserver>>,
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
        let script = self.resolver.resolve(key)?;
        let trial = Arc::new(Trial {
            provider: FakeProvider::new(script),
            faults: self.resolver.http_faults(key),
            http_requests: AtomicU64::new(0),
        });
        Some(
            self.trials()
                .entry(key.to_string())
                .or_insert(trial)
                .clone(),
        )
    }
}

/// The fake provider over HTTP. Build with [`FakeServer::new`], then [`FakeServer::spawn`]
/// (loopback, ephemeral port) or [`FakeServer::spawn_on`] (a listener of your choice).
pub struct FakeServer {
    resolver: Arc<dyn ScriptResolver>,
    config: FakeServerConfig,
    observer: Option<Arc<dyn ExchangeObserver>>,
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
    /// A server resolving keys with `resolver`.
    pub fn new(resolver: Arc<dyn ScriptResolver>, config: FakeServerConfig) -> Self {
        FakeServer {
            resolver,
            config,
            observer: None,
        }
    }

    /// Report every answered exchange to `observer`.
    pub fn with_observer(mut self, observer: Arc<dyn ExchangeObserver>) -> Self {
        self.observer = Some(observer);
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
            resolver: self.resolver,
            config: self.config,
            observer: self.observer,
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

    /// Chat requests received for `key` (faulted ones included).
    pub fn requests(&self, key: &str) -> u64 {
        self.shared
            .trials()
            .get(key)
            .map_or(0, |t| t.http_requests.load(Ordering::SeqCst))
    }

    /// Requests the fake provider of `key` actually saw (faulted ones excluded).
    pub fn provider_requests(&self, key: &str) -> u64 {
        self.shared
            .trials()
            .get(key)
            .map_or(0, |t| t.provider.requests_seen())
    }

    /// Faults injected so far, all keys.
    pub fn faults_injected(&self) -> u64 {
        self.shared.faults_injected.load(Ordering::SeqCst)
    }

    /// Drop the state of a finished trial (its next request would start a fresh provider).
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

fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never: Infallible| match never {})
        .boxed()
}

fn json_response(status: u16, headers: &[(String, String)], body: &Value) -> Response<Body> {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let mut resp = Response::new(full(bytes));
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
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

fn error_response(err: &ProviderError) -> Response<Body> {
    let http = wire::error_to_http(err);
    json_response(http.status, &http.headers, &http.body)
}

/// A plain OpenAI-shaped error (not a provider error: routing, parsing).
fn plain_error(status: u16, kind: &str, code: &str, message: &str) -> Response<Body> {
    json_response(
        status,
        &[],
        &json!({"error": {"message": message, "type": kind, "param": null, "code": code}}),
    )
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
    let route = rest.trim_end_matches('/');
    match (req.method(), route) {
        (&Method::POST, "v1/chat/completions" | "chat/completions") => chat(shared, key, req).await,
        (&Method::GET, "v1/models" | "models") => Ok(models(&shared, &key)),
        (_, "v1/chat/completions" | "chat/completions" | "v1/models" | "models") => {
            Ok(plain_error(
                405,
                "invalid_request_error",
                "method_not_allowed",
                "method not allowed",
            ))
        }
        _ => Ok(plain_error(
            404,
            "invalid_request_error",
            "unknown_url",
            &format!("unknown route {path}"),
        )),
    }
}

fn models(shared: &Shared, key: &str) -> Response<Body> {
    let data: Vec<Value> = shared
        .trial(key)
        .map(|t| {
            vec![json!({
                "id": t.provider.script().model,
                "object": "model",
                "created": 0,
                "owned_by": "ctxbench",
            })]
        })
        .unwrap_or_default();
    json_response(200, &[], &json!({"object": "list", "data": data}))
}

async fn chat(
    shared: Arc<Shared>,
    key: String,
    req: Request<Incoming>,
) -> Result<Response<Body>, BoxError> {
    let body = match Limited::new(req.into_body(), MAX_BODY_BYTES)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            return Ok(plain_error(
                413,
                "invalid_request_error",
                "request_too_large",
                &format!("request body unreadable: {e}"),
            ))
        }
    };
    let Some(trial) = shared.trial(&key) else {
        return Ok(plain_error(
            404,
            "invalid_request_error",
            "unknown_trial",
            &format!("no script for trial key `{key}`"),
        ));
    };
    let n = trial.http_requests.fetch_add(1, Ordering::SeqCst) + 1;
    if let Some(fault) = shared.config.faults.pick(&key, n, &trial.faults) {
        shared.faults_injected.fetch_add(1, Ordering::SeqCst);
        return inject(&shared, fault).await;
    }
    let value: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return Ok(plain_error(
                400,
                "invalid_request_error",
                "invalid_json",
                &format!("request body is not JSON: {e}"),
            ))
        }
    };
    if value.get("stream").and_then(Value::as_bool) == Some(true) {
        return Ok(plain_error(
            400,
            "invalid_request_error",
            "unsupported_parameter",
            "the ctxbench fake server does not stream; send `stream: false`",
        ));
    }
    let request = match wire::request_from_json(&value) {
        Ok(r) => r,
        Err(e) => {
            return Ok(plain_error(
                400,
                "invalid_request_error",
                "invalid_request",
                &e.message,
            ))
        }
    };
    let t0 = std::time::Instant::now();
    let result = trial.provider.complete(&request).await;
    if let Some(observer) = &shared.observer {
        observer.exchange(&key, &request, &result, t0.elapsed().as_millis() as u64);
    }
    Ok(match result {
        Ok(response) => json_response(
            200,
            &[],
            &wire::response_to_json(&response, &request.model, &format!("chatcmpl-ctxbench-{n}")),
        ),
        Err(err) => error_response(&err),
    })
}

/// A body that yields one chunk, pauses once, then fails: with a `content-length` larger
/// than the chunk, the client sees valid headers and a JSON document cut off mid-way. The
/// pause matters: hyper flushes what it has written when the body is not ready, and drops
/// unflushed bytes when the body fails, so without it the client would see no answer at all.
struct CutBody {
    chunk: Option<Bytes>,
    paused: bool,
}

impl hyper::body::Body for CutBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if let Some(b) = self.chunk.take() {
            return Poll::Ready(Some(Ok(Frame::data(b))));
        }
        if !self.paused {
            self.paused = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        Poll::Ready(Some(Err("connection cut by fault injection".into())))
    }
}

/// The body a truncated answer would have had (a plausible completion).
const TRUNCATED_DOCUMENT: &str = r#"{"id":"chatcmpl-ctxbench-fault","object":"chat.completion","created":0,"model":"fake","choices":[{"index":0,"message":{"role":"assistant","content":"This answer was cut off by an injected fault before it could finish."},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}"#;

async fn inject(shared: &Shared, fault: HttpFault) -> Result<Response<Body>, BoxError> {
    Ok(match fault {
        HttpFault::RateLimit { retry_after_ms } => error_response(&ProviderError::RateLimited {
            retry_after_ms: Some(retry_after_ms),
            message: "Rate limit reached for requests (injected by ctxbench).".into(),
        }),
        HttpFault::ServerError { status } => json_response(
            status,
            &[],
            &json!({"error": {
                "message": "The server had an error while processing your request (injected by ctxbench).",
                "type": "server_error", "param": null, "code": null,
            }}),
        ),
        HttpFault::Hang { ms } => {
            let mut shutdown = shared.shutdown.clone();
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(ms)) => {}
                _ = shutdown.changed() => {}
            }
            // An error from the service makes hyper close the connection unanswered.
            return Err("hung by fault injection".into());
        }
        HttpFault::TruncatedBody => {
            let full_len = TRUNCATED_DOCUMENT.len();
            let cut = Bytes::from_static(&TRUNCATED_DOCUMENT.as_bytes()[..full_len / 2]);
            let mut resp = Response::new(
                CutBody {
                    chunk: Some(cut),
                    paused: false,
                }
                .boxed(),
            );
            resp.headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            resp.headers_mut()
                .insert(CONTENT_LENGTH, HeaderValue::from(full_len));
            resp
        }
        HttpFault::MalformedBody => {
            let mut resp = Response::new(full(
                "<html><body><h1>502 Bad Gateway</h1> (injected by ctxbench)</body></html>",
            ));
            resp.headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            resp
        }
    })
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
