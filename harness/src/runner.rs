//! The runner: executes the matrix scenario × mode × trial with bounded concurrency and
//! appends every finished trial to run storage.
//!
//! The runner knows nothing about grading: a [`Judge`] (implemented by `ctxbench-graders`)
//! turns each [`TrialRecord`] into verdicts, so dependencies keep flowing one way.

use std::path::PathBuf;
use std::sync::Arc;

use thiserror::Error;
use tokio::sync::Semaphore;

use crate::connect::Services;
use crate::driver::{run_trial, ProviderSpec, TrialSpec};
use crate::progress::RunObserver;
use crate::record::TrialRecord;
use crate::scenario::Scenario;
use crate::storage::schema::{
    CassetteUse, EventRow, Evidence, Manifest, ManifestScenario, MessageRow, RecallRow,
    RegisteredGates, ResumeRecord, RunCaps, RunStop, Shard, TrialRow, Verdict, EVENT_SCHEMA,
    MANIFEST_SCHEMA, MESSAGE_SCHEMA, TRIAL_SCHEMA,
};
use crate::storage::{RunStore, StorageError, TrialRows};
use ctxbench_sut::redact::Redactor;
use ctxbench_sut::Mode;

/// Turns a trial record into verdicts.
pub trait Judge: Send + Sync {
    /// Grade one trial.
    fn judge(&self, scenario: &Scenario, record: &TrialRecord) -> Judgement;
}

/// The graders' conclusion on one trial.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Judgement {
    /// One verdict per applied grader.
    pub verdicts: Vec<Verdict>,
    /// Recall per probed fact.
    pub recall: Vec<RecallRow>,
    /// Whether the trial passes: expected outcome and every applied grader.
    pub passed: bool,
}

/// Runner errors (the run could not start or storage failed; trial failures are data).
#[derive(Debug, Error)]
pub enum RunError {
    /// Run storage failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The plan is not runnable.
    #[error("{0}")]
    Plan(String),
    /// A trial task panicked (a harness bug).
    #[error("a trial task failed: {0}")]
    Task(String),
}

/// What to run.
#[derive(Debug, Clone)]
pub struct RunPlan {
    /// Run id.
    pub run_id: String,
    /// Run directory.
    pub run_dir: PathBuf,
    /// Scenarios.
    pub scenarios: Vec<Arc<Scenario>>,
    /// Modes (each scenario runs in those it allows).
    pub modes: Vec<Mode>,
    /// Trials per scenario × mode; `None`: each scenario's own count (`vary.instances`).
    pub trials: Option<u32>,
    /// Run seed.
    pub seed: u64,
    /// Concurrent trials.
    pub concurrency: usize,
    /// Provider.
    pub provider: ProviderSpec,
    /// Where the suite came from.
    pub suite_source: String,
    /// Pre-registered gates.
    pub gates: Option<RegisteredGates>,
    /// ctxbench version.
    pub version: String,
    /// Run only this shard of the matrix.
    pub shard: Option<Shard>,
    /// Token and cost caps.
    pub caps: Option<RunCaps>,
    /// Shared provider plumbing (cassette, HTTP clients).
    pub services: Services,
    /// Continue the run already in `run_dir` (`--resume`) instead of creating one.
    pub resume: bool,
}

impl RunPlan {
    /// The trials of this run: the whole matrix in its stable order, or this shard's part
    /// of it (every N-th trial starting at K − 1, so shards are balanced across scenarios
    /// and modes, and a trial's result does not depend on which shard ran it).
    pub fn matrix(&self) -> Vec<TrialSpec> {
        let full = self.full_matrix();
        match self.shard {
            None => full,
            Some(shard) => full
                .into_iter()
                .enumerate()
                .filter(|(i, _)| *i as u64 % shard.count as u64 == (shard.index - 1) as u64)
                .map(|(_, t)| t)
                .collect(),
        }
    }

    /// Every trial of the unsharded matrix, in a stable order.
    pub fn full_matrix(&self) -> Vec<TrialSpec> {
        let mut out = Vec::new();
        for s in &self.scenarios {
            for &mode in &self.modes {
                if !s.modes.contains(&mode) {
                    continue;
                }
                for trial in 0..self.trials_of(s) {
                    out.push(TrialSpec {
                        scenario: s.clone(),
                        mode,
                        trial,
                        run_seed: self.seed,
                        provider: self.provider.clone(),
                        variant: None,
                        services: self.services.clone(),
                    });
                }
            }
        }
        out
    }

    /// Trials per mode of scenario `s`: `--trials`, else the scenario's own count.
    pub fn trials_of(&self, s: &Scenario) -> u32 {
        self.trials.unwrap_or(s.vary.instances)
    }

    fn manifest(&self, matrix_size: u64, full_matrix_size: u64) -> Manifest {
        Manifest {
            schema: MANIFEST_SCHEMA.into(),
            run_id: self.run_id.clone(),
            created_at: now_rfc3339(),
            ctxbench_version: self.version.clone(),
            seed: self.seed,
            provider: self.provider.name().into(),
            modes: self.modes.clone(),
            trials: self.trials,
            concurrency: self.concurrency as u32,
            suite_source: self.suite_source.clone(),
            scenarios: self
                .scenarios
                .iter()
                .map(|s| ManifestScenario {
                    id: s.id.clone(),
                    title: s.title.clone(),
                    tags: s.tags.clone(),
                    source: s.source.clone(),
                    source_hash: s.source_hash.clone(),
                    modes: self
                        .modes
                        .iter()
                        .copied()
                        .filter(|m| s.modes.contains(m))
                        .collect(),
                    trials: self.trials_of(s),
                })
                .collect(),
            matrix_size,
            gates: self.gates.clone(),
            provider_config: Some(self.provider.config()),
            shard: self.shard,
            full_matrix_size: Some(full_matrix_size),
            caps: self.caps.clone(),
            cassette: self.services.cassette.as_ref().map(|c| CassetteUse {
                mode: if c.replaying() { "replay" } else { "record" }.into(),
                path: c.path().display().to_string(),
            }),
            resumes: Vec::new(),
            sut: Some(match self.services.sut.external() {
                Some(e) => format!("exec:{}", e.command()),
                None => "reference".into(),
            }),
            stopped: None,
        }
    }
}

fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// Counts of a finished run (or of what this invocation added on `--resume`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunTotals {
    /// Trials run by this invocation.
    pub trials: u64,
    /// Trials that passed.
    pub passed: u64,
    /// Trials errored by infrastructure.
    pub errored: u64,
    /// Trials already complete when a `--resume` started (not run again).
    pub resumed_done: u64,
    /// Trials not run because a cap was reached.
    pub skipped_by_cap: u64,
    /// Why the run stopped early, when it did.
    pub stopped: Option<RunStop>,
}

/// Tokens and cost spent so far, against the run's caps.
#[derive(Debug, Default)]
struct Meter {
    input: std::sync::atomic::AtomicU64,
    output: std::sync::atomic::AtomicU64,
}

impl Meter {
    fn add(&self, input: u64, output: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        self.input.fetch_add(input, Relaxed);
        self.output.fetch_add(output, Relaxed);
    }

    /// The cap that has been reached, if any.
    fn exceeded(&self, caps: &RunCaps) -> Option<RunStop> {
        use std::sync::atomic::Ordering::Relaxed;
        let (input, output) = (self.input.load(Relaxed), self.output.load(Relaxed));
        if let Some(max) = caps.max_tokens {
            if input + output >= max {
                return Some(RunStop {
                    reason: "token_cap".into(),
                    detail: format!(
                        "{} provider tokens used, cap {max}; no further trials started",
                        input + output
                    ),
                    trials_done: 0,
                });
            }
        }
        if let (Some(max), Some((pin, pout))) = (caps.max_cost_usd, caps.price_per_mtok) {
            let cost = (input as f64 * pin + output as f64 * pout) / 1e6;
            if cost >= max {
                return Some(RunStop {
                    reason: "cost_cap".into(),
                    detail: format!(
                        "estimated ${cost:.4} spent, cap ${max:.4}; no further trials started"
                    ),
                    trials_done: 0,
                });
            }
        }
        None
    }
}

/// Execute a plan: write the manifest (with pre-registered gates) first — or, on
/// `--resume`, reopen the run and skip its complete trials — then run every trial,
/// appending each as it finishes. Trials already running when a cap is reached finish;
/// no new one starts, and the manifest says why the run stopped.
pub async fn execute(
    plan: RunPlan,
    judge: Arc<dyn Judge>,
    observer: Arc<dyn RunObserver>,
) -> Result<RunTotals, RunError> {
    let matrix = plan.matrix();
    if matrix.is_empty() {
        return Err(RunError::Plan(
            "the run matrix is empty: no scenario runs in the selected modes".into(),
        ));
    }
    // The engine and the record count with the model's estimator: load its tables while
    // the run sets up, not inside the first trial.
    let estimators: std::collections::HashSet<_> = matrix
        .iter()
        .map(|t| t.provider.effective_model(&t.scenario.model).estimator)
        .collect();
    for kind in estimators {
        ctxbench_adapters::estimate::prewarm(kind);
    }
    let full = plan.full_matrix().len() as u64;
    let total = matrix.len() as u64;
    let token = workspace_token(&plan.run_id);
    let (store, manifest, segment, done) = if plan.resume {
        // The interrupted run's scratch workspaces (one per trial it had in flight).
        let workspaces_removed = sweep_workspaces(&token);
        let caps = plan.caps.clone();
        let (store, scan) = RunStore::resume(&plan.run_dir, |manifest, scan| {
            manifest.resumes.push(ResumeRecord {
                at: now_rfc3339(),
                trials_done: scan.done.len() as u64,
                torn: scan.torn.clone(),
                repaired: scan.repaired.clone(),
                rerun: scan.rerun.clone(),
                workspaces_removed,
            });
            manifest.stopped = None;
            if let Some(caps) = caps {
                manifest.caps = Some(caps);
            }
        })?;
        let manifest = scan.manifest;
        let segment = manifest.resumes.len() as u32;
        (store, manifest, segment, scan.done)
    } else {
        let manifest = plan.manifest(total, full);
        let store = RunStore::create(&plan.run_dir, &manifest)?;
        (store, manifest, 0, Default::default())
    };
    let writer = Writer::start(store)?;
    let todo: Vec<TrialSpec> = matrix
        .into_iter()
        .filter(|t| !done.contains(&t.trial_id()))
        .collect();
    let resumed_done = total - todo.len() as u64;
    let remaining = todo.len() as u64;
    observer.started(remaining);
    let permits = Arc::new(Semaphore::new(plan.concurrency.max(1)));
    let meter = Arc::new(Meter::default());
    let stop: Arc<std::sync::Mutex<Option<RunStop>>> = Arc::default();
    let finished = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for spec in todo {
        let permits = permits.clone();
        let judge = judge.clone();
        let writer = writer.sender();
        let observer = observer.clone();
        let finished = finished.clone();
        let meter = meter.clone();
        let stop = stop.clone();
        let caps = plan.caps.clone();
        let token = token.clone();
        tasks.spawn(async move {
            let permit = permits
                .acquire_owned()
                .await
                .map_err(|e| RunError::Task(e.to_string()))?;
            if let Some(reached) = caps.as_ref().and_then(|c| meter.exceeded(c)) {
                stop.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get_or_insert(reached);
                return Ok::<_, RunError>(Done::Skipped);
            }
            let work = run_workdir(&token)?;
            let record = run_trial(&spec, work.path()).await;
            meter.add(
                record.stats.total_input_tokens,
                record.stats.total_output_tokens,
            );
            let judgement = judge.judge(&spec.scenario, &record);
            let (row, requests, events, messages) = rows(&spec, &record, judgement, segment);
            drop(record);
            drop(work);
            let (passed, status) = (row.passed, row.outcome.status);
            // The trial's CPU work is done: the next trial may start while the writer
            // appends and syncs this one.
            drop(permit);
            let written = tokio::sync::oneshot::channel();
            let shown = row.clone();
            if writer
                .send((
                    TrialRows {
                        trial: row,
                        requests,
                        events,
                        messages,
                    },
                    written.0,
                ))
                .is_err()
                || written.1.await != Ok(true)
            {
                return Ok(Done::StoreFailed);
            }
            let n = finished.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            observer.trial_finished(&shown, n, remaining);
            Ok(Done::Written(passed, status))
        });
    }
    let mut totals = RunTotals {
        resumed_done,
        ..RunTotals::default()
    };
    let mut store_failed = false;
    while let Some(joined) = tasks.join_next().await {
        let joined = match joined {
            // Trials cancelled after the writer failed: its error is the one to report.
            Err(e) if store_failed && e.is_cancelled() => continue,
            other => other,
        };
        match joined.map_err(|e| RunError::Task(e.to_string()))?? {
            Done::Written(passed, status) => {
                totals.trials += 1;
                totals.passed += passed as u64;
                totals.errored += (status == crate::storage::schema::OutcomeStatus::Errored) as u64;
            }
            Done::Skipped => totals.skipped_by_cap += 1,
            Done::StoreFailed => {
                store_failed = true;
                tasks.abort_all();
            }
        }
    }
    let written = writer.finish();
    if store_failed || written.is_err() {
        written?;
        return Err(RunError::Task("the run storage writer stopped".into()));
    }
    observer.finished();
    let stopped = stop.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(mut s) = stopped {
        s.trials_done = resumed_done + totals.trials;
        let mut manifest = manifest;
        manifest.stopped = Some(s.clone());
        crate::storage::write_manifest(&plan.run_dir, &manifest)?;
        totals.stopped = Some(s);
    }
    Ok(totals)
}

/// How a trial task ended.
enum Done {
    /// Run, judged and durably appended: (passed, outcome status).
    Written(bool, crate::storage::schema::OutcomeStatus),
    /// Not started: a cap was reached.
    Skipped,
    /// Run, but the storage writer failed (its error is returned by [`Writer::finish`]).
    StoreFailed,
}

/// How long the storage writer keeps collecting finished trials after the first one of a
/// group arrives before it appends and syncs them (group commit with a commit window, like
/// PostgreSQL's `commit_delay`). Without it a group was whatever happened to be waiting —
/// about one trial when trials are short — so short trials paid four `fdatasync` calls each
/// (3,193 syncs for the 1,000-trial peer benchmark, a third of a core). A trial's rows still
/// reach disk, in order and synced, before it counts as finished; the window only delays
/// that by at most this much.
const COMMIT_WINDOW: std::time::Duration = std::time::Duration::from_millis(20);

/// Most trials in one storage group (bounds the memory a group's buffers take).
const MAX_GROUP: usize = 256;

/// A finished trial's rows and where to say whether they were appended.
type Append = (TrialRows, tokio::sync::oneshot::Sender<bool>);

/// The run storage writer: one thread that appends finished trials with group commit.
///
/// Trial tasks hand over their rows and wait (asynchronously, holding no concurrency
/// permit) until the rows are durable; meanwhile the next trials run. The thread takes
/// every trial that arrives within [`COMMIT_WINDOW`] of the first and appends them as one
/// group ([`RunStore::append_trials`]:
/// one sync per file per group instead of four per trial), so the syncs — milliseconds
/// each on a real disk — are neither on the trials' critical path nor on the async
/// runtime's worker threads. A trial counts as finished (progress, totals) only once its
/// group is synced, exactly as before.
struct Writer {
    tx: std::sync::mpsc::Sender<Append>,
    thread: std::thread::JoinHandle<Result<(), StorageError>>,
}

impl Writer {
    fn start(mut store: RunStore) -> Result<Self, StorageError> {
        let (tx, rx) = std::sync::mpsc::channel::<Append>();
        let store_dir = store.dir().to_path_buf();
        let thread = std::thread::Builder::new()
            .name("ctxbench-store".into())
            .spawn(move || {
                while let Ok(first) = rx.recv() {
                    let mut group = vec![first];
                    let window = std::time::Instant::now() + COMMIT_WINDOW;
                    while group.len() < MAX_GROUP {
                        let left = window.saturating_duration_since(std::time::Instant::now());
                        match rx.recv_timeout(left) {
                            Ok(next) => group.push(next),
                            // The window closed, or every trial has handed over.
                            Err(_) => break,
                        }
                    }
                    let (rows, acks): (Vec<_>, Vec<_>) = group.into_iter().unzip();
                    let result = store.append_trials(rows);
                    let ok = result.is_ok();
                    for ack in acks {
                        let _ = ack.send(ok);
                    }
                    result?;
                }
                Ok(())
            })
            .map_err(|source| StorageError::Io {
                path: store_dir,
                source,
            })?;
        Ok(Writer { tx, thread })
    }

    fn sender(&self) -> std::sync::mpsc::Sender<Append> {
        self.tx.clone()
    }

    /// Wait until everything handed over is appended; the first storage error, if any.
    fn finish(self) -> Result<(), StorageError> {
        drop(self.tx);
        match self.thread.join() {
            Ok(r) => r,
            Err(_) => Err(StorageError::Io {
                path: PathBuf::from("run storage"),
                source: std::io::Error::other("the run storage writer panicked"),
            }),
        }
    }
}

/// Where trials' scratch workspaces (instruction file, session ledger) live:
/// `$CTXBENCH_WORKDIR`, else `/dev/shm` when it is a directory, else none (the system temp
/// directory is the fallback). Every trial creates a workspace, a session ledger and
/// snapshot files and renames its snapshot at every commit (once per turn); on a RAM disk
/// each of those costs microseconds instead of a disk metadata update — with a snapshot
/// after every record, as before group commit, it halved the wall time of short trials
/// (docs/benchmarks.md).
fn workdir_base() -> Option<PathBuf> {
    std::env::var_os("CTXBENCH_WORKDIR")
        .map(PathBuf::from)
        .or_else(|| {
            let shm = PathBuf::from("/dev/shm");
            shm.is_dir().then_some(shm)
        })
}

/// A trial's scratch workspace named `<prefix>XXXXXX` under [`workdir_base`] (else the
/// system temp directory); deleted when dropped.
fn workdir_with_prefix(prefix: &str) -> Result<tempfile::TempDir, StorageError> {
    if let Some(base) = workdir_base() {
        if let Ok(dir) = tempfile::Builder::new().prefix(prefix).tempdir_in(&base) {
            return Ok(dir);
        }
    }
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .map_err(|source| StorageError::Io {
            path: std::env::temp_dir(),
            source,
        })
}

/// A scratch workspace for one trial outside any run (selftest); deleted after the trial.
pub fn trial_workdir() -> Result<tempfile::TempDir, StorageError> {
    workdir_with_prefix("ctxbench-")
}

/// The part of a run's workspace names that identifies the run: a process killed with
/// `kill -9` cannot delete its trials' workspaces, so `--resume` finds them by it.
pub fn workspace_token(run_id: &str) -> String {
    use sha2::Digest;
    hex::encode(&sha2::Sha256::digest(run_id.as_bytes())[..6])
}

fn workspace_prefix(token: &str) -> String {
    format!("ctxbench-{token}-")
}

/// A scratch workspace for one trial of the run with `token` ([`workspace_token`]);
/// deleted after the trial, or by [`sweep_workspaces`] if the process dies first.
pub fn run_workdir(token: &str) -> Result<tempfile::TempDir, StorageError> {
    workdir_with_prefix(&workspace_prefix(token))
}

/// Delete the workspaces an interrupted run with `token` left behind (in the workspace
/// root and the system temp directory); returns how many. Workspaces of other runs are
/// never touched: the token is in the name.
pub fn sweep_workspaces(token: &str) -> u64 {
    let prefix = workspace_prefix(token);
    let mut removed = 0;
    let mut bases: Vec<PathBuf> = workdir_base().into_iter().collect();
    bases.push(std::env::temp_dir());
    bases.dedup();
    for base in bases {
        let Ok(entries) = std::fs::read_dir(&base) else {
            continue;
        };
        for entry in entries.flatten() {
            let ours = entry
                .file_name()
                .to_str()
                .is_some_and(|n| n.starts_with(&prefix));
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            if ours && is_dir && std::fs::remove_dir_all(entry.path()).is_ok() {
                removed += 1;
            }
        }
    }
    removed
}

/// Build the storage rows of a judged trial, secrets redacted.
pub fn rows(
    spec: &TrialSpec,
    record: &TrialRecord,
    judgement: Judgement,
    segment: u32,
) -> (
    TrialRow,
    Vec<crate::storage::schema::RequestRow>,
    Vec<EventRow>,
    Vec<MessageRow>,
) {
    let redactor = Redactor::new(&spec.scenario.secrets);
    let red_opt = |s: &Option<String>| s.as_ref().map(|s| redactor.redact(s));
    let verdicts = judgement
        .verdicts
        .into_iter()
        .map(|v| Verdict {
            summary: redactor.redact(&v.summary),
            evidence: v
                .evidence
                .into_iter()
                .map(|e| Evidence {
                    expected: red_opt(&e.expected),
                    seen: red_opt(&e.seen),
                    excerpt: red_opt(&e.excerpt),
                    note: redactor.redact(&e.note),
                    ..e
                })
                .collect(),
            ..v
        })
        .collect();
    let recall = judgement
        .recall
        .into_iter()
        .map(|r| RecallRow {
            answer: red_opt(&r.answer),
            expected: redactor.redact(&r.expected),
            ..r
        })
        .collect();
    let mut outcome = record.outcome.clone();
    outcome.detail = redactor.redact(&outcome.detail);
    let trial = TrialRow {
        schema: TRIAL_SCHEMA.into(),
        trial_id: record.trial_id.clone(),
        segment,
        scenario: record.scenario.clone(),
        tags: spec.scenario.tags.clone(),
        mode: record.mode,
        provider: record.provider.clone(),
        model: record.model.clone(),
        trial: record.trial,
        seed: record.seed,
        instance: spec.scenario.vary.instance_label(record.trial),
        outcome,
        expected_outcome: expected_text(spec.scenario.expect.outcome_for(record.mode)),
        passed: judgement.passed,
        verdicts,
        recall,
        stats: record.stats.clone(),
        started_at: record.started_at.clone(),
        elapsed_ms: record.elapsed_ms,
    };
    let requests = record
        .requests
        .iter()
        .map(|r| crate::storage::schema::RequestRow {
            segment,
            ..r.row.clone()
        })
        .collect();
    let events = record
        .events
        .iter()
        .map(|e| EventRow {
            schema: EVENT_SCHEMA.into(),
            trial_id: record.trial_id.clone(),
            segment,
            seq: e.seq,
            step: e.step,
            kind: e.event.kind().into(),
            data: redactor.redact_json(&e.event.data()),
        })
        .collect();
    let messages = record
        .messages
        .iter()
        .map(|(hash, m)| MessageRow {
            schema: MESSAGE_SCHEMA.into(),
            hash: hash.clone(),
            message: redactor.redact_message(m),
        })
        .collect();
    (trial, requests, events, messages)
}

/// The expected outcome as text, e.g. `success` or `limit_reached(before_provider_call)`.
pub fn expected_text(o: &crate::scenario::ExpectedOutcome) -> String {
    use crate::scenario::ExpectedOutcome;
    match o {
        ExpectedOutcome::Success => "success".into(),
        ExpectedOutcome::Any => "any".into(),
        ExpectedOutcome::LimitReached {
            before_provider_call: true,
        } => "limit_reached(before_provider_call)".into(),
        ExpectedOutcome::LimitReached { .. } => "limit_reached".into(),
    }
}
