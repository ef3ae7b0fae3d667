//! External agent runtimes as systems under test.
//!
//! An [`ExternalSut`] is the second implementation of [`SystemUnderTest`] (the reference
//! engine is the first): a process speaking the [`protocol`] (`ctxbench.agent/1`, JSON
//! lines over stdio, docs/agent-protocol.md). ctxbench is its model: the driver serves the
//! trial's fake provider on loopback and records every request the agent actually sends
//! (see [`crate::driver`]), so the black-box graders need nothing from the agent but its
//! requests and answers. Context events, the transcript and typed outcomes are optional
//! extras; graders that need events say not-applicable when a trial has none.
//!
//! Tool results are materialised as files in the trial's workspace before each turn:
//! `.ctxbench/tools/step-<n>/index.json` lists `{name, arguments, path}` in call order, and
//! each `path` holds the result text (see [`tools_index_path`]).
//!
//! Every failure of the agent — no reply within the timeout, a crash, a malformed line, a
//! protocol-version mismatch — is an [`AgentError`] that ends the trial as errored with a
//! stable reason (`agent_timeout`, `agent_crashed`, …); the run goes on.

pub mod process;
pub mod protocol;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ctxbench_adapters::Message;

use ctxbench_sut::CompactionOutcome;
use ctxbench_sut::{
    EngineError, EngineEvent, EventSink, SutFactory, SystemUnderTest, TurnIo, TurnOutcome,
};
pub use process::{split_command, AgentError, AgentProcess};
use protocol::{FromAgent, Start, ToAgent, PROTOCOL_VERSION};

/// Default time ctxbench waits for any line from the agent while a reply is pending.
pub const DEFAULT_AGENT_TIMEOUT: Duration = Duration::from_secs(120);

/// How to start an external agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalSpec {
    /// Program and arguments.
    pub argv: Vec<String>,
    /// Longest silence while a reply is pending.
    pub timeout: Duration,
}

impl ExternalSpec {
    /// The command line as typed.
    pub fn command(&self) -> String {
        self.argv.join(" ")
    }
}

/// Which system a trial runs against.
#[derive(Clone)]
pub enum SutSpec {
    /// A system built in process by a factory (the binary hands in the reference engine's).
    InProcess(Arc<dyn SutFactory>),
    /// An external process speaking the protocol.
    External(ExternalSpec),
}

impl std::fmt::Debug for SutSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SutSpec::InProcess(factory) => write!(f, "InProcess({})", factory.name()),
            SutSpec::External(e) => f.debug_tuple("External").field(e).finish(),
        }
    }
}

/// The agent runs in the trial's workspace, so a relative path in its command
/// (`./my-adapter`, `python3 ci/adapter.py`) would name nothing there: every word that
/// contains a `/`, is relative and names an existing file or directory from where ctxbench
/// was started is made absolute. Bare words (`python3`, `agent`) are left to `PATH` and
/// the program.
fn anchor_paths(argv: Vec<String>) -> Vec<String> {
    let Ok(here) = std::env::current_dir() else {
        return argv;
    };
    argv.into_iter()
        .map(|w| {
            let p = std::path::Path::new(&w);
            if w.contains('/') && p.is_relative() && p.exists() {
                here.join(p).to_string_lossy().into_owned()
            } else {
                w
            }
        })
        .collect()
}

impl SutSpec {
    /// Parse `reference` (the in-process system `reference` builds) or `exec:CMD ARGS`
    /// (`timeout` applies to `exec`).
    pub fn parse(
        s: &str,
        timeout: Duration,
        reference: Arc<dyn SutFactory>,
    ) -> Result<Self, String> {
        let s = s.trim();
        if s == "reference" {
            return Ok(SutSpec::InProcess(reference));
        }
        match s.strip_prefix("exec:") {
            Some(cmd) => Ok(SutSpec::External(ExternalSpec {
                argv: anchor_paths(split_command(cmd).map_err(|e| format!("--sut `{s}`: {e}"))?),
                timeout,
            })),
            None => Err(format!(
                "--sut `{s}`: expected `reference` or `exec:COMMAND ARGS`"
            )),
        }
    }

    /// The external spec, if any.
    pub fn external(&self) -> Option<&ExternalSpec> {
        match self {
            SutSpec::External(e) => Some(e),
            SutSpec::InProcess(_) => None,
        }
    }

    /// The in-process factory, if any.
    pub fn factory(&self) -> Option<&Arc<dyn SutFactory>> {
        match self {
            SutSpec::InProcess(f) => Some(f),
            SutSpec::External(_) => None,
        }
    }
}

/// `<workspace>/.ctxbench/tools/step-<n>/index.json`.
pub fn tools_index_path(workspace: &Path, step: u64) -> PathBuf {
    workspace
        .join(".ctxbench")
        .join("tools")
        .join(format!("step-{step}"))
        .join("index.json")
}

/// Write a turn's scripted tool results where an external agent's tools read them:
/// `<n>.txt` per call next to the turn's `index.json` ([`tools_index_path`]).
pub fn materialise_tools(
    workdir: &Path,
    step: u64,
    calls: &[crate::scenario::ScriptedCall],
) -> std::io::Result<()> {
    let index = tools_index_path(workdir, step);
    let dir = index.parent().unwrap_or(workdir);
    std::fs::create_dir_all(dir)?;
    let mut entries = Vec::new();
    for (k, c) in calls.iter().enumerate() {
        let path = dir.join(format!("{k}.txt"));
        std::fs::write(&path, &c.result)?;
        entries.push(protocol::ToolFile {
            name: c.name.clone(),
            arguments: c.arguments.clone(),
            path,
        });
    }
    let json = serde_json::to_string_pretty(&entries).map_err(std::io::Error::other)?;
    std::fs::write(index, json)
}

/// Receives the agent's events with their position: the number of model requests the agent
/// had sent when it emitted them (`None`: arrival order).
pub type EventPlacer = Arc<dyn Fn(Option<u64>, EngineEvent) + Send + Sync>;

/// An external agent process as a [`SystemUnderTest`].
pub struct ExternalSut {
    name: String,
    agent: Option<AgentProcess>,
    failure: Option<AgentError>,
    workspace: PathBuf,
    step: u64,
    place: EventPlacer,
    transcript: Vec<Message>,
    transcript_hash: String,
    notes: Vec<String>,
    declaration: ctxbench_sut::Declaration,
    test_hooks: Vec<String>,
}

impl std::fmt::Debug for ExternalSut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExternalSut")
            .field("name", &self.name)
            .field("failure", &self.failure)
            .finish_non_exhaustive()
    }
}

impl ExternalSut {
    /// Spawn the agent in `start.workspace` and complete the `start` handshake.
    pub async fn start(
        spec: &ExternalSpec,
        mut start: Start,
        place: EventPlacer,
    ) -> Result<Self, AgentError> {
        let mut agent = AgentProcess::spawn(&spec.argv, &start.workspace, &[], spec.timeout)?;
        start.id = agent.next_id();
        start.protocol = PROTOCOL_VERSION.into();
        let workspace = start.workspace.clone();
        let mut notes = Vec::new();
        let reply = agent
            .request(&ToAgent::Start(Box::new(start)), &mut |m| {
                if let FromAgent::Error { message, .. } = m {
                    notes.push(message);
                }
            })
            .await;
        let declaration;
        let hooks;
        let name = match reply {
            Ok(FromAgent::Ready {
                protocol,
                agent: n,
                declares,
                test_hooks,
                ..
            }) => {
                declaration = declares.unwrap_or_default();
                hooks = test_hooks;
                if protocol != PROTOCOL_VERSION {
                    agent.close(Duration::from_millis(200)).await;
                    return Err(AgentError::VersionMismatch {
                        expected: PROTOCOL_VERSION.into(),
                        got: protocol,
                    });
                }
                if n.is_empty() {
                    "external".to_string()
                } else {
                    n
                }
            }
            Ok(other) => {
                agent.close(Duration::from_millis(200)).await;
                return Err(unexpected("start", "ready", &other));
            }
            Err(e) => {
                agent.close(Duration::from_millis(200)).await;
                return Err(e);
            }
        };
        Ok(ExternalSut {
            name,
            agent: Some(agent),
            failure: None,
            workspace,
            step: 0,
            place,
            transcript: Vec::new(),
            transcript_hash: String::new(),
            notes,
            declaration,
            test_hooks: hooks,
        })
    }

    /// The first agent failure, if any.
    pub fn agent_failure(&self) -> Option<&AgentError> {
        self.failure.as_ref()
    }

    /// Non-fatal error lines the agent sent.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Send `msg` and wait for its reply; after a failure the agent is gone and every later
    /// request fails with the first error.
    async fn call(&mut self, msg: ToAgent) -> Result<FromAgent, AgentError> {
        if let Some(e) = &self.failure {
            return Err(e.clone());
        }
        let Some(agent) = self.agent.as_mut() else {
            return Err(AgentError::Violation("agent already shut down".into()));
        };
        let place = self.place.clone();
        let notes = &mut self.notes;
        let result = agent
            .request(&msg, &mut |m| match m {
                FromAgent::Event {
                    event,
                    requests_sent,
                } => place(requests_sent, event),
                FromAgent::Error { message, .. } => notes.push(message),
                _ => {}
            })
            .await;
        if let Err(e) = &result {
            self.failure = Some(e.clone());
            if let Some(agent) = self.agent.take() {
                agent.close(Duration::from_millis(100)).await;
            }
        }
        result
    }

    fn next_id(&mut self) -> u64 {
        self.agent.as_mut().map_or(0, AgentProcess::next_id)
    }
}

fn unexpected(request: &str, wanted: &str, got: &FromAgent) -> AgentError {
    let kind = serde_json::to_value(got)
        .ok()
        .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_string))
        .unwrap_or_default();
    AgentError::Violation(format!(
        "`{kind}` in reply to `{request}` (expected `{wanted}`)"
    ))
}

#[async_trait::async_trait]
impl SystemUnderTest for ExternalSut {
    fn name(&self) -> &str {
        &self.name
    }

    fn begin_step(&mut self, step: u64) {
        self.step = step;
    }

    async fn run_turn(&mut self, user: &str, _io: TurnIo<'_>) -> TurnOutcome {
        let id = self.next_id();
        let msg = ToAgent::UserTurn {
            id,
            step: self.step,
            text: user.to_string(),
            tools_index: tools_index_path(&self.workspace, self.step),
        };
        match self.call(msg).await {
            Ok(FromAgent::TurnComplete { outcome, .. }) => outcome,
            Ok(other) => {
                let e = unexpected("user_turn", "turn_complete", &other);
                self.failure = Some(e.clone());
                TurnOutcome::Errored {
                    detail: e.to_string(),
                }
            }
            Err(e) => TurnOutcome::Errored {
                detail: e.to_string(),
            },
        }
    }

    async fn compact(&mut self, dry_run: bool, _io: TurnIo<'_>) -> CompactionOutcome {
        let id = self.next_id();
        let msg = ToAgent::Compact {
            id,
            step: self.step,
            dry_run,
        };
        let failed = |e: &AgentError| CompactionOutcome::Failed {
            reason: e.kind().into(),
            detail: e.to_string(),
        };
        match self.call(msg).await {
            Ok(FromAgent::CompactComplete { outcome, .. }) => outcome,
            Ok(other) => {
                let e = unexpected("compact", "compact_complete", &other);
                self.failure = Some(e.clone());
                failed(&e)
            }
            Err(e) => failed(&e),
        }
    }

    fn restart(&mut self, _events: &mut dyn EventSink) -> Result<(), EngineError> {
        Err(EngineError::Unsupported(
            "an external agent restarts through restart_async".into(),
        ))
    }

    async fn restart_async(&mut self, _events: &mut dyn EventSink) -> Result<(), EngineError> {
        let id = self.next_id();
        let msg = ToAgent::Restart {
            id,
            step: self.step,
        };
        self.ack(msg, "restart").await
    }

    async fn instructions_edited(&mut self, path: &Path) -> Result<(), EngineError> {
        let id = self.next_id();
        let msg = ToAgent::InstructionsEdited {
            id,
            step: self.step,
            path: path.to_path_buf(),
        };
        self.ack(msg, "instructions_edited").await
    }

    async fn finish(&mut self) {
        if self.failure.is_some() {
            return;
        }
        let id = self.next_id();
        if let Ok(FromAgent::Bye {
            transcript,
            transcript_hash,
            ..
        }) = self.call(ToAgent::Shutdown { id }).await
        {
            self.transcript = transcript.unwrap_or_default();
            self.transcript_hash = transcript_hash.unwrap_or_default();
        }
        if let Some(agent) = self.agent.take() {
            agent.close(Duration::from_secs(2)).await;
        }
    }

    fn failure(&self) -> Option<(String, String)> {
        self.failure
            .as_ref()
            .map(|e| (e.kind().to_string(), e.to_string()))
    }

    fn transcript(&self) -> Vec<Message> {
        self.transcript.clone()
    }

    fn transcript_hash(&self) -> String {
        self.transcript_hash.clone()
    }

    fn declaration(&self) -> ctxbench_sut::Declaration {
        self.declaration.clone()
    }

    async fn corrupt_checkpoint(
        &mut self,
        how: ctxbench_sut::Corruption,
    ) -> Result<bool, EngineError> {
        if !self.test_hooks.iter().any(|h| h == "corrupt_checkpoint") {
            return Ok(false);
        }
        let id = self.next_id();
        let msg = ToAgent::CorruptCheckpoint {
            id,
            step: self.step,
            how,
        };
        self.ack(msg, "corrupt_checkpoint").await.map(|()| true)
    }
}

impl ExternalSut {
    async fn ack(&mut self, msg: ToAgent, what: &str) -> Result<(), EngineError> {
        match self.call(msg).await {
            Ok(FromAgent::Ack { .. }) => Ok(()),
            Ok(other) => {
                let e = unexpected(what, "ack", &other);
                self.failure = Some(e.clone());
                Err(EngineError::Agent(e.to_string()))
            }
            Err(e) => Err(EngineError::Agent(e.to_string())),
        }
    }
}

#[cfg(test)]
mod anchor_tests {
    use super::anchor_paths;

    #[test]
    fn relative_paths_in_the_command_resolve_where_ctxbench_started() {
        // Tests run in the crate's directory, where `src/lib.rs` exists.
        let argv = [
            "python3",
            "src/lib.rs",
            "agent",
            "--flag=x/y",
            "no/such/file",
            "/abs",
        ]
        .map(String::from)
        .to_vec();
        let out = anchor_paths(argv);
        let here = std::env::current_dir().unwrap();
        assert_eq!(out[1], here.join("src/lib.rs").to_string_lossy());
        assert_eq!(
            [&out[0], &out[2], &out[3], &out[4], &out[5]],
            ["python3", "agent", "--flag=x/y", "no/such/file", "/abs"]
        );
    }
}
