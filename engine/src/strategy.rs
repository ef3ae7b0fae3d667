//! Which summarizer a compaction uses, by capability, and when it falls back.
//!
//! Seed 000 §Selection algorithm, step 6: *use provider-native compaction when the adapter
//! supports it; otherwise summarize the prefix to the target budget.* The configured
//! strategy is a preference, not a promise the provider must keep:
//!
//! - `native` is used only when the provider (the adapter the engine talks to) offers native
//!   compaction; otherwise the compaction summarizes with the extractive summarizer instead
//!   of failing `strategy_unavailable` (it needs no model call and cannot itself be invalid);
//! - a `model` (or `native`) summary that is rejected — invalid (seed 004: a checkpoint that
//!   drops an archive reference, invents a constraint, is truncated …) or unavailable for
//!   this input — is replaced, for that compaction, by the extractive summary, rather than
//!   stopping the turn with `summary_invalid`. A summarizer that *fails* (the provider is
//!   down, the request is too large) is not a rejected summary: those keep their typed
//!   failure reasons.
//!
//! A fallback is visible: the compaction events name the strategy used and what it replaced,
//! e.g. `extractive (fallback from model: summary_invalid, untraceable constraint)`.

use ctxbench_sut::SummaryStrategy;

use crate::summarize::SummarizeError;

/// Which of the engine's summarizers runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    /// The configured strategy.
    Configured,
    /// The extractive fallback.
    Fallback,
}

/// Why a compaction used the extractive summarizer instead of the configured strategy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fallback {
    /// The strategy that was configured.
    pub from: SummaryStrategy,
    /// The stable reason the configured strategy would have failed with
    /// (`strategy_unavailable`, `summary_invalid`).
    pub reason: &'static str,
    /// What went wrong, in a few words (no summary content).
    pub why: String,
}

/// Longest `why` kept in an event.
const MAX_WHY_CHARS: usize = 60;

/// The name of a strategy in events.
pub fn name(s: SummaryStrategy) -> &'static str {
    match s {
        SummaryStrategy::Extractive => "extractive",
        SummaryStrategy::Model => "model",
        SummaryStrategy::Native => "native",
    }
}

/// Decided before summarizing: `native` without a provider that offers it.
pub fn by_capability(configured: SummaryStrategy, provider_native: bool) -> Option<Fallback> {
    (configured == SummaryStrategy::Native && !provider_native).then(|| Fallback {
        from: configured,
        reason: "strategy_unavailable",
        why: "provider offers no native compaction".into(),
    })
}

/// Decided after summarizing: whether `error` from the configured strategy is a rejected
/// summary the extractive one replaces (see the module docs).
pub fn after_error(configured: SummaryStrategy, error: &SummarizeError) -> Option<Fallback> {
    if configured == SummaryStrategy::Extractive {
        return None;
    }
    let (reason, detail) = match error {
        SummarizeError::Invalid(d) | SummarizeError::Unavailable(d) => (error.reason(), d),
        SummarizeError::Failed(_) | SummarizeError::InputTooLarge(_) => return None,
    };
    // The category of the rejection, not its quoted content: events carry no transcript.
    let why: String = detail
        .split(':')
        .next()
        .unwrap_or(detail)
        .chars()
        .take(MAX_WHY_CHARS)
        .collect();
    Some(Fallback {
        from: configured,
        reason,
        why: why.trim().to_string(),
    })
}

/// The strategy as events report it: `used`, and what it replaced when it is a fallback.
pub fn label(used: SummaryStrategy, fallback: Option<&Fallback>) -> String {
    match fallback {
        None => name(used).to_string(),
        Some(f) => format!(
            "{} (fallback from {}: {}, {})",
            name(used),
            name(f.from),
            f.reason,
            f.why
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_needs_the_capability() {
        assert_eq!(by_capability(SummaryStrategy::Native, true), None);
        assert_eq!(by_capability(SummaryStrategy::Model, false), None);
        let f = by_capability(SummaryStrategy::Native, false).expect("fallback");
        assert_eq!(
            label(SummaryStrategy::Extractive, Some(&f)),
            "extractive (fallback from native: strategy_unavailable, provider offers no native compaction)"
        );
    }

    #[test]
    fn rejected_summaries_fall_back_failures_do_not() {
        let invalid = SummarizeError::Invalid(
            "untraceable constraint: \"Never deploy on Mondays.\" is stated nowhere".into(),
        );
        let f = after_error(SummaryStrategy::Model, &invalid).expect("fallback");
        assert_eq!(
            label(SummaryStrategy::Extractive, Some(&f)),
            "extractive (fallback from model: summary_invalid, untraceable constraint)"
        );
        assert!(after_error(SummaryStrategy::Extractive, &invalid).is_none());
        for e in [
            SummarizeError::Failed("503".into()),
            SummarizeError::InputTooLarge("big".into()),
        ] {
            assert!(after_error(SummaryStrategy::Model, &e).is_none(), "{e:?}");
        }
        assert!(after_error(
            SummaryStrategy::Native,
            &SummarizeError::Unavailable("foreign item".into())
        )
        .is_some());
        assert_eq!(label(SummaryStrategy::Model, None), "model");
    }
}
