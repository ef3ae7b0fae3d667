//! # ctxbench-harness — scenarios, the reference engine, the driver and the runner
//!
//! Data flows one way: a [`scenario::Scenario`] is instantiated per trial; the
//! [`driver`] plays its steps through a system under test (the [`engine`], by default the
//! reference context engine of seed 000) against a provider from `ctxbench-adapters`;
//! every physical request, engine event and turn outcome lands in a
//! [`record::TrialRecord`]; a [`runner::Judge`] (implemented by `ctxbench-graders`) turns
//! the record into verdicts; the [`runner`] executes the matrix scenario × mode × trial and
//! appends everything to [`storage`] — the contract with `ctxbench-reports`.
//!
//! What this crate must not do: grade (graders own verdict logic), aggregate or render
//! reports, or let the engine see a scenario's facts, probes, expectations or secrets list.
//! Only the fake provider's script and the graders read those.
#![deny(missing_docs)]

pub mod budget;
pub mod cassette;
pub mod connect;
pub mod driver;
pub mod engine;
pub mod external;
pub mod fake_server;
pub mod instructions;
pub mod mode;
pub mod progress;
pub mod record;
pub mod redact;
pub mod runner;
pub mod scenario;
pub mod seed;
pub mod selftest;
pub mod session;
pub mod storage;

/// The retry layer's counters, stored per trial ([`storage::schema::TrialStats::infrastructure`]).
pub use ctxbench_adapters::resilience::ResilienceStats;
pub use mode::Mode;
