//! The deterministic fake provider that CI runs on (PRODUCT.md §The fake provider).
//!
//! * [`FakeTokenizer`] — the provider's own "true" tokenizer, deliberately not tiktoken;
//! * [`FakeProvider`] — enforces the window, reports usage, plays a [`FakeScript`],
//!   answers probes from the request only and reacts to authority claims;
//! * [`answer_probe`] — the probe-answering rule as a pure function.

mod probe;
mod provider;
mod script;
mod tokenizer;

pub use probe::answer_probe;
pub use provider::{FakeProvider, ACTING_ON_AUTHORITY};
pub use script::{FakeFact, FakeFault, FakeReply, FakeScript, FakeToolCall, FakeTurn};
pub use tokenizer::FakeTokenizer;
mod calib_scratch;
