//! The request projection: which messages the next request carries, in which order, and
//! what each category costs (seed 000 §Context model, §Token budget).
//!
//! Order: current effective instructions; conversation memory (a checkpoint, if any);
//! recent verbatim conversation; the current user request; then this run's continuation
//! (assistant tool calls and tool results). Tool definitions travel beside the messages.
//! The transcript itself is never touched: a projection is derived, not stored.
//!
//! Estimates are calibrated (seed 000 §Estimation accuracy): the engine compares each
//! preflight estimate with the provider-reported input and scales later estimates by the
//! learned ratio (never below 1), so a tokenizer the estimator does not match cannot keep
//! undercounting into the safety buffer.

use ctxbench_adapters::estimate::RequestEstimator;
use ctxbench_adapters::{ContentHash, Message, ModelRequest, ToolDefinition};

use crate::budget::BudgetBreakdown;
use crate::instructions::InstructionSnapshot;
use crate::session::Entry;

/// The inputs of one projection.
pub struct ProjectionInput<'a> {
    /// Frozen instructions of this run.
    pub instructions: &'a InstructionSnapshot,
    /// Conversation memory message (checkpoint), if any, with its hash.
    pub memory: Option<(&'a Message, ContentHash)>,
    /// Verbatim history before the current turn.
    pub history: &'a [Entry],
    /// The history's raw estimated tokens when the caller already knows them (the engine's
    /// running sums over the transcript); `None` sums the messages.
    pub history_tokens: Option<u64>,
    /// The current turn's messages: its user message first, then continuation.
    pub current: &'a [Entry],
    /// Advertised tools.
    pub tools: &'a [ToolDefinition],
    /// Model id.
    pub model: &'a str,
    /// Context window.
    pub window: u64,
    /// Requested output allowance.
    pub requested_output: u64,
    /// Safety buffer.
    pub buffer: u64,
    /// Calibration factor: learned from provider usage (then ≥ 1, never trusting the
    /// estimator to overcount) or set from a provider's exact count (any positive ratio);
    /// 1 = the raw estimator.
    pub calibration: f64,
}

/// A request and its estimated budget.
#[derive(Debug, Clone)]
pub struct Projection {
    /// The request to send.
    pub request: ModelRequest,
    /// Its budget by category.
    pub budget: BudgetBreakdown,
    /// Verbatim transcript messages included (history + current turn).
    pub retained_messages: u64,
    /// The estimator's raw total before calibration.
    pub raw_total: u64,
}

/// Build the request and estimate every category with the (cached) estimator.
pub fn project(input: &ProjectionInput<'_>, estimator: &RequestEstimator) -> Projection {
    let mut budget = BudgetBreakdown::new(input.window, input.requested_output, input.buffer);
    let mut messages = Vec::with_capacity(2 + input.history.len() + input.current.len());

    if !input.instructions.text.is_empty() {
        let m = Message::system(input.instructions.text.clone());
        budget.instructions =
            estimator.message_tokens(&m, &instruction_message_hash(input.instructions));
        messages.push(m);
    }
    if let Some((m, h)) = input.memory {
        budget.memory = estimator.message_tokens(m, &h);
        messages.push(m.clone());
    }
    budget.recent_tail = input.history_tokens.unwrap_or_else(|| {
        estimator.sum_message_tokens(input.history.iter().map(|e| (&e.message, &e.hash)))
    });
    messages.extend(input.history.iter().map(|e| e.message.clone()));
    for (i, e) in input.current.iter().enumerate() {
        let t = estimator.message_tokens(&e.message, &e.hash);
        if i == 0 {
            budget.current_request += t;
        } else {
            budget.continuation += t;
        }
        messages.push(e.message.clone());
    }
    budget.tool_schemas = estimator.tools_tokens(input.tools);
    budget.framing = RequestEstimator::request_priming();
    let raw_total = budget.with_total().total;
    if input.calibration > 0.0 && input.calibration != 1.0 {
        let scale = |x: u64| (x as f64 * input.calibration).ceil() as u64;
        budget.instructions = scale(budget.instructions);
        budget.memory = scale(budget.memory);
        budget.recent_tail = scale(budget.recent_tail);
        budget.current_request = scale(budget.current_request);
        budget.continuation = scale(budget.continuation);
        budget.tool_schemas = scale(budget.tool_schemas);
        budget.framing = scale(budget.framing);
    }
    let budget = budget.with_total();
    Projection {
        request: ModelRequest {
            model: input.model.to_string(),
            messages,
            tools: input.tools.to_vec(),
            max_output_tokens: u32::try_from(input.requested_output).unwrap_or(u32::MAX),
        },
        budget,
        retained_messages: (input.history.len() + input.current.len()) as u64,
        raw_total,
    }
}

/// The content hash of the system message carrying an instruction snapshot.
pub fn instruction_message_hash(snapshot: &InstructionSnapshot) -> ContentHash {
    Message::system(snapshot.text.clone()).content_hash()
}
