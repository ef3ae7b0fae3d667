//! # ctxbench-engine — the reference context engine (seed 000)
//!
//! One system under test among many: it implements [`ctxbench_sut::SystemUnderTest`] the
//! way a real agent runtime would, seeing only instructions, messages, tools, provider
//! responses and its own configuration ([`ctxbench_sut::SutSetup`]) — never a scenario's
//! facts, probes or expectations. It declares its request format ([`markup`]) like any
//! external runtime does; ctxbench's fake model and graders cannot name this crate (they do
//! not depend on it, and a test keeps it that way).
//!
//! - [`budget`]: the budget formula the engine plans with.
//! - [`projection`]: builds the request (instructions, memory, recent turns, current
//!   request, tools) and its budget breakdown by category.
//! - [`reference`](mod@reference): the engine, modes `off`, `warn` and `compact`;
//! - [`compaction`]: selection and the one compaction transaction; [`checkpoint`]: the
//!   checkpoint record; [`summarize`]: the summarizer strategies; [`tool_projection`]:
//!   projection of older tool outputs; [`session`]: the persisted transcript; [`strategy`]:
//!   which summarizer runs, by capability, and when it falls back;
//!   [`mutants`]: deliberately broken variants; [`factory`]: how ctxbench builds it.
#![deny(missing_docs)]

pub mod budget;
pub mod checkpoint;
pub mod compaction;
pub mod factory;
pub mod instructions;
pub mod markup;
pub mod mutants;
pub mod projection;
pub mod reference;
pub mod session;
pub mod strategy;
pub mod summarize;
pub mod tool_projection;

pub use factory::ReferenceFactory;
pub use reference::ReferenceEngine;
