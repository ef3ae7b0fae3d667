//! The token budget (seed 000 §Token budget, "Budget calculation").
//!
//! ```text
//! available input budget   = context window − max(requested output, safety buffer)
//! remaining history budget = available input − instructions − current request
//!                            − tool definitions − protocol-required continuation
//! ```
//!
//! The buffer is not a second output reserve: the larger of the two is subtracted once.

use serde::{Deserialize, Serialize};

/// The single effective reserve: `max(requested_output, buffer)`.
pub fn effective_reserve(requested_output: u64, buffer: u64) -> u64 {
    requested_output.max(buffer)
}

/// `window − max(requested_output, buffer)`, saturating at zero.
pub fn available_input(window: u64, requested_output: u64, buffer: u64) -> u64 {
    window.saturating_sub(effective_reserve(requested_output, buffer))
}

/// The budget of one request by category, as estimated before sending (seed 000 §Budget).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetBreakdown {
    /// Model context window.
    pub window: u64,
    /// Requested output allowance.
    pub requested_output: u64,
    /// Safety buffer.
    pub buffer: u64,
    /// The single effective reserve: max(requested output, buffer).
    pub reserve: u64,
    /// window − reserve.
    pub available_input: u64,
    /// Current instructions.
    pub instructions: u64,
    /// Conversation memory (checkpoint).
    pub memory: u64,
    /// Recent verbatim conversation turns.
    pub recent_tail: u64,
    /// The current user request.
    pub current_request: u64,
    /// Advertised tool schemas.
    pub tool_schemas: u64,
    /// In-run continuation: this run's assistant tool calls and tool results.
    pub continuation: u64,
    /// Request framing not attributable to one category.
    pub framing: u64,
    /// Sum of all categories.
    pub total: u64,
}

impl BudgetBreakdown {
    /// Mandatory context: instructions, current request, tools and protocol continuation.
    pub fn mandatory(&self) -> u64 {
        self.instructions
            + self.current_request
            + self.tool_schemas
            + self.continuation
            + self.framing
    }
    /// available input − mandatory (saturating at 0).
    pub fn remaining_history(&self) -> u64 {
        self.available_input.saturating_sub(self.mandatory())
    }
    /// Whether the whole request exceeds the available input budget.
    pub fn over_budget(&self) -> bool {
        self.total > self.available_input
    }
}

impl BudgetBreakdown {
    /// Start a breakdown for a window and reserve; categories are filled by the caller.
    pub fn new(window: u64, requested_output: u64, buffer: u64) -> Self {
        BudgetBreakdown {
            window,
            requested_output,
            buffer,
            reserve: effective_reserve(requested_output, buffer),
            available_input: available_input(window, requested_output, buffer),
            ..Default::default()
        }
    }

    /// Recompute `total` from the categories.
    pub fn with_total(mut self) -> Self {
        self.total = self.mandatory() + self.memory + self.recent_tail;
        self
    }

    /// The same breakdown with `total` set to an exact count (a provider's `count_tokens`):
    /// every category is scaled by `total / self.total` (rounded down) and `framing` takes
    /// the rounding remainder, so the categories still sum to the total.
    pub fn scaled_to(mut self, total: u64) -> Self {
        let old = self.with_total().total;
        if old == 0 {
            self.framing = total;
            return self.with_total();
        }
        let scale = |x: u64| ((x as u128 * total as u128) / old as u128) as u64;
        self.instructions = scale(self.instructions);
        self.memory = scale(self.memory);
        self.recent_tail = scale(self.recent_tail);
        self.current_request = scale(self.current_request);
        self.tool_schemas = scale(self.tool_schemas);
        self.continuation = scale(self.continuation);
        self.framing = 0;
        let rest = self.with_total().total;
        self.framing = total - rest;
        self.with_total()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaling_to_an_exact_count_keeps_the_categories_summing() {
        let mut b = BudgetBreakdown::new(16384, 512, 1024);
        b.instructions = 100;
        b.recent_tail = 900;
        b.current_request = 33;
        b.framing = 3;
        let b = b.with_total();
        for exact in [0, 1, 517, 1036, 1500, 99_999] {
            let s = b.scaled_to(exact);
            assert_eq!(s.total, exact);
            assert_eq!(s.with_total().total, exact);
            assert_eq!(s.available_input, b.available_input);
        }
        let s = b.scaled_to(2072);
        assert_eq!(
            (s.instructions, s.recent_tail, s.current_request),
            (200, 1800, 66)
        );
    }

    #[test]
    fn reserve_is_subtracted_once() {
        assert_eq!(effective_reserve(4096, 8192), 8192);
        assert_eq!(effective_reserve(8192, 4096), 8192);
        assert_eq!(available_input(16384, 1024, 2048), 14336);
        assert_eq!(available_input(16384, 4096, 2048), 12288);
    }

    #[test]
    fn exact_boundaries() {
        // A reserve equal to the window leaves nothing; larger saturates at zero.
        assert_eq!(available_input(8192, 8192, 0), 0);
        assert_eq!(available_input(8192, 9000, 0), 0);
        let mut b = BudgetBreakdown::new(10_000, 1_000, 2_000);
        assert_eq!(b.available_input, 8_000);
        b.instructions = 3_000;
        b.current_request = 1_000;
        b.tool_schemas = 4_000;
        let b = b.with_total();
        assert_eq!(b.total, 8_000);
        assert!(!b.over_budget(), "a request exactly at the budget fits");
        assert_eq!(b.remaining_history(), 0);
        let mut c = b;
        c.recent_tail = 1;
        let c = c.with_total();
        assert!(c.over_budget());
    }
}
