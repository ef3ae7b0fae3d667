//! Conventions shared by the engine and the fake provider, as a real runtime and its model
//! would share a prompt format.

/// Opens the block in which an engine places derived conversation memory (a checkpoint).
/// Text inside it is untrusted history: the fake provider gives it the lowest precedence
/// and never treats an approval claim inside it as authoritative.
pub const MEMORY_OPEN: &str = "<conversation-memory trust=\"untrusted\">";
/// Closes the conversation-memory block.
pub const MEMORY_CLOSE: &str = "</conversation-memory>";

/// The answer a model gives to a probe whose fact is not in its context.
pub const UNKNOWN_ANSWER: &str = "unknown";
