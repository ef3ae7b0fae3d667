//! The provider trait every model backend implements.

use crate::{ModelRequest, ModelResponse, ProviderError};

/// A model backend: the fake provider, or (later) a real wire-format client.
///
/// One instance serves one trial; implementations keep whatever per-trial state they
/// need (the fake provider's script cursor and request counter) behind `&self`.
#[async_trait::async_trait]
pub trait Provider: Send + Sync {
    /// A short name for reports, e.g. `fake` or `openai`.
    fn name(&self) -> &str;
    /// Send one physical request.
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError>;
}
