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

/// First line of the system message of a summarization request (the `model` checkpoint
/// strategy). A fake provider recognises it and answers with a summary built only from the
/// request; a real model simply reads it as its instructions.
pub const SUMMARY_REQUEST_MARKER: &str = "[ctxbench:summarize]";

/// Opens a provider-native opaque compaction item carried in a request message; the item's
/// `data` follows on the same line. Only the provider that created it interprets it.
pub const OPAQUE_OPEN: &str = "<provider-compaction-item";
/// Closes an opaque compaction item.
pub const OPAQUE_CLOSE: &str = "</provider-compaction-item>";
