//! The YAML shape of a scenario file, exactly as written, with source locations.
//!
//! Every struct denies unknown keys. Values that later cross-checks need to point at are
//! wrapped in [`Spanned`] so a problem found after parsing still has a line and column.
//! Alternatives ("a text or `{filler: …}`", "a name or `{name, …}`") are hand-written
//! visitors rather than `#[serde(untagged)]`, because untagged enums lose both the spans
//! and the error message ("data did not match any variant").
//!
//! Numbers that must be positive are read as `i64` so `-5` gets "must be at least 1" instead
//! of serde's "invalid u64".

use std::fmt;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_saphyr::Spanned;

use super::compiled::{Corruption, FactKind, SummaryStrategy};
use super::template::FillerKind;
use ctxbench_sut::Mode;

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawScenario {
    pub(crate) version: Option<Spanned<i64>>,
    pub(crate) id: Spanned<String>,
    pub(crate) title: Option<Spanned<String>>,
    pub(crate) description: Option<Spanned<String>>,
    #[serde(default)]
    pub(crate) tags: Vec<Spanned<String>>,
    pub(crate) modes: Option<Spanned<Vec<Spanned<Mode>>>>,
    pub(crate) model: Spanned<RawModel>,
    pub(crate) context: Option<Spanned<RawContext>>,
    pub(crate) provider: Option<Spanned<RawProvider>>,
    pub(crate) instructions: Option<Spanned<String>>,
    #[serde(default)]
    pub(crate) tools: Vec<Spanned<RawTool>>,
    #[serde(default)]
    pub(crate) secrets: Vec<Spanned<String>>,
    #[serde(default)]
    pub(crate) facts: Vec<Spanned<RawFact>>,
    #[serde(default)]
    pub(crate) hostile: Vec<Spanned<RawHostile>>,
    #[serde(default)]
    pub(crate) verifications: Vec<Spanned<RawHostile>>,
    pub(crate) script: Spanned<Vec<Spanned<RawStep>>>,
    #[serde(default)]
    pub(crate) faults: Vec<Spanned<RawFault>>,
    pub(crate) expect: Option<Spanned<RawExpect>>,
    pub(crate) vary: Option<Spanned<RawVary>>,
}

/// `vary:` — seeded variation of the script across trials.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawVary {
    pub(crate) instances: Option<Spanned<i64>>,
    pub(crate) sizes: Option<Spanned<f64>>,
    pub(crate) repeats: Option<Spanned<f64>>,
}

/// `model:` — either declared numbers or a capability-table reference; which keys may be
/// combined is checked after parsing, so the message can say exactly what is wrong.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawModel {
    pub(crate) context_window: Option<Spanned<i64>>,
    pub(crate) max_output: Option<Spanned<i64>>,
    pub(crate) estimator: Option<Spanned<String>>,
    pub(crate) id: Option<Spanned<String>>,
    pub(crate) capability: Option<Spanned<String>>,
}

/// `context:` — per-scenario overrides of the budget defaults.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawContext {
    pub(crate) reserved_output_tokens: Option<Spanned<i64>>,
    pub(crate) buffer_tokens: Option<Spanned<i64>>,
    pub(crate) recent_tail_tokens: Option<Spanned<i64>>,
    pub(crate) summary_target_tokens: Option<Spanned<i64>>,
    pub(crate) strategy: Option<Spanned<SummaryStrategy>>,
    pub(crate) wrapper: Option<Spanned<bool>>,
}

/// `provider:` — properties of the (fake) provider the scenario is played against.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawProvider {
    pub(crate) native_compaction: Option<Spanned<bool>>,
    pub(crate) token_scale: Option<Spanned<f64>>,
    pub(crate) summary_profile: Option<Spanned<ctxbench_adapters::fake::SummaryProfile>>,
}

/// One `hostile:` or `verifications:` entry: a marked span of text.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawHostile {
    pub(crate) id: Spanned<String>,
    pub(crate) text: Spanned<String>,
}

/// One `tools:` entry: a literal tool (`name`, `description`, `parameters`) or
/// `generate: {…}`; the combination is checked after parsing.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTool {
    pub(crate) name: Option<Spanned<String>>,
    pub(crate) description: Option<Spanned<String>>,
    pub(crate) parameters: Option<Spanned<serde_json::Value>>,
    pub(crate) generate: Option<Spanned<RawGenerate>>,
}

/// `generate:` — a synthetic tool catalogue.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawGenerate {
    pub(crate) count: Spanned<i64>,
    pub(crate) schema_tokens: Spanned<i64>,
    pub(crate) prefix: Option<Spanned<String>>,
    pub(crate) seed: Option<Spanned<u64>>,
}

/// One `facts:` entry.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFact {
    pub(crate) id: Spanned<String>,
    pub(crate) states: Option<Spanned<String>>,
    pub(crate) value: Option<Spanned<String>>,
    pub(crate) about: Option<Spanned<String>>,
    pub(crate) kind: Option<Spanned<FactKind>>,
    #[serde(default)]
    pub(crate) updates: Vec<Spanned<RawUpdate>>,
    pub(crate) question: Spanned<String>,
    pub(crate) expect: Spanned<RawAnswer>,
    #[serde(default)]
    pub(crate) excludes: Vec<Spanned<String>>,
}

/// One `updates:` entry: the superseding sentence, or `{states, value}`.
#[derive(Debug)]
pub(crate) struct RawUpdate {
    pub(crate) states: String,
    pub(crate) value: Option<String>,
}

impl<'de> Deserialize<'de> for RawUpdate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawUpdate;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a sentence, or `{states: \"…\", value: \"…\"}`")
            }
            fn visit_str<E>(self, s: &str) -> Result<RawUpdate, E> {
                Ok(RawUpdate {
                    states: s.to_string(),
                    value: None,
                })
            }
            fn visit_string<E>(self, s: String) -> Result<RawUpdate, E> {
                Ok(RawUpdate {
                    states: s,
                    value: None,
                })
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawUpdate, A::Error> {
                let mut states: Option<String> = None;
                let mut value: Option<String> = None;
                while let Some(k) = map.next_key::<String>()? {
                    let slot = match k.as_str() {
                        "states" => &mut states,
                        "value" => &mut value,
                        other => return Err(de::Error::unknown_field(other, &["states", "value"])),
                    };
                    if slot.is_some() {
                        return Err(de::Error::custom(format!("duplicate field `{k}`")));
                    }
                    *slot = Some(map.next_value::<String>()?);
                }
                match states {
                    Some(states) => Ok(RawUpdate { states, value }),
                    None => Err(de::Error::missing_field("states")),
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// A fact's `expect:` — a single-key mapping.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub(crate) enum RawAnswer {
    Exact(String),
    Contains(String),
    Regex(String),
    OneOf(Vec<String>),
    Abstain(bool),
}

/// One script step. Every kind is a key; exactly one kind per step (plus `steps` with
/// `repeat`) is checked after parsing so the error can name the offending keys.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawStep {
    pub(crate) user: Option<Spanned<String>>,
    pub(crate) assistant: Option<Spanned<RawContent>>,
    pub(crate) tool_calls: Option<Spanned<Vec<Spanned<RawCall>>>>,
    pub(crate) probe: Option<Spanned<Vec<Spanned<String>>>>,
    #[serde(default, deserialize_with = "present")]
    pub(crate) restart: Option<Spanned<Empty>>,
    pub(crate) edit_instructions: Option<Spanned<RawEdit>>,
    #[serde(default, deserialize_with = "present_compact")]
    pub(crate) compact: Option<Spanned<RawCompact>>,
    pub(crate) corrupt_checkpoint: Option<Spanned<Corruption>>,
    pub(crate) repeat: Option<Spanned<i64>>,
    pub(crate) steps: Option<Spanned<Vec<Spanned<RawStep>>>>,
}

impl RawStep {
    /// The step-kind keys present, in declaration order (not `steps`).
    pub(crate) fn kinds(&self) -> Vec<&'static str> {
        let mut k = Vec::new();
        if self.user.is_some() {
            k.push("user");
        }
        if self.assistant.is_some() {
            k.push("assistant");
        }
        if self.tool_calls.is_some() {
            k.push("tool_calls");
        }
        if self.probe.is_some() {
            k.push("probe");
        }
        if self.restart.is_some() {
            k.push("restart");
        }
        if self.edit_instructions.is_some() {
            k.push("edit_instructions");
        }
        if self.compact.is_some() {
            k.push("compact");
        }
        if self.corrupt_checkpoint.is_some() {
            k.push("corrupt_checkpoint");
        }
        if self.repeat.is_some() {
            k.push("repeat");
        }
        k
    }
}

/// Makes `restart:` with a null value count as present (plain `Option` would read it as
/// absent).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Spanned<Empty>>, D::Error> {
    Spanned::<Empty>::deserialize(d).map(Some)
}

/// Makes `compact:` with a null value count as present, like `restart:`.
fn present_compact<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Spanned<RawCompact>>, D::Error> {
    Spanned::<RawCompact>::deserialize(d).map(Some)
}

/// `compact:` — `{}` (or nothing) for a manual compact, `{dry_run: true}` for a preview.
#[derive(Debug, Default)]
pub(crate) struct RawCompact {
    pub(crate) dry_run: bool,
}

impl<'de> Deserialize<'de> for RawCompact {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawCompact;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("`compact: {}` or `compact: {dry_run: true}`")
            }
            fn visit_unit<E>(self) -> Result<RawCompact, E> {
                Ok(RawCompact::default())
            }
            fn visit_none<E>(self) -> Result<RawCompact, E> {
                Ok(RawCompact::default())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawCompact, A::Error> {
                let mut out = RawCompact::default();
                let mut seen = false;
                while let Some(k) = map.next_key::<String>()? {
                    if k != "dry_run" {
                        return Err(de::Error::custom(format!(
                            "unknown field `{k}` of `compact`, expected `compact: {{}}` or `compact: {{dry_run: true}}`"
                        )));
                    }
                    if seen {
                        return Err(de::Error::custom("duplicate field `dry_run`"));
                    }
                    seen = true;
                    out.dry_run = map.next_value::<bool>()?;
                }
                Ok(out)
            }
        }
        d.deserialize_any(V)
    }
}

/// A value that must be empty: `{}` or nothing.
#[derive(Debug)]
pub(crate) struct Empty;

impl<'de> Deserialize<'de> for Empty {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Empty;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an empty mapping `{}`")
            }
            fn visit_unit<E>(self) -> Result<Empty, E> {
                Ok(Empty)
            }
            fn visit_none<E>(self) -> Result<Empty, E> {
                Ok(Empty)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Empty, A::Error> {
                match map.next_key::<String>()? {
                    Some(k) => Err(de::Error::custom(format!(
                        "`restart` takes no options, found `{k}`, expected `restart: {{}}`"
                    ))),
                    None => Ok(Empty),
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// `edit_instructions:` — `{set: text}` or `{append: text}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub(crate) enum RawEdit {
    Set(Spanned<String>),
    Append(Spanned<String>),
}

/// One call of a `tool_calls:` round.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCall {
    pub(crate) call: Spanned<RawCallSpec>,
    pub(crate) result: Spanned<RawContent>,
}

/// `call:` — which tool, with which arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCallSpec {
    pub(crate) name: Spanned<String>,
    pub(crate) args: Option<Spanned<serde_json::Value>>,
}

/// A text, or `{filler: {tokens, kind}}`.
#[derive(Debug)]
pub(crate) enum RawContent {
    Text(String),
    Filler(Spanned<RawFiller>),
}

/// `filler:` — generated text.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFiller {
    pub(crate) tokens: Spanned<i64>,
    #[serde(default)]
    pub(crate) kind: FillerKind,
}

impl<'de> Deserialize<'de> for RawContent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawContent;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a text, or `{filler: {tokens: N, kind: prose|code}}`")
            }
            fn visit_str<E>(self, s: &str) -> Result<RawContent, E> {
                Ok(RawContent::Text(s.to_string()))
            }
            fn visit_string<E>(self, s: String) -> Result<RawContent, E> {
                Ok(RawContent::Text(s))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawContent, A::Error> {
                let Some(key) = map.next_key::<String>()? else {
                    return Err(de::Error::custom(
                        "empty mapping, expected a text, or `{filler: {tokens: N, kind: prose|code}}`",
                    ));
                };
                if key != "filler" {
                    return Err(de::Error::unknown_field(&key, &["filler"]));
                }
                let filler: Spanned<RawFiller> = map.next_value()?;
                if let Some(extra) = map.next_key::<String>()? {
                    return Err(de::Error::custom(format!(
                        "unexpected key `{extra}` next to `filler`, expected `{{filler: {{tokens: N, kind: prose|code}}}}` alone"
                    )));
                }
                Ok(RawContent::Filler(filler))
            }
        }
        d.deserialize_any(V)
    }
}

/// One `faults:` entry. Every shape's keys are optional here; which combination is valid
/// (exactly one of `provider`, `summarizer`, `checkpoint_write`, `summary`, with its own
/// companion key) is checked after parsing so the error can name the offending keys.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFault {
    pub(crate) at_request: Option<Spanned<i64>>,
    pub(crate) provider: Option<Spanned<RawProviderFault>>,
    pub(crate) at_compaction: Option<Spanned<i64>>,
    pub(crate) summarizer: Option<Spanned<RawSummarizerFault>>,
    pub(crate) checkpoint_write: Option<Spanned<RawCheckpointFault>>,
    pub(crate) summary: Option<Spanned<RawSummaryDefect>>,
    pub(crate) fact: Option<Spanned<String>>,
    pub(crate) text: Option<Spanned<String>>,
}

/// What the provider does at the faulty request.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RawProviderFault {
    Overflow,
    OverflowAfterPartialOutput,
}

/// What the summarizer does at the faulty call.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RawSummarizerFault {
    Fail,
}

/// What happens at the faulty checkpoint write.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RawCheckpointFault {
    Crash,
}

/// A defect of the provider's model-generated summaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RawSummaryDefect {
    DropFact,
    InventConstraint,
    CarryApproval,
    Truncate,
}

/// `expect:` — graders and the terminal outcome.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawExpect {
    pub(crate) graders: Option<Spanned<Vec<Spanned<RawGrader>>>>,
    pub(crate) outcome: Option<Spanned<RawOutcomeSpec>>,
}

/// `expect.outcome`: one outcome for every mode, or `{off: …, warn: …, compact: …}`.
#[derive(Debug)]
pub(crate) enum RawOutcomeSpec {
    All(RawOutcome),
    PerMode(Vec<(Mode, RawOutcome)>),
}

impl<'de> Deserialize<'de> for RawOutcomeSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        let is_mode_map = v
            .as_object()
            .is_some_and(|o| !o.is_empty() && o.keys().all(|k| k.parse::<Mode>().is_ok()));
        if !is_mode_map {
            return RawOutcome::deserialize(v)
                .map(RawOutcomeSpec::All)
                .map_err(|e| {
                    de::Error::custom(format!(
                    "{e}; expected `success`, `any`, `{{limit_reached: {{before_provider_call: \
                     true|false}}}}`, or one of them per mode: `{{off: any, warn: any, compact: \
                     success}}`"
                ))
                });
        }
        let mut out = Vec::new();
        if let serde_json::Value::Object(o) = v {
            for (k, val) in o {
                let mode: Mode = k.parse().map_err(de::Error::custom)?;
                let outcome = RawOutcome::deserialize(val)
                    .map_err(|e| de::Error::custom(format!("outcome of `{mode}`: {e}")))?;
                out.push((mode, outcome));
            }
        }
        Ok(RawOutcomeSpec::PerMode(out))
    }
}

/// One expected outcome.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub(crate) enum RawOutcome {
    Success,
    Any,
    LimitReached {
        #[serde(default)]
        before_provider_call: bool,
    },
}

/// One grader: `name`, or `{name, modes?, params?}`.
#[derive(Debug)]
pub(crate) struct RawGrader {
    pub(crate) name: Spanned<String>,
    pub(crate) modes: Option<Vec<Spanned<Mode>>>,
    pub(crate) params: Option<Spanned<serde_json::Value>>,
}

impl<'de> Deserialize<'de> for RawGrader {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        const FIELDS: &[&str] = &["name", "modes", "params"];
        impl<'de> Visitor<'de> for V {
            type Value = RawGrader;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a grader name, or `{name: NAME, modes: [..], params: {..}}`")
            }
            fn visit_str<E>(self, s: &str) -> Result<RawGrader, E> {
                Ok(RawGrader {
                    name: unspanned(s.to_string()),
                    modes: None,
                    params: None,
                })
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawGrader, A::Error> {
                let mut name = None;
                let mut modes = None;
                let mut params = None;
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "name" => name = Some(map.next_value::<Spanned<String>>()?),
                        "modes" => modes = Some(map.next_value::<Vec<Spanned<Mode>>>()?),
                        "params" => params = Some(map.next_value::<Spanned<serde_json::Value>>()?),
                        other => return Err(de::Error::unknown_field(other, FIELDS)),
                    }
                }
                let name = name.ok_or_else(|| de::Error::missing_field("name"))?;
                Ok(RawGrader {
                    name,
                    modes,
                    params,
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// A value with an unknown location; replaced by the enclosing node's location by the
/// validator (a plain-string grader is located by its list entry).
fn unspanned<T>(value: T) -> Spanned<T> {
    Spanned::new(
        value,
        serde_saphyr::Location::UNKNOWN,
        serde_saphyr::Location::UNKNOWN,
    )
}
