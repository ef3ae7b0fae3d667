//! `ctxbench report`.

use anyhow::Context;

use crate::cli::ReportArgs;
use crate::exit;

pub fn report(args: ReportArgs) -> anyhow::Result<i32> {
    let gates = super::gate::resolve_gates(args.gates.as_deref(), &args.runs[0])?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| args.runs[0].join("report"));
    let summary = ctxbench_reports::write_report(&args.runs, &out, &gates)
        .map_err(|e| exit::usage(e.to_string()))
        .with_context(|| format!("building the report in {}", out.display()))?;
    for line in summary.mode_lines() {
        println!("  {line}");
    }
    println!("report: {}", out.join("index.html").display());
    println!(
        "verdict: {}",
        ctxbench_reports::verdict_line(&summary.gates)
    );
    Ok(exit::OK)
}
