//! Reading run storage (see `ctxbench_harness::storage::schema` for the contract).
//!
//! A run directory holds `manifest.json`, `trials.jsonl`, `requests.jsonl` and usually
//! `events.jsonl`. The report uses only the compaction-related events of the latter
//! ([`REPORT_EVENT_KINDS`]); a run without `events.jsonl` (older runs, or modes that emit
//! none of them) simply has no such events, which is not an error.
//! The JSONL files are append-only and may end in a **torn last line** when the writer was
//! killed mid-append: a final line without its newline, or a final line that is not even
//! syntactically complete JSON. Such a line is skipped and counted in
//! [`RunData::torn_lines`] — it belongs to a trial whose `trials.jsonl` row was never
//! written, and `ctxbench run --resume` re-runs it. Anything else that does not parse is
//! corruption and an error naming the file and line.
//!
//! Because a trial's rows are appended together with its trial row last, a request row
//! whose trial has no trial row is an *orphan* of a killed trial: it is dropped and counted
//! ([`RunData::orphan_requests`]). Every row also carries the run *segment* that wrote it
//! (0, then n for the n-th `--resume`); rows from another segment than their trial row's
//! are orphans of a killed attempt and dropped the same way. Within a segment, the same
//! `(trial, seq, step, round, attempt)` twice keeps the later copy, counted in
//! [`RunData::duplicate_requests`]. Events are treated the same way, keyed by
//! `(trial, seq)` ([`RunData::orphan_events`], [`RunData::duplicate_events`]).

//!
//! **Memory.** Request rows are the bulk of a run (a million rows is a normal long-session
//! suite), so they are never held as row structs: each line is parsed into a borrowed view
//! and appended to column vectors, repeated text interned to `u32` codes
//! ([`RunData::requests`] is then one polars frame whose text columns are gathered from
//! small dictionaries, i.e. 16-byte views sharing one buffer). Sorting and the removal of
//! superseded copies work on a permutation of row numbers, with no hash map per row.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use ctxbench_harness::storage::schema::{
    EventRow, Manifest, ManifestScenario, TrialRow, EVENT_SCHEMA, MANIFEST_SCHEMA, REQUEST_SCHEMA,
    TRIAL_SCHEMA,
};
use ctxbench_harness::sut::BudgetBreakdown;
use ctxbench_harness::Mode;
use polars::prelude::*;
use serde::de::{DeserializeOwned, IgnoredAny};
use serde::Deserialize;

use crate::error::ReportError;

/// One run directory that was read.
#[derive(Debug, Clone)]
pub struct RunSource {
    /// The directory.
    pub dir: PathBuf,
    /// Its manifest.
    pub manifest: Manifest,
    /// Torn last lines skipped in this directory's JSONL files.
    pub torn_lines: usize,
    /// Whether `events.jsonl` exists (a run without it has no events).
    pub has_events: bool,
}

/// Event kinds the report keeps from `events.jsonl` (all others — budgets, usage, warnings,
/// provider errors — are already summarized in the request and trial rows, and are the
/// bulk of the file, so they are not retained).
pub const REPORT_EVENT_KINDS: &[&str] = &[
    "context.compaction.started",
    "context.compaction.completed",
    "context.compaction.unchanged",
    "context.compaction.failed",
    "context.compaction.preview",
    "context.checkpoint.rejected",
    "context.checkpoint.reused",
    "context.tool_output.projected",
    "context.limit_reached",
];

/// Everything the report reads from one or more run directories (shards), merged and in
/// a deterministic order. Request rows are kept as one columnar frame without their
/// `message_hashes` (unused by the report, and the bulk of a long session's rows).
///
/// Trials are sorted by `(scenario, mode, trial, trial_id)`; requests by their trial in
/// that order, then `(step, round, attempt, seq)` — chronological within a trial, and
/// equal to `seq` order for sent requests while keeping preflight stops (`seq = 0`) at
/// their step.
#[derive(Debug, Clone)]
pub struct RunData {
    /// The run directories, in the order given.
    pub runs: Vec<RunSource>,
    /// Every trial row, sorted.
    pub trials: Vec<TrialRow>,
    /// Every request row of a present trial, sorted: the columns of `requests.csv`
    /// ([`crate::frames::REQUEST_COLUMNS`]) except the derived `abs_error` and `rel_error`,
    /// which [`crate::frames::requests_frame`] adds.
    pub requests: DataFrame,
    /// Events of a present trial whose kind is in [`REPORT_EVENT_KINDS`], sorted by their
    /// trial (in trial order), then `seq`.
    pub events: Vec<EventRow>,
    /// Torn last lines skipped over all files.
    pub torn_lines: usize,
    /// Request rows dropped because their trial has no trial row (killed trial).
    pub orphan_requests: usize,
    /// Request rows dropped because a later copy of the same request exists (resume).
    pub duplicate_requests: usize,
    /// Retained-kind events dropped because their trial has no trial row (killed trial).
    pub orphan_events: usize,
    /// Retained-kind events dropped because a later copy with the same `(trial, seq)`
    /// exists (resume).
    pub duplicate_events: usize,
    /// trial_id → index into `runs`.
    trial_run: HashMap<String, usize>,
}

impl RunData {
    /// The first run's manifest (shards agree on the fields the report uses; see
    /// [`load_runs`]).
    pub fn manifest(&self) -> &Manifest {
        // `load_runs` refuses an empty list, so there is always a first run.
        &self.runs[0].manifest
    }

    /// The system under test of the run (shards agree on it; see [`load_runs`]):
    /// `reference`, or `exec:COMMAND ARGS`.
    pub fn sut(&self) -> &str {
        sut_of(self.manifest())
    }

    /// The run directory a trial was read from.
    pub fn run_of(&self, trial_id: &str) -> Option<&RunSource> {
        self.trial_run.get(trial_id).map(|&i| &self.runs[i])
    }

    /// The run id of the run a trial was read from (empty if unknown).
    pub fn run_id_of(&self, trial_id: &str) -> &str {
        self.run_of(trial_id)
            .map(|r| r.manifest.run_id.as_str())
            .unwrap_or("")
    }

    /// Request rows read (after dropping orphans and superseded copies).
    pub fn request_count(&self) -> usize {
        self.requests.height()
    }

    /// Number of matrix trials the manifests announce (sum over shards).
    pub fn matrix_size(&self) -> u64 {
        self.runs.iter().map(|r| r.manifest.matrix_size).sum()
    }

    /// Scenarios registered in any of the manifests, once each, sorted by id.
    pub fn scenarios(&self) -> Vec<&ManifestScenario> {
        let mut by_id: BTreeMap<&str, &ManifestScenario> = BTreeMap::new();
        for r in &self.runs {
            for s in &r.manifest.scenarios {
                by_id.entry(s.id.as_str()).or_insert(s);
            }
        }
        by_id.into_values().collect()
    }
}

/// Reads one run directory.
pub fn load_run(dir: &Path) -> Result<RunData, ReportError> {
    load_runs(&[dir.to_path_buf()])
}

/// Reads several run directories (shards of one matrix) and merges them.
///
/// Fails when a trial appears in two directories (naming both), or when the manifests
/// disagree on what makes results comparable: the system under test, seed, provider,
/// trials per cell, ctxbench version, modes, suite source, shard count `N`, the whole
/// matrix's size, registered gates, or the source hash of a scenario both ran.
pub fn load_runs(dirs: &[PathBuf]) -> Result<RunData, ReportError> {
    if dirs.is_empty() {
        return Err(ReportError::NoRuns);
    }
    let mut runs = Vec::with_capacity(dirs.len());
    let mut trials: Vec<TrialRow> = Vec::new();
    let mut events: Vec<(usize, EventRow)> = Vec::new();
    let mut trial_run: HashMap<String, usize> = HashMap::new();
    let mut requests = RequestColumns::default();
    let mut torn_lines = 0;
    let mut orphan_requests = 0;
    let mut orphan_events = 0;
    let mut duplicate_events = 0;

    for (idx, dir) in dirs.iter().enumerate() {
        let one = read_dir(dir, trials.len(), &mut requests)?;
        if let Some(first) = runs.first() {
            check_compatible(first, &one.source)?;
        }
        for t in &one.trials {
            if let Some(&prev) = trial_run.get(&t.trial_id) {
                return Err(ReportError::DuplicateTrial {
                    trial_id: t.trial_id.clone(),
                    first: dirs[prev].clone(),
                    second: dir.clone(),
                });
            }
            trial_run.insert(t.trial_id.clone(), idx);
        }
        torn_lines += one.source.torn_lines;
        orphan_requests += one.orphan_requests;
        orphan_events += one.orphan_events;
        duplicate_events += one.duplicate_events;
        trials.extend(one.trials);
        events.extend(one.events);
        runs.push(one.source);
    }

    // Sort the trials; `pos[i]` is the sorted position of the i-th trial read.
    let mut order: Vec<usize> = (0..trials.len()).collect();
    order.sort_by(|&a, &b| trial_key(&trials[a]).cmp(&trial_key(&trials[b])));
    let mut pos = vec![0usize; trials.len()];
    for (p, &i) in order.iter().enumerate() {
        pos[i] = p;
    }
    let mut slots: Vec<Option<TrialRow>> = trials.into_iter().map(Some).collect();
    let trials: Vec<TrialRow> = order.iter().filter_map(|&i| slots[i].take()).collect();
    drop(slots);

    events.sort_by_key(|(t, e)| (pos[*t], e.seq));
    let events: Vec<EventRow> = events.into_iter().map(|(_, e)| e).collect();

    let run_ids: Vec<&str> = runs.iter().map(|r| r.manifest.run_id.as_str()).collect();
    let trial_run_idx: Vec<usize> = trials
        .iter()
        .map(|t| trial_run.get(&t.trial_id).copied().unwrap_or(0))
        .collect();
    let (requests, duplicate_requests) =
        requests.into_frame(&pos, &trials, &trial_run_idx, &run_ids)?;

    Ok(RunData {
        runs,
        trials,
        requests,
        events,
        torn_lines,
        orphan_requests,
        duplicate_requests,
        orphan_events,
        duplicate_events,
        trial_run,
    })
}

fn trial_key(t: &TrialRow) -> (&str, ctxbench_harness::Mode, u32, &str) {
    (t.scenario.as_str(), t.mode, t.trial, t.trial_id.as_str())
}

/// One directory, before merging (its request rows went straight into the shared
/// [`RequestColumns`]).
struct DirData {
    source: RunSource,
    trials: Vec<TrialRow>,
    /// (index of the trial in read order over all directories, event).
    events: Vec<(usize, EventRow)>,
    orphan_requests: usize,
    orphan_events: usize,
    duplicate_events: usize,
}

/// Reads one directory; `first_trial` is the read-order index its first trial will have,
/// and its request rows are appended to `requests`.
fn read_dir(
    dir: &Path,
    first_trial: usize,
    requests: &mut RequestColumns,
) -> Result<DirData, ReportError> {
    let manifest = read_manifest(&dir.join("manifest.json"))?;

    let trials_path = dir.join("trials.jsonl");
    let mut trials = Vec::new();
    let mut seen: HashMap<String, u64> = HashMap::new();
    let mut dup: Option<ReportError> = None;
    let torn_trials = read_jsonl::<TrialRow>(
        &trials_path,
        TRIAL_SCHEMA,
        |r| &r.schema,
        |line, row| {
            if dup.is_some() {
                return;
            }
            if let Some(&first_line) = seen.get(&row.trial_id) {
                dup = Some(ReportError::DuplicateTrialInRun {
                    path: trials_path.clone(),
                    trial_id: row.trial_id.clone(),
                    first_line,
                    second_line: line,
                });
                return;
            }
            seen.insert(row.trial_id.clone(), line);
            trials.push(row);
        },
    )?;
    if let Some(e) = dup {
        return Err(e);
    }

    // A row belongs to its trial only when written by the same run segment as the trial
    // row: rows a killed attempt left behind (an earlier segment) are orphans, even when a
    // resumed, non-deterministic trial sent fewer requests than the killed one had.
    let trial_index: HashMap<&str, (usize, u32)> = trials
        .iter()
        .enumerate()
        .map(|(i, t)| (t.trial_id.as_str(), (first_trial + i, t.segment)))
        .collect();
    let mut orphan_requests = 0;
    let req_path = dir.join("requests.jsonl");
    let torn_requests = read_jsonl_raw(&req_path, REQUEST_SCHEMA, |_, text| {
        let row: RawRequest<'_> = serde_json::from_slice(text).map_err(LineError::Json)?;
        if row.schema != REQUEST_SCHEMA {
            return Err(LineError::Schema(row.schema.into_owned()));
        }
        match trial_index.get(row.trial_id.as_ref()) {
            Some(&(t, segment)) if segment == row.segment => requests.push(t, &row),
            _ => orphan_requests += 1,
        }
        Ok(())
    })?;

    // Events: only the kinds the report uses; a later copy of `(trial, seq)` wins.
    let events_path = dir.join("events.jsonl");
    let has_events = events_path.is_file();
    let mut events: Vec<(usize, EventRow)> = Vec::new();
    let mut event_slot: HashMap<(usize, u64), usize> = HashMap::new();
    let mut orphan_events = 0;
    let mut duplicate_events = 0;
    let torn_events = if has_events {
        read_jsonl::<EventRow>(
            &events_path,
            EVENT_SCHEMA,
            |r| &r.schema,
            |_, row| {
                if !REPORT_EVENT_KINDS.contains(&row.kind.as_str()) {
                    return;
                }
                let Some(&(t, segment)) = trial_index.get(row.trial_id.as_str()) else {
                    orphan_events += 1;
                    return;
                };
                if segment != row.segment {
                    orphan_events += 1;
                    return;
                }
                let key = (t, row.seq);
                match event_slot.get(&key) {
                    Some(&i) => {
                        events[i] = (t, row);
                        duplicate_events += 1;
                    }
                    None => {
                        event_slot.insert(key, events.len());
                        events.push((t, row));
                    }
                }
            },
        )?
    } else {
        0
    };
    drop(event_slot);
    drop(trial_index);

    Ok(DirData {
        source: RunSource {
            dir: dir.to_path_buf(),
            manifest,
            torn_lines: torn_trials + torn_requests + torn_events,
            has_events,
        },
        trials,
        events,
        orphan_requests,
        orphan_events,
        duplicate_events,
    })
}

/// A request row as parsed: text borrowed from the line where it has no escapes, the
/// message hashes skipped (required, as in the schema, but never stored). Mirrors
/// `ctxbench_harness::storage::schema::RequestRow`; unknown fields are ignored.
#[derive(Deserialize)]
struct RawRequest<'a> {
    #[serde(borrow)]
    schema: Cow<'a, str>,
    #[serde(borrow)]
    trial_id: Cow<'a, str>,
    #[serde(borrow)]
    scenario: Cow<'a, str>,
    mode: Mode,
    #[serde(borrow)]
    provider: Cow<'a, str>,
    #[serde(borrow)]
    model: Cow<'a, str>,
    trial: u32,
    #[serde(default)]
    segment: u32,
    seq: u64,
    step: u64,
    round: u64,
    attempt: u32,
    sent: bool,
    #[serde(borrow, default = "purpose_turn")]
    purpose: Cow<'a, str>,
    budget: BudgetBreakdown,
    #[serde(borrow)]
    estimator: Cow<'a, str>,
    #[serde(borrow)]
    estimation_method: Cow<'a, str>,
    #[serde(borrow)]
    confidence: Cow<'a, str>,
    observed_estimate: u64,
    over_budget: bool,
    warned: bool,
    #[serde(default)]
    provider_input_tokens: Option<u64>,
    #[serde(default)]
    provider_output_tokens: Option<u64>,
    #[serde(default)]
    overflow_input_tokens: Option<u64>,
    #[serde(borrow, default)]
    error_kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    retry_reason: Option<Cow<'a, str>>,
    #[serde(borrow)]
    instruction_hash: Cow<'a, str>,
    #[serde(borrow, default)]
    checkpoint_id: Option<Cow<'a, str>>,
    #[allow(dead_code)]
    message_hashes: IgnoredAny,
    latency_ms: u64,
}

fn purpose_turn<'a>() -> Cow<'a, str> {
    Cow::Borrowed(crate::frames::PURPOSE_TURN)
}

/// Code of "no value" in an optional text column.
const NONE: u32 = u32::MAX;

/// Distinct strings, each stored once, numbered in first-seen order.
#[derive(Default)]
struct Interner {
    values: Vec<String>,
    codes: HashMap<String, u32>,
}

impl Interner {
    fn code(&mut self, s: &str) -> u32 {
        if let Some(&c) = self.codes.get(s) {
            return c;
        }
        let c = self.values.len() as u32;
        self.values.push(s.to_string());
        self.codes.insert(s.to_string(), c);
        c
    }

    fn opt(&mut self, s: Option<&str>) -> u32 {
        s.map_or(NONE, |s| self.code(s))
    }
}

/// Request rows as columns, in read order (one entry per row in every vector).
#[derive(Default)]
struct RequestColumns {
    strings: Interner,
    /// Read-order index of the row's trial (over all directories).
    trial_idx: Vec<u32>,
    scenario: Vec<u32>,
    mode: Vec<Mode>,
    provider: Vec<u32>,
    model: Vec<u32>,
    trial: Vec<u32>,
    seq: Vec<u64>,
    step: Vec<u64>,
    round: Vec<u64>,
    attempt: Vec<u32>,
    sent: Vec<bool>,
    purpose: Vec<u32>,
    budget: Vec<BudgetBreakdown>,
    estimator: Vec<u32>,
    estimation_method: Vec<u32>,
    confidence: Vec<u32>,
    observed_estimate: Vec<u64>,
    over_budget: Vec<bool>,
    warned: Vec<bool>,
    provider_input_tokens: Vec<Option<u64>>,
    provider_output_tokens: Vec<Option<u64>>,
    overflow_input_tokens: Vec<Option<u64>>,
    error_kind: Vec<u32>,
    retry_reason: Vec<u32>,
    instruction_hash: Vec<u32>,
    checkpoint_id: Vec<u32>,
    latency_ms: Vec<u64>,
}

impl RequestColumns {
    fn push(&mut self, trial: usize, r: &RawRequest<'_>) {
        let s = &mut self.strings;
        self.trial_idx.push(trial as u32);
        self.scenario.push(s.code(&r.scenario));
        self.mode.push(r.mode);
        self.provider.push(s.code(&r.provider));
        self.model.push(s.code(&r.model));
        self.trial.push(r.trial);
        self.seq.push(r.seq);
        self.step.push(r.step);
        self.round.push(r.round);
        self.attempt.push(r.attempt);
        self.sent.push(r.sent);
        self.purpose.push(s.code(&r.purpose));
        self.budget.push(r.budget);
        self.estimator.push(s.code(&r.estimator));
        self.estimation_method.push(s.code(&r.estimation_method));
        self.confidence.push(s.code(&r.confidence));
        self.observed_estimate.push(r.observed_estimate);
        self.over_budget.push(r.over_budget);
        self.warned.push(r.warned);
        self.provider_input_tokens.push(r.provider_input_tokens);
        self.provider_output_tokens.push(r.provider_output_tokens);
        self.overflow_input_tokens.push(r.overflow_input_tokens);
        self.error_kind.push(s.opt(r.error_kind.as_deref()));
        self.retry_reason.push(s.opt(r.retry_reason.as_deref()));
        self.instruction_hash.push(s.code(&r.instruction_hash));
        self.checkpoint_id.push(s.opt(r.checkpoint_id.as_deref()));
        self.latency_ms.push(r.latency_ms);
    }

    /// The sorted frame (columns of `requests.csv` without `abs_error` / `rel_error`) and
    /// the number of superseded copies dropped. `pos` maps a read-order trial index to its
    /// sorted position; `trial_run` gives the run (index into `run_ids`) of each sorted
    /// trial.
    ///
    /// Rows are ordered by (trial position, step, round, attempt, seq, read order); of
    /// rows equal in all but read order — the same physical request appended again by a
    /// resumed trial — the last read is kept. Columns are built one at a time from that
    /// permutation and their source vectors freed as they go, so the peak is one column
    /// more than the frame itself.
    fn into_frame(
        mut self,
        pos: &[usize],
        trials: &[TrialRow],
        trial_run: &[usize],
        run_ids: &[&str],
    ) -> PolarsResult<(DataFrame, usize)> {
        let key = |i: usize| {
            (
                pos[self.trial_idx[i] as usize],
                self.step[i],
                self.round[i],
                self.attempt[i],
                self.seq[i],
            )
        };
        let mut perm: Vec<u32> = (0..self.trial_idx.len() as u32).collect();
        perm.sort_unstable_by_key(|&i| (key(i as usize), i));
        // Keep the last of each run of equal keys.
        let mut keep: Vec<u32> = Vec::with_capacity(perm.len());
        for (k, &i) in perm.iter().enumerate() {
            let superseded = perm
                .get(k + 1)
                .is_some_and(|&next| key(next as usize) == key(i as usize));
            if !superseded {
                keep.push(i);
            }
        }
        let duplicates = perm.len() - keep.len();
        drop(perm);
        let n = keep.len();

        fn gather<T: Copy>(v: Vec<T>, keep: &[u32]) -> Vec<T> {
            keep.iter().map(|&i| v[i as usize]).collect()
        }
        let dict =
            |name: &str, values: Vec<Option<&str>>, codes: Vec<u32>| -> PolarsResult<Column> {
                let none = values.len() as IdxSize;
                let mut values = values;
                values.push(None);
                let idx: Vec<IdxSize> = codes
                    .into_iter()
                    .map(|c| if c == NONE { none } else { c as IdxSize })
                    .collect();
                Column::new(name.into(), values).take(&IdxCa::from_vec("".into(), idx))
            };
        let strings: Vec<Option<&str>> = self
            .strings
            .values
            .iter()
            .map(|s| Some(s.as_str()))
            .collect();
        let text = |name: &str, codes: Vec<u32>| dict(name, strings.clone(), gather(codes, &keep));

        let trial_sorted: Vec<u32> = keep
            .iter()
            .map(|&i| pos[self.trial_idx[i as usize] as usize] as u32)
            .collect();
        let run_of: Vec<u32> = trial_sorted
            .iter()
            .map(|&t| trial_run.get(t as usize).copied().unwrap_or(0) as u32)
            .collect();
        // Straight from the row-order budgets: no second copy of the whole breakdown.
        let budget = &self.budget;
        let b = |f: fn(&BudgetBreakdown) -> u64| {
            keep.iter()
                .map(|&i| f(&budget[i as usize]))
                .collect::<Vec<u64>>()
        };
        let u = |name: &str, v: Vec<u64>| Column::new(name.into(), gather(v, &keep));
        let cols = vec![
            dict("run_id", run_ids.iter().map(|s| Some(*s)).collect(), run_of)?,
            dict(
                "trial_id",
                trials.iter().map(|t| Some(t.trial_id.as_str())).collect(),
                trial_sorted,
            )?,
            text("scenario", std::mem::take(&mut self.scenario))?,
            Column::new(
                "mode".into(),
                keep.iter()
                    .map(|&i| self.mode[i as usize].as_str())
                    .collect::<Vec<_>>(),
            ),
            text("provider", std::mem::take(&mut self.provider))?,
            text("model", std::mem::take(&mut self.model))?,
            Column::new(
                "trial".into(),
                gather(std::mem::take(&mut self.trial), &keep),
            ),
            u("seq", std::mem::take(&mut self.seq)),
            u("step", std::mem::take(&mut self.step)),
            u("round", std::mem::take(&mut self.round)),
            Column::new(
                "attempt".into(),
                gather(std::mem::take(&mut self.attempt), &keep),
            ),
            Column::new("sent".into(), gather(std::mem::take(&mut self.sent), &keep)),
            text("purpose", std::mem::take(&mut self.purpose))?,
            Column::new("window".into(), b(|b| b.window)),
            Column::new("requested_output".into(), b(|b| b.requested_output)),
            Column::new("buffer".into(), b(|b| b.buffer)),
            Column::new("reserve".into(), b(|b| b.reserve)),
            Column::new("available_input".into(), b(|b| b.available_input)),
            Column::new("est_instructions".into(), b(|b| b.instructions)),
            Column::new("est_memory".into(), b(|b| b.memory)),
            Column::new("est_recent_tail".into(), b(|b| b.recent_tail)),
            Column::new("est_current_request".into(), b(|b| b.current_request)),
            Column::new("est_tool_schemas".into(), b(|b| b.tool_schemas)),
            Column::new("est_continuation".into(), b(|b| b.continuation)),
            Column::new("est_framing".into(), b(|b| b.framing)),
            Column::new("est_total".into(), b(|b| b.total)),
            u(
                "observed_estimate",
                std::mem::take(&mut self.observed_estimate),
            ),
            text("estimator", std::mem::take(&mut self.estimator))?,
            text(
                "estimation_method",
                std::mem::take(&mut self.estimation_method),
            )?,
            text("confidence", std::mem::take(&mut self.confidence))?,
            Column::new(
                "over_budget".into(),
                gather(std::mem::take(&mut self.over_budget), &keep),
            ),
            Column::new(
                "warned".into(),
                gather(std::mem::take(&mut self.warned), &keep),
            ),
            Column::new(
                "provider_input_tokens".into(),
                gather(std::mem::take(&mut self.provider_input_tokens), &keep),
            ),
            Column::new(
                "provider_output_tokens".into(),
                gather(std::mem::take(&mut self.provider_output_tokens), &keep),
            ),
            Column::new(
                "overflow_input_tokens".into(),
                gather(std::mem::take(&mut self.overflow_input_tokens), &keep),
            ),
            text("error_kind", std::mem::take(&mut self.error_kind))?,
            text("retry_reason", std::mem::take(&mut self.retry_reason))?,
            text(
                "instruction_hash",
                std::mem::take(&mut self.instruction_hash),
            )?,
            text("checkpoint_id", std::mem::take(&mut self.checkpoint_id))?,
            u("latency_ms", std::mem::take(&mut self.latency_ms)),
        ];
        Ok((DataFrame::new(n, cols)?, duplicates))
    }
}

fn read_manifest(path: &Path) -> Result<Manifest, ReportError> {
    let text = std::fs::read_to_string(path).map_err(|e| ReportError::io(path, e))?;
    match serde_json::from_str::<Manifest>(&text) {
        Ok(m) if m.schema == MANIFEST_SCHEMA => Ok(m),
        Ok(m) => Err(ReportError::UnknownSchema {
            path: path.to_path_buf(),
            line: 1,
            found: m.schema,
            expected: MANIFEST_SCHEMA,
        }),
        Err(source) => {
            if let Ok(tag) = serde_json::from_str::<SchemaTag>(&text) {
                if tag.schema != MANIFEST_SCHEMA {
                    return Err(ReportError::UnknownSchema {
                        path: path.to_path_buf(),
                        line: 1,
                        found: tag.schema,
                        expected: MANIFEST_SCHEMA,
                    });
                }
            }
            Err(ReportError::BadManifest {
                path: path.to_path_buf(),
                source,
            })
        }
    }
}

/// Just the `schema` tag, to tell "newer schema" from "corrupt row".
#[derive(Deserialize)]
struct SchemaTag {
    schema: String,
}

/// Why one JSONL line was not accepted.
enum LineError {
    /// It is not JSON of the row's shape.
    Json(serde_json::Error),
    /// It parsed, but carries another `schema` tag.
    Schema(String),
}

/// Streams a JSONL file row by row (bounded memory: one line at a time), calling `row`
/// with the 1-based line number and the parsed row. Returns the number of torn last lines
/// skipped (0 or 1). Blank lines carry nothing and are skipped.
fn read_jsonl<T: DeserializeOwned>(
    path: &Path,
    expected: &'static str,
    schema_of: impl Fn(&T) -> &str,
    mut row: impl FnMut(u64, T),
) -> Result<usize, ReportError> {
    read_jsonl_raw(path, expected, |line_no, text| {
        let parsed = serde_json::from_slice::<T>(text).map_err(LineError::Json)?;
        let tag = schema_of(&parsed);
        if tag != expected {
            return Err(LineError::Schema(tag.to_string()));
        }
        row(line_no, parsed);
        Ok(())
    })
}

/// The line loop of [`read_jsonl`]: `on_line` gets the 1-based line number and each
/// non-blank, complete line (without its line end), in order. A final line without `\n`, or a final line that is not
/// complete JSON, is a torn append (returns 1); any other rejected line is an error naming
/// the file and line.
fn read_jsonl_raw(
    path: &Path,
    expected: &'static str,
    mut on_line: impl FnMut(u64, &[u8]) -> Result<(), LineError>,
) -> Result<usize, ReportError> {
    let file = File::open(path).map_err(|e| ReportError::io(path, e))?;
    let mut reader = BufReader::with_capacity(1 << 16, file);
    let mut buf = Vec::new();
    let mut line_no = 0u64;
    loop {
        buf.clear();
        let n = reader
            .read_until(b'\n', &mut buf)
            .map_err(|e| ReportError::io(path, e))?;
        if n == 0 {
            return Ok(0);
        }
        line_no += 1;
        let terminated = buf.last() == Some(&b'\n');
        let is_last = !terminated
            || reader
                .fill_buf()
                .map_err(|e| ReportError::io(path, e))?
                .is_empty();
        let text = trim_line(&buf);
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if !terminated {
            // The writer always ends a row with '\n': without it the append was cut.
            return Ok(1);
        }
        match on_line(line_no, text) {
            Ok(()) => {}
            Err(LineError::Schema(found)) => {
                return Err(ReportError::UnknownSchema {
                    path: path.to_path_buf(),
                    line: line_no,
                    found,
                    expected,
                });
            }
            Err(LineError::Json(e)) => {
                // An incomplete final line is a torn append; complete JSON of the wrong
                // shape is corruption even at the end.
                if is_last && !e.is_data() {
                    return Ok(1);
                }
                if let Ok(tag) = serde_json::from_slice::<SchemaTag>(text) {
                    if tag.schema != expected {
                        return Err(ReportError::UnknownSchema {
                            path: path.to_path_buf(),
                            line: line_no,
                            found: tag.schema,
                            expected,
                        });
                    }
                }
                return Err(ReportError::BadLine {
                    path: path.to_path_buf(),
                    line: line_no,
                    message: e.to_string(),
                });
            }
        }
    }
}

fn trim_line(buf: &[u8]) -> &[u8] {
    let mut end = buf.len();
    while end > 0 && (buf[end - 1] == b'\n' || buf[end - 1] == b'\r') {
        end -= 1;
    }
    &buf[..end]
}

/// Shards are comparable only if they ran the same experiment.
fn check_compatible(first: &RunSource, other: &RunSource) -> Result<(), ReportError> {
    let (a, b) = (&first.manifest, &other.manifest);
    let mismatch = |what: &str, left: String, right: String| ReportError::MismatchedShards {
        first: first.dir.clone(),
        second: other.dir.clone(),
        what: what.to_string(),
        left,
        right,
    };
    // The system under test first: shards of two different systems are two experiments,
    // whatever else they share (issue: a mutant's shard merged with the reference's passed).
    if sut_of(a) != sut_of(b) {
        return Err(mismatch(
            "the system under test (`sut`)",
            sut_of(a).to_string(),
            sut_of(b).to_string(),
        ));
    }
    if a.seed != b.seed {
        return Err(mismatch("seed", a.seed.to_string(), b.seed.to_string()));
    }
    if a.provider != b.provider {
        return Err(mismatch("provider", a.provider.clone(), b.provider.clone()));
    }
    if a.trials != b.trials {
        return Err(mismatch(
            "trials per cell",
            trials_text(a.trials),
            trials_text(b.trials),
        ));
    }
    if a.ctxbench_version != b.ctxbench_version {
        return Err(mismatch(
            "ctxbench version",
            a.ctxbench_version.clone(),
            b.ctxbench_version.clone(),
        ));
    }
    if a.modes != b.modes {
        return Err(mismatch(
            "modes",
            modes_text(&a.modes, ","),
            modes_text(&b.modes, ","),
        ));
    }
    if a.suite_source != b.suite_source {
        return Err(mismatch(
            "the suite source (`suite_source`)",
            a.suite_source.clone(),
            b.suite_source.clone(),
        ));
    }
    let shards = |m: &Manifest| {
        m.shard
            .map_or_else(|| "unsharded".to_string(), |s| s.count.to_string())
    };
    if shards(a) != shards(b) {
        return Err(mismatch("the shard count N", shards(a), shards(b)));
    }
    // Older manifests lack the whole matrix's size; compared only when both record it.
    if let (Some(x), Some(y)) = (a.full_matrix_size, b.full_matrix_size) {
        if x != y {
            return Err(mismatch(
                "the full matrix size (`full_matrix_size`)",
                x.to_string(),
                y.to_string(),
            ));
        }
    }
    let sha = |m: &Manifest| {
        m.gates
            .as_ref()
            .map(|g| g.sha256.clone())
            .unwrap_or_else(|| "none".to_string())
    };
    if sha(a) != sha(b) {
        return Err(mismatch("registered gates (sha256)", sha(a), sha(b)));
    }
    for s in &b.scenarios {
        if let Some(t) = a.scenarios.iter().find(|t| t.id == s.id) {
            if t.source_hash != s.source_hash {
                return Err(mismatch(
                    &format!("source hash of scenario `{}`", s.id),
                    t.source_hash.clone(),
                    s.source_hash.clone(),
                ));
            }
        }
    }
    Ok(())
}

/// The system under test a manifest records: `reference`, or `exec:COMMAND ARGS` for an
/// external agent. Manifests written before the field existed ran the reference engine.
pub fn sut_of(m: &Manifest) -> &str {
    m.sut.as_deref().unwrap_or("reference")
}

/// Modes as text, joined by `sep` (`off,compact` in messages, `off, compact` in the page).
pub(crate) fn modes_text(modes: &[Mode], sep: &str) -> String {
    modes
        .iter()
        .map(|m| m.as_str())
        .collect::<Vec<_>>()
        .join(sep)
}

/// `--trials` as the manifest recorded it: a number, or "per scenario".
pub(crate) fn trials_text(t: Option<u32>) -> String {
    t.map_or_else(|| "per scenario".to_string(), |n| n.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctxbench_harness::storage::schema::Shard;

    fn source(dir: &str, edit: impl FnOnce(&mut Manifest)) -> RunSource {
        let mut manifest = Manifest {
            schema: MANIFEST_SCHEMA.into(),
            run_id: dir.into(),
            seed: 7,
            provider: "fake".into(),
            modes: Mode::ALL.to_vec(),
            trials: Some(2),
            suite_source: "builtin".into(),
            matrix_size: 3,
            shard: Some(Shard { index: 1, count: 2 }),
            full_matrix_size: Some(6),
            sut: Some("reference".into()),
            ..Default::default()
        };
        edit(&mut manifest);
        RunSource {
            dir: PathBuf::from(dir),
            manifest,
            torn_lines: 0,
            has_events: false,
        }
    }

    /// Shards that differ in what defines the experiment are refused, naming the field and
    /// both values.
    #[test]
    fn shards_of_another_experiment_are_refused_naming_the_field() {
        let first = source("a", |_| {});
        let second = |edit: fn(&mut Manifest)| {
            source("b", |m| {
                m.shard = Some(Shard { index: 2, count: 2 });
                edit(m);
            })
        };
        assert!(check_compatible(&first, &second(|_| {})).is_ok());
        // A manifest without `sut` ran the reference engine.
        assert!(check_compatible(&first, &second(|m| m.sut = None)).is_ok());
        type Edit = fn(&mut Manifest);
        let cases: [(Edit, &str, &str); 6] = [
            (
                |m| m.sut = Some("exec:python3 mutant.py".into()),
                "system under test",
                "\"exec:python3 mutant.py\"",
            ),
            (
                |m| m.modes = vec![Mode::Off, Mode::Compact],
                "modes",
                "\"off,compact\"",
            ),
            (
                |m| m.suite_source = "my-suite".into(),
                "suite source",
                "\"my-suite\"",
            ),
            (
                |m| m.shard = Some(Shard { index: 2, count: 3 }),
                "shard count N",
                "\"3\"",
            ),
            (|m| m.shard = None, "shard count N", "\"unsharded\""),
            (
                |m| m.full_matrix_size = Some(8),
                "full matrix size",
                "\"8\"",
            ),
        ];
        for (edit, field, value) in cases {
            let err = check_compatible(&first, &second(edit)).expect_err(field);
            let msg = err.to_string();
            assert!(
                matches!(err, ReportError::MismatchedShards { .. }),
                "{err:?}"
            );
            assert!(msg.contains(field) && msg.contains(value), "{field}: {msg}");
            assert!(msg.contains(" a and b "), "{msg}");
        }
    }
}
