//! `ctxbench run`: resolve the plan, register gates, run the matrix, write the report.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use ctxbench_harness::driver::ProviderSpec;
use ctxbench_harness::progress::{Progress, ProgressMode};
use ctxbench_harness::runner::{execute, RunPlan};
use ctxbench_harness::storage::schema::RegisteredGates;
use ctxbench_harness::Mode;

use crate::cli::{ProgressArg, RunArgs};
use crate::exit;

pub fn run(args: RunArgs) -> anyhow::Result<i32> {
    // Stage two: resolve everything before the first trial.
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
    if args.trials == 0 {
        return Err(exit::usage("--trials must be at least 1"));
    }
    let concurrency = args.concurrency.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
    });
    if concurrency == 0 {
        return Err(exit::usage("--concurrency must be at least 1"));
    }
    let all = match crate::suite::load(args.suite.as_deref()) {
        Ok(s) => s,
        Err(d) => {
            eprintln!("{d}");
            return Err(exit::usage(format!(
                "{} problem(s) in the suite; nothing was run",
                d.0.len()
            )));
        }
    };
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
    let run_id = new_run_id(args.seed);
    let run_dir = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("runs").join(&run_id));
    let plan = RunPlan {
        run_id: run_id.clone(),
        run_dir: run_dir.clone(),
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
    };
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
            other => anyhow::Error::new(other).context(format!("run {}", run_dir.display())),
        })?;
    let report_dir = run_dir.join("report");
    let summary =
        ctxbench_reports::write_report(std::slice::from_ref(&run_dir), &report_dir, &gates)
            .with_context(|| format!("writing the report of {}", run_dir.display()))?;
    if !args.quiet {
        println!(
            "ran {} trials ({} passed, {} errored) → {}",
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
    println!(
        "verdict: {}",
        ctxbench_reports::verdict_line(&summary.gates)
    );
    Ok(summary.gates.exit_code)
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
