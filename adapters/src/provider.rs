//! The provider trait every model backend implements.

use crate::{ModelRequest, ModelResponse, ProviderError};

/// A model backend: the fake provider, or a real wire-format client
/// ([`crate::openai::OpenAiProvider`], [`crate::anthropic::AnthropicProvider`]), possibly
/// wrapped in [`crate::resilience::Resilient`].
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

    /// The provider's own count of `request`'s input tokens, when it offers an exact
    /// counting endpoint (Anthropic's `count_tokens`); `None` when it does not, and the
    /// caller falls back to a local estimate.
    async fn count_tokens(&self, request: &ModelRequest) -> Result<Option<u64>, ProviderError> {
        let _ = request;
        Ok(None)
    }

    /// What the retry layer did for this provider so far (attempts, retries by kind,
    /// give-ups), when there is one ([`crate::resilience::Resilient`]); `None` for a
    /// provider that is called directly (the in-process fake). Reports count
    /// infrastructure trouble apart from model failures with it.
    fn resilience_stats(&self) -> Option<crate::resilience::ResilienceStats> {
        None
    }
}

/// A boxed provider is a provider (the harness holds `Box<dyn Provider>`).
#[async_trait::async_trait]
impl<P: Provider + ?Sized> Provider for Box<P> {
    fn name(&self) -> &str {
        (**self).name()
    }
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        (**self).complete(request).await
    }
    fn native_compaction(&self) -> bool {
        (**self).native_compaction()
    }
    async fn compact(&self, request: &ModelRequest) -> Result<crate::OpaqueItem, ProviderError> {
        (**self).compact(request).await
    }
    async fn count_tokens(&self, request: &ModelRequest) -> Result<Option<u64>, ProviderError> {
        (**self).count_tokens(request).await
    }
    fn resilience_stats(&self) -> Option<crate::resilience::ResilienceStats> {
        (**self).resilience_stats()
    }
}

/// A shared provider is a provider.
#[async_trait::async_trait]
impl<P: Provider + ?Sized> Provider for std::sync::Arc<P> {
    fn name(&self) -> &str {
        (**self).name()
    }
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        (**self).complete(request).await
    }
    fn native_compaction(&self) -> bool {
        (**self).native_compaction()
    }
    async fn compact(&self, request: &ModelRequest) -> Result<crate::OpaqueItem, ProviderError> {
        (**self).compact(request).await
    }
    async fn count_tokens(&self, request: &ModelRequest) -> Result<Option<u64>, ProviderError> {
        (**self).count_tokens(request).await
    }
    fn resilience_stats(&self) -> Option<crate::resilience::ResilienceStats> {
        (**self).resilience_stats()
    }
}
