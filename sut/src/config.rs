//! What a system under test is configured with — what a real runtime would be — and what it
//! declares about its own request format.
//!
//! Nothing here carries a scenario's facts, probes, expectations or graders.

use std::path::PathBuf;

use ctxbench_adapters::capabilities::ModelCapabilities;
pub use ctxbench_adapters::Markup;
use ctxbench_adapters::ToolDefinition;
use serde::{Deserialize, Serialize};

use crate::mode::Mode;

/// Context configuration; every value in tokens (seed 000 §Token budget).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextConfig {
    /// Output allowance requested on every call.
    pub reserved_output_tokens: u64,
    /// Safety buffer; the larger of this and the output allowance is reserved once.
    pub buffer_tokens: u64,
    /// Budget of the verbatim recent tail (compact mode).
    pub recent_tail_tokens: u64,
    /// Target size of a checkpoint summary (compact mode).
    pub summary_target_tokens: u64,
    /// Checkpoint strategy (compact mode).
    pub strategy: SummaryStrategy,
    /// Send each request as the instructions plus ONE user message holding the JSON of the
    /// projected conversation (seed 000's "Codex wrapper"), budgeted in that form.
    #[serde(default)]
    pub wrapper: bool,
}

impl Default for ContextConfig {
    /// Forge's documented defaults (seed 000 §Budget calculation).
    fn default() -> Self {
        ContextConfig {
            reserved_output_tokens: 4096,
            buffer_tokens: 8192,
            recent_tail_tokens: 12000,
            summary_target_tokens: 1200,
            strategy: SummaryStrategy::Extractive,
            wrapper: false,
        }
    }
}

/// How a system builds a checkpoint (seed 000 §Checkpoint schema, "strategy").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SummaryStrategy {
    /// Deterministic, redacted extractive summary; no model call (the default).
    #[default]
    Extractive,
    /// A summarization request through the provider, validated before use.
    Model,
    /// The provider's own opaque compaction item, when it offers one.
    Native,
}

/// What a `corrupt_checkpoint` step does to the persisted checkpoint before a restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Corruption {
    /// Overwrite the stored checkpoint with bytes that do not parse.
    Garbage,
    /// Keep the checkpoint but change its source hash, as after a manual transcript repair.
    StaleSource,
    /// Make its summarized range extend beyond the transcript.
    OutOfRange,
}

/// Faults injected into the system itself (test hooks; every real run has none).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SutFaults {
    /// Summarizer calls (1-based, per system lifetime) that throw.
    #[serde(default)]
    pub summarizer_failures: Vec<u64>,
    /// Checkpoint writes (1-based) torn by a simulated crash.
    #[serde(default)]
    pub checkpoint_write_crashes: Vec<u64>,
}

/// Everything a system under test is configured with for one trial.
#[derive(Debug, Clone)]
pub struct SutSetup {
    /// Context mode.
    pub mode: Mode,
    /// Model facts (window, output limit, estimator, provenance).
    pub model: ModelCapabilities,
    /// Budget configuration.
    pub context: ContextConfig,
    /// Tools the runtime advertises.
    pub tools: Vec<ToolDefinition>,
    /// The instruction file, reloaded at the start of every run.
    pub instructions_path: PathBuf,
    /// Where the session lives.
    pub session_dir: PathBuf,
    /// Secret values the runtime's redaction is configured with (what a real runtime's
    /// redaction configuration would hold; not the graders' view).
    pub redact: Vec<String>,
    /// Injected faults of the system itself.
    pub faults: SutFaults,
    /// A deliberately broken variant by name (selftest and grader tests only; `None` in
    /// every real run).
    pub variant: Option<String>,
}

/// How a system marks the parts of its requests that ctxbench must tell apart.
///
/// ctxbench's fake model and graders know nothing of any system's prompt format: what they
/// need of it, the system declares — the reference engine in code, an external runtime in
/// the protocol's `hello` (`docs/agent-protocol.md`). Without a declaration the documented
/// defaults apply (see [`Declaration::memory_rule`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Declaration {
    /// Where the system places derived conversation memory (a checkpoint or summary): text
    /// between `open` and `close`, in any message. The fake model gives it the lowest
    /// precedence and never takes orders from it; graders inspect it as memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Markup>,
    /// A text that marks the system's summarization requests (found in the request's first
    /// system message or its last user message). Without it the fake model recognises a
    /// summarization request by the documented default rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_request: Option<String>,
    /// The event families the system reports ([`crate::EventFamily`]); `None`: inferred
    /// per trial from the events it emitted. A declared family is judged even in a trial
    /// where the system emitted none of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<crate::EventFamily>>,
}

impl Declaration {
    /// The rule graders and the fake apply to find memory, in words, for evidence.
    pub fn memory_rule(&self) -> String {
        match &self.memory {
            Some(m) => format!(
                "memory = text inside the declared `{}` … `{}` blocks",
                m.open, m.close
            ),
            None => "memory = system-message text that is not the instruction file and not \
                     verbatim transcript (no memory markup declared)"
                .to_string(),
        }
    }
}
