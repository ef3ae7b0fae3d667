//! The instruction snapshot (seed 000 §Instruction scope).
//!
//! Instructions are reloaded from their file at the start of every run (user turn) and then
//! frozen for that run: a tool that edits the file mid-run does not change the active
//! prompt. The snapshot's hash is recorded on every physical attempt.

use std::path::Path;

use ctxbench_adapters::ContentHash;

/// A frozen copy of the instruction file for one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstructionSnapshot {
    /// The instruction text.
    pub text: String,
    /// SHA-256 of the text.
    pub hash: ContentHash,
}

impl InstructionSnapshot {
    /// Snapshot of a text.
    pub fn of(text: impl Into<String>) -> Self {
        let text = text.into();
        let hash = ContentHash::of_bytes(text.as_bytes());
        InstructionSnapshot { text, hash }
    }

    /// Load the instruction file; a missing file means no instructions.
    pub fn load(path: &Path) -> std::io::Result<Self> {
        match std::fs::read_to_string(path) {
            Ok(text) => Ok(Self::of(text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::of(String::new())),
            Err(e) => Err(e),
        }
    }
}
