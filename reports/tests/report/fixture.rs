//! Small synthetic run directories, written by serializing the harness schema structs.
//!
//! The "good" fixture (numbers the tests hand-compute from):
//!
//! - scenario `s1` tagged `long-session`; modes off, warn, compact; trials 0 and 1;
//! - every trial succeeds and passes; verdicts `budget-respected`, `transcript-immutable`
//!   and `recall` pass; two fact probes, both correct;
//! - window 1000, buffer 200; two requests per trial (steps 0 and 1, seq 1 and 2):
//!   - off: provider input 200 then 400 (estimate exact);
//!   - warn: 150 then 300 (estimate exact);
//!   - compact trial 0: est 100 / provider 100, est 90 / provider 100;
//!   - compact trial 1: est 110 / provider 100, est 200 / provider 200.

use std::io::Write;
use std::path::Path;

use ctxbench_harness::storage::schema::*;
use ctxbench_harness::Mode;

pub struct Fx {
    pub manifest: Manifest,
    pub trials: Vec<TrialRow>,
    pub requests: Vec<RequestRow>,
    /// Written to `events.jsonl` only when non-empty.
    pub events: Vec<EventRow>,
}

pub fn event(trial_id: &str, seq: u64, step: u64, kind: &str, data: serde_json::Value) -> EventRow {
    EventRow {
        schema: EVENT_SCHEMA.into(),
        trial_id: trial_id.into(),
        segment: 0,
        seq,
        step,
        kind: kind.into(),
        data,
    }
}

pub fn manifest(run_id: &str) -> Manifest {
    Manifest {
        schema: MANIFEST_SCHEMA.into(),
        run_id: run_id.into(),
        created_at: "2025-01-01T00:00:00Z".into(),
        ctxbench_version: "0.1.0".into(),
        seed: 7,
        provider: "fake".into(),
        modes: Mode::ALL.to_vec(),
        trials: Some(2),
        concurrency: 2,
        suite_source: "builtin".into(),
        scenarios: vec![ManifestScenario {
            id: "s1".into(),
            title: "Long session".into(),
            tags: vec!["long-session".into()],
            source: "builtin:s1.yaml".into(),
            source_hash: "ab".repeat(32),
            modes: Mode::ALL.to_vec(),
            trials: 2,
        }],
        matrix_size: 6,
        gates: None,
        ..Default::default()
    }
}

pub fn verdict(grader: &str, status: VerdictStatus) -> Verdict {
    Verdict {
        grader: grader.into(),
        status,
        summary: format!("{grader} ok"),
        evidence: vec![],
    }
}

pub fn trial(scenario: &str, mode: Mode, t: u32) -> TrialRow {
    TrialRow {
        schema: TRIAL_SCHEMA.into(),
        trial_id: format!("{scenario}/{mode}/{t}"),
        segment: 0,
        scenario: scenario.into(),
        tags: vec!["long-session".into()],
        mode,
        provider: "fake".into(),
        model: "fake-model".into(),
        trial: t,
        seed: 1000 + u64::from(t),
        instance: "as-written".into(),
        outcome: TrialOutcome {
            status: OutcomeStatus::Success,
            reason: String::new(),
            step: None,
            detail: String::new(),
            sut_fault: false,
        },
        expected_outcome: "success".into(),
        passed: true,
        verdicts: vec![
            verdict("budget-respected", VerdictStatus::Pass),
            verdict("transcript-immutable", VerdictStatus::Pass),
            verdict("recall", VerdictStatus::Pass),
        ],
        recall: vec![
            RecallRow {
                fact: "db".into(),
                step: 1,
                expected: "contains: PostgreSQL".into(),
                answer: Some("PostgreSQL".into()),
                correct: true,
                kind: "constraint".into(),
            },
            RecallRow {
                fact: "lang".into(),
                step: 1,
                expected: "contains: Rust".into(),
                answer: Some("Rust".into()),
                correct: true,
                kind: "constraint".into(),
            },
        ],
        stats: TrialStats {
            steps: 2,
            turns_completed: 2,
            requests: 2,
            transcript_hash: format!("hash-{scenario}-{mode}-{t}"),
            transcript_messages: 4,
            ..TrialStats::default()
        },
        started_at: "2025-01-01T00:00:01Z".into(),
        elapsed_ms: 12,
    }
}

pub fn request(tr: &TrialRow, seq: u64, step: u64, est: u64, provider: Option<u64>) -> RequestRow {
    RequestRow {
        schema: REQUEST_SCHEMA.into(),
        trial_id: tr.trial_id.clone(),
        segment: tr.segment,
        scenario: tr.scenario.clone(),
        mode: tr.mode,
        provider: "fake".into(),
        model: "fake-model".into(),
        trial: tr.trial,
        seq,
        step,
        round: 0,
        attempt: 1,
        sent: true,
        purpose: "turn".into(),
        budget: BudgetBreakdown {
            window: 1000,
            requested_output: 100,
            buffer: 200,
            reserve: 200,
            available_input: 800,
            instructions: est / 2,
            recent_tail: est - est / 2,
            total: est,
            ..BudgetBreakdown::default()
        },
        estimator: "cl100k_base".into(),
        estimation_method: "provider-tokenizer".into(),
        confidence: "exact".into(),
        observed_estimate: est,
        over_budget: false,
        warned: false,
        provider_input_tokens: provider,
        provider_output_tokens: provider.map(|_| 10),
        overflow_input_tokens: None,
        error_kind: None,
        retry_reason: None,
        instruction_hash: "i".repeat(64),
        checkpoint_id: None,
        message_hashes: vec![],
        latency_ms: 3,
    }
}

impl Fx {
    pub fn good(run_id: &str) -> Fx {
        Fx::wide(run_id, 1)
    }

    /// The good fixture's scenario `s1` repeated as `n` independent scenarios `s1`…`sn`
    /// (each its own session for the gates), with the same sizes and results: enough
    /// sessions and probes for the statistical gates to decide.
    pub fn wide(run_id: &str, n: u32) -> Fx {
        let mut trials = Vec::new();
        let mut requests = Vec::new();
        let mut manifest = manifest(run_id);
        let template = manifest.scenarios[0].clone();
        manifest.scenarios = (1..=n)
            .map(|k| ManifestScenario {
                id: format!("s{k}"),
                ..template.clone()
            })
            .collect();
        manifest.matrix_size = 6 * u64::from(n);
        for k in 1..=n {
            let id = format!("s{k}");
            Fx::scenario_rows(&id, &mut trials, &mut requests);
        }
        Fx {
            manifest,
            trials,
            requests,
            events: vec![],
        }
    }

    fn scenario_rows(id: &str, trials: &mut Vec<TrialRow>, requests: &mut Vec<RequestRow>) {
        {
            for mode in Mode::ALL {
                for t in 0..2u32 {
                    let tr = trial(id, mode, t);
                    let sizes: [(u64, u64); 2] = match (mode, t) {
                        (Mode::Off, _) => [(200, 200), (400, 400)],
                        (Mode::Warn, _) => [(150, 150), (300, 300)],
                        (Mode::Compact, 0) => [(100, 100), (90, 100)],
                        (Mode::Compact, _) => [(110, 100), (200, 200)],
                    };
                    for (i, (est, prov)) in sizes.into_iter().enumerate() {
                        requests.push(request(&tr, i as u64 + 1, i as u64, est, Some(prov)));
                    }
                    trials.push(tr);
                }
            }
        }
    }

    /// Every `warn` trial fails (the baseline hits the window, as on long sessions), so the
    /// candidate is shown non-inferior to it on the fixture's two pairs: with every pair
    /// passing in both modes, two pairs cannot show a regression under 5 points.
    pub fn warn_fails(&mut self) -> &mut Self {
        for t in self.trials.iter_mut().filter(|t| t.mode == Mode::Warn) {
            t.passed = false;
            t.outcome.status = OutcomeStatus::Failed;
            t.outcome.reason = "provider_overflow".into();
        }
        self
    }

    pub fn trial_mut(&mut self, id: &str) -> &mut TrialRow {
        self.trials
            .iter_mut()
            .find(|t| t.trial_id == id)
            .expect("fixture trial")
    }

    pub fn register(&mut self, text: &str) {
        self.manifest.gates = Some(RegisteredGates {
            source: "builtin".into(),
            sha256: ctxbench_reports::gates::sha256_hex(text),
            registered_at: "2025-01-01T00:00:00Z".into(),
            text: text.into(),
        });
    }

    /// Writes the run directory (no `events.jsonl` unless there are events: the reader
    /// must tolerate that).
    pub fn write(&self, dir: &Path) {
        std::fs::create_dir_all(dir).expect("mkdir");
        std::fs::write(
            dir.join("manifest.json"),
            serde_json::to_vec_pretty(&self.manifest).expect("manifest json"),
        )
        .expect("write manifest");
        write_jsonl(&dir.join("trials.jsonl"), &self.trials);
        write_jsonl(&dir.join("requests.jsonl"), &self.requests);
        if !self.events.is_empty() {
            write_jsonl(&dir.join("events.jsonl"), &self.events);
        }
    }
}

pub fn write_jsonl<T: serde::Serialize>(path: &Path, rows: &[T]) {
    let mut f = std::fs::File::create(path).expect("create jsonl");
    for r in rows {
        serde_json::to_writer(&mut f, r).expect("row json");
        f.write_all(b"\n").expect("newline");
    }
}

pub fn append(path: &Path, bytes: &[u8]) {
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .expect("open for append");
    f.write_all(bytes).expect("append");
}
