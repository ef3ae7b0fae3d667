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
use crate::fake::{FakeProvider, FakeScript, FakeState};
use crate::openai::wire as openai_wire;
pub use crate::transport::TRIAL_HEADER;
use crate::{ModelRequest, Provider, ProviderError};
use render::{json_response, Body, BoxError, FaultAnswer, StreamOptions, Wire};

/// Turns an opaque trial key into the script the fake provider plays for it.
pub trait ScriptResolver: Send + Sync {
    /// The script for `key`, or `None` for an unknown key (answered with a 404).
    fn resolve(&self, key: &str) -> Option<FakeScript>;

    /// The script for `key`, shared. The server asks on every request of a trial (it keeps
    /// only the trial's [`FakeState`]), so a resolver serving many trials should cache
    /// (the same key must always give the same script). Default: [`Self::resolve`].
    fn script(&self, key: &str) -> Option<Arc<FakeScript>> {
        self.resolve(key).map(Arc::new)
    }

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

/// Largest [`crate::transport::DECLARE_HEADER`] value the server keeps for a trial.
pub const MAX_DECLARATION_BYTES: usize = 16 * 1024;

/// What the server keeps per trial key, and for how long: a server that runs for days and
/// may be reached by anyone on its network holds bounded memory whatever keys arrive.
///
/// A trial's state is its script position (for the fake: a few hundred bytes; the script
/// itself is the resolver's, shared or rebuilt), its counters and its key. A trial idle for
/// longer than `idle_ttl` is evicted; a new key when `max_trials` trials are held evicts
/// the least recently used trial without a request in flight, and is refused (503, retried
/// by clients) when every trial has one. An evicted trial's next request is answered 410
/// `evicted_trial` with the reason — never silently from the start of its script — for as
/// long as its eviction is remembered: the last [`EVICTIONS_REMEMBERED_PER_SLOT`] ×
/// `max_trials` evictions (a 64-bit fingerprint of the key and a few counters each, about
/// 3 MB at the default cap), and, with a TTL, for one TTL.
#[derive(Debug, Clone, PartialEq)]
pub struct TrialLimits {
    /// Most trial keys held at once (at least 1).
    pub max_trials: usize,
    /// Idle time after which a trial is evicted; `None` keeps trials until `max_trials`
    /// pushes them out (or [`FakeServerHandle::forget`]).
    pub idle_ttl: Option<Duration>,
    /// Longest trial key accepted, in bytes (a longer one is answered 400 `too_large`).
    pub max_key_bytes: usize,
}

impl Default for TrialLimits {
    fn default() -> Self {
        TrialLimits {
            max_trials: 4096,
            idle_ttl: None,
            max_key_bytes: 256,
        }
    }
}

/// Server-wide settings.
#[derive(Debug, Clone, PartialEq)]
pub struct FakeServerConfig {
    /// Key for requests that name none.
    pub default_key: String,
    /// HTTP faults.
    pub faults: FaultPlan,
    /// What is kept per trial, and for how long.
    pub limits: TrialLimits,
}

impl Default for FakeServerConfig {
    fn default() -> Self {
        FakeServerConfig {
            default_key: DEFAULT_TRIAL_KEY.into(),
            faults: FaultPlan::default(),
            limits: TrialLimits::default(),
        }
    }
}

/// Where trials' backends come from.
enum Source {
    /// Any backend, kept for the trial's life.
    Backends(Arc<dyn BackendResolver>),
    /// The fake playing a script: the trial keeps only its [`FakeState`]; the script is
    /// asked for again per request (the resolver caches or rebuilds it).
    Scripts(Arc<dyn ScriptResolver>),
}

impl Source {
    fn http_faults(&self, key: &str) -> Vec<ScheduledFault> {
        match self {
            Source::Backends(r) => r.http_faults(key),
            Source::Scripts(r) => r.http_faults(key),
        }
    }
}

/// A trial's backend as the server keeps it between requests.
enum TrialBackend {
    Fixed(Backend),
    Script { state: Arc<FakeState> },
}

/// One trial's state on the server.
struct Trial {
    backend: TrialBackend,
    faults: Vec<ScheduledFault>,
    /// Completion requests received, faulted ones included: the number faults go by.
    http_requests: AtomicU64,
    /// Completion requests forwarded to the backend.
    forwarded: AtomicU64,
    /// Milliseconds since the server started, at the trial's latest request.
    last_used: AtomicU64,
}

/// Why a trial key is not served.
enum Refusal {
    /// The resolver does not know the key.
    Unknown,
    /// The trial was evicted: the message says why.
    Evicted(String),
    /// Every trial slot has a request in flight.
    Full(usize),
}

/// Evictions remembered per trial slot ([`TrialLimits::max_trials`]): an evicted key keeps
/// being refused until this many later evictions (or one TTL) have passed.
pub const EVICTIONS_REMEMBERED_PER_SLOT: usize = 16;

/// Why a trial was evicted (the message is written when the key comes back).
#[derive(Debug, Clone, Copy, PartialEq)]
enum EvictionCause {
    /// Idle for longer than the TTL (seconds).
    Idle(u64),
    /// A new key needed the slot of the least recently used trial (the cap).
    Capacity(usize),
}

impl EvictionCause {
    fn reason(self) -> String {
        match self {
            EvictionCause::Idle(ttl) => {
                format!("it was idle for longer than the trial TTL of {ttl} s")
            }
            EvictionCause::Capacity(max) => {
                format!("the server holds at most {max} trials and it was the least recently used")
            }
        }
    }
}

/// A remembered eviction: a few numbers, never the key (only its fingerprint).
struct Eviction {
    at_ms: u64,
    cause: EvictionCause,
    requests: u64,
}

/// The live trials and the keys evicted recently.
#[derive(Default)]
struct Table {
    live: HashMap<String, Arc<Trial>>,
    /// Evictions by key fingerprint ([`Table::fingerprint`]).
    evicted: HashMap<u64, Eviction>,
    /// Evicted fingerprints, oldest first, with their eviction time (to bound `evicted`).
    evicted_order: std::collections::VecDeque<(u64, u64)>,
    /// Seeds the fingerprints: random per server, so no client can choose colliding keys.
    hasher: std::collections::hash_map::RandomState,
    last_sweep_ms: u64,
}

struct Shared {
    source: Source,
    config: FakeServerConfig,
    observer: Option<Arc<dyn ExchangeObserver>>,
    max_body_bytes: usize,
    trials: Mutex<Table>,
    started: std::time::Instant,
    faults_injected: AtomicU64,
    shutdown: watch::Receiver<bool>,
}

impl Table {
    /// The 64-bit fingerprint under which an evicted key is remembered.
    fn fingerprint(&self, key: &str) -> u64 {
        use std::hash::BuildHasher;
        self.hasher.hash_one(key)
    }

    /// Move `key` from the live trials to the evicted ones, with its cause.
    fn evict(&mut self, key: &str, cause: EvictionCause, now_ms: u64, max_trials: usize) {
        let Some(trial) = self.live.remove(key) else {
            return;
        };
        let fp = self.fingerprint(key);
        self.evicted.insert(
            fp,
            Eviction {
                at_ms: now_ms,
                cause,
                requests: trial.http_requests.load(Ordering::SeqCst),
            },
        );
        self.evicted_order.push_back((fp, now_ms));
        let max = max_trials
            .max(1)
            .saturating_mul(EVICTIONS_REMEMBERED_PER_SLOT);
        while self.evicted_order.len() > max {
            if let Some((old, at)) = self.evicted_order.pop_front() {
                if self.evicted.get(&old).is_some_and(|e| e.at_ms == at) {
                    self.evicted.remove(&old);
                }
            }
        }
    }
}

impl Shared {
    fn trials(&self) -> std::sync::MutexGuard<'_, Table> {
        self.trials.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Evict trials idle for longer than the TTL (at most every quarter TTL, so a flood of
    /// new keys does not scan the table on every request), and forget evictions older
    /// than the TTL.
    fn sweep(&self, table: &mut Table, now_ms: u64) {
        let limits = &self.config.limits;
        let Some(ttl) = limits.idle_ttl else { return };
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        if now_ms.saturating_sub(table.last_sweep_ms) < (ttl_ms / 4).max(1) {
            return;
        }
        table.last_sweep_ms = now_ms;
        let idle: Vec<String> = table
            .live
            .iter()
            .filter(|(_, t)| {
                Arc::strong_count(t) == 1
                    && now_ms.saturating_sub(t.last_used.load(Ordering::SeqCst)) > ttl_ms
            })
            .map(|(k, _)| k.clone())
            .collect();
        for key in idle {
            let cause = EvictionCause::Idle(ttl.as_secs());
            table.evict(&key, cause, now_ms, limits.max_trials);
        }
        while let Some((key, at)) = table.evicted_order.front().cloned() {
            if now_ms.saturating_sub(at) <= ttl_ms {
                break;
            }
            table.evicted_order.pop_front();
            if table.evicted.get(&key).is_some_and(|e| e.at_ms == at) {
                table.evicted.remove(&key);
            }
        }
    }

    /// The trial for `key`, created on first use within the [`TrialLimits`].
    fn trial(&self, key: &str) -> Result<Arc<Trial>, Refusal> {
        self.trial_at(key, self.now_ms())
    }

    /// [`Shared::trial`] at `now` (milliseconds since the server started).
    fn trial_at(&self, key: &str, now: u64) -> Result<Arc<Trial>, Refusal> {
        {
            let mut table = self.trials();
            self.sweep(&mut table, now);
            if let Some(t) = table.live.get(key) {
                t.last_used.store(now, Ordering::SeqCst);
                return Ok(t.clone());
            }
            if let Some(e) = table.evicted.get(&table.fingerprint(key)) {
                return Err(Refusal::Evicted(format!(
                    "trial `{key}` was evicted by the server after {} request(s) because {}; \
                     its script position is lost, so this request cannot be answered as the \
                     trial expects — run the trial again (a new trial key), or raise the \
                     server's limits (serve-fake --max-trials, --trial-ttl)",
                    e.requests,
                    e.cause.reason()
                )));
            }
        }
        // Resolve outside the lock (a resolver may be slow); first insert wins.
        let backend = match &self.source {
            Source::Backends(r) => TrialBackend::Fixed(r.backend(key).ok_or(Refusal::Unknown)?),
            Source::Scripts(r) => {
                let script = r.script(key).ok_or(Refusal::Unknown)?;
                TrialBackend::Script {
                    state: Arc::new(FakeState::new(&script)),
                }
            }
        };
        let trial = Arc::new(Trial {
            backend,
            faults: self.source.http_faults(key),
            http_requests: AtomicU64::new(0),
            forwarded: AtomicU64::new(0),
            last_used: AtomicU64::new(now),
        });
        let max = self.config.limits.max_trials.max(1);
        let mut table = self.trials();
        if let Some(t) = table.live.get(key) {
            return Ok(t.clone());
        }
        if table.live.len() >= max {
            // The least recently used trial without a request in flight makes room.
            let victim = table
                .live
                .iter()
                .filter(|(_, t)| Arc::strong_count(t) == 1)
                .min_by_key(|(_, t)| t.last_used.load(Ordering::SeqCst))
                .map(|(k, _)| k.clone());
            let Some(victim) = victim else {
                return Err(Refusal::Full(max));
            };
            table.evict(&victim, EvictionCause::Capacity(max), now, max);
        }
        let fp = table.fingerprint(key);
        table.evicted.remove(&fp);
        table.live.insert(key.to_string(), trial.clone());
        Ok(trial)
    }

    /// The backend answering `trial` now: its own, or the fake rebuilt on its state.
    fn backend(&self, key: &str, trial: &Trial) -> Option<Backend> {
        match (&trial.backend, &self.source) {
            (TrialBackend::Fixed(b), _) => Some(b.clone()),
            (TrialBackend::Script { state }, Source::Scripts(r)) => r
                .script(key)
                .map(|script| Backend::fake(FakeProvider::with_state(script, state.clone()))),
            (TrialBackend::Script { .. }, Source::Backends(_)) => None,
        }
    }

    /// Live trials (for tests and the soak).
    fn live(&self) -> usize {
        self.trials().live.len()
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
    source: Source,
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
        FakeServer {
            source: Source::Scripts(resolver),
            config,
            observer: None,
            max_body_bytes: MAX_BODY_BYTES,
        }
    }

    /// A server forwarding each key's requests to the backend `backends` resolves it to.
    pub fn with_backends(backends: Arc<dyn BackendResolver>, config: FakeServerConfig) -> Self {
        FakeServer {
            source: Source::Backends(backends),
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
            source: self.source,
            config: self.config,
            observer: self.observer,
            max_body_bytes: self.max_body_bytes,
            trials: Mutex::new(Table::default()),
            started: std::time::Instant::now(),
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
            .live
            .get(key)
            .map_or(0, |t| t.http_requests.load(Ordering::SeqCst))
    }

    /// Requests the backend of `key` actually saw (faulted ones excluded): for the fake
    /// provider its own request counter, for any other backend the completions the server
    /// forwarded to it.
    pub fn provider_requests(&self, key: &str) -> u64 {
        self.shared
            .trials()
            .live
            .get(key)
            .map_or(0, |t| match &t.backend {
                TrialBackend::Script { state } => state.requests_seen(),
                TrialBackend::Fixed(b) => b.as_fake().map_or_else(
                    || t.forwarded.load(Ordering::SeqCst),
                    FakeProvider::requests_seen,
                ),
            })
    }

    /// Trials held now (at most [`TrialLimits::max_trials`]).
    pub fn live_trials(&self) -> usize {
        self.shared.live()
    }

    /// Faults injected so far, all keys.
    pub fn faults_injected(&self) -> u64 {
        self.shared.faults_injected.load(Ordering::SeqCst)
    }

    /// Drop the state of a finished trial (its next request would start a fresh backend).
    pub fn forget(&self, key: &str) {
        self.shared.trials().live.remove(key);
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
    let max_key = shared.config.limits.max_key_bytes;
    if key.len() > max_key {
        let f = failure(
            HttpFailureKind::TooLarge,
            None,
            format!(
                "trial key of {} bytes; the server accepts at most {max_key}",
                key.len()
            ),
            None,
        );
        let short: String = key.chars().take(64).collect();
        return Ok(shared.reject(&short, Wire::OpenAi, 400, f));
    }
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
        .ok()
        .and_then(|t| shared.backend(key, &t))
        .and_then(|b| b.model().map(str::to_string));
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
) -> Result<(Parsed, Arc<Trial>, Backend), Response<Body>> {
    let wire = endpoint.wire();
    let bytes = match read_body(req, shared.max_body_bytes).await {
        Ok(b) => b,
        Err((status, kind, message)) => {
            let f = failure(kind, Some(endpoint), message, None);
            return Err(shared.reject(key, wire, status, f));
        }
    };
    let parsed = parse(wire, &bytes);
    let request = || parsed.request.as_ref().ok().cloned();
    let unknown = || {
        failure(
            HttpFailureKind::UnknownTrial,
            Some(endpoint),
            format!("no backend for trial key `{key}`"),
            request(),
        )
    };
    let trial = match shared.trial(key) {
        Ok(t) => t,
        Err(Refusal::Unknown) => return Err(shared.reject(key, wire, 404, unknown())),
        Err(Refusal::Evicted(message)) => {
            let f = failure(
                HttpFailureKind::EvictedTrial,
                Some(endpoint),
                message,
                request(),
            );
            return Err(shared.reject(key, wire, 410, f));
        }
        Err(Refusal::Full(max)) => {
            let f = failure(
                HttpFailureKind::TooManyTrials,
                Some(endpoint),
                format!(
                    "the server holds {max} trials, each with a request in flight; retry \
                     shortly (serve-fake --max-trials raises the limit)"
                ),
                request(),
            );
            return Err(shared.reject(key, wire, 503, f));
        }
    };
    let Some(backend) = shared.backend(key, &trial) else {
        return Err(shared.reject(key, wire, 404, unknown()));
    };
    Ok((parsed, trial, backend))
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
    if declared
        .as_ref()
        .is_some_and(|d| d.len() > MAX_DECLARATION_BYTES)
    {
        let f = failure(
            HttpFailureKind::TooLarge,
            Some(endpoint),
            format!("declaration header larger than {MAX_DECLARATION_BYTES} bytes"),
            None,
        );
        return Ok(shared.reject(&key, wire, 400, f));
    }
    let (parsed, trial, backend) = match admit(&shared, &key, endpoint, req).await {
        Ok(admitted) => admitted,
        Err(rejected) => return Ok(rejected),
    };
    if let (Some(fake), Some(declared)) = (backend.as_fake(), declared.as_deref()) {
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
    let result = backend.provider().complete(&request).await;
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
    let (parsed, _trial, backend) = match admit(&shared, &key, endpoint, req).await {
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
    let tokens = match backend.as_fake() {
        Some(fake) => fake.true_input_tokens(&request),
        None => match backend.provider().count_tokens(&request).await {
            Ok(Some(n)) => n,
            Ok(None) => {
                let f = failure(
                    HttpFailureKind::Unsupported,
                    Some(endpoint),
                    format!(
                        "backend `{}` offers no token count",
                        backend.provider().name()
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
    use std::sync::atomic::AtomicUsize;

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

    /// Scripts for keys starting with `k`, counting how often one is asked for.
    struct Counting(AtomicUsize);

    impl ScriptResolver for Counting {
        fn resolve(&self, key: &str) -> Option<FakeScript> {
            self.0.fetch_add(1, Ordering::SeqCst);
            key.starts_with('k').then(|| FakeScript {
                model: "fake-1k".into(),
                context_window: 1024,
                ..FakeScript::default()
            })
        }
    }

    fn shared(limits: TrialLimits) -> (Shared, Arc<Counting>) {
        let resolver = Arc::new(Counting(AtomicUsize::new(0)));
        let (_tx, rx) = watch::channel(false);
        let shared = Shared {
            source: Source::Scripts(resolver.clone()),
            config: FakeServerConfig {
                limits,
                ..FakeServerConfig::default()
            },
            observer: None,
            max_body_bytes: MAX_BODY_BYTES,
            trials: Mutex::new(Table::default()),
            started: std::time::Instant::now(),
            faults_injected: AtomicU64::new(0),
            shutdown: rx,
        };
        (shared, resolver)
    }

    fn evicted(r: Result<Arc<Trial>, Refusal>) -> String {
        match r {
            Err(Refusal::Evicted(m)) => m,
            Err(Refusal::Full(n)) => panic!("full ({n})"),
            Err(Refusal::Unknown) => panic!("unknown"),
            Ok(_) => panic!("served"),
        }
    }

    #[test]
    fn a_new_key_at_the_cap_evicts_the_least_recently_used_idle_trial() {
        let (s, _) = shared(TrialLimits {
            max_trials: 2,
            ..TrialLimits::default()
        });
        s.trial_at("k1", 0).ok().unwrap();
        s.trial_at("k2", 1).ok().unwrap();
        s.trial_at("k1", 2).ok().unwrap(); // k2 is now the least recently used
        s.trial_at("k3", 3).ok().unwrap();
        assert_eq!(s.live(), 2);
        let why = evicted(s.trial_at("k2", 4));
        assert!(why.contains("trial `k2` was evicted"), "{why}");
        assert!(why.contains("at most 2 trials"), "{why}");
        assert!(s
            .trial_at("nope", 5)
            .is_err_and(|r| matches!(r, Refusal::Unknown)));
        // A trial with a request in flight is never evicted: with both held, a new key is
        // refused instead.
        let held = (
            s.trial_at("k1", 6).ok().unwrap(),
            s.trial_at("k3", 6).ok().unwrap(),
        );
        assert!(matches!(s.trial_at("k4", 7), Err(Refusal::Full(2))));
        drop(held);
        assert!(s.trial_at("k4", 8).is_ok());
    }

    #[test]
    fn an_evicted_key_is_refused_long_after_the_cap_has_turned_over() {
        // The audit's case: with room for 2 trials, keys 10..14 then 10 again must not
        // restart key 10's script from the beginning.
        let (s, _) = shared(TrialLimits {
            max_trials: 2,
            ..TrialLimits::default()
        });
        for (i, k) in (10..15).enumerate() {
            s.trial_at(&format!("k{k}"), i as u64).ok().unwrap();
        }
        let why = evicted(s.trial_at("k10", 10));
        assert!(why.contains("trial `k10` was evicted"), "{why}");
        // Remembered for EVICTIONS_REMEMBERED_PER_SLOT × max_trials later evictions.
        for i in 0..(2 * EVICTIONS_REMEMBERED_PER_SLOT as u64 - 4) {
            s.trial_at(&format!("k{}", 100 + i), 100 + i).ok().unwrap();
        }
        evicted(s.trial_at("k10", 1_000));
        for i in 0..8 {
            s.trial_at(&format!("k{}", 200 + i), 2_000 + i)
                .ok()
                .unwrap();
        }
        assert!(s.trial_at("k10", 3_000).is_ok(), "forgotten past the bound");
    }

    #[test]
    fn idle_trials_expire_and_their_eviction_is_remembered_for_one_ttl() {
        let (s, _) = shared(TrialLimits {
            max_trials: 100,
            idle_ttl: Some(Duration::from_secs(10)),
            ..TrialLimits::default()
        });
        s.trial_at("k1", 0).ok().unwrap();
        s.trial_at("k2", 9_000).ok().unwrap();
        // At 12 s, k1 (idle 12 s) expires and k2 (idle 3 s) stays. (The table is swept at
        // most every quarter TTL, so a flood of keys does not scan it per request.)
        s.trial_at("k3", 12_000).ok().unwrap();
        assert_eq!(s.live(), 2);
        let why = evicted(s.trial_at("k1", 12_500));
        assert!(
            why.contains("idle for longer than the trial TTL of 10 s"),
            "{why}"
        );
        // Asked again, still the same clear error; once the eviction is a TTL old, the key
        // starts a new trial.
        s.trial_at("k2", 15_000).ok().unwrap();
        s.trial_at("k3", 15_000).ok().unwrap();
        evicted(s.trial_at("k1", 16_000));
        assert!(s.trial_at("k1", 23_000).is_ok());
        assert_eq!(s.live(), 3);
    }

    #[test]
    fn state_stays_bounded_under_any_number_of_distinct_keys() {
        let (s, resolver) = shared(TrialLimits {
            max_trials: 8,
            idle_ttl: Some(Duration::from_secs(60)),
            ..TrialLimits::default()
        });
        for i in 0..10_000u64 {
            let key = format!("k{i}");
            let t = s.trial_at(&key, i).ok().unwrap();
            // The trial keeps its state, not its script: the script is asked for per use.
            assert!(
                s.backend(&key, &t)
                    .and_then(|b| b.as_fake().map(|f| f.script().context_window))
                    == Some(1024)
            );
        }
        let table = s.trials();
        assert_eq!(table.live.len(), 8);
        let remembered = 8 * EVICTIONS_REMEMBERED_PER_SLOT;
        assert!(table.evicted.len() <= remembered && table.evicted_order.len() <= remembered);
        drop(table);
        // One resolution to create each trial and one per use.
        assert_eq!(resolver.0.load(Ordering::SeqCst), 20_000);
    }
}
