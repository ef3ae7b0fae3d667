//! The record of one trial: everything graders and run storage need.
//!
//! Requests are kept as message-hash lists over one per-trial message store, so a long
//! `off` session whose requests re-send the whole history costs memory linear in distinct
//! content, not quadratic.

use std::collections::BTreeMap;

use ctxbench_adapters::{Message, ModelResponse, ProviderError};
use serde::{Deserialize, Serialize};

use crate::scenario::Step;
use crate::storage::schema::{RequestRow, TrialOutcome, TrialStats};
use ctxbench_sut::Mode;
use ctxbench_sut::{EngineEvent, TurnOutcome};

/// One engine event with the step it happened in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventRecord {
    /// 1-based event number within the trial.
    pub seq: u64,
    /// Script step index.
    pub step: u64,
    /// The event.
    pub event: EngineEvent,
}

/// One physical request (or a preflight stop) with its outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestRecord {
    /// The storage row (budget, estimate, usage, error).
    pub row: RequestRow,
    /// Number of advertised tools.
    pub tools: usize,
    /// The response, when answered.
    pub response: Option<ModelResponse>,
    /// The provider error, when rejected.
    pub error: Option<ProviderError>,
}

/// One tool execution (a side effect).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolExecution {
    /// Script step index.
    pub step: u64,
    /// Tool call id.
    pub call_id: String,
    /// Tool name.
    pub name: String,
    /// Whether a scripted result existed for it.
    pub scripted: bool,
}

/// A manual compact step and its typed outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompactionRecord {
    /// Script step index.
    pub step: u64,
    /// Whether it was a dry run.
    pub dry_run: bool,
    /// The transaction's outcome.
    pub outcome: ctxbench_sut::CompactionOutcome,
}

/// One turn as the driver saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnRecord {
    /// Script step index.
    pub step: u64,
    /// The user text sent.
    pub user: String,
    /// How it ended.
    pub outcome: TurnOutcome,
    /// Physical request numbers sent during the turn.
    pub requests: Vec<u64>,
    /// For probe turns: fact ids in question order.
    pub probe: Option<Vec<String>>,
}

/// Everything that happened in one trial.
#[derive(Debug, Clone)]
pub struct TrialRecord {
    /// `<scenario>/<mode>/<trial>`.
    pub trial_id: String,
    /// Scenario id.
    pub scenario: String,
    /// Mode.
    pub mode: Mode,
    /// Trial index.
    pub trial: u32,
    /// Trial seed.
    pub seed: u64,
    /// Provider name.
    pub provider: String,
    /// Model id.
    pub model: String,
    /// The instantiated script.
    pub steps: Vec<Step>,
    /// Requests in order (preflight stops included, with `row.sent == false`).
    pub requests: Vec<RequestRecord>,
    /// Engine events in order.
    pub events: Vec<EventRecord>,
    /// Turns in order.
    pub turns: Vec<TurnRecord>,
    /// Tool executions in order.
    pub tool_executions: Vec<ToolExecution>,
    /// Manual compact steps in order (automatic ones are in `events`).
    pub compactions: Vec<CompactionRecord>,
    /// Every distinct message seen in a request or the transcript, by content hash (hex).
    pub messages: BTreeMap<String, Message>,
    /// The final canonical transcript.
    pub transcript: Vec<Message>,
    /// Terminal outcome.
    pub outcome: TrialOutcome,
    /// Counters.
    pub stats: TrialStats,
    /// RFC 3339 start time.
    pub started_at: String,
    /// Wall time.
    pub elapsed_ms: u64,
    /// What the system under test declared about its request format (how graders find its
    /// memory and summarization requests).
    pub declaration: ctxbench_sut::Declaration,
    /// Steps whose `corrupt_checkpoint` actually damaged a stored checkpoint (a system
    /// without the test hook, or without a checkpoint yet, is left alone).
    pub corruptions: Vec<u64>,
    /// Whether the system itself reported `stats.transcript_hash` (its hash chain head);
    /// otherwise ctxbench computed a digest of the transcript for the record.
    pub transcript_hash_reported: bool,
}

impl TrialRecord {
    /// The messages of a recorded request, resolved from the message store.
    pub fn request_messages(&self, request: &RequestRecord) -> Vec<&Message> {
        request
            .row
            .message_hashes
            .iter()
            .filter_map(|h| self.messages.get(h))
            .collect()
    }
}
