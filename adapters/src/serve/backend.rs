//! What answers a trial's requests: a [`Backend`] per trial key, from a [`BackendResolver`].
//!
//! The fake provider is one backend among others: ctxbench can put any [`Provider`] behind
//! the server (a real upstream model, a cassette) and still record, through the
//! [`super::ExchangeObserver`], every request an agent runtime sends.

use std::sync::Arc;

use super::faults::ScheduledFault;
use crate::fake::FakeProvider;
use crate::Provider;

/// The provider answering one trial key's requests, and what the server needs to know about
/// it beyond [`Provider`] (whose trait stays as it is): the model id `GET /v1/models` lists,
/// and, for the fake provider, its own token count and request counter.
#[derive(Clone)]
pub struct Backend {
    provider: Arc<dyn Provider>,
    model: Option<String>,
    fake: Option<Arc<FakeProvider>>,
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend")
            .field("provider", &self.provider.name())
            .field("model", &self.model)
            .field("fake", &self.fake.is_some())
            .finish()
    }
}

impl Backend {
    /// Any provider. `POST /v1/messages/count_tokens` is forwarded to
    /// [`Provider::count_tokens`] (a provider without an exact count answers 404);
    /// `GET /v1/models` lists nothing unless [`Backend::with_model`] names the model; the
    /// server counts the completions it forwards for
    /// [`super::FakeServerHandle::provider_requests`].
    pub fn new(provider: Arc<dyn Provider>) -> Self {
        Backend {
            provider,
            model: None,
            fake: None,
        }
    }

    /// The fake provider. `GET /v1/models` lists its script's model; `count_tokens` is its
    /// own count of the request's input ([`FakeProvider::true_input_tokens`], the count it
    /// enforces its window with), which neither moves its script cursor nor counts as a
    /// request; [`super::FakeServerHandle::provider_requests`] is its own request counter.
    pub fn fake(provider: impl Into<Arc<FakeProvider>>) -> Self {
        let fake: Arc<FakeProvider> = provider.into();
        Backend {
            model: Some(fake.script().model.clone()),
            provider: fake.clone(),
            fake: Some(fake),
        }
    }

    /// The model id `GET /v1/models` lists for this backend.
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// The provider requests are forwarded to.
    pub fn provider(&self) -> &Arc<dyn Provider> {
        &self.provider
    }

    /// The model id `GET /v1/models` lists, if known.
    pub fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }

    /// The fake provider, when this backend is one ([`Backend::fake`]).
    pub fn as_fake(&self) -> Option<&FakeProvider> {
        self.fake.as_deref()
    }
}

impl From<Arc<dyn Provider>> for Backend {
    fn from(provider: Arc<dyn Provider>) -> Self {
        Backend::new(provider)
    }
}

impl From<FakeProvider> for Backend {
    fn from(provider: FakeProvider) -> Self {
        Backend::fake(provider)
    }
}

/// Turns an opaque trial key into the backend that answers it. The server asks once per
/// key (on its first request) and keeps the answer until
/// [`super::FakeServerHandle::forget`] or an eviction ([`super::TrialLimits`]), so a
/// stateful backend (the fake's script cursor) lives as long as its trial.
pub trait BackendResolver: Send + Sync {
    /// The backend for `key`, or `None` for an unknown key (answered with a 404).
    fn backend(&self, key: &str) -> Option<Backend>;

    /// HTTP faults for this key, on top of the server's [`super::FaultPlan`]. None by
    /// default.
    fn http_faults(&self, key: &str) -> Vec<ScheduledFault> {
        let _ = key;
        Vec::new()
    }
}

impl<F> BackendResolver for F
where
    F: Fn(&str) -> Option<Backend> + Send + Sync,
{
    fn backend(&self, key: &str) -> Option<Backend> {
        self(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::{FakeProvider, FakeScript};

    #[test]
    fn a_plain_provider_has_no_model_until_named() {
        let p: Arc<dyn Provider> = Arc::new(FakeProvider::new(FakeScript::default()));
        let b = Backend::from(p);
        assert_eq!(b.model(), None);
        assert!(
            b.as_fake().is_none(),
            "only Backend::fake counts as the fake"
        );
        assert_eq!(b.with_model("upstream-1").model(), Some("upstream-1"));
        let debug = format!(
            "{:?}",
            Backend::from(FakeProvider::new(FakeScript::default()))
        );
        assert!(debug.contains("fake: true"), "{debug}");
    }
}
