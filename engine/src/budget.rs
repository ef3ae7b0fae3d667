//! The budget formula the engine plans every request with (seed 000 §Token budget):
//!
//! ```text
//! available input budget   = context window − max(requested output, safety buffer)
//! remaining history budget = available input − instructions − current request
//!                            − tool definitions − protocol-required continuation
//! ```
//!
//! The formula and the breakdown's shape are the protocol's ([`ctxbench_sut::budget`]):
//! every system reports its budget in that shape. What the engine adds is how it fills the
//! categories ([`crate::projection`]) and acts on them ([`crate::reference`]).

pub use ctxbench_sut::budget::{available_input, effective_reserve, BudgetBreakdown};
