//! `ctxbench selftest`: prove the graders can fail.

use std::io::Write;
use std::sync::Arc;

use anyhow::Context;
use ctxbench_harness::engine::mutants::Mutation;
use ctxbench_harness::selftest::selftest_on as run_selftest;
use ctxbench_harness::Mode;

use crate::cli::SelftestArgs;
use crate::exit;

pub fn selftest(args: SelftestArgs) -> anyhow::Result<i32> {
    let mut modes = Vec::new();
    for m in &args.modes {
        let mode: Mode = m.trim().parse().map_err(exit::usage)?;
        if !modes.contains(&mode) {
            modes.push(mode);
        }
    }
    let scenarios = match crate::suite::load(args.suite.as_deref()) {
        Ok(s) => s.into_iter().map(Arc::new).collect::<Vec<_>>(),
        Err(d) => {
            eprintln!("{d}");
            return Ok(exit::USAGE);
        }
    };
    let concurrency = args.concurrency.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
    });
    let sut = crate::commands::run::sut(&args.sut, args.agent_timeout)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(concurrency.clamp(1, 64))
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let report = runtime.block_on(run_selftest(
        &scenarios,
        &modes,
        &Mutation::ALL,
        args.seed,
        concurrency,
        Arc::new(ctxbench_graders::Graders),
        sut,
    ));
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "reference engine: {} trials, {} invariant failure(s)",
        report.reference_trials,
        report.reference_failures.len()
    )?;
    for (trial, grader) in &report.reference_failures {
        writeln!(out, "  FAIL {grader} on {trial}")?;
    }
    let width = report
        .mutants
        .iter()
        .map(|m| m.mutation.as_str().len())
        .max()
        .unwrap_or(8);
    writeln!(out, "{:width$}  caught by", "mutant")?;
    for m in &report.mutants {
        let by: Vec<&str> = m.caught_by.iter().map(String::as_str).collect();
        writeln!(
            out,
            "{:width$}  {}",
            m.mutation.as_str(),
            if by.is_empty() {
                "NOT CAUGHT".to_string()
            } else {
                by.join(", ")
            }
        )?;
    }
    let caught = report
        .mutants
        .iter()
        .filter(|m| !m.caught_by.is_empty())
        .count();
    writeln!(
        out,
        "mutation score: {caught}/{} ({:.0}%)",
        report.mutants.len(),
        report.score() * 100.0
    )?;
    Ok(if report.passed() {
        exit::OK
    } else {
        exit::GATE_FAILED
    })
}
