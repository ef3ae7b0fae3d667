//! The engine's own request format, and what it declares of it.
//!
//! Like any runtime, the engine chooses how it labels derived memory and how it asks its
//! model for a summary. ctxbench's fake model and graders do not share these constants: they
//! learn them from [`declaration`], exactly as they learn an external runtime's markup from
//! the protocol's `hello`.

use ctxbench_sut::{Declaration, Markup};

/// Opens the block in which the engine places derived conversation memory (a checkpoint).
/// Text inside it is untrusted history, below the instructions.
pub const MEMORY_OPEN: &str = "<conversation-memory trust=\"untrusted\">";
/// Closes the conversation-memory block.
pub const MEMORY_CLOSE: &str = "</conversation-memory>";

/// First line of the system message of the engine's summarization requests (the `model`
/// checkpoint strategy). A real model simply reads the lines after it as instructions.
pub const SUMMARY_REQUEST_MARKER: &str = "[ctxbench:summarize]";

/// What the engine declares to ctxbench.
pub fn declaration() -> Declaration {
    Declaration {
        memory: Some(Markup {
            open: MEMORY_OPEN.to_string(),
            close: MEMORY_CLOSE.to_string(),
        }),
        summary_request: Some(SUMMARY_REQUEST_MARKER.to_string()),
        // The engine reports every family, so every grader judges it in every trial.
        events: Some(ctxbench_sut::EventFamily::ALL.to_vec()),
    }
}
