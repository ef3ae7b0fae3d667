//! The `ctxbench.agent/1` protocol: JSON lines over the agent's stdio (docs/agent-protocol.md).
//!
//! Every line is one JSON object with a `type`. ctxbench sends [`ToAgent`] messages on the
//! agent's stdin; every one but `shutdown`'s reply carries an `id` the agent echoes in its
//! one terminal reply ([`FromAgent`]). Between a request and its reply the agent may send
//! any number of `event` and non-fatal `error` lines.

use std::path::PathBuf;

use ctxbench_adapters::capabilities::ModelCapabilities;
use ctxbench_adapters::{Message, ToolDefinition};
use serde::{Deserialize, Serialize};

use crate::scenario::ContextConfig;
use ctxbench_sut::CompactionOutcome;
use ctxbench_sut::{EngineEvent, TurnOutcome};

/// The protocol version this build speaks.
pub const PROTOCOL_VERSION: &str = "ctxbench.agent/1";

/// The model endpoint the agent must use (ctxbench's loopback fake, OpenAI wire format).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelEndpoint {
    /// OpenAI-compatible base URL (`…/v1`): requests go to `{base_url}/chat/completions`.
    pub base_url: String,
    /// The same model in the Anthropic Messages wire format, for runtimes that speak it
    /// (`{anthropic_base_url}/v1/messages`, `…/v1/messages/count_tokens`; the Anthropic
    /// SDKs append `/v1` themselves). Absent when ctxbench did not serve it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anthropic_base_url: Option<String>,
    /// Model name to send.
    pub name: String,
    /// Context window in tokens.
    pub context_window: u64,
    /// Maximum output tokens per request.
    pub max_output_tokens: u64,
    /// Full capability record (estimator, provenance) for runtimes that want it.
    pub capabilities: ModelCapabilities,
}

/// Test-only hooks, honoured only by `ctxbench agent` (the reference engine) so the
/// selftest can run deliberately broken variants through the external path. A real
/// runtime's adapter ignores this field.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TestHooks {
    /// A mutation name (`ctxbench selftest` lists them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mutation: Option<String>,
    /// Summarizer calls (1-based) that throw.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub summarizer_failures: Vec<u64>,
    /// Checkpoint writes (1-based) torn by a simulated crash.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checkpoint_write_crashes: Vec<u64>,
}

impl TestHooks {
    /// Whether nothing is set.
    pub fn is_empty(&self) -> bool {
        self == &TestHooks::default()
    }
}

/// The `start` message: everything a runtime is configured with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Start {
    /// Request id.
    pub id: u64,
    /// [`PROTOCOL_VERSION`].
    pub protocol: String,
    /// `<scenario>/<mode>/<trial>`.
    pub trial: String,
    /// Scenario id.
    pub scenario: String,
    /// Context mode: `off`, `warn` or `compact`.
    pub mode: String,
    /// The model endpoint.
    pub model: ModelEndpoint,
    /// The trial's workspace (the agent's working directory; tool results live under
    /// `.ctxbench/tools/`).
    pub workspace: PathBuf,
    /// The instruction file (`AGENTS.md`), reread by the runtime at every run start.
    pub instructions_path: PathBuf,
    /// Where the runtime may keep its session (inside the workspace).
    pub session_dir: PathBuf,
    /// Context settings, in tokens.
    pub context: ContextConfig,
    /// Tools the runtime advertises to the model.
    pub tools: Vec<ToolDefinition>,
    /// Secret values the runtime's redaction is configured with.
    #[serde(default)]
    pub redact: Vec<String>,
    /// Test-only hooks (see [`TestHooks`]).
    #[serde(default, skip_serializing_if = "TestHooks::is_empty")]
    pub test: TestHooks,
}

/// ctxbench → agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToAgent {
    /// Configure the agent for one trial; answered by `ready`.
    Start(Box<Start>),
    /// One user turn (one run); answered by `turn_complete`.
    UserTurn {
        /// Request id.
        id: u64,
        /// Script step.
        step: u64,
        /// The user's text.
        text: String,
        /// JSON index of this turn's tool results (`[{name, arguments, path}]`, in call
        /// order); each `path` holds the result text.
        tools_index: PathBuf,
    },
    /// Persist, drop in-memory state, reload; answered by `ack`.
    Restart {
        /// Request id.
        id: u64,
        /// Script step.
        step: u64,
    },
    /// The instruction file was edited between runs; answered by `ack`.
    InstructionsEdited {
        /// Request id.
        id: u64,
        /// Script step.
        step: u64,
        /// The file.
        path: PathBuf,
    },
    /// Test-only (sent only to an agent whose `ready` lists `corrupt_checkpoint` in
    /// `test_hooks`): damage the checkpoint it persisted, as the recovery scenario's fault;
    /// answered by `ack`. The next `restart` must reject it.
    CorruptCheckpoint {
        /// Request id.
        id: u64,
        /// Script step.
        step: u64,
        /// How.
        how: ctxbench_sut::Corruption,
    },
    /// A manual `/compact`; answered by `compact_complete`.
    Compact {
        /// Request id.
        id: u64,
        /// Script step.
        step: u64,
        /// Preview only: no model call, nothing written.
        dry_run: bool,
    },
    /// End of the trial; answered by `bye`, then the agent exits.
    Shutdown {
        /// Request id.
        id: u64,
    },
}

impl ToAgent {
    /// The request id.
    pub fn id(&self) -> u64 {
        match self {
            ToAgent::Start(s) => s.id,
            ToAgent::UserTurn { id, .. }
            | ToAgent::Restart { id, .. }
            | ToAgent::InstructionsEdited { id, .. }
            | ToAgent::CorruptCheckpoint { id, .. }
            | ToAgent::Compact { id, .. }
            | ToAgent::Shutdown { id } => *id,
        }
    }

    /// The message's `type`.
    pub fn kind(&self) -> &'static str {
        match self {
            ToAgent::Start(_) => "start",
            ToAgent::UserTurn { .. } => "user_turn",
            ToAgent::Restart { .. } => "restart",
            ToAgent::InstructionsEdited { .. } => "instructions_edited",
            ToAgent::CorruptCheckpoint { .. } => "corrupt_checkpoint",
            ToAgent::Compact { .. } => "compact",
            ToAgent::Shutdown { .. } => "shutdown",
        }
    }
}

/// agent → ctxbench.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FromAgent {
    /// Reply to `start`.
    Ready {
        /// Request id.
        id: u64,
        /// The protocol version the agent speaks (must equal [`PROTOCOL_VERSION`]).
        protocol: String,
        /// The runtime's name for reports.
        #[serde(default)]
        agent: String,
        /// What the runtime declares about its request format (its memory markup, its
        /// summary-request marker). Absent: ctxbench applies the documented default rules.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        declares: Option<ctxbench_sut::Declaration>,
        /// Test-only messages the agent accepts (`corrupt_checkpoint`); a real runtime's
        /// adapter lists none.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        test_hooks: Vec<String>,
    },
    /// Reply to `user_turn`.
    TurnComplete {
        /// Request id.
        id: u64,
        /// The typed outcome (`completed` carries the assistant text as `reply`).
        outcome: TurnOutcome,
    },
    /// Reply to `restart` and `instructions_edited`.
    Ack {
        /// Request id.
        id: u64,
    },
    /// Reply to `compact`.
    CompactComplete {
        /// Request id.
        id: u64,
        /// The typed outcome.
        outcome: CompactionOutcome,
    },
    /// Reply to `shutdown`; the transcript is optional (graders that need it say
    /// not-applicable without it).
    Bye {
        /// Request id.
        id: u64,
        /// The canonical transcript.
        #[serde(default)]
        transcript: Option<Vec<Message>>,
        /// Head of the transcript hash chain (hex).
        #[serde(default)]
        transcript_hash: Option<String>,
    },
    /// An optional context event.
    Event {
        /// The event (`kind` + `data`, as in ctxbench's event log).
        event: EngineEvent,
        /// Model requests the agent had sent in this trial when the event happened
        /// (places the event exactly between requests; arrival order otherwise).
        #[serde(default)]
        requests_sent: Option<u64>,
    },
    /// An error. With the `id` of the pending request, or `fatal`, it ends the trial as
    /// errored; otherwise it is noted and ignored.
    Error {
        /// The request it answers, if any.
        #[serde(default)]
        id: Option<u64>,
        /// What went wrong.
        message: String,
        /// Whether the agent cannot continue.
        #[serde(default)]
        fatal: bool,
    },
}

/// One entry of a turn's tool index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolFile {
    /// Tool name the model calls.
    pub name: String,
    /// The scripted call's arguments.
    pub arguments: serde_json::Value,
    /// File holding the result text.
    pub path: PathBuf,
}

/// Encode one message as a line (no trailing newline).
pub fn encode<T: Serialize>(msg: &T) -> String {
    // These types always serialize (string keys, no non-finite floats).
    serde_json::to_string(msg)
        .unwrap_or_else(|e| format!("{{\"type\":\"error\",\"message\":\"{e}\"}}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_with_snake_case_types() {
        let m = ToAgent::Compact {
            id: 3,
            step: 2,
            dry_run: true,
        };
        let line = encode(&m);
        assert_eq!(line, r#"{"type":"compact","id":3,"step":2,"dry_run":true}"#);
        assert_eq!(serde_json::from_str::<ToAgent>(&line).unwrap(), m);
        let r: FromAgent = serde_json::from_str(
            r#"{"type":"turn_complete","id":1,"outcome":{"status":"completed","reply":"hi"}}"#,
        )
        .unwrap();
        assert_eq!(
            r,
            FromAgent::TurnComplete {
                id: 1,
                outcome: TurnOutcome::Completed { reply: "hi".into() }
            }
        );
    }
}
