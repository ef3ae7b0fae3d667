//! The gates file: its types, parsing and validation (unknown keys, ranges, zero minimums
//! rejected with `file:line:column`).

use std::path::Path;

use ctxbench_harness::Mode;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::error::ReportError;

/// The default gates file (also `reports/gates/default.yaml`).
pub const DEFAULT_GATES: &str = include_str!("../../gates/default.yaml");

/// A parsed gates file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatesFile {
    /// Format version; only 1 exists.
    pub version: u32,
    /// The mode being judged.
    #[serde(default = "default_candidate")]
    pub candidate: Mode,
    /// Modes reported beside the candidate (and compared against by `_vs_<mode>` gates).
    #[serde(default = "default_baselines")]
    pub baselines: Vec<Mode>,
    /// The thresholds; an absent gate is not checked.
    pub gates: GateThresholds,
    /// Where the file came from (a path, or `builtin`).
    #[serde(skip)]
    pub source: String,
    /// Lowercase hex SHA-256 of the file's exact text (compared with the registration).
    #[serde(skip)]
    pub sha256: String,
    /// Evaluate even when these are not the gates registered before the run; every output
    /// is then stamped exploratory (`ctxbench gate --exploratory`). Without it, unregistered
    /// gates cannot give a verdict.
    #[serde(skip)]
    pub exploratory: bool,
}

fn default_candidate() -> Mode {
    Mode::Compact
}

fn default_baselines() -> Vec<Mode> {
    vec![Mode::Off, Mode::Warn]
}

/// The gate thresholds of a gates file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateThresholds {
    /// Failed invariant-grader verdicts in candidate trials.
    #[serde(default)]
    pub safety_invariant_failures: Option<MaxCount>,
    /// Failed `transcript-immutable` verdicts in candidate trials.
    #[serde(default)]
    pub transcript_corruptions: Option<MaxCount>,
    /// Candidate requests sent over budget without a warning.
    #[serde(default)]
    pub unwarned_over_budget_requests: Option<MaxCount>,
    /// Median per-step input-token reduction of the candidate against `off`.
    #[serde(default)]
    pub token_reduction_vs_off: Option<MinReduction>,
    /// Pass-rate drop of the candidate against `warn`, by scenario.
    #[serde(default)]
    pub pass_rate_regression_vs_warn: Option<NonInferiority>,
    /// Completion drop (turns completed ÷ scripted) of the candidate against `warn`, by
    /// scenario.
    #[serde(default)]
    pub completion_regression_vs_warn: Option<NonInferiority>,
    /// The candidate's own pass rate over sessions with a definite expected outcome.
    #[serde(default)]
    pub candidate_pass_rate: Option<PassRateGate>,
    /// Recall of seeded facts in the candidate.
    #[serde(default)]
    pub seeded_recall: Option<RecallGate>,
    /// Recall of every seeded probe (all kinds, all scenarios), pooled and per kind.
    #[serde(default)]
    pub probe_recall: Option<ProbeRecallGate>,
    /// p95 estimator undercount against the safety buffer's share of the window.
    #[serde(default)]
    pub estimator_p95_undercount: Option<MaxShareOfBuffer>,
    /// Errored trials, all modes.
    #[serde(default)]
    pub errored_trials: Option<MaxCount>,
}

/// `{max: N}` on a count.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MaxCount {
    /// Largest acceptable count.
    pub max: u64,
}

/// `{max: x, min_units: n}`: a non-inferiority margin on a per-session difference, and the
/// fewest independent sessions (scenarios, or the instances `vary:` makes of one) it may be
/// judged on.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NonInferiority {
    /// Largest acceptable upper bound of the interval on baseline − candidate.
    pub max: f64,
    /// Fewest eligible sessions (below: `not_evaluated`, saying how many are needed).
    #[serde(default = "default_min_units")]
    pub min_units: u64,
    /// Fewest distinct scenarios among them: `vary:` instances of one scenario are separate
    /// sessions but one design, so a single scenario cannot carry the gate.
    #[serde(default = "default_min_scenarios")]
    pub min_scenarios: u64,
    /// Largest share of the eligible sessions in which the **baseline itself** may miss its
    /// expected outcome (e.g. a `warn` that refuses what it should complete). Such sessions
    /// have no baseline and leave the comparison; above this share the comparison is
    /// `not_evaluated`: a broken baseline cannot make non-inferiority free.
    #[serde(default = "default_max_baseline_misses")]
    pub max_baseline_misses: f64,
}

fn default_min_scenarios() -> u64 {
    DEFAULT_MIN_SCENARIOS
}

fn default_max_baseline_misses() -> f64 {
    DEFAULT_MAX_BASELINE_MISSES
}

/// Fewest distinct scenarios a statistical gate is judged on, by default.
pub const DEFAULT_MIN_SCENARIOS: u64 = 2;
/// Largest share of eligible sessions whose baseline may miss its expected outcome, by
/// default.
pub const DEFAULT_MAX_BASELINE_MISSES: f64 = 0.1;
/// Fewest probes of one kind for `probe_recall` to gate that kind on its own, by default.
pub const DEFAULT_MIN_KIND_PROBES: u64 = 20;

fn default_min_units() -> u64 {
    DEFAULT_MIN_UNITS
}

/// Fewest independent sessions a per-session comparison is judged on, by default.
pub const DEFAULT_MIN_UNITS: u64 = 5;
/// Fewest session clusters the token-reduction interval is computed on, by default.
pub const DEFAULT_MIN_CLUSTERS: u64 = 3;
/// Fewest probes the recall gate is judged on, by default.
pub const DEFAULT_MIN_PROBES: u64 = 20;

/// `{min: x, tag: t, kinds: [..], min_probes: n}`: recall of seeded facts, judged on the lower
/// Wilson bound over the probes of `kinds` in scenarios carrying `tag`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecallGate {
    /// Smallest acceptable lower Wilson 95% bound.
    pub min: f64,
    /// Only scenarios carrying this tag count (seed 000: "in long sessions").
    #[serde(default)]
    pub tag: Option<String>,
    /// Fact kinds that count (default: durable constraints); the others are reported beside.
    #[serde(default = "default_recall_kinds")]
    pub kinds: Vec<String>,
    /// Fewest probes (below: `not_evaluated`).
    #[serde(default = "default_min_probes")]
    pub min_probes: u64,
    /// Fewest distinct scenarios contributing probes (below: `not_evaluated`).
    #[serde(default = "default_min_scenarios")]
    pub min_scenarios: u64,
}

/// `{min, min_per_kind, min_kind_probes, min_probes, min_scenarios}`: recall of **every**
/// seeded probe, of every kind, in every scenario, counted once per session (a scenario's
/// copies agree or the probe counts as missed). Judged on the lower Wilson 95% bound of the
/// pool ≥ `min` **and** of every kind with at least `min_kind_probes` probes ≥
/// `min_per_kind` (a pool dominated by one kind would hide the loss of another).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeRecallGate {
    /// Smallest acceptable lower Wilson 95% bound of the pooled recall.
    pub min: f64,
    /// Smallest acceptable lower Wilson 95% bound of each gated kind.
    pub min_per_kind: f64,
    /// Fewest probes a kind needs to be gated on its own (fewer: reported, in the pool only).
    #[serde(default = "default_min_kind_probes")]
    pub min_kind_probes: u64,
    /// Fewest probes in the pool (below: `not_evaluated`).
    #[serde(default = "default_min_probes")]
    pub min_probes: u64,
    /// Fewest distinct scenarios contributing probes (below: `not_evaluated`).
    #[serde(default = "default_min_scenarios")]
    pub min_scenarios: u64,
}

fn default_min_kind_probes() -> u64 {
    DEFAULT_MIN_KIND_PROBES
}

/// `{min, min_units, min_scenarios}`: the candidate's own pass rate over every session
/// whose expected outcome in the candidate mode is definite (not `any`), judged on the lower
/// Wilson 95% bound — an absolute bar that a weak baseline cannot lower.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PassRateGate {
    /// Smallest acceptable lower Wilson 95% bound.
    pub min: f64,
    /// Fewest sessions (below: `not_evaluated`).
    #[serde(default = "default_min_units")]
    pub min_units: u64,
    /// Fewest distinct scenarios (below: `not_evaluated`).
    #[serde(default = "default_min_scenarios")]
    pub min_scenarios: u64,
}

fn default_recall_kinds() -> Vec<String> {
    vec!["constraint".to_string()]
}

fn default_min_probes() -> u64 {
    DEFAULT_MIN_PROBES
}

/// The fact kinds a recall gate may name.
pub const FACT_KINDS: &[&str] = &["constraint", "decision", "task", "detail", "abstention"];

/// `{min: x, tag: t, min_clusters: n}`: a reduction share, optionally restricted to
/// scenarios with a tag, judged on the lower bound of its interval.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MinReduction {
    /// Smallest acceptable lower bound of the median reduction's interval (0.30 = 30%
    /// fewer input tokens).
    pub min: f64,
    /// Only scenarios carrying this tag are paired.
    #[serde(default)]
    pub tag: Option<String>,
    /// Fewest scenarios (the interval's independent clusters); below: `not_evaluated`.
    #[serde(default = "default_min_clusters")]
    pub min_clusters: u64,
    /// Fewest distinct scenarios among the clusters (below: `not_evaluated`).
    #[serde(default = "default_min_scenarios")]
    pub min_scenarios: u64,
}

fn default_min_clusters() -> u64 {
    DEFAULT_MIN_CLUSTERS
}

/// `{max_share_of_buffer: k, exclude_tags: [..]}`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MaxShareOfBuffer {
    /// Multiple of the buffer's share of the window the p95 undercount may reach.
    pub max_share_of_buffer: f64,
    /// Scenarios carrying any of these tags are left out (default
    /// [`DEFAULT_UNDERCOUNT_EXCLUDED_TAGS`]: scenarios that undercount on purpose, e.g. a
    /// provider whose tokenizer the estimator does not match). `[]` keeps every scenario.
    #[serde(default = "default_undercount_excluded_tags")]
    pub exclude_tags: Vec<String>,
}

/// Tags the `estimator_p95_undercount` gate leaves out unless `exclude_tags` says otherwise:
/// none — every scenario is judged on the estimate the system planned with (calibrated).
pub const DEFAULT_UNDERCOUNT_EXCLUDED_TAGS: &[&str] = &[];

fn default_undercount_excluded_tags() -> Vec<String> {
    DEFAULT_UNDERCOUNT_EXCLUDED_TAGS
        .iter()
        .map(|s| s.to_string())
        .collect()
}

impl GatesFile {
    /// Parses and validates gates-file text. `source` names it in errors and reports; every
    /// error carries `line:column` (the parser's, or the offending key's).
    pub fn parse(text: &str, source: &str) -> Result<GatesFile, ReportError> {
        let err = |at: Option<(usize, usize)>, message: String| ReportError::Gates {
            source_name: match at {
                Some((line, col)) => format!("{source}:{line}:{col}"),
                None => source.to_string(),
            },
            message,
        };
        let mut file: GatesFile = serde_saphyr::from_str(text).map_err(|e| {
            let at = e
                .location()
                .map(|l| (l.line() as usize, l.column() as usize));
            err(at, e.to_string())
        })?;
        file.source = source.to_string();
        file.sha256 = sha256_hex(text);
        file.validate()
            .map_err(|(path, message)| err(locate(text, &path), message))?;
        Ok(file)
    }

    /// Validation; an error names the key path (e.g. `["gates", "seeded_recall", "min"]`).
    fn validate(&self) -> Result<(), (Vec<&'static str>, String)> {
        if self.version != 1 {
            return Err((
                vec!["version"],
                format!(
                    "version: unsupported gates file version {} (this ctxbench reads version 1)",
                    self.version
                ),
            ));
        }
        if self.baselines.contains(&self.candidate) {
            return Err((
                vec!["baselines"],
                format!(
                    "baselines: the candidate `{}` cannot also be a baseline",
                    self.candidate
                ),
            ));
        }
        let g = &self.gates;
        let needs = |gate: &'static str, mode: Mode| {
            if self.baselines.contains(&mode) {
                Ok(())
            } else {
                Err((
                    vec!["gates", gate],
                    format!(
                        "gates.{gate}: compares against `{mode}`, which is not among the \
                         baselines (hint: add `{mode}` to `baselines` or remove the gate)"
                    ),
                ))
            }
        };
        let range = |gate: &'static str, field: &'static str, v: f64, lo: f64, hi: f64| {
            if v.is_finite() && (lo..=hi).contains(&v) {
                Ok(())
            } else {
                Err((
                    vec!["gates", gate, field],
                    format!("gates.{gate}.{field}: {v} is out of range (expected {lo} to {hi})"),
                ))
            }
        };
        let at_least_one = |gate: &'static str, field: &'static str, n: u64| {
            if n >= 1 {
                Ok(())
            } else {
                Err((
                    vec!["gates", gate, field],
                    format!("gates.{gate}.{field}: 0 is out of range (expected at least 1)"),
                ))
            }
        };
        let tag = |gate: &'static str, t: &Option<String>| {
            if t.as_deref().is_some_and(|s| s.trim().is_empty()) {
                Err((
                    vec!["gates", gate, "tag"],
                    format!("gates.{gate}.tag: empty tag"),
                ))
            } else {
                Ok(())
            }
        };
        if let Some(t) = &g.token_reduction_vs_off {
            needs("token_reduction_vs_off", Mode::Off)?;
            range("token_reduction_vs_off", "min", t.min, -1.0, 1.0)?;
            tag("token_reduction_vs_off", &t.tag)?;
            at_least_one("token_reduction_vs_off", "min_clusters", t.min_clusters)?;
            at_least_one("token_reduction_vs_off", "min_scenarios", t.min_scenarios)?;
        }
        for (name, t) in [
            (
                "pass_rate_regression_vs_warn",
                g.pass_rate_regression_vs_warn,
            ),
            (
                "completion_regression_vs_warn",
                g.completion_regression_vs_warn,
            ),
        ] {
            if let Some(t) = t {
                needs(name, Mode::Warn)?;
                range(name, "max", t.max, 0.0, 1.0)?;
                at_least_one(name, "min_units", t.min_units)?;
                at_least_one(name, "min_scenarios", t.min_scenarios)?;
                range(name, "max_baseline_misses", t.max_baseline_misses, 0.0, 1.0)?;
            }
        }
        if let Some(t) = &g.seeded_recall {
            range("seeded_recall", "min", t.min, 0.0, 1.0)?;
            tag("seeded_recall", &t.tag)?;
            at_least_one("seeded_recall", "min_probes", t.min_probes)?;
            at_least_one("seeded_recall", "min_scenarios", t.min_scenarios)?;
            if t.kinds.is_empty() {
                return Err((
                    vec!["gates", "seeded_recall", "kinds"],
                    "gates.seeded_recall.kinds: empty (expected at least one kind)".into(),
                ));
            }
            if let Some(k) = t.kinds.iter().find(|k| !FACT_KINDS.contains(&k.as_str())) {
                return Err((
                    vec!["gates", "seeded_recall", "kinds"],
                    format!(
                        "gates.seeded_recall.kinds: unknown kind `{k}` (expected one of {})",
                        FACT_KINDS.join(", ")
                    ),
                ));
            }
        }
        if let Some(t) = &g.candidate_pass_rate {
            range("candidate_pass_rate", "min", t.min, 0.0, 1.0)?;
            at_least_one("candidate_pass_rate", "min_units", t.min_units)?;
            at_least_one("candidate_pass_rate", "min_scenarios", t.min_scenarios)?;
        }
        if let Some(t) = &g.probe_recall {
            range("probe_recall", "min", t.min, 0.0, 1.0)?;
            range("probe_recall", "min_per_kind", t.min_per_kind, 0.0, 1.0)?;
            at_least_one("probe_recall", "min_kind_probes", t.min_kind_probes)?;
            at_least_one("probe_recall", "min_probes", t.min_probes)?;
            at_least_one("probe_recall", "min_scenarios", t.min_scenarios)?;
        }
        if let Some(t) = &g.estimator_p95_undercount {
            range(
                "estimator_p95_undercount",
                "max_share_of_buffer",
                t.max_share_of_buffer,
                0.0,
                1000.0,
            )?;
            if t.exclude_tags.iter().any(|s| s.trim().is_empty()) {
                return Err((
                    vec!["gates", "estimator_p95_undercount", "exclude_tags"],
                    "gates.estimator_p95_undercount.exclude_tags: empty tag".into(),
                ));
            }
        }
        let configured = [
            g.safety_invariant_failures.is_some(),
            g.transcript_corruptions.is_some(),
            g.unwarned_over_budget_requests.is_some(),
            g.token_reduction_vs_off.is_some(),
            g.pass_rate_regression_vs_warn.is_some(),
            g.completion_regression_vs_warn.is_some(),
            g.candidate_pass_rate.is_some(),
            g.seeded_recall.is_some(),
            g.probe_recall.is_some(),
            g.estimator_p95_undercount.is_some(),
            g.errored_trials.is_some(),
        ];
        if !configured.contains(&true) {
            return Err((
                vec!["gates"],
                "gates: no gate configured (an empty gates file would always pass)".into(),
            ));
        }
        Ok(())
    }
}

/// `(line, column)` (1-based) of the last key of `path` in `text`, found in order: each key
/// is searched after the previous one (good enough for a gates file's shallow YAML).
fn locate(text: &str, path: &[&str]) -> Option<(usize, usize)> {
    let mut from = 0;
    let mut at = None;
    for key in path {
        let pattern = format!("{key}:");
        let rel = text[from..]
            .match_indices(&pattern)
            .map(|(i, _)| from + i)
            .find(|&i| {
                // A whole key: preceded by the start, whitespace, `{` or `,`.
                text[..i]
                    .chars()
                    .next_back()
                    .is_none_or(|c| c.is_whitespace() || c == '{' || c == ',')
            })?;
        at = Some(rel);
        from = rel + pattern.len();
    }
    let i = at?;
    let line = text[..i].matches('\n').count() + 1;
    let col = i - text[..i].rfind('\n').map_or(0, |n| n + 1) + 1;
    Some((line, col))
}

/// Loads a gates file from `path`, or the built-in [`DEFAULT_GATES`] when `None`.
pub fn load_gates(path: Option<&Path>) -> Result<GatesFile, ReportError> {
    match path {
        None => GatesFile::parse(DEFAULT_GATES, "builtin"),
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|e| ReportError::io(p, e))?;
            GatesFile::parse(&text, &p.display().to_string())
        }
    }
}

/// Lowercase hex SHA-256 of a text, as registered in the manifest.
pub fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}
