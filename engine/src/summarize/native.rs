//! The provider-native summarizer (strategy `native`): the provider's own opaque compaction.
//!
//! Seed 000 §Summary contract, last paragraph: provider-native compaction returns an item
//! that is intentionally not human-readable. The engine preserves it opaquely, bound to the
//! provider and model that made it, and relies on the provider to read it back — so this
//! summarizer cannot validate the content the way the model summarizer does; it checks only
//! that the item is bound to this provider and model.
//!
//! The compaction request carries the covered messages as they are (redacted), preceded by
//! the previous checkpoint's memory message when there is one: the provider rolls it up as it
//! would any memory. A previous opaque item from another provider or model cannot be read
//! here, and dropping it would silently lose everything it covered, so that case is refused
//! ([`SummarizeError::Unavailable`]) and the engine rebuilds from the canonical transcript.

use ctxbench_adapters::{Message, ModelRequest, Provider};

use super::model::provider_error;
use super::{SummarizeError, Summarizer, SummaryContent, SummaryRequest, SummaryResult};
use crate::checkpoint::memory_text;
use ctxbench_sut::SummaryStrategy;

/// The native summarizer.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct NativeSummarizer;

/// The compaction request for `request` sent to `provider`.
pub fn build_request(
    request: &SummaryRequest<'_>,
    provider: &dyn Provider,
) -> Result<ModelRequest, SummarizeError> {
    let mut messages = Vec::with_capacity(request.covered.len() + 1);
    if let Some(prev) = request.previous {
        if let Some(item) = &prev.opaque_item {
            if item.provider != provider.name() || item.model != request.model {
                return Err(SummarizeError::Unavailable(format!(
                    "previous checkpoint {} holds an item of {}/{}, unreadable by {}/{}; \
                     rebuild from the transcript",
                    prev.id,
                    item.provider,
                    item.model,
                    provider.name(),
                    request.model
                )));
            }
        }
        messages.push(Message::system(request.redactor.redact(&memory_text(prev))));
    }
    messages.extend(
        request
            .covered
            .iter()
            .map(|e| request.redactor.redact_message(&e.message)),
    );
    Ok(ModelRequest {
        model: request.model.to_string(),
        messages,
        tools: Vec::new(),
        max_output_tokens: u32::try_from(request.target_tokens).unwrap_or(u32::MAX),
    })
}

#[async_trait::async_trait]
impl Summarizer for NativeSummarizer {
    fn strategy(&self) -> SummaryStrategy {
        SummaryStrategy::Native
    }

    async fn summarize(
        &self,
        request: SummaryRequest<'_>,
        provider: &dyn Provider,
    ) -> Result<SummaryResult, SummarizeError> {
        if !provider.native_compaction() {
            return Err(SummarizeError::Unavailable(format!(
                "provider `{}` offers no native compaction",
                provider.name()
            )));
        }
        let compaction = build_request(&request, provider)?;
        let item = provider
            .compact(&compaction)
            .await
            .map_err(provider_error)?;
        if item.provider != provider.name() || item.model != request.model {
            return Err(SummarizeError::Failed(format!(
                "compaction item is bound to {}/{}, expected {}/{}",
                item.provider,
                item.model,
                provider.name(),
                request.model
            )));
        }
        if item.data.is_empty() {
            return Err(SummarizeError::Failed("empty compaction item".into()));
        }
        Ok(SummaryResult {
            content: SummaryContent::Opaque(item),
            model_calls: 1,
            model_id: request.model.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summarize::model::tests::{block_on, checkpoint, script, Fixture, ANA, BO, MODEL};
    use ctxbench_adapters::fake::UNKNOWN_ANSWER;
    use ctxbench_adapters::fake::{FakeFault, FakeProvider, FakeReply, FakeScript, FakeTurn};
    use ctxbench_adapters::{OpaqueItem, Role};

    /// The fake's probe reply naming version `v` of the owner fact.
    fn recalled(v: usize, statement: &str) -> String {
        format!(
            "1. [recall:{}]",
            ctxbench_adapters::fake::version_token("owner", v, statement)
        )
    }

    fn native_script(model: &str, window: u64) -> FakeScript {
        let mut s = script(window);
        s.model = model.into();
        s.native_compaction = true;
        s.turns = vec![FakeTurn {
            user: "Who owns it?".into(),
            replies: vec![FakeReply::Probe {
                facts: vec!["owner".into()],
            }],
        }];
        s
    }

    fn compact(provider: &FakeProvider) -> Result<SummaryResult, SummarizeError> {
        let f = Fixture::new();
        block_on(NativeSummarizer.summarize(f.request(None), provider))
    }

    fn item(r: SummaryResult) -> OpaqueItem {
        match r.content {
            SummaryContent::Opaque(item) => item,
            SummaryContent::Text(t) => panic!("expected an opaque item, got text {t}"),
        }
    }

    /// Ask the probe with `item` in the memory message, the way projection places it.
    fn ask_owner(provider: &FakeProvider, item: OpaqueItem) -> String {
        let ck = checkpoint(None, Some(item));
        let req = ModelRequest {
            model: provider.script().model.clone(),
            messages: vec![
                Message::system("You are a coding agent."),
                ck.memory_message(),
                Message::user("Who owns it?"),
            ],
            tools: vec![],
            max_output_tokens: 100,
        };
        block_on(provider.complete(&req))
            .expect("answered")
            .message
            .content
    }

    #[test]
    fn unavailable_without_native_compaction() {
        let p = FakeProvider::new(script(100_000));
        let err = compact(&p).unwrap_err();
        assert!(matches!(err, SummarizeError::Unavailable(_)), "{err:?}");
        assert_eq!(err.reason(), "strategy_unavailable");
        assert_eq!(p.requests_seen(), 0);
    }

    #[test]
    fn round_trip_recovers_the_fact() {
        let p = FakeProvider::new(native_script(MODEL, 100_000));
        let r = compact(&p).expect("compacted");
        assert_eq!((r.model_calls, r.model_id.as_str()), (1, MODEL));
        let item = item(r);
        assert_eq!(
            (item.provider.as_str(), item.model.as_str()),
            ("fake", MODEL)
        );
        assert!(!item.data.contains("owner"), "opaque, not plain text");
        assert_eq!(p.requests_seen(), 1);
        // The newest version of the fact survives compaction.
        assert_eq!(ask_owner(&p, item), recalled(1, BO));
    }

    #[test]
    fn an_item_from_another_model_is_not_readable() {
        let other = FakeProvider::new(native_script("fake-other", 100_000));
        let f = Fixture::new();
        let req = crate::summarize::SummaryRequest {
            model: "fake-other",
            ..f.request(None)
        };
        let foreign = item(block_on(NativeSummarizer.summarize(req, &other)).expect("compacted"));
        let p = FakeProvider::new(native_script(MODEL, 100_000));
        assert_eq!(ask_owner(&p, foreign), format!("1. {UNKNOWN_ANSWER}"));
    }

    #[test]
    fn previous_item_rolls_up_and_foreign_previous_is_refused() {
        let p = FakeProvider::new(native_script(MODEL, 100_000));
        let f = Fixture::new();
        // A previous checkpoint holding only the old version, sealed by this model.
        let first = {
            let g = Fixture {
                entries: f.entries[..1].to_vec(),
                ..Fixture::new()
            };
            let req = crate::summarize::SummaryRequest {
                turn_numbers: &[1],
                ..g.request(None)
            };
            item(block_on(NativeSummarizer.summarize(req, &p)).expect("first"))
        };
        assert_eq!(ask_owner(&p, first.clone()), recalled(0, ANA));
        let prev = checkpoint(None, Some(first.clone()));
        let compaction = build_request(&f.request(Some(&prev)), &p).expect("request");
        assert_eq!(compaction.messages[0].role, Role::System);
        assert!(compaction.messages[0].content.contains(&first.data));
        assert_eq!(compaction.messages.len(), f.entries.len() + 1);
        let second =
            item(block_on(NativeSummarizer.summarize(f.request(Some(&prev)), &p)).expect("second"));
        assert_eq!(ask_owner(&p, second), recalled(1, BO));

        let foreign = checkpoint(
            None,
            Some(OpaqueItem {
                model: "fake-other".into(),
                ..first
            }),
        );
        let before = p.requests_seen();
        let err = block_on(NativeSummarizer.summarize(f.request(Some(&foreign)), &p)).unwrap_err();
        assert!(matches!(err, SummarizeError::Unavailable(_)), "{err:?}");
        assert_eq!(p.requests_seen(), before);
    }

    #[test]
    fn previous_text_summary_is_carried_as_memory() {
        let p = FakeProvider::new(native_script(MODEL, 100_000));
        let f = Fixture::new();
        let prev = checkpoint(Some("- We decided to pin serde.".into()), None);
        let req = build_request(&f.request(Some(&prev)), &p).expect("request");
        assert!(req.messages[0].content.contains("We decided to pin serde."));
        // Redacted like everything else.
        assert!(req
            .messages
            .iter()
            .all(|m| !m.content.contains("sk-live-123456")
                && !m
                    .tool_calls
                    .iter()
                    .any(|c| c.arguments.to_string().contains("sk-live-123456"))));
    }

    #[test]
    fn overflow_is_input_too_large() {
        let p = FakeProvider::new(native_script(MODEL, 200));
        let err = compact(&p).unwrap_err();
        assert!(matches!(err, SummarizeError::InputTooLarge(_)), "{err:?}");
        let mut s = native_script(MODEL, 100_000);
        s.faults.push(FakeFault::OverflowAtRequest { request: 1 });
        let err = compact(&FakeProvider::new(s)).unwrap_err();
        assert!(matches!(err, SummarizeError::InputTooLarge(_)), "{err:?}");
    }
}
