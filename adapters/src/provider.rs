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

    /// Whether [`Provider::compact`] is supported (seed 000 `nativeCompaction`).
    fn native_compaction(&self) -> bool {
        false
    }

    /// Provider-native compaction: turn the conversation in `request` into an opaque item
    /// the provider can later read back. Unsupported by default.
    async fn compact(&self, request: &ModelRequest) -> Result<crate::OpaqueItem, ProviderError> {
        let _ = request;
        Err(ProviderError::Rejected {
            status: 400,
            message: format!(
                "provider `{}` does not support native compaction",
                self.name()
            ),
        })
    }
}
