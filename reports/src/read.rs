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
//! ([`RunData::orphan_requests`]). If a resumed trial re-appended its requests, the same
//! `(trial, seq, step, round, attempt)` appears twice; the later copy (the one written
//! together with the trial row) wins and the earlier is counted in
//! [`RunData::duplicate_requests`]. Events are treated the same way, keyed by
//! `(trial, seq)` ([`RunData::orphan_events`], [`RunData::duplicate_events`]).

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use ctxbench_harness::storage::schema::{
    EventRow, Manifest, ManifestScenario, RequestRow, TrialRow, EVENT_SCHEMA, MANIFEST_SCHEMA,
    REQUEST_SCHEMA, TRIAL_SCHEMA,
};
use serde::de::DeserializeOwned;
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
/// a deterministic order. Request rows are kept without their `message_hashes` (unused by
/// the report, and the bulk of a long session's rows).
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
    /// Every request row of a present trial, sorted.
    pub requests: Vec<RequestRow>,
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
/// disagree on what makes results comparable: seed, provider, trials per cell, ctxbench
/// version, registered gates, or the source hash of a scenario both ran.
pub fn load_runs(dirs: &[PathBuf]) -> Result<RunData, ReportError> {
    if dirs.is_empty() {
        return Err(ReportError::NoRuns);
    }
    let mut runs = Vec::with_capacity(dirs.len());
    let mut trials: Vec<TrialRow> = Vec::new();
    let mut requests: Vec<RequestRow> = Vec::new();
    let mut events: Vec<EventRow> = Vec::new();
    let mut trial_run: HashMap<String, usize> = HashMap::new();
    let mut torn_lines = 0;
    let mut orphan_requests = 0;
    let mut duplicate_requests = 0;
    let mut orphan_events = 0;
    let mut duplicate_events = 0;

    for (idx, dir) in dirs.iter().enumerate() {
        let one = read_dir(dir)?;
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
        duplicate_requests += one.duplicate_requests;
        orphan_events += one.orphan_events;
        duplicate_events += one.duplicate_events;
        trials.extend(one.trials);
        requests.extend(one.requests);
        events.extend(one.events);
        runs.push(one.source);
    }

    trials.sort_by(|a, b| trial_key(a).cmp(&trial_key(b)));
    let order: HashMap<&str, usize> = trials
        .iter()
        .enumerate()
        .map(|(i, t)| (t.trial_id.as_str(), i))
        .collect();
    // Every kept request has a trial (orphans were dropped per directory).
    requests.sort_by_cached_key(|r| {
        (
            order
                .get(r.trial_id.as_str())
                .copied()
                .unwrap_or(usize::MAX),
            r.step,
            r.round,
            r.attempt,
            r.seq,
        )
    });
    events.sort_by_cached_key(|e| {
        (
            order
                .get(e.trial_id.as_str())
                .copied()
                .unwrap_or(usize::MAX),
            e.seq,
        )
    });

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

fn trial_key(t: &TrialRow) -> (&str, ctxbench_harness::mode::Mode, u32, &str) {
    (t.scenario.as_str(), t.mode, t.trial, t.trial_id.as_str())
}

/// One directory, before merging.
struct DirData {
    source: RunSource,
    trials: Vec<TrialRow>,
    requests: Vec<RequestRow>,
    events: Vec<EventRow>,
    orphan_requests: usize,
    duplicate_requests: usize,
    orphan_events: usize,
    duplicate_events: usize,
}

fn read_dir(dir: &Path) -> Result<DirData, ReportError> {
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

    // A later copy of the same physical request replaces an earlier one. Keyed by the
    // trial's index rather than its id, so the map holds no strings.
    let trial_index: HashMap<&str, usize> = trials
        .iter()
        .enumerate()
        .map(|(i, t)| (t.trial_id.as_str(), i))
        .collect();
    let mut requests: Vec<RequestRow> = Vec::new();
    let mut slot: HashMap<(usize, u64, u64, u64, u32), usize> = HashMap::new();
    let mut orphan_requests = 0;
    let mut duplicate_requests = 0;
    let torn_requests = read_jsonl::<RequestRow>(
        &dir.join("requests.jsonl"),
        REQUEST_SCHEMA,
        |r| &r.schema,
        |_, mut row| {
            let Some(&t) = trial_index.get(row.trial_id.as_str()) else {
                orphan_requests += 1;
                return;
            };
            // The report never reads message hashes, and in long sessions they dominate a
            // row's size (one 64-char hash per message per request): not retained.
            row.message_hashes = Vec::new();
            let key = (t, row.seq, row.step, row.round, row.attempt);
            match slot.get(&key) {
                Some(&i) => {
                    requests[i] = row;
                    duplicate_requests += 1;
                }
                None => {
                    slot.insert(key, requests.len());
                    requests.push(row);
                }
            }
        },
    )?;
    drop(slot);

    // Events: only the kinds the report uses; a later copy of `(trial, seq)` wins.
    let events_path = dir.join("events.jsonl");
    let has_events = events_path.is_file();
    let mut events: Vec<EventRow> = Vec::new();
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
                let Some(&t) = trial_index.get(row.trial_id.as_str()) else {
                    orphan_events += 1;
                    return;
                };
                let key = (t, row.seq);
                match event_slot.get(&key) {
                    Some(&i) => {
                        events[i] = row;
                        duplicate_events += 1;
                    }
                    None => {
                        event_slot.insert(key, events.len());
                        events.push(row);
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
        requests,
        events,
        orphan_requests,
        duplicate_requests,
        orphan_events,
        duplicate_events,
    })
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

/// Streams a JSONL file row by row (bounded memory: one line at a time), calling `row`
/// with the 1-based line number and the parsed row. Returns the number of torn last lines
/// skipped (0 or 1). Blank lines carry nothing and are skipped.
fn read_jsonl<T: DeserializeOwned>(
    path: &Path,
    expected: &'static str,
    schema_of: impl Fn(&T) -> &str,
    mut row: impl FnMut(u64, T),
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
        match serde_json::from_slice::<T>(text) {
            Ok(parsed) => {
                let tag = schema_of(&parsed);
                if tag != expected {
                    return Err(ReportError::UnknownSchema {
                        path: path.to_path_buf(),
                        line: line_no,
                        found: tag.to_string(),
                        expected,
                    });
                }
                row(line_no, parsed);
            }
            Err(e) => {
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
    if a.seed != b.seed {
        return Err(mismatch("seed", a.seed.to_string(), b.seed.to_string()));
    }
    if a.provider != b.provider {
        return Err(mismatch("provider", a.provider.clone(), b.provider.clone()));
    }
    if a.trials != b.trials {
        return Err(mismatch(
            "trials per cell",
            a.trials.to_string(),
            b.trials.to_string(),
        ));
    }
    if a.ctxbench_version != b.ctxbench_version {
        return Err(mismatch(
            "ctxbench version",
            a.ctxbench_version.clone(),
            b.ctxbench_version.clone(),
        ));
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
