//! `ctxbench report`.

use anyhow::Context;

use crate::cli::ReportArgs;
use crate::exit;

pub fn report(args: ReportArgs) -> anyhow::Result<i32> {
    let mut gates = super::gate::resolve_gates(args.gates.as_deref(), &args.runs[0])?;
    gates.exploratory = args.exploratory;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| args.runs[0].join("report"));
    let options = ctxbench_reports::ReportOptions {
        baseline: args.baseline.clone(),
        systems: args.systems.clone(),
    };
    let summary = ctxbench_reports::write_report_with(&args.runs, &out, &gates, &options)
        .map_err(|e| exit::usage(e.to_string()))
        .with_context(|| format!("building the report in {}", out.display()))?;
    for line in summary.mode_lines() {
        println!("  {line}");
    }
    println!("report: {}", out.join("index.html").display());
    if !args.baseline.is_empty() {
        println!(
            "compared with baseline: {}",
            out.join("baseline.csv").display()
        );
    }
    if !args.systems.is_empty() {
        println!(
            "systems side by side: {}",
            out.join("systems.csv").display()
        );
    }
    println!("system under test: {}", crate::safe(&summary.gates.sut));
    println!(
        "verdict: {}",
        crate::safe(&ctxbench_reports::verdict_line(&summary.gates))
    );
    // The report is written whatever the verdict; the exit code is the verdict's, exactly
    // as `ctxbench gate` gives it: 0 pass, 1 a gate failed, 3 INCOMPLETE (a gate could not
    // decide, the run lacks part of its matrix — shards, trials — or the gates are not the
    // registered ones and --exploratory was not given). A CI merge job acts on it.
    Ok(summary.gates.exit_code)
}
