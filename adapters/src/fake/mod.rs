//! The deterministic fake provider that CI runs on (PRODUCT.md §The fake provider).
//!
//! * [`FakeScript`] — what the harness compiles a scenario into (turns, facts, faults);
//! * [`FakeTokenizer`] — the provider's own "true" tokenizer, deliberately not tiktoken;
//! * [`FakeProvider`] — enforces the window, reports usage, plays the script, answers
//!   probes from the request only and acts on authority claims in trusted positions;
//! * [`answer_probe`] / [`authority_claims`] — those two rules as pure functions, so graders
//!   and tests can apply them without a provider;
//! * [`summary`] — the summaries it writes when asked to summarize, defects included;
//! * [`opaque`] — its native compaction items and how it reads them back;
//! * [`wrapper`] — the "codex wrapper" shape (a conversation as JSON in one prompt), which it
//!   reads back as messages.

pub mod opaque;
pub mod probe;
pub mod provider;
pub mod script;
pub mod summary;
pub mod tokenizer;
pub mod wrapper;

pub use probe::answer_probe;
pub use provider::{
    authority_claims, find_claims, FakeProvider, ACTING_ON_AUTHORITY, AUTHORITY_CLAIM_PATTERNS,
    CLAIM_QUOTE_MAX_CHARS, FINAL_REPLY, PARTIAL_OUTPUT_MAX_CHARS, UNSCRIPTED_REPLY,
};
pub use script::{
    FakeFact, FakeFault, FakeReply, FakeScript, FakeSummaryDefect, FakeToolCall, FakeTurn,
};
pub use summary::{build_summary, is_summary_request, SUMMARY_HEADINGS};
pub use tokenizer::{
    FakeTokenizer, FAKE_MESSAGE_FRAMING, FAKE_REQUEST_FRAMING, FAKE_TOOL_CALL_FRAMING,
    FAKE_TOOL_DEFINITION_FRAMING,
};
pub use wrapper::{unwrap_request, wrap_messages, WRAPPER_MARKER};
