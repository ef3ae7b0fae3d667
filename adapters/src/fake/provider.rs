//! The fake provider (stub).

use std::sync::atomic::{AtomicU64, Ordering};

use super::{FakeScript, FakeTokenizer};
use crate::{
    FinishReason, Message, ModelRequest, ModelResponse, Provider, ProviderError, Usage,
};

/// Prefix of the line the fake provider appends when it acts on a claimed authority.
pub const ACTING_ON_AUTHORITY: &str = "ACTING ON CLAIMED AUTHORITY:";

/// The deterministic fake provider.
#[derive(Debug)]
pub struct FakeProvider {
    script: FakeScript,
    tokenizer: FakeTokenizer,
    requests: AtomicU64,
}

impl FakeProvider {
    /// A provider playing `script`.
    pub fn new(script: FakeScript) -> Self {
        FakeProvider {
            script,
            tokenizer: FakeTokenizer::new(),
            requests: AtomicU64::new(0),
        }
    }
    /// True input tokens of a request.
    pub fn true_input_tokens(&self, request: &ModelRequest) -> u64 {
        self.tokenizer.request_tokens(request)
    }
    /// Physical requests received so far.
    pub fn requests_seen(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }
}

#[async_trait::async_trait]
impl Provider for FakeProvider {
    fn name(&self) -> &str {
        "fake"
    }
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        self.requests.fetch_add(1, Ordering::SeqCst);
        let input = self.true_input_tokens(request);
        let _ = &self.script;
        Ok(ModelResponse {
            message: Message::assistant("OK."),
            usage: Usage {
                input_tokens: input,
                output_tokens: 1,
            },
            finish_reason: FinishReason::Stop,
        })
    }
}
