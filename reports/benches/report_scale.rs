//! Scale benchmark of the report stage: synthesises a run directory with (by default)
//! 1,000,000 request rows in the run-storage format (`docs/run-storage.md`), then times
//! `ctxbench_reports::write_report` over it and prints wall time, peak RSS and the size of
//! every output file.
//!
//! ```text
//! cargo bench -p ctxbench-reports --bench report_scale                  # 1M rows
//! cargo bench -p ctxbench-reports --bench report_scale -- --rows 200000 --keep /tmp/rs
//! ```
//!
//! Options: `--rows N` (request rows), `--scenarios N`, `--trials N` (per scenario × mode),
//! `--hashes N` (message hashes per request row: they dominate real rows' size but the
//! report drops them), `--keep DIR` (write the run and report under DIR and keep them).
//!
//! Peak RSS is the kernel's high-water mark (`VmHWM` in `/proc/self/status`), reset after
//! the synthesis (by writing `5` to `/proc/self/clear_refs`), so it measures the report
//! alone. Not a libtest harness (`harness = false`): `cargo test` never runs it.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use ctxbench_harness::storage::schema::*;
use ctxbench_harness::sut::BudgetBreakdown;
use ctxbench_harness::Mode;

struct Opts {
    rows: u64,
    scenarios: u64,
    trials: u32,
    hashes: usize,
    keep: Option<PathBuf>,
}

fn parse() -> Opts {
    let mut o = Opts {
        rows: 1_000_000,
        scenarios: 10,
        trials: 4,
        hashes: 8,
        keep: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_default();
        match a.as_str() {
            "--rows" => o.rows = val().parse().unwrap_or(o.rows),
            "--scenarios" => o.scenarios = val().parse().unwrap_or(o.scenarios),
            "--trials" => o.trials = val().parse().unwrap_or(o.trials),
            "--hashes" => o.hashes = val().parse().unwrap_or(o.hashes),
            "--keep" => o.keep = Some(PathBuf::from(val())),
            // `cargo bench` passes `--bench`; ignore it and anything unknown.
            _ => {}
        }
    }
    o
}

/// `VmHWM` (peak resident set) of this process, in KiB.
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Resets `VmHWM` to the current RSS (Linux ≥ 4.0); false where unsupported.
fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// A tiny deterministic generator (no rand dependency needed in the bench).
fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

fn synthesise(dir: &Path, o: &Opts) -> std::io::Result<u64> {
    std::fs::create_dir_all(dir)?;
    let scenarios: Vec<String> = (0..o.scenarios)
        .map(|i| format!("long-session-{i:02}"))
        .collect();
    let manifest = Manifest {
        schema: MANIFEST_SCHEMA.into(),
        run_id: "scale-run".into(),
        created_at: "2025-01-01T00:00:00Z".into(),
        ctxbench_version: env!("CARGO_PKG_VERSION").into(),
        seed: 1,
        provider: "fake".into(),
        modes: Mode::ALL.to_vec(),
        trials: Some(o.trials),
        concurrency: 2,
        suite_source: "builtin".into(),
        scenarios: scenarios
            .iter()
            .map(|id| ManifestScenario {
                id: id.clone(),
                title: format!("Synthetic {id}"),
                tags: vec!["long-session".into()],
                source: format!("builtin:{id}.yaml"),
                source_hash: "ab".repeat(32),
                modes: Mode::ALL.to_vec(),
                trials: o.trials,
            })
            .collect(),
        matrix_size: o.scenarios * 3 * u64::from(o.trials),
        gates: None,
        ..Default::default()
    };
    std::fs::write(
        dir.join("manifest.json"),
        serde_json::to_vec_pretty(&manifest).map_err(std::io::Error::other)?,
    )?;

    let n_trials = o.scenarios * 3 * u64::from(o.trials);
    let per_trial = o.rows.div_ceil(n_trials.max(1));
    let mut trials_w = BufWriter::new(File::create(dir.join("trials.jsonl"))?);
    let mut req_w = BufWriter::with_capacity(1 << 20, File::create(dir.join("requests.jsonl"))?);
    let mut ev_w = BufWriter::new(File::create(dir.join("events.jsonl"))?);
    let hashes: Vec<String> = (0..o.hashes)
        .map(|i| format!("{:064x}", mix(i as u64)))
        .collect();
    let mut written = 0u64;
    for s in &scenarios {
        for mode in Mode::ALL {
            for t in 0..o.trials {
                let trial_id = format!("{s}/{mode}/{t}");
                let mut stats = TrialStats {
                    steps: per_trial,
                    turns_completed: per_trial,
                    transcript_hash: "cd".repeat(32),
                    transcript_messages: per_trial * 2,
                    ..TrialStats::default()
                };
                let mut ev_seq = 0u64;
                for i in 0..per_trial {
                    if written >= o.rows {
                        break;
                    }
                    let seed = mix(written);
                    let history = match mode {
                        Mode::Off | Mode::Warn => 40 * i,
                        Mode::Compact => 40 * (i % 200) + 500,
                    };
                    let est = 1_500 + history.min(120_000);
                    let noise = (seed % 200) as i64 - 100; // ±100 tokens
                    let provider = (est as i64 + noise).max(1) as u64;
                    let over = est > 120_000;
                    let row = RequestRow {
                        schema: REQUEST_SCHEMA.into(),
                        trial_id: trial_id.clone(),
                        segment: 0,
                        scenario: s.clone(),
                        mode,
                        provider: "fake".into(),
                        model: "fake-model".into(),
                        trial: t,
                        seq: i + 1,
                        step: i,
                        round: 0,
                        attempt: 1,
                        sent: true,
                        purpose: "turn".into(),
                        budget: BudgetBreakdown {
                            window: 128_000,
                            requested_output: 4_000,
                            buffer: 8_000,
                            reserve: 8_000,
                            available_input: 120_000,
                            instructions: 800,
                            memory: if mode == Mode::Compact { 300 } else { 0 },
                            recent_tail: history.min(120_000),
                            current_request: 200,
                            tool_schemas: 400,
                            continuation: 0,
                            framing: 100,
                            total: est,
                        },
                        estimator: "cl100k_base".into(),
                        estimation_method: "provider-tokenizer".into(),
                        confidence: "exact".into(),
                        observed_estimate: est,
                        over_budget: over,
                        warned: over && mode != Mode::Off,
                        provider_input_tokens: Some(provider),
                        provider_output_tokens: Some(50 + seed % 100),
                        overflow_input_tokens: None,
                        error_kind: None,
                        retry_reason: None,
                        instruction_hash: "e".repeat(64),
                        checkpoint_id: (mode == Mode::Compact && i >= 200)
                            .then(|| format!("ckpt-{}", i / 200)),
                        message_hashes: hashes.clone(),
                        latency_ms: seed % 50,
                    };
                    serde_json::to_writer(&mut req_w, &row).map_err(std::io::Error::other)?;
                    req_w.write_all(b"\n")?;
                    written += 1;
                    stats.requests += 1;
                    stats.total_input_tokens += provider;
                    stats.peak_input_tokens = stats.peak_input_tokens.max(provider);
                    if mode == Mode::Compact && i % 200 == 199 {
                        ev_seq += 1;
                        let ev = EventRow {
                            schema: EVENT_SCHEMA.into(),
                            trial_id: trial_id.clone(),
                            segment: 0,
                            seq: ev_seq,
                            step: i,
                            kind: "context.compaction.completed".into(),
                            data: serde_json::json!({
                                "trigger": "threshold",
                                "checkpoint_id": format!("ckpt-{}", i / 200 + 1),
                                "reclaimed_tokens": 7_500,
                                "summary_tokens": 300,
                                "summarized_from": 0,
                                "summarized_through": i,
                            }),
                        };
                        serde_json::to_writer(&mut ev_w, &ev).map_err(std::io::Error::other)?;
                        ev_w.write_all(b"\n")?;
                    }
                }
                let trial = TrialRow {
                    schema: TRIAL_SCHEMA.into(),
                    trial_id: trial_id.clone(),
                    segment: 0,
                    scenario: s.clone(),
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
                    passed: mix(written) % 10 != 0,
                    verdicts: vec![Verdict {
                        grader: "recall".into(),
                        status: VerdictStatus::Pass,
                        summary: "recall ok".into(),
                        evidence: vec![],
                    }],
                    recall: vec![RecallRow {
                        fact: "db".into(),
                        step: 1,
                        expected: "contains: PostgreSQL".into(),
                        answer: Some("PostgreSQL".into()),
                        correct: true,
                        kind: "constraint".into(),
                    }],
                    stats,
                    started_at: "2025-01-01T00:00:01Z".into(),
                    elapsed_ms: 1000,
                };
                serde_json::to_writer(&mut trials_w, &trial).map_err(std::io::Error::other)?;
                trials_w.write_all(b"\n")?;
            }
        }
    }
    trials_w.flush()?;
    req_w.flush()?;
    ev_w.flush()?;
    Ok(written)
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let o = parse();
    let tmp;
    let root = match &o.keep {
        Some(d) => d.clone(),
        None => {
            tmp = tempfile::tempdir()?;
            tmp.path().to_path_buf()
        }
    };
    let run_dir = root.join("run");
    let out_dir = root.join("report");

    let t0 = Instant::now();
    let rows = synthesise(&run_dir, &o)?;
    let jsonl = std::fs::metadata(run_dir.join("requests.jsonl"))?.len();
    println!(
        "synthesised {rows} request rows ({}) in {:.1} s",
        mib(jsonl),
        t0.elapsed().as_secs_f64()
    );

    let reset = reset_peak_rss();
    let before = peak_rss_kib().unwrap_or(0);
    let gates = ctxbench_reports::load_gates(None)?;
    let t1 = Instant::now();
    let summary = ctxbench_reports::write_report(std::slice::from_ref(&run_dir), &out_dir, &gates)?;
    let wall = t1.elapsed();
    let peak = peak_rss_kib().unwrap_or(0);
    println!(
        "report: {} trials, {} request rows in {:.2} s wall",
        summary.trials,
        summary.requests,
        wall.as_secs_f64()
    );
    println!(
        "peak RSS (VmHWM): {} ({}; before the report: {})",
        mib(peak * 1024),
        if reset {
            "reset after synthesis"
        } else {
            "NOT reset: includes synthesis"
        },
        mib(before * 1024)
    );
    for f in &summary.files {
        let size = std::fs::metadata(f).map(|m| m.len()).unwrap_or(0);
        println!(
            "  {:<16} {}",
            f.file_name().unwrap_or_default().to_string_lossy(),
            mib(size)
        );
    }
    println!(
        "verdict: {}",
        ctxbench_reports::verdict_line(&summary.gates)
    );
    Ok(())
}
