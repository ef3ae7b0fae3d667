//! The fake provider's own tokenizer (stub).

use crate::ModelRequest;

/// The fake provider's "true" tokenizer.
#[derive(Debug, Clone, Copy, Default)]
pub struct FakeTokenizer;

impl FakeTokenizer {
    /// A tokenizer.
    pub fn new() -> Self {
        FakeTokenizer
    }
    /// Tokens of one string.
    pub fn count_text(&self, text: &str) -> u64 {
        (text.len() as u64).div_ceil(4)
    }
    /// Tokens of a request.
    pub fn request_tokens(&self, req: &ModelRequest) -> u64 {
        req.messages.iter().map(|m| 4 + self.count_text(&m.content)).sum::<u64>() + 3
    }
}
