//! # ctxbench-adapters — the model boundary
//!
//! This crate owns everything that touches a model: the provider-neutral
//! [`ModelRequest`] / [`ModelResponse`] / [`Usage`] types, typed [`ProviderError`]s,
//! token estimators ([`estimate`]), the model capability table ([`capabilities`]) and
//! providers: the deterministic [`fake`] provider that CI runs on (also over loopback HTTP,
//! [`serve`]), OpenAI-compatible chat completions ([`openai`]) and Anthropic messages
//! ([`anthropic`]), with retries and adaptive concurrency in [`resilience`].
//!
//! It does **not** know about scenarios, modes, budgets or graders: the harness compiles a
//! scenario into a [`fake::FakeScript`] and hands it over; the engine only ever sees
//! requests and responses.
//!
//! ## Example: one scripted turn on the fake provider
//!
//! ```
//! use ctxbench_adapters::fake::{FakeProvider, FakeReply, FakeScript, FakeTurn};
//! use ctxbench_adapters::{FinishReason, Message, ModelRequest, Provider};
//!
//! let script = FakeScript {
//!     model: "fake-16k".into(),
//!     context_window: 16_384,
//!     turns: vec![FakeTurn {
//!         user: "Hello?".into(),
//!         replies: vec![FakeReply::Text { text: "Hi there.".into() }],
//!     }],
//!     ..FakeScript::default()
//! };
//! let provider = FakeProvider::new(script);
//! let request = ModelRequest {
//!     model: "fake-16k".into(),
//!     messages: vec![Message::system("Be brief."), Message::user("Hello?")],
//!     tools: vec![],
//!     max_output_tokens: 256,
//! };
//!
//! let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
//! let response = runtime.block_on(provider.complete(&request)).unwrap();
//! assert_eq!(response.message.content, "Hi there.");
//! assert_eq!(response.finish_reason, FinishReason::Stop);
//! // Usage is the provider's own count, which a client estimate only approximates.
//! assert_eq!(response.usage.input_tokens, provider.true_input_tokens(&request));
//! ```
#![deny(missing_docs)]

pub mod anthropic;
pub mod capabilities;
pub mod conventions;
pub mod error;
pub mod estimate;
pub mod fake;
pub mod openai;
pub mod provider;
pub mod resilience;
pub mod serve;
pub mod transport;
pub mod types;

pub use error::ProviderError;
/// The "codex wrapper" request shape, shared by engines that use it and the fake provider.
pub use fake::wrapper;
pub use provider::Provider;
pub use types::*;
