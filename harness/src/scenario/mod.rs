//! Scenario files: loading, validation and per-trial instantiation.
//!
//! A scenario is a hand-written YAML file (format v1, reference in
//! `docs/scenario-format.md`). This module owns the whole path from bytes to a trial:
//!
//! 1. **Load** ([`load_str`], [`load_file`], [`load_suite`]): size cap, strict parse with
//!    serde-saphyr under fixed resource limits (unknown keys are errors everywhere), then
//!    every cross-check — undefined facts, unknown tools and graders, budgets that cannot
//!    work, turn grouping, expansion bounds, fault shapes, summary defects that could never
//!    apply, checkpoint corruption with no restart to notice it. All problems of a file are reported together,
//!    each with file, line, column, what was expected and the source line ([`Diagnostics`]).
//! 2. **Instantiate** ([`Scenario::instantiate`]): expand repeat blocks, substitute
//!    placeholders, generate seeded filler, group steps into turns, and build the fake
//!    provider's script. Deterministic: same scenario + seed → byte-identical [`Instance`].
//!
//! What it must not do: run anything, talk to a provider, or hand facts, probes,
//! expectations or secrets to the engine. Those flow only into [`Instance::fake`] (the fake
//! provider) and the [`Scenario`] fields graders read; the engine sees [`Step`]s, whose
//! probe turns carry only the question text a user would type.
//!
//! Resource limits (documented in `docs/scenario-format.md` §Limits) bound what a hostile
//! file can cost: [`MAX_FILE_BYTES`] before parsing; nesting, node, alias and document
//! limits during parsing ([`yaml_options`]); [`MAX_EXPANDED_STEPS`],
//! [`MAX_TOTAL_FILLER_TOKENS`] and catalogue limits before anything is generated.

mod compiled;
mod diagnostics;
mod fits;
mod generate;
mod instantiate;
pub(crate) mod model;
mod raw;
mod template;
mod validate;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

pub use compiled::*;
pub use diagnostics::{Diagnostic, Diagnostics, Snippet};

use diagnostics::Reporter;
use raw::RawScenario;

/// The only format version this build reads.
pub const SUPPORTED_VERSION: i64 = 1;

/// Largest scenario file accepted, checked before parsing (8 MiB). Real scenarios are a few
/// kilobytes — long sessions come from `repeat` and filler, not from long files.
pub const MAX_FILE_BYTES: usize = 8 * 1024 * 1024;

/// Most script steps after expanding every `repeat` block.
pub const MAX_EXPANDED_STEPS: u64 = 100_000;

/// Longest id (scenario, fact, tag, hostile span, verification): ids are repeated in every
/// stored row, so a long one multiplies the size of the run.
pub const MAX_ID_CHARS: usize = 64;

/// Longest fact text (statement, update, value, about, question), in characters.
pub const MAX_FACT_TEXT_CHARS: usize = 2_000;

/// Longest title, in characters.
pub const MAX_TITLE_CHARS: usize = 200;

/// Most literal text (templates with their placeholders filled, excluding filler) one trial's
/// script may expand to, in bytes: repeats multiply it.
pub const MAX_TOTAL_TEXT_BYTES: u64 = 32 * 1024 * 1024;

/// Most trials a scenario's `vary: {instances: N}` may ask for.
pub const MAX_VARY_INSTANCES: i64 = 64;

/// Largest relative change `vary: {sizes: x, repeats: x}` may ask for.
pub const MAX_VARY_SPREAD: f64 = 0.5;

/// Largest single filler (`{filler: {tokens: N}}` or `{filler:N}`).
pub const MAX_FILLER_TOKENS: u64 = 1_000_000;

/// Most filler tokens one trial may generate (about 80 MB of text).
pub const MAX_TOTAL_FILLER_TOKENS: u64 = 20_000_000;

/// Most tools one `generate` block may create.
pub const MAX_GENERATED_TOOLS: u64 = 10_000;

/// Largest `schema_tokens` of a generated tool.
pub const MAX_SCHEMA_TOKENS: u64 = 10_000;

/// Most tokens of generated tool definitions per file (`count × schema_tokens`, summed).
pub const MAX_CATALOGUE_TOKENS: u64 = 2_000_000;

/// Every grader name a scenario may list; keep in step with `ctxbench-graders`.
pub const KNOWN_GRADERS: &[&str] = &[
    "recall",
    "budget",
    "limit-honest",
    "transcript-immutable",
    "tool-pairs",
    "no-authority-in-checkpoint",
    "instructions-outrank-history",
    "instruction-hash-frozen",
    "overflow-no-duplicate",
    "no-thrash",
    "typed-reason",
    "secrets-redacted",
    "checkpoint-reuse-valid",
    "recap-not-empty",
    "archive-refs",
    "no-invented-constraints",
    "summary-request-fits",
    "verification-historical",
    "opaque-items-hashed",
    "script-adherence",
];

/// Graders applied when `expect.graders` is omitted.
pub const DEFAULT_GRADERS: &[&str] = &["recall", "budget", "limit-honest"];

/// First line of every probe turn; the questions follow as `N. question` lines.
pub const PROBE_LEAD_IN: &str =
    "Answer each question from what you know so far; say \"unknown\" if you don't know:";

/// The parser configuration: strict and bounded. Limits are far above any real scenario
/// and far below what would cost noticeable time or memory:
///
/// * one document; at most 48 levels of nesting (block or flow) — a 5,000-deep file is
///   rejected at level 49 without recursing further (a real scenario needs about 12);
/// * at most 250,000 nodes and 1,000,000 parser events;
/// * at most 1,000 anchors and 1,000 aliases, 1,000 expansions per anchor and 20,000
///   replayed events in all, nested at most 16 deep — a "billion laughs" alias bomb stops
///   after 20,000 replayed events instead of growing exponentially;
/// * duplicate keys are errors (serde-saphyr's default) and YAML 1.1 booleans such as
///   `yes`/`on` are not booleans, so `modes: [off]` means the mode `off`.
pub fn yaml_options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_reader_input_bytes: Some(MAX_FILE_BYTES),
            max_documents: 1,
            max_depth: 48,
            flow_nesting_limit: 48,
            max_nodes: 250_000,
            max_events: 1_000_000,
            max_anchors: 1_000,
            max_aliases: 1_000,
            max_merge_keys: 1_000,
            max_total_scalar_bytes: MAX_FILE_BYTES,
        },
        alias_limits: serde_saphyr::alias_limits! {
            max_total_replayed_events: 20_000,
            max_replay_stack_depth: 16,
            max_alias_expansions_per_anchor: 1_000,
        },
        strict_booleans: true,
        with_snippet: false,
    }
}

/// The counter synthetic catalogues and instruction filler are sized with at load time:
/// the fake provider's true tokenizer, so "120 tokens per tool" means 120 tokens to the
/// provider that enforces the window. Fixed (not a parameter) so a catalogue is the same in
/// every trial, mode and run.
fn load_counter(text: &str) -> u64 {
    ctxbench_adapters::fake::FakeTokenizer::new().count_text(text)
}

/// Loads one scenario from text. `source_name` names it in diagnostics and
/// [`Scenario::source`] (a path, or `builtin:<name>`).
pub fn load_str(source_name: &str, text: &str) -> Result<Scenario, Diagnostics> {
    load_compiled(source_name, text).map(|c| c.scenario)
}

/// Loads one scenario file (at most [`MAX_FILE_BYTES`], UTF-8).
pub fn load_file(path: &Path) -> Result<Scenario, Diagnostics> {
    let name = path.display().to_string();
    let text = read_capped(path, &name)?;
    load_str(&name, &text)
}

/// Loads a suite: one file, or every `*.yaml` / `*.yml` file directly in a directory
/// (sorted by file name; subdirectories and dot-files are skipped). Problems of every file
/// are collected; a scenario id used by two files is an error. Nothing is returned unless
/// the whole suite is valid.
pub fn load_suite(path: &Path) -> Result<Vec<Scenario>, Diagnostics> {
    let name = path.display().to_string();
    let meta =
        std::fs::metadata(path).map_err(|e| file_error(&name, format!("cannot read: {e}")))?;
    if !meta.is_dir() {
        return load_file(path).map(|s| vec![s]);
    }
    let entries = std::fs::read_dir(path)
        .map_err(|e| file_error(&name, format!("cannot list the directory: {e}")))?;
    let mut files = Vec::new();
    let mut problems = Vec::new();
    for entry in entries {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                problems.push(file_error(&name, format!("cannot list the directory: {e}")));
                continue;
            }
        };
        let file_name = entry.file_name().to_string_lossy().into_owned();
        let is_yaml = file_name.ends_with(".yaml") || file_name.ends_with(".yml");
        if !is_yaml || file_name.starts_with('.') {
            continue;
        }
        let p = entry.path();
        if p.is_file() {
            files.push((file_name, p));
        }
    }
    files.sort();
    if files.is_empty() && problems.is_empty() {
        return Err(file_error(
            &name,
            "no scenario files (`*.yaml` or `*.yml`) in this directory".to_string(),
        )
        .into());
    }
    let mut out = Vec::new();
    let mut diags: Vec<Diagnostic> = problems;
    let mut ids: HashMap<String, String> = HashMap::new();
    for (_, p) in &files {
        let file = p.display().to_string();
        let text = match read_capped(p, &file) {
            Ok(t) => t,
            Err(d) => {
                diags.extend(d);
                continue;
            }
        };
        match load_compiled(&file, &text) {
            Ok(c) => {
                if let Some(first) = ids.get(&c.scenario.id) {
                    let rep = Reporter::new(&file, &text);
                    diags.push(rep.make(
                        c.id_at,
                        format!(
                            "duplicate scenario id `{}` (also used by {first})",
                            c.scenario.id
                        ),
                        Some("an id that is unique in the suite".to_string()),
                    ));
                    continue;
                }
                ids.insert(c.scenario.id.clone(), file.clone());
                out.push(c.scenario);
            }
            Err(d) => diags.extend(d),
        }
    }
    if diags.is_empty() {
        Ok(out)
    } else {
        Err(Diagnostics(diags))
    }
}

fn file_error(file: &str, message: String) -> Diagnostic {
    Diagnostic {
        file: file.to_string(),
        line: None,
        column: None,
        message,
        expected: None,
        snippet: None,
    }
}

/// Reads at most [`MAX_FILE_BYTES`] + 1 bytes, so a huge (or endless) file is rejected
/// without being read into memory; then requires UTF-8, locating the first bad byte.
fn read_capped(path: &Path, name: &str) -> Result<String, Diagnostics> {
    let file =
        std::fs::File::open(path).map_err(|e| file_error(name, format!("cannot read: {e}")))?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| file_error(name, format!("cannot read: {e}")))?;
    if bytes.len() > MAX_FILE_BYTES {
        return Err(too_large(name).into());
    }
    match String::from_utf8(bytes) {
        Ok(t) => Ok(t),
        Err(e) => {
            let good = &e.as_bytes()[..e.utf8_error().valid_up_to()];
            // Valid by construction: the prefix up to `valid_up_to`.
            let prefix = String::from_utf8_lossy(good);
            let line = prefix.matches('\n').count() + 1;
            let column = prefix
                .rsplit('\n')
                .next()
                .map(|l| l.chars().count())
                .unwrap_or(0)
                + 1;
            let rep = Reporter::new(name, &prefix);
            Err(rep
                .at_line(
                    Some(line),
                    Some(column),
                    "the file is not valid UTF-8 (binary data?)".to_string(),
                    Some("a UTF-8 text file".to_string()),
                )
                .into())
        }
    }
}

fn too_large(name: &str) -> Diagnostic {
    Diagnostic {
        expected: Some(format!(
            "a file of at most {MAX_FILE_BYTES} bytes (8 MiB); long sessions come from `repeat` and `filler`, not long files"
        )),
        ..file_error(name, "the file is too large".to_string())
    }
}

/// A file with nothing but whitespace and comments.
fn is_blank(text: &str) -> bool {
    text.trim_start_matches('\u{FEFF}')
        .lines()
        .map(str::trim)
        .all(|l| l.is_empty() || l.starts_with('#') || l == "---" || l == "...")
}

/// Stack for parsing and validating one file. serde's recursive descent costs tens of
/// kilobytes per nesting level in debug builds, so a file at the nesting limit would
/// overflow a small (e.g. 2 MiB test) thread stack. Parsing on a dedicated thread with this
/// much stack makes the depth limit, not the caller's stack size, the bound. Only touched
/// pages are committed, so the reservation costs nothing for ordinary files.
const PARSE_STACK_BYTES: usize = 64 * 1024 * 1024;

fn load_compiled(source_name: &str, text: &str) -> Result<validate::Compiled, Diagnostics> {
    if text.len() > MAX_FILE_BYTES {
        return Err(too_large(source_name).into());
    }
    let crashed = || {
        file_error(
            source_name,
            "internal error while reading the scenario (please report this file)".to_string(),
        )
    };
    std::thread::scope(|scope| {
        let worker = std::thread::Builder::new()
            .name("scenario-parse".to_string())
            .stack_size(PARSE_STACK_BYTES)
            .spawn_scoped(scope, || parse_and_check(source_name, text));
        match worker {
            Ok(handle) => handle.join().unwrap_or_else(|_| Err(crashed().into())),
            Err(e) => Err(file_error(
                source_name,
                format!("cannot start the scenario parser thread: {e}"),
            )
            .into()),
        }
    })
}

fn parse_and_check(source_name: &str, text: &str) -> Result<validate::Compiled, Diagnostics> {
    let mut rep = Reporter::new(source_name, text);
    if is_blank(text) {
        rep.error(
            None,
            "the file is empty",
            Some("a scenario mapping with at least `id`, `model` and `script`".to_string()),
        );
        return Err(Diagnostics(rep.finish()));
    }
    let raw: RawScenario = match serde_saphyr::from_str_with_options(text, yaml_options()) {
        Ok(r) => r,
        Err(e) => {
            rep.yaml_error(&e);
            return Err(Diagnostics(rep.finish()));
        }
    };
    let compiled = validate::compile(source_name, text, raw, &mut rep, &load_counter);
    if let Some(c) = &compiled {
        if rep.is_clean() {
            check_fixed_context_fits(c, &mut rep);
        }
        if rep.is_clean() {
            fits::check_uncompacted_success_fits(c, &mut rep);
        }
    }
    match compiled {
        Some(c) if rep.is_clean() => Ok(c),
        _ => {
            let d = rep.finish();
            if d.is_empty() {
                // Unreachable by construction (compile returns None only after recording);
                // kept so a bug shows up as a diagnostic, never as a panic.
                Err(file_error(source_name, "the scenario is invalid".to_string()).into())
            } else {
                Err(Diagnostics(d))
            }
        }
    }
}

/// QUALITY.md: a budget that cannot hold the mandatory context *by construction* is a
/// scenario error — unless the scenario exists to prove exactly that stop
/// (`outcome: {limit_reached: …}`). "By construction" means the fixed part: instructions,
/// tool schemas and request framing, estimated with the scenario's own estimator against
/// `window − max(requested output, buffer)`.
fn check_fixed_context_fits(c: &validate::Compiled, rep: &mut Reporter<'_>) {
    use ctxbench_adapters::estimate::RequestEstimator;
    use ctxbench_adapters::Message;
    let s = &c.scenario;
    let proves_the_stop = std::iter::once(&s.expect.outcome)
        .chain(s.expect.by_mode.iter().map(|(_, o)| o))
        .any(|o| matches!(o, ExpectedOutcome::LimitReached { .. }));
    if proves_the_stop {
        return;
    }
    let est = RequestEstimator::new(s.model.estimator);
    let instructions = if s.instructions.is_empty() {
        0
    } else {
        est.message_tokens_uncached(&Message::system(s.instructions.clone()))
    };
    let fixed = instructions + est.tools_tokens(&s.tools) + RequestEstimator::request_priming();
    let requested_output = s
        .context
        .reserved_output_tokens
        .min(s.model.max_output_tokens);
    let available = ctxbench_sut::budget::available_input(
        s.model.context_window,
        requested_output,
        s.context.buffer_tokens,
    );
    if fixed > available {
        rep.error(
            c.id_at,
            format!(
                "the mandatory context cannot fit by construction: instructions ({instructions}) + \
                 tool schemas + framing need {fixed} tokens but only {available} are available \
                 (window {} − max(requested output {requested_output}, buffer {}))",
                s.model.context_window, s.context.buffer_tokens
            ),
            Some(
                "a larger `model.context_window`, fewer or smaller tools, or \
                 `expect: {outcome: {limit_reached: {before_provider_call: true}}}` if the \
                 stop is the point of the scenario"
                    .to_string(),
            ),
        );
    }
}
