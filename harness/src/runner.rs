//! The runner: executes the matrix scenario × mode × trial with bounded concurrency and
//! appends every finished trial to run storage.
//!
//! The runner knows nothing about grading: a [`Judge`] (implemented by `ctxbench-graders`)
//! turns each [`TrialRecord`] into verdicts, so dependencies keep flowing one way.

use std::path::PathBuf;
use std::sync::Arc;

use thiserror::Error;
use tokio::sync::{Mutex, Semaphore};

use crate::driver::{run_trial, ProviderSpec, TrialSpec};
use crate::mode::Mode;
use crate::progress::RunObserver;
use crate::record::TrialRecord;
use crate::redact::Redactor;
use crate::scenario::Scenario;
use crate::storage::schema::{
    EventRow, Evidence, Manifest, ManifestScenario, MessageRow, RecallRow, RegisteredGates,
    TrialRow, Verdict, EVENT_SCHEMA, MANIFEST_SCHEMA, MESSAGE_SCHEMA, TRIAL_SCHEMA,
};
use crate::storage::{RunStore, StorageError};

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
    /// Trials per scenario × mode.
    pub trials: u32,
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
}

impl RunPlan {
    /// The trials of the matrix, in a stable order.
    pub fn matrix(&self) -> Vec<TrialSpec> {
        let mut out = Vec::new();
        for s in &self.scenarios {
            for &mode in &self.modes {
                if !s.modes.contains(&mode) {
                    continue;
                }
                for trial in 0..self.trials {
                    out.push(TrialSpec {
                        scenario: s.clone(),
                        mode,
                        trial,
                        run_seed: self.seed,
                        provider: self.provider.clone(),
                        mutation: None,
                    });
                }
            }
        }
        out
    }

    fn manifest(&self, matrix_size: u64) -> Manifest {
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
                })
                .collect(),
            matrix_size,
            gates: self.gates.clone(),
        }
    }
}

fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// Counts of a finished run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunTotals {
    /// Trials run.
    pub trials: u64,
    /// Trials that passed.
    pub passed: u64,
    /// Trials errored by infrastructure.
    pub errored: u64,
}

/// Execute a plan: write the manifest (with pre-registered gates) first, then run every
/// trial, appending each as it finishes.
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
    let total = matrix.len() as u64;
    let store = Arc::new(Mutex::new(RunStore::create(
        &plan.run_dir,
        &plan.manifest(total),
    )?));
    observer.started(total);
    let permits = Arc::new(Semaphore::new(plan.concurrency.max(1)));
    let done = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for spec in matrix {
        let permits = permits.clone();
        let judge = judge.clone();
        let store = store.clone();
        let observer = observer.clone();
        let done = done.clone();
        tasks.spawn(async move {
            let _permit = permits
                .acquire_owned()
                .await
                .map_err(|e| RunError::Task(e.to_string()))?;
            let work = tempfile::tempdir().map_err(|source| StorageError::Io {
                path: std::env::temp_dir(),
                source,
            })?;
            let record = run_trial(&spec, work.path()).await;
            let judgement = judge.judge(&spec.scenario, &record);
            let (row, requests, events, messages) = rows(&spec, &record, judgement);
            store
                .lock()
                .await
                .append_trial(&row, &requests, &events, messages)?;
            let n = done.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            observer.trial_finished(&row, n, total);
            Ok::<_, RunError>((row.passed, row.outcome.status))
        });
    }
    let mut totals = RunTotals::default();
    while let Some(joined) = tasks.join_next().await {
        let (passed, status) = joined.map_err(|e| RunError::Task(e.to_string()))??;
        totals.trials += 1;
        totals.passed += passed as u64;
        totals.errored += (status == crate::storage::schema::OutcomeStatus::Errored) as u64;
    }
    observer.finished();
    Ok(totals)
}

/// Build the storage rows of a judged trial, secrets redacted.
pub fn rows(
    spec: &TrialSpec,
    record: &TrialRecord,
    judgement: Judgement,
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
            ..r
        })
        .collect();
    let mut outcome = record.outcome.clone();
    outcome.detail = redactor.redact(&outcome.detail);
    let trial = TrialRow {
        schema: TRIAL_SCHEMA.into(),
        trial_id: record.trial_id.clone(),
        scenario: record.scenario.clone(),
        tags: spec.scenario.tags.clone(),
        mode: record.mode,
        provider: record.provider.clone(),
        model: record.model.clone(),
        trial: record.trial,
        seed: record.seed,
        outcome,
        expected_outcome: expected_text(&spec.scenario.expect.outcome),
        passed: judgement.passed,
        verdicts,
        recall,
        stats: record.stats.clone(),
        started_at: record.started_at.clone(),
        elapsed_ms: record.elapsed_ms,
    };
    let requests = record.requests.iter().map(|r| r.row.clone()).collect();
    let events = record
        .events
        .iter()
        .map(|e| EventRow {
            schema: EVENT_SCHEMA.into(),
            trial_id: record.trial_id.clone(),
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
