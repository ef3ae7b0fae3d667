//! The model capability table: window, output limit, estimator and native-compaction support
//! per model, each entry with its provenance. Unknown models never inherit an optimistic
//! window: they get [`conservative_fallback`] and say so.

use serde::{Deserialize, Serialize};

use crate::estimate::EstimatorKind;

/// Whether a provider can compact context itself (seed 000 §Capability contract).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NativeCompaction {
    /// No provider-side compaction.
    Unsupported,
    /// The provider returns an opaque compaction item to carry forward.
    OpaqueProviderItem,
}

/// Where a model's numbers came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "source", rename_all = "kebab-case")]
pub enum Provenance {
    /// An entry of the built-in table, with the public document it was taken from.
    Table {
        /// Document (URL or title) the numbers come from.
        reference: String,
        /// When the entry was last checked (YYYY-MM-DD).
        checked: String,
    },
    /// Declared by the scenario (or the user) explicitly.
    Declared {
        /// Who declared it, e.g. the scenario file.
        by: String,
    },
    /// The model is unknown; conservative defaults apply.
    ConservativeFallback {
        /// Why the fallback was used.
        reason: String,
    },
}

/// What the budget needs to know about a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelCapabilities {
    /// Model id.
    pub model: String,
    /// Context window in tokens.
    pub context_window: u64,
    /// Maximum output tokens per request.
    pub max_output_tokens: u64,
    /// The estimator that best matches the model's tokenizer.
    pub estimator: EstimatorKind,
    /// Provider-native compaction support.
    pub native_compaction: NativeCompaction,
    /// Where these numbers came from.
    pub provenance: Provenance,
}

/// The date every table entry was last checked against its reference.
pub const TABLE_CHECKED: &str = "2026-11-30";
/// Window of an unknown model: Forge's documented unknown-model default.
pub const FALLBACK_CONTEXT_WINDOW: u64 = 32_768;
/// Output allowance of an unknown model.
pub const FALLBACK_MAX_OUTPUT_TOKENS: u64 = 4_096;

/// One row of the built-in capability table. `'static` so the table is a plain constant;
/// [`TableEntry::capabilities`] turns it into the owned [`ModelCapabilities`] callers use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableEntry {
    /// Exact model id (case-sensitive).
    pub model: &'static str,
    /// Context window in tokens.
    pub context_window: u64,
    /// Maximum output tokens per request.
    pub max_output_tokens: u64,
    /// The estimator closest to the model's tokenizer.
    pub estimator: EstimatorKind,
    /// Provider-native compaction support *through this crate's adapters*.
    pub native_compaction: NativeCompaction,
    /// The public document the numbers come from.
    pub reference: &'static str,
}

impl TableEntry {
    /// The entry as owned capabilities with `Table` provenance.
    pub fn capabilities(&self) -> ModelCapabilities {
        ModelCapabilities {
            model: self.model.to_string(),
            context_window: self.context_window,
            max_output_tokens: self.max_output_tokens,
            estimator: self.estimator,
            native_compaction: self.native_compaction,
            provenance: Provenance::Table {
                reference: self.reference.to_string(),
                checked: TABLE_CHECKED.to_string(),
            },
        }
    }
}

const FAKE_REF: &str = "ctxbench fake provider";
const OPENAI_GPT4O: &str = "https://platform.openai.com/docs/models/gpt-4o";
const OPENAI_GPT4O_MINI: &str = "https://platform.openai.com/docs/models/gpt-4o-mini";
const OPENAI_GPT41: &str = "https://platform.openai.com/docs/models/gpt-4.1";
const OPENAI_GPT41_MINI: &str = "https://platform.openai.com/docs/models/gpt-4.1-mini";
const OPENAI_O3: &str = "https://platform.openai.com/docs/models/o3";
const OPENAI_O4_MINI: &str = "https://platform.openai.com/docs/models/o4-mini";
const OPENAI_GPT41_NANO: &str = "https://platform.openai.com/docs/models/gpt-4.1-nano";
const OPENAI_O3_MINI: &str = "https://platform.openai.com/docs/models/o3-mini";
const OPENAI_O1: &str = "https://platform.openai.com/docs/models/o1";
const OPENAI_GPT5: &str = "https://platform.openai.com/docs/models/gpt-5";
const OPENAI_GPT5_MINI: &str = "https://platform.openai.com/docs/models/gpt-5-mini";
const OPENAI_GPT5_NANO: &str = "https://platform.openai.com/docs/models/gpt-5-nano";
const ANTHROPIC_MODELS: &str = "https://docs.anthropic.com/en/docs/about-claude/models/overview";
const DEEPSEEK_MODELS: &str = "https://api-docs.deepseek.com/quick_start/pricing";
/// The window is the `-c 8192` ctxbench serves it with (the model's trained context, per its
/// card); the output cap is ctxbench's choice of half the window, not a vendor number.
const SMOLLM2_LLAMA_CPP: &str =
    "https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct (llama.cpp server, -c 8192)";

const fn entry(
    model: &'static str,
    context_window: u64,
    max_output_tokens: u64,
    estimator: EstimatorKind,
    reference: &'static str,
) -> TableEntry {
    TableEntry {
        model,
        context_window,
        max_output_tokens,
        estimator,
        // No adapter in this crate drives a provider-native compaction endpoint yet, so no
        // model may claim it: the capability describes what ctxbench can use, not the vendor.
        native_compaction: NativeCompaction::Unsupported,
        reference,
    }
}

use EstimatorKind::{Cl100kBase, Conservative, O200kBase};

/// The built-in table. Anthropic, DeepSeek and SmolLM2 models use the conservative estimator
/// because no local tokenizer for them ships with this crate. Dated snapshot ids are listed
/// only where the vendor documents them with the same numbers as the alias.
static TABLE: &[TableEntry] = &[
    // The fake provider's models; their "true" tokenizer is calibrated against cl100k_base.
    entry("fake-16k", 16_384, 4_096, Cl100kBase, FAKE_REF),
    entry("fake-32k", 32_768, 4_096, Cl100kBase, FAKE_REF),
    entry("fake-128k", 131_072, 8_192, Cl100kBase, FAKE_REF),
    entry("gpt-4o", 128_000, 16_384, O200kBase, OPENAI_GPT4O),
    entry("gpt-4o-mini", 128_000, 16_384, O200kBase, OPENAI_GPT4O_MINI),
    entry("gpt-4.1", 1_047_576, 32_768, O200kBase, OPENAI_GPT41),
    entry(
        "gpt-4.1-mini",
        1_047_576,
        32_768,
        O200kBase,
        OPENAI_GPT41_MINI,
    ),
    entry(
        "gpt-4.1-nano",
        1_047_576,
        32_768,
        O200kBase,
        OPENAI_GPT41_NANO,
    ),
    entry("o1", 200_000, 100_000, O200kBase, OPENAI_O1),
    entry("o3", 200_000, 100_000, O200kBase, OPENAI_O3),
    entry("o3-mini", 200_000, 100_000, O200kBase, OPENAI_O3_MINI),
    entry("o4-mini", 200_000, 100_000, O200kBase, OPENAI_O4_MINI),
    entry("gpt-5", 400_000, 128_000, O200kBase, OPENAI_GPT5),
    entry("gpt-5-mini", 400_000, 128_000, O200kBase, OPENAI_GPT5_MINI),
    entry("gpt-5-nano", 400_000, 128_000, O200kBase, OPENAI_GPT5_NANO),
    entry(
        "claude-3-haiku-20240307",
        200_000,
        4_096,
        Conservative,
        ANTHROPIC_MODELS,
    ),
    entry(
        "claude-3-5-sonnet-20240620",
        200_000,
        8_192,
        Conservative,
        ANTHROPIC_MODELS,
    ),
    entry(
        "claude-3-5-sonnet-20241022",
        200_000,
        8_192,
        Conservative,
        ANTHROPIC_MODELS,
    ),
    entry(
        "claude-3-5-sonnet-latest",
        200_000,
        8_192,
        Conservative,
        ANTHROPIC_MODELS,
    ),
    entry(
        "claude-3-5-haiku-latest",
        200_000,
        8_192,
        Conservative,
        ANTHROPIC_MODELS,
    ),
    entry(
        "claude-3-7-sonnet-20250219",
        200_000,
        64_000,
        Conservative,
        ANTHROPIC_MODELS,
    ),
    entry(
        "claude-3-7-sonnet-latest",
        200_000,
        64_000,
        Conservative,
        ANTHROPIC_MODELS,
    ),
    entry(
        "claude-opus-4-1-20250805",
        200_000,
        32_000,
        Conservative,
        ANTHROPIC_MODELS,
    ),
    entry(
        "claude-sonnet-4-5-20250929",
        200_000,
        64_000,
        Conservative,
        ANTHROPIC_MODELS,
    ),
    entry(
        "claude-sonnet-4",
        200_000,
        64_000,
        Conservative,
        ANTHROPIC_MODELS,
    ),
    entry(
        "claude-sonnet-4-20250514",
        200_000,
        64_000,
        Conservative,
        ANTHROPIC_MODELS,
    ),
    entry(
        "claude-opus-4",
        200_000,
        32_000,
        Conservative,
        ANTHROPIC_MODELS,
    ),
    entry(
        "claude-opus-4-20250514",
        200_000,
        32_000,
        Conservative,
        ANTHROPIC_MODELS,
    ),
    entry(
        "claude-3-5-haiku",
        200_000,
        8_192,
        Conservative,
        ANTHROPIC_MODELS,
    ),
    entry(
        "claude-3-5-haiku-20241022",
        200_000,
        8_192,
        Conservative,
        ANTHROPIC_MODELS,
    ),
    entry(
        "deepseek-chat",
        131_072,
        8_192,
        Conservative,
        DEEPSEEK_MODELS,
    ),
    entry(
        "deepseek-reasoner",
        131_072,
        65_536,
        Conservative,
        DEEPSEEK_MODELS,
    ),
    entry(
        "SmolLM2-135M-Instruct",
        8_192,
        4_096,
        Conservative,
        SMOLLM2_LLAMA_CPP,
    ),
];

/// Every built-in entry, in table order.
pub fn table() -> &'static [TableEntry] {
    TABLE
}

/// Capabilities of `model`: its table entry, or [`conservative_fallback`].
///
/// Matching is by **exact, case-sensitive id**: `GPT-4o` or `gpt-4o-2024-08-06` are not
/// `gpt-4o`. Guessing a family from a prefix would hand an unknown model someone else's
/// (possibly larger) window, which is precisely what seed 000 forbids.
pub fn lookup(model: &str) -> ModelCapabilities {
    match TABLE.iter().find(|e| e.model == model) {
        Some(e) => e.capabilities(),
        None => conservative_fallback(
            model,
            format!("model `{model}` is not in the capability table"),
        ),
    }
}

/// Conservative capabilities for a model the table does not know: a 32 768-token window,
/// 4 096 output tokens and the byte-based estimator, with the reason recorded as provenance.
pub fn conservative_fallback(model: &str, reason: impl Into<String>) -> ModelCapabilities {
    ModelCapabilities {
        model: model.to_string(),
        context_window: FALLBACK_CONTEXT_WINDOW,
        max_output_tokens: FALLBACK_MAX_OUTPUT_TOKENS,
        estimator: EstimatorKind::Conservative,
        native_compaction: NativeCompaction::Unsupported,
        provenance: Provenance::ConservativeFallback {
            reason: reason.into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_models_are_in_the_table() {
        let c = lookup("fake-16k");
        assert_eq!(c.context_window, 16_384);
        assert_eq!(c.max_output_tokens, 4_096);
        assert_eq!(c.estimator, EstimatorKind::Cl100kBase);
        assert_eq!(
            c.provenance,
            Provenance::Table {
                reference: "ctxbench fake provider".into(),
                checked: "2026-11-30".into()
            }
        );
        assert_eq!(lookup("fake-128k").context_window, 131_072);
        assert_eq!(lookup("fake-32k").context_window, 32_768);
    }

    #[test]
    fn real_models_have_public_numbers() {
        let c = lookup("gpt-4o");
        assert_eq!((c.context_window, c.max_output_tokens), (128_000, 16_384));
        assert_eq!(c.estimator, EstimatorKind::O200kBase);
        assert_eq!(lookup("gpt-4.1").context_window, 1_047_576);
        assert_eq!(lookup("o3").max_output_tokens, 100_000);
        let claude = lookup("claude-sonnet-4");
        assert_eq!(claude.estimator, EstimatorKind::Conservative);
        assert_eq!(claude.max_output_tokens, 64_000);
        assert!(matches!(claude.provenance, Provenance::Table { .. }));
    }

    #[test]
    fn newer_entries() {
        let c = |m: &str| {
            let c = lookup(m);
            assert!(matches!(c.provenance, Provenance::Table { .. }), "{m}");
            (c.context_window, c.max_output_tokens)
        };
        assert_eq!(c("gpt-5"), (400_000, 128_000));
        assert_eq!(c("gpt-4.1-nano"), (1_047_576, 32_768));
        assert_eq!(c("o3-mini"), (200_000, 100_000));
        assert_eq!(c("claude-3-7-sonnet-20250219"), (200_000, 64_000));
        assert_eq!(c("claude-3-5-sonnet-20241022"), (200_000, 8_192));
        assert_eq!(c("deepseek-reasoner"), (131_072, 65_536));
        assert_eq!(c("SmolLM2-135M-Instruct"), (8_192, 4_096));
        assert_eq!(
            lookup("SmolLM2-135M-Instruct").estimator,
            EstimatorKind::Conservative
        );
    }

    #[test]
    fn unknown_model_falls_back_with_provenance() {
        let c = lookup("mystery-model-9000");
        assert_eq!(c.model, "mystery-model-9000");
        assert_eq!(c.context_window, 32_768);
        assert_eq!(c.max_output_tokens, 4_096);
        assert_eq!(c.estimator, EstimatorKind::Conservative);
        match c.provenance {
            Provenance::ConservativeFallback { reason } => {
                assert!(reason.contains("mystery-model-9000"))
            }
            other => panic!("unexpected provenance {other:?}"),
        }
    }

    #[test]
    fn lookup_is_exact_and_case_sensitive() {
        for id in [
            "GPT-4o",
            "gpt-4o-2024-08-06",
            "gpt-4",
            " gpt-4o",
            "Fake-16k",
        ] {
            assert!(
                matches!(
                    lookup(id).provenance,
                    Provenance::ConservativeFallback { .. }
                ),
                "{id} must not match a table entry"
            );
        }
    }

    #[test]
    fn table_ids_are_unique_and_sane() {
        let mut ids: Vec<&str> = table().iter().map(|e| e.model).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), table().len());
        for e in table() {
            assert!(e.max_output_tokens < e.context_window, "{}", e.model);
        }
    }

    #[test]
    fn provenance_serializes_tagged() {
        let v = serde_json::to_value(lookup("nope").provenance).unwrap();
        assert_eq!(v["source"], "conservative-fallback");
    }
}
