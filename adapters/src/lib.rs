//! # ctxbench-adapters — the model boundary
//!
//! This crate owns everything that touches a model: the provider-neutral
//! [`ModelRequest`] / [`ModelResponse`] / [`Usage`] types, typed [`ProviderError`]s,
//! token estimators ([`estimate`]), the model capability table ([`capabilities`]) and
//! providers — today the deterministic [`fake`] provider that CI runs on.
//!
//! It does **not** know about scenarios, modes, budgets or graders: the harness compiles a
//! scenario into a [`fake::FakeScript`] and hands it over; the engine only ever sees
//! requests and responses.
#![deny(missing_docs)]

pub mod capabilities;
pub mod conventions;
pub mod error;
pub mod estimate;
pub mod fake;
pub mod provider;
pub mod types;

pub use error::ProviderError;
pub use provider::Provider;
pub use types::*;
