//! # ctxbench-harness — scenarios, the driver, the runner and run storage
//!
//! Data flows one way: a [`scenario::Scenario`] is instantiated per trial; the
//! [`driver`] plays its steps through a system under test (any
//! [`ctxbench_sut::SystemUnderTest`]: an in-process one built by a
//! [`ctxbench_sut::SutFactory`], or an [`external`] runtime over the protocol) against a
//! provider from `ctxbench-adapters`;
//! every physical request, engine event and turn outcome lands in a
//! [`record::TrialRecord`]; a [`runner::Judge`] (implemented by `ctxbench-graders`) turns
//! the record into verdicts; the [`runner`] executes the matrix scenario × mode × trial and
//! appends everything to [`storage`] — the contract with `ctxbench-reports`.
//!
//! What this crate must not do: grade (graders own verdict logic), aggregate or render
//! reports, know any system under test's implementation (the reference engine is handed in
//! as a factory by the binary; this crate does not depend on it), or let a system under test
//! see a scenario's facts, probes, expectations or graders. Only the fake provider's script
//! and the graders read those.
#![deny(missing_docs)]

pub mod cassette;
pub mod connect;
pub mod driver;
pub mod external;
pub mod fake_server;
pub mod progress;
pub mod record;
pub mod runner;
pub mod scenario;
pub mod seed;
pub mod selftest;
pub mod storage;
pub mod visible;

/// The retry layer's counters, stored per trial ([`storage::schema::TrialStats::infrastructure`]).
pub use ctxbench_adapters::resilience::ResilienceStats;
/// The contract with a system under test.
pub use ctxbench_sut as sut;
pub use ctxbench_sut::Mode;
