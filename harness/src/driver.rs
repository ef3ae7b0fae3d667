//! The agent driver: plays one instantiated scenario through a system under test.
//!
//! The driver is the only place where the script meets the engine. It hands the engine user
//! turns, restarts and instruction-file edits — what a real user and workspace would —
//! executes scripted tool results behind [`ToolExecutor`], and records every physical
//! request (through a recording provider wrapper), every engine event and every turn
//! outcome in a [`TrialRecord`]. A failed turn does not end the scenario: later steps still
//! run, so every mode has a value for every step.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use ctxbench_adapters::estimate::RequestEstimator;
use ctxbench_adapters::fake::{FakeProvider, FakeTokenizer};
use ctxbench_adapters::{Message, ModelRequest, ModelResponse, Provider, ProviderError, ToolCall};
use sha2::{Digest, Sha256};

use crate::record::CompactionRecord;
use crate::record::{EventRecord, RequestRecord, ToolExecution, TrialRecord, TurnRecord};
use crate::scenario::Fault;
use crate::scenario::{Scenario, ScriptedCall, Step};
use crate::seed::trial_seed;
use crate::storage::schema::{OutcomeStatus, RequestRow, TrialOutcome, TrialStats, REQUEST_SCHEMA};
use ctxbench_sut::CompactionOutcome;
use ctxbench_sut::Mode;
use ctxbench_sut::{
    EngineEvent, EventSink, SystemUnderTest, ToolExecutor, ToolOutput, TurnIo, TurnOutcome,
};
use ctxbench_sut::{SutFaults, SutSetup};

pub use crate::connect::ProviderSpec;
use crate::connect::Services;

/// Identity of one trial in the matrix.
#[derive(Debug, Clone)]
pub struct TrialSpec {
    /// The scenario.
    pub scenario: Arc<Scenario>,
    /// Mode.
    pub mode: Mode,
    /// Trial index.
    pub trial: u32,
    /// Run seed (the trial seed is derived from it).
    pub run_seed: u64,
    /// Provider.
    pub provider: ProviderSpec,
    /// A deliberately broken variant of the system under test, by name (grader tests and
    /// selftest only).
    pub variant: Option<String>,
    /// Run-level plumbing (cassette, HTTP clients); default: none, the in-process fake.
    pub services: Services,
}

impl TrialSpec {
    /// `<scenario>/<mode>/<trial>`.
    pub fn trial_id(&self) -> String {
        format!("{}/{}/{}", self.scenario.id, self.mode, self.trial)
    }
}

#[derive(Debug)]
enum LogItem {
    Event(EngineEvent),
    /// An external agent's event, placed after its `after`-th exchange.
    Placed {
        after: u64,
        event: EngineEvent,
    },
    Exchange {
        request: ModelRequest,
        result: Result<ModelResponse, ProviderError>,
        latency_ms: u64,
    },
}

#[derive(Default)]
struct Log {
    step: u64,
    items: Vec<(u64, LogItem)>,
    exchanges: u64,
}

/// Records what an external agent sends to the trial's loopback fake provider.
struct Observer(SharedLog);

impl ctxbench_adapters::serve::ExchangeObserver for Observer {
    fn exchange(
        &self,
        _key: &str,
        request: &ModelRequest,
        result: &Result<ModelResponse, ProviderError>,
        latency_ms: u64,
    ) {
        let mut l = lock(&self.0);
        let step = l.step;
        l.exchanges += 1;
        l.items.push((
            step,
            LogItem::Exchange {
                request: request.clone(),
                result: result.clone(),
                latency_ms,
            },
        ));
    }

    /// A request the agent sent that never reached the model (malformed body, unknown
    /// route or trial, an injected fault): recorded like an exchange that the provider
    /// refused, so a runtime's broken requests are visible in `requests.csv` and count
    /// against it, instead of vanishing.
    fn http_failure(&self, key: &str, failure: &ctxbench_adapters::serve::HttpFailure) {
        let request = failure.request.clone().unwrap_or_else(|| ModelRequest {
            model: String::new(),
            messages: Vec::new(),
            tools: Vec::new(),
            max_output_tokens: 0,
        });
        let message = format!(
            "{} ({}{}): {}",
            failure.kind.as_str(),
            failure
                .endpoint
                .map(|e| e.as_str())
                .unwrap_or("unknown route"),
            failure
                .status
                .map(|s| format!(", HTTP {s}"))
                .unwrap_or_default(),
            failure.message
        );
        // A failure with no HTTP answer (the connection was closed) is a transport error.
        let error = match failure.status {
            None => ProviderError::Server { status: 0, message },
            Some(status) => ProviderError::Rejected { status, message },
        };
        self.exchange(key, &request, &Err(error), 0);
    }
}

/// Put every placed event right after the exchange it follows (arrival order among
/// events of the same place); exchanges keep their order.
fn place_events(items: Vec<(u64, LogItem)>) -> Vec<(u64, LogItem)> {
    let mut out = Vec::with_capacity(items.len());
    let mut placed: Vec<(u64, u64, EngineEvent)> = Vec::new();
    let mut exchanges = Vec::new();
    for (step, item) in items {
        match item {
            LogItem::Placed { after, event } => placed.push((after, step, event)),
            other => exchanges.push((step, other)),
        }
    }
    placed.sort_by_key(|(after, _, _)| *after);
    let mut placed = placed.into_iter().peekable();
    let mut n = 0u64;
    for (step, item) in exchanges {
        if matches!(item, LogItem::Exchange { .. }) {
            while let Some((_, s, e)) = placed.next_if(|(after, _, _)| *after <= n) {
                out.push((s, LogItem::Event(e)));
            }
            n += 1;
        }
        out.push((step, item));
    }
    out.extend(placed.map(|(_, s, e)| (s, LogItem::Event(e))));
    out
}

/// The tool calls an external agent executed: each call its model made, judged against the
/// script the way the in-process executor would have (scripted when the name matches the
/// next scripted call), once — and again for every further result the agent sent back for
/// the same call in one request (a call answered twice was executed twice). What the agent
/// did is seen only in what it sends; a call the model repeats is a new call (the fake
/// gives it a new id).
fn observed_executions(items: &[(u64, LogItem)], steps: &[Step]) -> Vec<ToolExecution> {
    let mut out = Vec::new();
    let mut cursor: BTreeMap<u64, usize> = BTreeMap::new();
    // (step, call id) → the most results one request carried for it.
    let mut answered: BTreeMap<(u64, &str), usize> = BTreeMap::new();
    for (step, item) in items {
        let LogItem::Exchange {
            request, result, ..
        } = item
        else {
            continue;
        };
        let mut here: BTreeMap<&str, usize> = BTreeMap::new();
        for id in request
            .messages
            .iter()
            .filter(|m| m.role == ctxbench_adapters::Role::Tool)
            .filter_map(|m| m.tool_call_id.as_deref())
        {
            *here.entry(id).or_default() += 1;
        }
        for (id, n) in here {
            let most = answered.entry((*step, id)).or_default();
            *most = (*most).max(n);
        }
        let Ok(response) = result else {
            continue;
        };
        let scripted: Vec<&ScriptedCall> = match steps.get(*step as usize) {
            Some(Step::Turn(t)) => t.tool_rounds.iter().flatten().collect(),
            _ => Vec::new(),
        };
        for call in &response.message.tool_calls {
            let next = cursor.entry(*step).or_insert(0);
            let ok = scripted.get(*next).is_some_and(|c| {
                ctxbench_adapters::fake::tool_names::names_tool(&call.name, &c.name)
            });
            if ok {
                *next += 1;
            }
            out.push(ToolExecution {
                step: *step,
                call_id: call.id.clone(),
                name: call.name.clone(),
                scripted: ok,
            });
        }
    }
    let mut again = Vec::new();
    for x in &out {
        let n = answered
            .get(&(x.step, x.call_id.as_str()))
            .copied()
            .unwrap_or(0);
        again.extend((1..n).map(|_| x.clone()));
    }
    out.extend(again);
    out
}

type SharedLog = Arc<Mutex<Log>>;

fn lock(log: &SharedLog) -> std::sync::MutexGuard<'_, Log> {
    log.lock().unwrap_or_else(|e| e.into_inner())
}

struct Sink(SharedLog);

impl EventSink for Sink {
    fn emit(&mut self, event: EngineEvent) {
        let mut l = lock(&self.0);
        let step = l.step;
        l.items.push((step, LogItem::Event(event)));
    }
}

/// Wraps the provider and records every physical exchange, in order with the events; with
/// a cassette it also stores each exchange (record) or answers from it (replay).
struct Recording {
    inner: Box<dyn Provider>,
    log: SharedLog,
    trial_id: String,
    cassette: Option<Arc<crate::cassette::Cassette>>,
    /// The scenario's listed secrets, which the cassette stores only as placeholders.
    secrets: crate::cassette::Secrets,
    /// `false` when an external agent reaches this provider through the loopback server,
    /// whose observer records the exchange already (with the agent's own request bytes).
    log_exchanges: bool,
}

impl Recording {
    /// One call through the cassette: replayed from it, or made live (`live` is only
    /// awaited then) and stored; without a cassette, just made live.
    async fn taped<T>(
        &self,
        live: impl std::future::Future<Output = Result<T, ProviderError>>,
        replay: impl FnOnce(&crate::cassette::Cassette) -> Result<T, ProviderError>,
        store: impl FnOnce(
            &crate::cassette::Cassette,
            &Result<T, ProviderError>,
        ) -> Result<(), crate::cassette::CassetteError>,
    ) -> Result<T, ProviderError> {
        match &self.cassette {
            Some(c) if c.replaying() => replay(c),
            Some(c) => {
                let result = live.await;
                if let Err(e) = store(c, &result) {
                    // A recording that cannot be written must not pass for a recorded run.
                    return Err(ProviderError::Unavailable {
                        message: format!("cassette: {e}"),
                    });
                }
                result
            }
            None => live.await,
        }
    }
}

#[async_trait::async_trait]
impl Provider for Recording {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn native_compaction(&self) -> bool {
        self.inner.native_compaction()
    }
    async fn compact(
        &self,
        request: &ModelRequest,
    ) -> Result<ctxbench_adapters::OpaqueItem, ProviderError> {
        // A native compaction call is a physical request too; it is recorded with the
        // compaction's events, not as a turn request.
        self.inner.compact(request).await
    }
    async fn count_tokens(&self, request: &ModelRequest) -> Result<Option<u64>, ProviderError> {
        let step = lock(&self.log).step;
        self.taped(
            self.inner.count_tokens(request),
            |c| c.count(&self.trial_id, step, request, &self.secrets),
            |c, r| c.store_count(&self.trial_id, step, request, &self.secrets, r),
        )
        .await
    }
    fn resilience_stats(&self) -> Option<ctxbench_adapters::resilience::ResilienceStats> {
        self.inner.resilience_stats()
    }
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        let t0 = Instant::now();
        let step = lock(&self.log).step;
        let result = self
            .taped(
                self.inner.complete(request),
                |c| c.answer(&self.trial_id, step, request, &self.secrets),
                |c, r| c.store(&self.trial_id, step, request, &self.secrets, r),
            )
            .await;
        let latency_ms = t0.elapsed().as_millis() as u64;
        if !self.log_exchanges {
            return result;
        }
        let mut l = lock(&self.log);
        l.exchanges += 1;
        l.items.push((
            step,
            LogItem::Exchange {
                request: request.clone(),
                result: result.clone(),
                latency_ms,
            },
        ));
        result
    }
}

/// Plays a turn's scripted tool results in call order.
struct ScriptedTools {
    step: u64,
    calls: Vec<ScriptedCall>,
    next: usize,
    executions: Vec<ToolExecution>,
}

impl ToolExecutor for ScriptedTools {
    fn execute(&mut self, call: &ToolCall) -> ToolOutput {
        let scripted = self.calls.get(self.next).filter(|c| c.name == call.name);
        let out = match scripted {
            Some(c) => {
                self.next += 1;
                ToolOutput {
                    content: c.result.clone(),
                    ok: true,
                }
            }
            None => ToolOutput {
                content: format!("error: tool `{}` is not available here", call.name),
                ok: false,
            },
        };
        self.executions.push(ToolExecution {
            step: self.step,
            call_id: call.id.clone(),
            name: call.name.clone(),
            scripted: out.ok,
        });
        out
    }
}

fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// Run one trial to completion. Never panics on scenario content; infrastructure problems
/// end the trial as `errored`.
pub async fn run_trial(spec: &TrialSpec, workdir: &Path) -> TrialRecord {
    let started_at = now_rfc3339();
    let t0 = Instant::now();
    let scenario = &spec.scenario;
    let seed = trial_seed(spec.run_seed, &scenario.id, spec.trial);
    let tokenizer = FakeTokenizer::new();
    let instance =
        scenario.instantiate_trial_separable(seed, spec.trial, &|t: &str| tokenizer.count_text(t));

    let log: SharedLog = Arc::new(Mutex::new(Log::default()));
    let model = spec.provider.effective_model(&scenario.model);
    let mut infra_error: Option<(u64, String)> = None;
    let replaying = spec
        .services
        .cassette
        .as_ref()
        .is_some_and(|c| c.replaying());
    // What the system under test declares about its request format reaches the fake model
    // (and the record, for the graders) — the in-process factory's now, an external
    // runtime's from its `ready`.
    let mut declaration = spec
        .services
        .sut
        .factory()
        .map(|f| f.declaration())
        .unwrap_or_default();
    let mut fake_script = instance.fake.clone();
    fake_script.memory = declaration.memory.clone();
    fake_script.summary_marker = declaration.summary_request.clone();
    let fake_model = Arc::new(FakeProvider::new(fake_script));
    let inner: Box<dyn Provider> = match &spec.provider {
        ProviderSpec::Fake => Box::new(fake_model.clone()),
        // A replayed trial reaches no network: every answer comes from the cassette.
        ProviderSpec::Http(_) if replaying => Box::new(Unreachable),
        ProviderSpec::Http(http) => {
            let key = crate::connect::trial_key(&scenario.id, seed, spec.mode, spec.trial);
            match spec.services.http_provider(http, &key, &declaration) {
                Ok(p) => p,
                Err(e) => {
                    infra_error = Some((0, e));
                    Box::new(Unreachable)
                }
            }
        }
    };
    let external = spec.services.sut.external().cloned();
    let provider = Arc::new(Recording {
        inner,
        log: log.clone(),
        trial_id: spec.trial_id(),
        cassette: spec.services.cassette.clone(),
        secrets: crate::cassette::Secrets::new(&scenario.secrets),
        log_exchanges: external.is_none(),
    });
    let mut sink = Sink(log.clone());
    let mut turns = Vec::new();
    let mut executions = Vec::new();
    let mut compactions: Vec<CompactionRecord> = Vec::new();
    let mut corruptions: Vec<u64> = Vec::new();

    let instructions_path = workdir.join("AGENTS.md");
    let config = SutSetup {
        mode: spec.mode,
        model: model.clone(),
        context: scenario.context,
        tools: scenario.tools.clone(),
        instructions_path: instructions_path.clone(),
        session_dir: workdir.join("session"),
        redact: scenario.secrets.clone(),
        faults: sut_faults(&scenario.faults),
        variant: spec.variant.clone(),
    };
    let mut server: Option<ctxbench_adapters::serve::FakeServerHandle> = None;
    let mut failure_reason: Option<String> = None;
    // Whether the trial's stop is the system under test's own failure (a crash, a timeout,
    // its session I/O) — it then fails the trial — rather than ctxbench's or the provider's
    // (then the trial is errored, counted apart).
    let mut sut_fault = false;
    let prepared = infra_error
        .as_ref()
        .map_or(Ok(()), |(_, e)| Err(e.clone()))
        .and_then(|_| {
            std::fs::write(&instructions_path, &scenario.instructions)
                .map_err(|e| format!("writing {}: {e}", instructions_path.display()))
        });
    let engine: Result<Box<dyn SystemUnderTest>, String> = match (prepared, &external) {
        (Err(e), _) => Err(e),
        (Ok(()), None) => match spec.services.sut.factory() {
            Some(factory) => factory.create(config.clone()).map_err(|e| e.to_string()),
            None => Err("no system under test".to_string()),
        },
        (Ok(()), Some(ext)) => {
            let key = crate::connect::trial_key(&scenario.id, seed, spec.mode, spec.trial);
            // The agent's model: the fake provider playing this trial's script, or — with
            // an HTTP provider — the real upstream behind ctxbench's retry layer and
            // cassette. Either way the observer records every request the agent sends.
            let backend = match &spec.provider {
                ProviderSpec::Fake => ctxbench_adapters::serve::Backend::fake(fake_model.clone()),
                ProviderSpec::Http(_) => {
                    ctxbench_adapters::serve::Backend::new(provider.clone() as Arc<dyn Provider>)
                        .with_model(model.model.clone())
                }
            };
            let resolver = move |_: &str| Some(backend.clone());
            let fake = ctxbench_adapters::serve::FakeServer::with_backends(
                Arc::new(resolver),
                Default::default(),
            )
            .with_observer(Arc::new(Observer(log.clone())));
            match fake.spawn().await {
                Err(e) => Err(format!("starting the loopback model: {e}")),
                Ok((_, handle)) => {
                    let base_url = handle.trial_base_url(&key);
                    let anthropic_base_url = handle.trial_anthropic_base_url(&key);
                    server = Some(handle);
                    let placer_log = log.clone();
                    let place: crate::external::EventPlacer =
                        Arc::new(move |requests_sent: Option<u64>, event: EngineEvent| {
                            let mut l = lock(&placer_log);
                            let step = l.step;
                            let after = requests_sent.unwrap_or(l.exchanges);
                            l.items.push((step, LogItem::Placed { after, event }));
                        });
                    let start = crate::external::protocol::Start {
                        id: 0,
                        protocol: String::new(),
                        trial: spec.trial_id(),
                        scenario: scenario.id.clone(),
                        mode: spec.mode.to_string(),
                        model: crate::external::protocol::ModelEndpoint {
                            base_url,
                            anthropic_base_url: Some(anthropic_base_url),
                            name: model.model.clone(),
                            context_window: model.context_window,
                            max_output_tokens: model.max_output_tokens,
                            // Provider-native (opaque) compaction is not served over
                            // the wire: the handshake must not promise it.
                            capabilities: ctxbench_adapters::capabilities::ModelCapabilities {
                                native_compaction:
                                    ctxbench_adapters::capabilities::NativeCompaction::Unsupported,
                                ..model.clone()
                            },
                        },
                        workspace: workdir.to_path_buf(),
                        instructions_path: config.instructions_path.clone(),
                        session_dir: config.session_dir.clone(),
                        context: config.context,
                        tools: config.tools.clone(),
                        redact: config.redact.clone(),
                        test: crate::external::protocol::TestHooks {
                            mutation: spec.variant.clone(),
                            summarizer_failures: config.faults.summarizer_failures.clone(),
                            checkpoint_write_crashes: config
                                .faults
                                .checkpoint_write_crashes
                                .clone(),
                        },
                    };
                    match crate::external::ExternalSut::start(ext, start, place).await {
                        Ok(sut) => {
                            declaration = sut.declaration();
                            fake_model.declare(
                                declaration.memory.clone(),
                                declaration.summary_request.clone(),
                            );
                            Ok(Box::new(sut) as Box<dyn SystemUnderTest>)
                        }
                        Err(e) => {
                            failure_reason = Some(e.kind().to_string());
                            // A command that cannot start is a configuration error; anything
                            // the started runtime does wrong is its own failure.
                            sut_fault = e.kind() != "agent_spawn_failed";
                            Err(e.to_string())
                        }
                    }
                }
            }
        }
    };
    let mut engine: Box<dyn SystemUnderTest> = match engine {
        Ok(e) => e,
        Err(e) => {
            infra_error = Some((0, e));
            Box::new(NullEngine)
        }
    };

    if infra_error.is_none() {
        for (index, step) in instance.steps.iter().enumerate() {
            let index = index as u64;
            lock(&log).step = index;
            engine.begin_step(index);
            match step {
                Step::Turn(turn) => {
                    if external.is_some() {
                        let calls: Vec<ScriptedCall> =
                            turn.tool_rounds.iter().flatten().cloned().collect();
                        if let Err(e) = crate::external::materialise_tools(workdir, index, &calls) {
                            infra_error = Some((index, format!("writing tool results: {e}")));
                            break;
                        }
                    }
                    let mut tools = ScriptedTools {
                        step: index,
                        calls: turn.tool_rounds.iter().flatten().cloned().collect(),
                        next: 0,
                        executions: Vec::new(),
                    };
                    let before = lock(&log).items.len();
                    let outcome = engine
                        .run_turn(
                            &turn.user,
                            TurnIo {
                                provider: &*provider,
                                tools: &mut tools,
                                events: &mut sink,
                            },
                        )
                        .await;
                    let sent = lock(&log).items[before..]
                        .iter()
                        .filter(|(_, i)| matches!(i, LogItem::Exchange { .. }))
                        .count();
                    executions.extend(tools.executions);
                    if let TurnOutcome::Errored { detail } = &outcome {
                        // Infrastructure when the provider failed in this step (after the
                        // retry layer); otherwise the system's own error.
                        let provider_failed = lock(&log).items[before..].iter().any(|(_, i)| {
                            matches!(i, LogItem::Exchange { result: Err(e), .. }
                                if e.is_infrastructure())
                        });
                        if !provider_failed && infra_error.is_none() {
                            sut_fault = true;
                            failure_reason.get_or_insert_with(|| "sut_error".into());
                        }
                        infra_error.get_or_insert((index, detail.clone()));
                    }
                    turns.push((index, turn.user.clone(), outcome, sent, turn.probe.clone()));
                    if infra_error.is_some() {
                        break;
                    }
                }
                Step::Restart => {
                    if let Err(e) = engine.restart_async(&mut sink).await {
                        infra_error = Some((index, format!("restart failed: {e}")));
                        sut_fault = true;
                        failure_reason.get_or_insert_with(|| "sut_error".into());
                        break;
                    }
                }
                Step::Compact { dry_run } => {
                    let mut tools = ScriptedTools {
                        step: index,
                        calls: Vec::new(),
                        next: 0,
                        executions: Vec::new(),
                    };
                    let outcome = engine
                        .compact(
                            *dry_run,
                            TurnIo {
                                provider: &*provider,
                                tools: &mut tools,
                                events: &mut sink,
                            },
                        )
                        .await;
                    compactions.push(CompactionRecord {
                        step: index,
                        dry_run: *dry_run,
                        outcome,
                    });
                }
                Step::CorruptCheckpoint { how } => {
                    // The system damages its own stored checkpoint (a test hook: ctxbench does
                    // not know any system's storage format). A system without the hook, or
                    // without a checkpoint, is left alone, and the record says so.
                    match engine.corrupt_checkpoint(*how).await {
                        Ok(true) => corruptions.push(index),
                        Ok(false) => {}
                        Err(e) => {
                            infra_error = Some((index, format!("corrupting the checkpoint: {e}")));
                            sut_fault = true;
                            failure_reason.get_or_insert_with(|| "sut_error".into());
                            break;
                        }
                    }
                }
                Step::EditInstructions { text } => {
                    if let Err(e) = std::fs::write(&instructions_path, text) {
                        infra_error = Some((
                            index,
                            format!("writing {}: {e}", instructions_path.display()),
                        ));
                        break;
                    }
                    if let Err(e) = engine.instructions_edited(&instructions_path).await {
                        infra_error = Some((index, format!("instruction edit: {e}")));
                        sut_fault = true;
                        failure_reason.get_or_insert_with(|| "sut_error".into());
                        break;
                    }
                }
            }
        }
    }

    engine.finish().await;
    if let Some((reason, detail)) = engine.failure() {
        sut_fault = reason != "agent_spawn_failed";
        failure_reason = Some(reason);
        if let Some((_, d)) = &mut infra_error {
            *d = detail;
        }
    }
    let transcript = engine.transcript();
    let transcript_hash = engine.transcript_hash();
    drop(engine);
    if let Some(server) = server {
        server.shutdown().await;
    }
    let mut items = std::mem::take(&mut lock(&log).items);
    let black_box = if external.is_some() {
        items = place_events(items);
        executions = observed_executions(&items, &instance.steps);
        !items.iter().any(|(_, i)| matches!(i, LogItem::Event(_)))
    } else {
        false
    };
    let mut record = assemble(
        spec,
        &model,
        &declaration,
        seed,
        instance.steps,
        items,
        turns,
        executions,
        compactions,
        transcript,
        transcript_hash,
        infra_error.map(|(step, detail)| {
            (
                step,
                failure_reason.unwrap_or_else(|| "infrastructure".into()),
                detail,
                sut_fault,
            )
        }),
        black_box,
        started_at,
        t0.elapsed().as_millis() as u64,
    );
    record.corruptions = corruptions;
    // What the retry layer absorbed (HTTP providers only): infrastructure trouble is
    // counted apart from model failures, even when every retry succeeded.
    record.stats.infrastructure = provider.resilience_stats();
    record
}

fn sut_faults(faults: &[Fault]) -> SutFaults {
    let mut f = SutFaults::default();
    for fault in faults {
        match fault {
            Fault::SummarizerFailure { at_compaction } => {
                f.summarizer_failures.push(*at_compaction)
            }
            Fault::CrashDuringCheckpointWrite { at_compaction } => {
                f.checkpoint_write_crashes.push(*at_compaction)
            }
            // Provider faults and summary defects reach only the fake provider.
            Fault::ProviderOverflow { .. }
            | Fault::OverflowAfterPartialOutput { .. }
            | Fault::SummaryDefect { .. } => {}
        }
    }
    f
}

/// Stands in for a provider that must not be reached (a replayed trial) or could not be
/// built (no key); every request is an infrastructure error.
struct Unreachable;

#[async_trait::async_trait]
impl Provider for Unreachable {
    fn name(&self) -> &str {
        "unreachable"
    }
    async fn complete(&self, _request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        Err(ProviderError::Unavailable {
            message: "no provider connection for this trial".into(),
        })
    }
}

/// Stands in when the engine could not even be created, so the trial still yields a record.
struct NullEngine;

#[async_trait::async_trait]
impl SystemUnderTest for NullEngine {
    fn name(&self) -> &str {
        "none"
    }
    async fn run_turn(&mut self, _user: &str, _io: TurnIo<'_>) -> TurnOutcome {
        TurnOutcome::Errored {
            detail: "no engine".into(),
        }
    }
    async fn compact(&mut self, _dry_run: bool, _io: TurnIo<'_>) -> CompactionOutcome {
        CompactionOutcome::Failed {
            reason: "no_engine".into(),
            detail: "no engine".into(),
        }
    }
    fn restart(&mut self, _events: &mut dyn EventSink) -> Result<(), ctxbench_sut::EngineError> {
        Ok(())
    }
    fn transcript(&self) -> Vec<Message> {
        Vec::new()
    }
    fn transcript_hash(&self) -> String {
        String::new()
    }
}

type TurnTuple = (u64, String, TurnOutcome, usize, Option<Vec<String>>);

/// Whether `request` is a summarization request, by the rule the fake model applies: the
/// system's declared marker, else the default words in a request that opens no scripted
/// turn.
fn is_summary_request(
    request: &ModelRequest,
    declaration: &ctxbench_sut::Declaration,
    scripted_users: &std::collections::HashSet<&str>,
) -> bool {
    use ctxbench_adapters::fake::summary::{instruction_index, SummaryRule};
    let rule = SummaryRule {
        marker: declaration.summary_request.clone(),
    };
    if instruction_index(request, &rule).is_none() {
        return false;
    }
    if rule.marker.is_some() {
        return true;
    }
    let last_user = request
        .messages
        .iter()
        .rposition(|m| m.role == ctxbench_adapters::Role::User);
    last_user.is_none_or(|u| {
        let text = request.messages[u].content.as_str();
        !scripted_users
            .iter()
            .any(|t| text == *t || (!t.trim().is_empty() && text.contains(t.trim())))
    })
}

#[allow(clippy::too_many_arguments)]
fn assemble(
    spec: &TrialSpec,
    model: &ctxbench_adapters::capabilities::ModelCapabilities,
    declaration: &ctxbench_sut::Declaration,
    seed: u64,
    steps: Vec<Step>,
    items: Vec<(u64, LogItem)>,
    turn_tuples: Vec<TurnTuple>,
    tool_executions: Vec<ToolExecution>,
    compactions: Vec<CompactionRecord>,
    transcript: Vec<Message>,
    transcript_hash: String,
    infra_error: Option<(u64, String, String, bool)>,
    black_box: bool,
    started_at: String,
    elapsed_ms: u64,
) -> TrialRecord {
    let scenario = &spec.scenario;
    let scripted_users: std::collections::HashSet<&str> = steps
        .iter()
        .filter_map(|s| match s {
            Step::Turn(t) => Some(t.user.as_str()),
            _ => None,
        })
        .collect();
    let trial_id = spec.trial_id();
    let estimator = RequestEstimator::new(model.estimator);
    let mut messages: BTreeMap<String, Message> = BTreeMap::new();
    let mut requests: Vec<RequestRecord> = Vec::new();
    let mut events: Vec<EventRecord> = Vec::new();
    let mut last_budget: Option<ctxbench_sut::Budgeted> = None;
    let mut warned = false;
    let mut seq = 0u64;
    let mut stats = TrialStats {
        steps: steps.len() as u64,
        turns_scripted: steps.iter().filter(|s| matches!(s, Step::Turn(_))).count() as u64,
        ..Default::default()
    };
    let mut turn_requests: BTreeMap<u64, Vec<u64>> = BTreeMap::new();

    let base_row = |step: u64, b: &Option<ctxbench_sut::Budgeted>| RequestRow {
        schema: REQUEST_SCHEMA.into(),
        trial_id: trial_id.clone(),
        segment: 0,
        scenario: scenario.id.clone(),
        mode: spec.mode,
        provider: spec.provider.name().into(),
        model: model.model.clone(),
        trial: spec.trial,
        seq: 0,
        step,
        round: b.as_ref().map(|b| b.round).unwrap_or(0),
        attempt: b.as_ref().map(|b| b.attempt).unwrap_or(1),
        sent: false,
        purpose: "turn".into(),
        budget: b.as_ref().map(|b| b.budget).unwrap_or_default(),
        estimator: b
            .as_ref()
            .map(|b| b.estimator.clone())
            .unwrap_or_else(|| estimator.kind().as_str().into()),
        estimation_method: b
            .as_ref()
            .map(|b| b.estimation_method.clone())
            .unwrap_or_else(|| estimator.method().as_str().into()),
        confidence: b
            .as_ref()
            .map(|b| b.confidence.clone())
            .unwrap_or_else(|| estimator.confidence().as_str().into()),
        observed_estimate: 0,
        over_budget: false,
        warned: false,
        provider_input_tokens: None,
        provider_output_tokens: None,
        overflow_input_tokens: None,
        error_kind: None,
        retry_reason: b.as_ref().and_then(|b| b.retry_reason.clone()),
        instruction_hash: b
            .as_ref()
            .map(|b| b.instruction_hash.clone())
            .unwrap_or_default(),
        checkpoint_id: b.as_ref().and_then(|b| b.checkpoint_id.clone()),
        message_hashes: Vec::new(),
        latency_ms: 0,
    };

    for (step, item) in items {
        match item {
            LogItem::Event(event) => {
                match &event {
                    EngineEvent::Budgeted(b) => {
                        last_budget = Some(b.clone());
                        warned = false;
                    }
                    EngineEvent::Warning { .. } => {
                        warned = true;
                        stats.warnings += 1;
                    }
                    EngineEvent::LimitReached { budget, .. } => {
                        stats.limit_stops += 1;
                        let mut row = base_row(step, &last_budget);
                        row.budget = *budget;
                        row.over_budget = budget.over_budget();
                        row.warned = warned;
                        requests.push(RequestRecord {
                            row,
                            tools: scenario.tools.len(),
                            response: None,
                            error: None,
                        });
                    }
                    _ => {}
                }
                events.push(EventRecord {
                    seq: events.len() as u64 + 1,
                    step,
                    event,
                });
            }
            LogItem::Placed { .. } => {}
            LogItem::Exchange {
                mut request,
                result,
                latency_ms,
            } => {
                seq += 1;
                let is_summary = is_summary_request(&request, declaration, &scripted_users);
                let mut row = if is_summary {
                    base_row(step, &None)
                } else {
                    base_row(step, &last_budget)
                };
                row.seq = seq;
                if is_summary {
                    row.purpose = "summary".into();
                }
                row.sent = true;
                row.latency_ms = latency_ms;
                // Our own count of the exact request, each message hashed once here (the
                // hashes also key the message store below). Counts come from the
                // process-wide memo when the engine's estimator already tokenized the same
                // content — keyed by these hashes of the exact content, so it stays an
                // independent, exact count.
                let (observed, request_hashes) = estimator.request_tokens_hashed(&request);
                row.observed_estimate = observed;
                let declared_total = last_budget.as_ref().map(|b| b.budget.total).unwrap_or(0);
                let available = last_budget
                    .as_ref()
                    .map(|b| b.budget.available_input)
                    .unwrap_or(0);
                // Over budget by the engine's own estimate or by ours of the exact request
                // sent — an engine that under-declares cannot hide an over-budget request.
                // A summarization request is judged against the window alone.
                if is_summary {
                    row.over_budget = row.observed_estimate + u64::from(request.max_output_tokens)
                        > model.context_window;
                } else if black_box {
                    // No budget declared by an agent that reports no events: judge the
                    // request as sent against the window.
                    row.over_budget = row.observed_estimate + u64::from(request.max_output_tokens)
                        > model.context_window;
                    row.warned = warned;
                } else {
                    row.over_budget = last_budget.is_none()
                        || declared_total.max(row.observed_estimate) > available;
                    row.warned = warned;
                }
                // A wrapped ("Codex wrapper") request is recorded as the conversation it
                // carries, so graders judge the same active view as for a native request; its
                // size above is the wrapped request's, as sent.
                // The request is owned here: its messages move into the store (a long
                // conversation is not copied once per request that carries it).
                let (carried, carried_hashes) =
                    match ctxbench_adapters::wrapper::unwrap_request(&request) {
                        Some(logical) => {
                            let hashes =
                                logical.messages.iter().map(|m| m.content_hash()).collect();
                            (logical.messages, hashes)
                        }
                        None => (std::mem::take(&mut request.messages), request_hashes),
                    };
                row.message_hashes.reserve(carried.len());
                for (m, h) in carried.into_iter().zip(carried_hashes) {
                    let h = h.to_hex();
                    if !messages.contains_key(&h) {
                        messages.insert(h.clone(), m);
                    }
                    row.message_hashes.push(h);
                }
                stats.requests += 1;
                if row.over_budget && !is_summary {
                    stats.over_budget_requests += 1;
                }
                let (response, error) = match result {
                    Ok(r) => {
                        row.provider_input_tokens = Some(r.usage.input_tokens);
                        row.provider_output_tokens = Some(r.usage.output_tokens);
                        stats.total_input_tokens += r.usage.input_tokens;
                        stats.total_output_tokens += r.usage.output_tokens;
                        stats.peak_input_tokens = stats.peak_input_tokens.max(r.usage.input_tokens);
                        (Some(r), None)
                    }
                    Err(e) => {
                        row.error_kind = Some(e.kind().into());
                        if let ProviderError::ContextOverflow { input_tokens, .. } = &e {
                            row.overflow_input_tokens = *input_tokens;
                            stats.provider_overflows += 1;
                        } else {
                            stats.provider_errors += 1;
                        }
                        (None, Some(e))
                    }
                };
                turn_requests.entry(step).or_default().push(seq);
                if !is_summary {
                    // One budget event covers one physical request.
                    last_budget = None;
                    warned = false;
                }
                requests.push(RequestRecord {
                    row,
                    tools: request.tools.len(),
                    response,
                    error,
                });
            }
        }
    }
    if let Some(r) = requests.iter().find(|r| r.row.sent) {
        stats.tool_schema_tokens = r.row.budget.tool_schemas;
    }
    // Each transcript message hashed once, for the message store and (black box) the
    // transcript hash.
    let mut digest = Sha256::new();
    for m in &transcript {
        let h = m.content_hash();
        digest.update(h.0);
        messages.entry(h.to_hex()).or_insert_with(|| m.clone());
    }
    stats.transcript_messages = transcript.len() as u64;
    let transcript_hash_reported = !transcript_hash.is_empty();
    stats.transcript_hash = if transcript_hash.is_empty() {
        hex::encode(digest.finalize())
    } else {
        transcript_hash
    };

    let mut turns = Vec::new();
    let mut outcome = TrialOutcome {
        status: OutcomeStatus::Success,
        reason: String::new(),
        step: None,
        detail: String::new(),
        sut_fault: false,
    };
    for (step, user, o, _sent, probe) in turn_tuples {
        let (status, reason, detail) = match &o {
            TurnOutcome::Completed { .. } => {
                stats.turns_completed += 1;
                (OutcomeStatus::Success, String::new(), String::new())
            }
            TurnOutcome::LimitReached { reason, detail, .. } => {
                stats.turns_failed += 1;
                (OutcomeStatus::LimitReached, reason.clone(), detail.clone())
            }
            TurnOutcome::Failed { reason, detail } => {
                stats.turns_failed += 1;
                (OutcomeStatus::Failed, reason.clone(), detail.clone())
            }
            TurnOutcome::Errored { detail } => {
                stats.turns_failed += 1;
                (
                    OutcomeStatus::Errored,
                    "infrastructure".into(),
                    detail.clone(),
                )
            }
        };
        if outcome.status == OutcomeStatus::Success && status != OutcomeStatus::Success {
            outcome = TrialOutcome {
                status,
                reason,
                step: Some(step),
                detail,
                sut_fault: false,
            };
        }
        turns.push(TurnRecord {
            step,
            user,
            outcome: o,
            requests: turn_requests.remove(&step).unwrap_or_default(),
            probe,
        });
    }
    if let Some((step, reason, detail, sut_fault)) = infra_error {
        outcome = TrialOutcome {
            status: if sut_fault {
                OutcomeStatus::Failed
            } else {
                OutcomeStatus::Errored
            },
            reason,
            step: Some(step),
            detail,
            sut_fault,
        };
    }

    TrialRecord {
        trial_id,
        scenario: scenario.id.clone(),
        mode: spec.mode,
        trial: spec.trial,
        seed,
        provider: spec.provider.name().into(),
        model: model.model.clone(),
        steps,
        requests,
        events,
        turns,
        tool_executions,
        compactions,
        messages,
        transcript,
        outcome,
        stats,
        started_at,
        elapsed_ms,
        declaration: declaration.clone(),
        corruptions: Vec::new(),
        transcript_hash_reported,
    }
}

#[cfg(test)]
mod external_tests {
    use super::*;

    fn exchange(n: u32) -> LogItem {
        LogItem::Exchange {
            request: ModelRequest {
                model: format!("m{n}"),
                messages: Vec::new(),
                tools: Vec::new(),
                max_output_tokens: 1,
            },
            result: Err(ProviderError::Unavailable {
                message: String::new(),
            }),
            latency_ms: 0,
        }
    }

    fn warning(round: u64) -> EngineEvent {
        EngineEvent::Warning {
            round,
            attempt: 1,
            total: 0,
            available_input: 0,
            over_by: 0,
        }
    }

    fn shape(items: &[(u64, LogItem)]) -> Vec<String> {
        items
            .iter()
            .map(|(_, i)| match i {
                LogItem::Exchange { request, .. } => request.model.clone(),
                LogItem::Event(EngineEvent::Warning { round, .. }) => format!("e{round}"),
                _ => "?".into(),
            })
            .collect()
    }

    #[test]
    fn placed_events_land_between_the_exchanges_they_name() {
        // The HTTP exchange of request 1 was logged before the event that precedes it.
        let items = vec![
            (0, exchange(1)),
            (
                0,
                LogItem::Placed {
                    after: 0,
                    event: warning(0),
                },
            ),
            (
                0,
                LogItem::Placed {
                    after: 1,
                    event: warning(1),
                },
            ),
            (0, exchange(2)),
            (
                1,
                LogItem::Placed {
                    after: 2,
                    event: warning(2),
                },
            ),
        ];
        assert_eq!(shape(&place_events(items)), ["e0", "m1", "e1", "m2", "e2"]);
    }
}
