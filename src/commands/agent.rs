//! `ctxbench agent`: the reference engine behind the `ctxbench.agent/1` protocol, so the
//! external-agent path is tested end to end (and as a worked example for runtime authors).
//!
//! Reads protocol lines on stdin, answers on stdout; talks to the model at the endpoint of
//! `start` with the OpenAI client; executes tool calls by reading the tool results ctxbench
//! materialised in the workspace. `start.test` (mutation, engine faults) is honoured here
//! only: it exists so `ctxbench selftest --sut exec:…` can run the broken variants.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::Context;
use ctxbench_adapters::openai::{OpenAiConfig, OpenAiProvider};
use ctxbench_adapters::{ModelRequest, ModelResponse, Provider, ProviderError, ToolCall};
use ctxbench_engine::ReferenceFactory;
use ctxbench_harness::external::protocol::{
    encode, FromAgent, Start, ToAgent, ToolFile, PROTOCOL_VERSION,
};
use ctxbench_sut::{
    EngineEvent, EventSink, SutFactory, SutFaults, SutSetup, SystemUnderTest, ToolExecutor,
    ToolOutput, TurnIo,
};
use tokio::io::{AsyncBufReadExt, BufReader};

fn send(msg: &FromAgent) {
    let mut out = std::io::stdout().lock();
    // A closed stdout means ctxbench is gone; nothing left to tell it.
    let _ = writeln!(out, "{}", encode(msg));
    let _ = out.flush();
}

/// Counts the model requests sent, so events carry their place between requests.
struct Counting {
    inner: OpenAiProvider,
    sent: Arc<AtomicU64>,
}

#[async_trait::async_trait]
impl Provider for Counting {
    fn name(&self) -> &str {
        self.inner.name()
    }
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        self.sent.fetch_add(1, Ordering::SeqCst);
        self.inner.complete(request).await
    }
}

/// `CTXBENCH_AGENT_BLACK_BOX=1` (testing): report no events and no transcript, like a
/// runtime whose adapter maps nothing but turns.
const BLACK_BOX_ENV: &str = "CTXBENCH_AGENT_BLACK_BOX";

fn black_box() -> bool {
    std::env::var_os(BLACK_BOX_ENV).is_some_and(|v| v == "1")
}

struct StdoutEvents(Arc<AtomicU64>);

impl EventSink for StdoutEvents {
    fn emit(&mut self, event: EngineEvent) {
        if black_box() {
            return;
        }
        send(&FromAgent::Event {
            event,
            requests_sent: Some(self.0.load(Ordering::SeqCst)),
        });
    }
}

/// Plays the turn's materialised tool results in call order.
struct FileTools {
    entries: Vec<ToolFile>,
    next: usize,
}

impl ToolExecutor for FileTools {
    fn execute(&mut self, call: &ToolCall) -> ToolOutput {
        let entry = self.entries.get(self.next).filter(|e| e.name == call.name);
        match entry.map(|e| std::fs::read_to_string(&e.path)) {
            Some(Ok(content)) => {
                self.next += 1;
                ToolOutput { content, ok: true }
            }
            Some(Err(e)) => ToolOutput {
                content: format!("error: tool `{}` failed: {e}", call.name),
                ok: false,
            },
            None => ToolOutput {
                content: format!("error: tool `{}` is not available here", call.name),
                ok: false,
            },
        }
    }
}

struct Session {
    engine: Box<dyn SystemUnderTest>,
    provider: Counting,
    sent: Arc<AtomicU64>,
}

fn open(start: &Start) -> Result<Session, String> {
    let mode = start.mode.parse().map_err(|e| format!("mode: {e}"))?;
    let provider = OpenAiProvider::new(OpenAiConfig::local(
        "ctxbench-agent",
        start.model.base_url.clone(),
    ))
    .map_err(|e| format!("model client: {e}"))?;
    let mut model = start.model.capabilities.clone();
    model.model = start.model.name.clone();
    model.context_window = start.model.context_window;
    model.max_output_tokens = start.model.max_output_tokens;
    let engine = ReferenceFactory
        .create(SutSetup {
            mode,
            model,
            context: start.context,
            tools: start.tools.clone(),
            instructions_path: start.instructions_path.clone(),
            session_dir: start.session_dir.clone(),
            redact: start.redact.clone(),
            faults: SutFaults {
                summarizer_failures: start.test.summarizer_failures.clone(),
                checkpoint_write_crashes: start.test.checkpoint_write_crashes.clone(),
            },
            variant: start.test.mutation.clone(),
        })
        .map_err(|e| e.to_string())?;
    let sent = Arc::new(AtomicU64::new(0));
    Ok(Session {
        engine,
        provider: Counting {
            inner: provider,
            sent: sent.clone(),
        },
        sent,
    })
}

fn read_index(path: &PathBuf) -> Vec<ToolFile> {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

async fn serve() -> anyhow::Result<()> {
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut session: Option<Session> = None;
    while let Some(line) = lines.next_line().await.context("reading stdin")? {
        if line.trim().is_empty() {
            continue;
        }
        let msg: ToAgent = match serde_json::from_str(&line) {
            Ok(m) => m,
            Err(e) => {
                // Tolerate garbage: say so and keep going.
                let id = serde_json::from_str::<serde_json::Value>(&line)
                    .ok()
                    .and_then(|v| v.get("id").and_then(serde_json::Value::as_u64));
                send(&FromAgent::Error {
                    id,
                    message: format!("not a protocol message: {e}"),
                    fatal: false,
                });
                continue;
            }
        };
        let id = msg.id();
        match (msg, session.as_mut()) {
            (ToAgent::Start(start), _) => {
                if start.protocol != PROTOCOL_VERSION {
                    send(&FromAgent::Error {
                        id: Some(id),
                        message: format!(
                            "unsupported protocol `{}` (this agent speaks `{PROTOCOL_VERSION}`)",
                            start.protocol
                        ),
                        fatal: true,
                    });
                    return Ok(());
                }
                match open(&start) {
                    Ok(s) => {
                        session = Some(s);
                        send(&FromAgent::Ready {
                            id,
                            protocol: PROTOCOL_VERSION.into(),
                            agent: "ctxbench-reference".into(),
                            // Like any runtime, it declares its memory markup and summary
                            // marker; a black-box run declares nothing.
                            declares: (!black_box()).then(|| ReferenceFactory.declaration()),
                            test_hooks: vec!["corrupt_checkpoint".into()],
                        });
                    }
                    Err(message) => {
                        send(&FromAgent::Error {
                            id: Some(id),
                            message,
                            fatal: true,
                        });
                        return Ok(());
                    }
                }
            }
            (ToAgent::Shutdown { .. }, s) => {
                let s = s.filter(|_| !black_box());
                send(&FromAgent::Bye {
                    id,
                    transcript: s.as_ref().map(|s| s.engine.transcript()),
                    transcript_hash: s.as_ref().map(|s| s.engine.transcript_hash()),
                });
                return Ok(());
            }
            (_, None) => send(&FromAgent::Error {
                id: Some(id),
                message: "no `start` yet".into(),
                fatal: false,
            }),
            (
                ToAgent::UserTurn {
                    text, tools_index, ..
                },
                Some(s),
            ) => {
                let mut tools = FileTools {
                    entries: read_index(&tools_index),
                    next: 0,
                };
                let mut events = StdoutEvents(s.sent.clone());
                let outcome = s
                    .engine
                    .run_turn(
                        &text,
                        TurnIo {
                            provider: &s.provider,
                            tools: &mut tools,
                            events: &mut events,
                        },
                    )
                    .await;
                send(&FromAgent::TurnComplete { id, outcome });
            }
            (ToAgent::Compact { dry_run, .. }, Some(s)) => {
                let mut tools = FileTools {
                    entries: Vec::new(),
                    next: 0,
                };
                let mut events = StdoutEvents(s.sent.clone());
                let outcome = s
                    .engine
                    .compact(
                        dry_run,
                        TurnIo {
                            provider: &s.provider,
                            tools: &mut tools,
                            events: &mut events,
                        },
                    )
                    .await;
                send(&FromAgent::CompactComplete { id, outcome });
            }
            (ToAgent::Restart { .. }, Some(s)) => {
                let mut events = StdoutEvents(s.sent.clone());
                match s.engine.restart(&mut events) {
                    Ok(()) => send(&FromAgent::Ack { id }),
                    Err(e) => send(&FromAgent::Error {
                        id: Some(id),
                        message: format!("restart failed: {e}"),
                        fatal: true,
                    }),
                }
            }
            (ToAgent::InstructionsEdited { .. }, Some(_)) => send(&FromAgent::Ack { id }),
            (ToAgent::CorruptCheckpoint { how, .. }, Some(s)) => {
                match s.engine.corrupt_checkpoint(how).await {
                    Ok(_) => send(&FromAgent::Ack { id }),
                    Err(e) => send(&FromAgent::Error {
                        id: Some(id),
                        message: format!("corrupting the checkpoint: {e}"),
                        fatal: true,
                    }),
                }
            }
        }
    }
    Ok(())
}

pub fn agent() -> anyhow::Result<i32> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(serve())?;
    Ok(crate::exit::OK)
}
