//! `ctxbench run`: resolve the plan, register gates, run the matrix, write the report.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use ctxbench_harness::cassette::Cassette;
use ctxbench_harness::connect::{HttpSettings, Services};
use ctxbench_harness::driver::ProviderSpec;
use ctxbench_harness::progress::{Progress, ProgressMode};
use ctxbench_harness::runner::{execute, RunPlan};
use ctxbench_harness::storage::schema::{Manifest, RegisteredGates, RunCaps, Shard};
use ctxbench_harness::Mode;

use crate::cli::{ProgressArg, RunArgs};
use crate::exit;

pub fn run(args: RunArgs) -> anyhow::Result<i32> {
    // Stage two: resolve everything before the first trial.
    let concurrency = args.concurrency.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
    });
    if concurrency == 0 {
        return Err(exit::usage("--concurrency must be at least 1"));
    }
    let caps = caps(&args)?;
    let (plan, gates) = match &args.resume {
        Some(dir) => resume_plan(&args, dir, concurrency, caps)?,
        None => fresh_plan(&args, concurrency, caps)?,
    };
    let run_dir = plan.run_dir.clone();
    let progress = Progress::new(match (args.quiet, args.progress) {
        (true, _) | (_, ProgressArg::None) => ProgressMode::Quiet,
        (_, ProgressArg::Plain) => ProgressMode::Plain,
        (_, ProgressArg::Auto) => ProgressMode::Auto,
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(concurrency.clamp(1, 64))
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let totals = runtime
        .block_on(execute(
            plan,
            Arc::new(ctxbench_graders::Graders),
            Arc::new(progress),
        ))
        .map_err(|e| match e {
            ctxbench_harness::runner::RunError::Plan(m) => exit::usage(m),
            // Refused before anything ran (e.g. a trial with two rows): bad input.
            ctxbench_harness::runner::RunError::Storage(
                e @ ctxbench_harness::storage::StorageError::NotResumable { .. },
            ) => exit::usage(e.to_string()),
            other => anyhow::Error::new(other).context(format!("run {}", run_dir.display())),
        })?;
    let report_dir = run_dir.join("report");
    let summary =
        ctxbench_reports::write_report(std::slice::from_ref(&run_dir), &report_dir, &gates)
            .with_context(|| format!("writing the report of {}", run_dir.display()))?;
    if !args.quiet {
        let resumed = if totals.resumed_done > 0 {
            format!(", {} already done", totals.resumed_done)
        } else {
            String::new()
        };
        println!(
            "ran {} trials ({} passed, {} errored{resumed}) → {}",
            totals.trials,
            totals.passed,
            totals.errored,
            run_dir.display()
        );
        for line in summary.mode_lines() {
            println!("  {line}");
        }
        println!("report: {}", report_dir.join("index.html").display());
    }
    if let Some(stop) = &totals.stopped {
        // A capped run is incomplete: its verdict covers only the trials it ran.
        eprintln!(
            "run stopped early ({}): {}; {} trials not run — continue with `ctxbench run --resume {}`",
            stop.reason,
            stop.detail,
            totals.skipped_by_cap,
            run_dir.display()
        );
        println!("verdict: INCOMPLETE (run stopped by a cap)");
        return Ok(exit::FAILURE);
    }
    println!(
        "verdict: {}",
        crate::safe(&ctxbench_reports::verdict_line(&summary.gates))
    );
    Ok(summary.gates.exit_code)
}

fn caps(args: &RunArgs) -> anyhow::Result<Option<RunCaps>> {
    let price = match &args.price {
        None => None,
        Some(p) => {
            let bad = || {
                exit::usage(format!(
                    "--price `{p}`: expected IN,OUT dollars per million tokens, e.g. 2.5,10"
                ))
            };
            let (a, b) = p.split_once(',').ok_or_else(bad)?;
            let a: f64 = a.trim().parse().map_err(|_| bad())?;
            let b: f64 = b.trim().parse().map_err(|_| bad())?;
            if !(a.is_finite() && b.is_finite() && a >= 0.0 && b >= 0.0) {
                return Err(bad());
            }
            Some((a, b))
        }
    };
    if args.max_tokens.is_none() && args.max_cost.is_none() {
        return Ok(None);
    }
    if let Some(c) = args.max_cost {
        if !(c.is_finite() && c > 0.0) {
            return Err(exit::usage(
                "--max-cost must be a positive number of dollars",
            ));
        }
    }
    Ok(Some(RunCaps {
        max_tokens: args.max_tokens,
        max_cost_usd: args.max_cost,
        price_per_mtok: price,
    }))
}

fn services(
    args: &RunArgs,
    concurrency: usize,
    seed: u64,
    provider: &ProviderSpec,
    record: Option<&Path>,
    replay: Option<&Path>,
    sut_text: &str,
) -> anyhow::Result<Services> {
    let cassette = match (record, replay) {
        (Some(p), _) => Some(Arc::new(
            Cassette::record(p).map_err(|e| exit::usage(e.to_string()))?,
        )),
        (_, Some(p)) => Some(Arc::new(
            Cassette::replay(p).map_err(|e| exit::usage(e.to_string()))?,
        )),
        _ => None,
    };
    if cassette.is_some() && *provider == ProviderSpec::Fake {
        return Err(exit::usage(
            "--record/--replay need an HTTP provider (the fake provider is already deterministic)",
        ));
    }
    if args.request_timeout == 0 || args.max_attempts == 0 {
        return Err(exit::usage(
            "--request-timeout and --max-attempts must be at least 1",
        ));
    }
    let settings = HttpSettings {
        max_in_flight: concurrency,
        max_attempts: args.max_attempts,
        attempt_timeout: std::time::Duration::from_secs(args.request_timeout),
        jitter_seed: seed,
        max_retry_after: max_retry_after(args),
    };
    let sut = sut(sut_text, args.agent_timeout)?;
    Services::connect(sut, provider, cassette, &settings).map_err(exit::usage)
}

/// `--max-retry-after`, else the smaller of `--request-timeout` and the retry layer's
/// default: a server's wait longer than one whole attempt may take is not worth honouring
/// in full.
fn max_retry_after(args: &RunArgs) -> std::time::Duration {
    args.max_retry_after
        .map(std::time::Duration::from_secs)
        .unwrap_or_else(|| {
            std::time::Duration::from_secs(args.request_timeout)
                .min(ctxbench_adapters::resilience::DEFAULT_MAX_RETRY_AFTER)
        })
}

/// Resolve `--sut` and `--agent-timeout`.
pub(crate) fn sut(
    sut: &str,
    timeout_secs: u64,
) -> anyhow::Result<ctxbench_harness::external::SutSpec> {
    if timeout_secs == 0 {
        return Err(exit::usage("--agent-timeout must be at least 1"));
    }
    ctxbench_harness::external::SutSpec::parse(
        sut,
        std::time::Duration::from_secs(timeout_secs),
        std::sync::Arc::new(ctxbench_engine::ReferenceFactory),
    )
    .map_err(exit::usage)
}

fn fresh_plan(
    args: &RunArgs,
    concurrency: usize,
    caps: Option<RunCaps>,
) -> anyhow::Result<(RunPlan, ctxbench_reports::GatesFile)> {
    let mut modes = Vec::new();
    for m in &args.modes {
        let mode: Mode = m.trim().parse().map_err(exit::usage)?;
        if !modes.contains(&mode) {
            modes.push(mode);
        }
    }
    if modes.is_empty() {
        return Err(exit::usage("--modes is empty"));
    }
    let provider: ProviderSpec = args.provider.parse().map_err(exit::usage)?;
    let provider = provider
        .with_base_url(args.base_url.clone())
        .map_err(exit::usage)?;
    if args.trials == Some(0) {
        return Err(exit::usage("--trials must be at least 1"));
    }
    let shard: Option<Shard> = match &args.shard {
        Some(s) => Some(s.parse().map_err(exit::usage)?),
        None => None,
    };
    let all = load_suite(args.suite.as_deref())?;
    for id in &args.scenarios {
        if !all.iter().any(|s| &s.id == id) {
            let known: Vec<&str> = all.iter().map(|s| s.id.as_str()).collect();
            return Err(exit::usage(format!(
                "unknown scenario `{id}` (known: {})",
                known.join(", ")
            )));
        }
    }
    let scenarios: Vec<Arc<_>> = all
        .into_iter()
        .filter(|s| args.scenarios.is_empty() || args.scenarios.contains(&s.id))
        .filter(|s| args.tags.is_empty() || s.tags.iter().any(|t| args.tags.contains(t)))
        .map(Arc::new)
        .collect();
    if scenarios.is_empty() {
        return Err(exit::usage(
            "no scenario matches the --scenario/--tag filters",
        ));
    }
    let (gates_text, gates_source) = match &args.gates {
        Some(p) => (
            std::fs::read_to_string(p)
                .with_context(|| format!("reading gates file {}", p.display()))
                .map_err(|e| exit::usage(format!("{e:#}")))?,
            p.display().to_string(),
        ),
        None => (
            ctxbench_reports::DEFAULT_GATES.to_string(),
            "builtin".to_string(),
        ),
    };
    let gates = ctxbench_reports::GatesFile::parse(&gates_text, &gates_source)
        .map_err(|e| exit::usage(e.to_string()))?;
    let services = services(
        args,
        concurrency,
        args.seed,
        &provider,
        args.record.as_deref(),
        args.replay.as_deref(),
        &args.sut,
    )?;
    let run_id = new_run_id(args.seed);
    let run_dir = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("runs").join(&run_id));
    let plan = RunPlan {
        run_id,
        run_dir,
        scenarios,
        modes,
        trials: args.trials,
        seed: args.seed,
        concurrency,
        provider,
        suite_source: args
            .suite
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "builtin".into()),
        gates: Some(RegisteredGates {
            source: gates_source,
            sha256: ctxbench_reports::gates::sha256_hex(&gates_text),
            registered_at: now_rfc3339(),
            text: gates_text,
        }),
        version: env!("CARGO_PKG_VERSION").to_string(),
        shard,
        caps,
        services,
        resume: false,
    };
    Ok((plan, gates))
}

/// Rebuild the plan of an existing run from its manifest, so the resumed matrix is exactly
/// the original one; the suite must still hash the same.
fn resume_plan(
    args: &RunArgs,
    dir: &Path,
    concurrency: usize,
    caps: Option<RunCaps>,
) -> anyhow::Result<(RunPlan, ctxbench_reports::GatesFile)> {
    let path = dir.join("manifest.json");
    let text = std::fs::read(&path)
        .with_context(|| format!("--resume {}: no run there", dir.display()))
        .map_err(|e| exit::usage(format!("{e:#}")))?;
    let manifest: Manifest = serde_json::from_slice(&text)
        .map_err(|e| exit::usage(format!("{}: not a ctxbench manifest: {e}", path.display())))?;
    let suite_path =
        (manifest.suite_source != "builtin").then(|| PathBuf::from(&manifest.suite_source));
    let all = load_suite(suite_path.as_deref())?;
    let mut scenarios = Vec::new();
    for m in &manifest.scenarios {
        let Some(s) = all.iter().find(|s| s.id == m.id) else {
            return Err(exit::usage(format!(
                "--resume: scenario `{}` of the run is no longer in the suite ({})",
                m.id, manifest.suite_source
            )));
        };
        if s.source_hash != m.source_hash {
            return Err(exit::usage(format!(
                "--resume: scenario `{}` changed since the run started ({} hashes {}, the run used {}); \
                 a resumed run must run the same scenarios — start a new run",
                m.id, s.source, s.source_hash, m.source_hash
            )));
        }
        scenarios.push(Arc::new(s.clone()));
    }
    let provider = match &manifest.provider_config {
        Some(c) => ProviderSpec::from_config(c).map_err(exit::usage)?,
        None => manifest.provider.parse().map_err(exit::usage)?,
    };
    let (gates_text, gates_source) = match &manifest.gates {
        Some(g) => (g.text.clone(), g.source.clone()),
        None => (
            ctxbench_reports::DEFAULT_GATES.to_string(),
            "builtin".to_string(),
        ),
    };
    let gates = ctxbench_reports::GatesFile::parse(&gates_text, &gates_source)
        .map_err(|e| exit::usage(e.to_string()))?;
    let (record, replay) = match &manifest.cassette {
        Some(c) if c.mode == "record" => (Some(PathBuf::from(&c.path)), None),
        Some(c) => (None, Some(PathBuf::from(&c.path))),
        None => (None, None),
    };
    let services = services(
        args,
        concurrency,
        manifest.seed,
        &provider,
        record.as_deref(),
        replay.as_deref(),
        // The resumed trials run against the same system under test as the first ones.
        manifest.sut.as_deref().unwrap_or(&args.sut),
    )?;
    let plan = RunPlan {
        run_id: manifest.run_id.clone(),
        run_dir: dir.to_path_buf(),
        scenarios,
        // Each scenario's own allowed modes filter the matrix exactly as at the start.
        modes: manifest.modes.clone(),
        trials: manifest.trials,
        seed: manifest.seed,
        concurrency,
        provider,
        suite_source: manifest.suite_source.clone(),
        gates: manifest.gates.clone(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        shard: manifest.shard,
        caps: caps.or(manifest.caps.clone()),
        services,
        resume: true,
    };
    Ok((plan, gates))
}

fn load_suite(path: Option<&Path>) -> anyhow::Result<Vec<ctxbench_harness::scenario::Scenario>> {
    crate::suite::load(path).map_err(|d| {
        eprintln!("{}", crate::safe(&d.to_string()));
        exit::usage(format!(
            "{} problem(s) in the suite; nothing was run",
            d.0.len()
        ))
    })
}

fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

fn new_run_id(seed: u64) -> String {
    let now = time::OffsetDateTime::now_utc();
    let stamp = now
        .format(time::macros::format_description!(
            "[year][month][day]T[hour][minute][second]Z"
        ))
        .unwrap_or_else(|_| "run".into());
    format!(
        "{stamp}-s{seed}-{:04x}",
        (now.nanosecond() ^ std::process::id()) & 0xffff
    )
}
