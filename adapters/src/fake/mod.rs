//! The deterministic fake provider that CI runs on (PRODUCT.md §The fake provider).
//!
//! * [`FakeScript`] — what the harness compiles a scenario into (turns, facts, hostile spans,
//!   faults) plus what the system under test declared about its request format;
//! * [`FakeTokenizer`] — the provider's own "true" tokenizer, deliberately not tiktoken;
//! * [`FakeProvider`] — enforces the window, reports usage, plays the script, answers
//!   probes from the request only and acts on marked hostile text in trusted positions;
//! * [`layout`] — how it reads a request's places (instructions, current user message,
//!   conversation, memory) from the declared markup or the documented default;
//! * [`probe`] / [`taint`] — the probe and hostile-text rules as pure functions, so graders
//!   and tests apply exactly what the model does;
//! * [`summary`] — the summaries it writes when asked to summarize: generic salience,
//!   profiles and defects, never the fact list;
//! * [`opaque`] — its native compaction items and how it reads them back;
//! * [`tool_names`] — a scripted tool found among the request's (possibly namespaced) tools;
//! * [`wrapper`] — the "codex wrapper" shape (a conversation as JSON in one prompt), which it
//!   reads back as messages.
//!
//! Nothing here knows any system under test's code or vocabulary: what it needs of a
//! system's format, the system declares.

pub mod layout;
pub mod opaque;
pub mod probe;
pub mod provider;
pub mod script;
pub mod summary;
pub mod taint;
pub mod text;
pub mod tokenizer;
pub mod tool_names;
pub mod wrapper;

pub use layout::{MemoryRule, Place};
pub use probe::{answer_probe, recall, version_token, Recalled, RECALL_PREFIX, UNKNOWN_ANSWER};
pub use provider::{
    FakeProvider, FakeState, FINAL_REPLY, PARTIAL_OUTPUT_MAX_CHARS, UNSCRIPTED_REPLY,
};
pub use script::{FakeFact, FakeFault, FakeReply, FakeScript, FakeToolCall, FakeTurn};
pub use summary::{build_summary, FakeSummaryDefect, SummaryProfile, SummaryRule};
pub use taint::{acted_on, tainted, FakeHostile, ACTING_ON_AUTHORITY};
pub use tokenizer::{
    FakeTokenizer, FAKE_MESSAGE_FRAMING, FAKE_REQUEST_FRAMING, FAKE_TOOL_CALL_FRAMING,
    FAKE_TOOL_DEFINITION_FRAMING,
};
pub use wrapper::{unwrap_request, wrap_messages, WRAPPER_MARKER};
