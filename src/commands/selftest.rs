//! `ctxbench selftest`: prove the graders can fail.

use std::io::Write;
use std::sync::Arc;

use anyhow::Context;
use ctxbench_harness::selftest::selftest as run_selftest;
use ctxbench_harness::Mode;
use ctxbench_sut::SutFactory;

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
            eprintln!("{}", crate::safe(&d.to_string()));
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
        // `ctxbench agent` is the reference engine too: its variants are the same.
        &ctxbench_engine::ReferenceFactory.variants(),
        args.seed,
        concurrency,
        Arc::new(ctxbench_graders::Graders),
        sut,
    ));
    // Scenario ids, grader names and error details are untrusted: written to a buffer,
    // printed through the terminal filter.
    let mut out = Vec::new();
    writeln!(
        out,
        "system under test: {} trials, {} invariant failure(s), {} errored",
        report.reference_trials,
        report.reference_failures.len(),
        report.reference_errors.len()
    )?;
    for (trial, grader) in &report.reference_failures {
        writeln!(out, "  FAIL {grader} on {trial}")?;
    }
    for (trial, detail) in &report.reference_errors {
        writeln!(
            out,
            "  ERRORED {trial}: {detail} (no baseline for its variants)"
        )?;
    }
    let width = report
        .mutants
        .iter()
        .map(|m| m.variant.name.len())
        .max()
        .unwrap_or(8)
        .max("variant".len());
    writeln!(
        out,
        "{:width$}  intended grader(s) → caught by · incidental",
        "variant"
    )?;
    for m in &report.mutants {
        let by: Vec<&str> = m.caught_by.iter().map(String::as_str).collect();
        let incidental: Vec<&str> = m.incidental.iter().map(String::as_str).collect();
        writeln!(
            out,
            "{:width$}  {} → {}{}{}",
            m.variant.name,
            m.variant.intended.join(", "),
            if by.is_empty() {
                "NOT CAUGHT".to_string()
            } else {
                by.join(", ")
            },
            if incidental.is_empty() {
                String::new()
            } else {
                format!(" · incidental: {}", incidental.join(", "))
            },
            if m.errored_in.is_empty() {
                String::new()
            } else {
                format!(" · {} errored trial(s)", m.errored_in.len())
            }
        )?;
    }
    let caught = report.mutants.iter().filter(|m| m.caught()).count();
    match report.score() {
        Some(score) => writeln!(
            out,
            "mutation score: {caught}/{} ({:.0}%) caught by an intended grader",
            report.mutants.len(),
            score * 100.0
        )?,
        None => writeln!(out, "mutation score: none (no variants to run)")?,
    }
    std::io::stdout()
        .lock()
        .write_all(crate::safe(&String::from_utf8_lossy(&out)).as_bytes())?;
    Ok(if report.passed() {
        exit::OK
    } else {
        exit::GATE_FAILED
    })
}
