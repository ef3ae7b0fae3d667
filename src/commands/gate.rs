//! `ctxbench gate`.

use std::path::Path;

use crate::cli::GateArgs;
use crate::exit;

/// The gates to evaluate: the given file, else those registered in the run, else the default.
pub fn resolve_gates(
    path: Option<&Path>,
    run: &Path,
) -> anyhow::Result<ctxbench_reports::GatesFile> {
    if let Some(p) = path {
        let text = std::fs::read_to_string(p)
            .map_err(|e| exit::usage(format!("reading gates file {}: {e}", p.display())))?;
        return ctxbench_reports::GatesFile::parse(&text, &p.display().to_string())
            .map_err(|e| exit::usage(e.to_string()));
    }
    let manifest = run.join("manifest.json");
    if let Ok(text) = std::fs::read_to_string(&manifest) {
        if let Ok(m) = serde_json::from_str::<ctxbench_harness::storage::schema::Manifest>(&text) {
            if let Some(g) = m.gates {
                return ctxbench_reports::GatesFile::parse(&g.text, &g.source)
                    .map_err(|e| exit::usage(e.to_string()));
            }
        }
    }
    ctxbench_reports::GatesFile::parse(ctxbench_reports::DEFAULT_GATES, "builtin")
        .map_err(|e| exit::usage(e.to_string()))
}

pub fn gate(args: GateArgs) -> anyhow::Result<i32> {
    let mut gates = resolve_gates(args.gates.as_deref(), &args.run)?;
    gates.exploratory = args.exploratory;
    let run = match ctxbench_reports::load_run(&args.run) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("ctxbench: cannot evaluate gates: {e}");
            return Ok(exit::CANNOT_EVALUATE);
        }
    };
    let report = ctxbench_reports::evaluate(&run, &gates);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for g in &report.gates {
            let observed = g
                .observed
                .map(|v| format!("{v:.4}"))
                .unwrap_or_else(|| "—".into());
            let line = format!(
                "  {:<32} {:<14} observed {:<10} {}",
                g.name,
                g.status.as_str(),
                observed,
                g.detail
            );
            println!("{}", crate::safe(&line));
        }
        println!(
            "verdict: {}",
            crate::safe(&ctxbench_reports::verdict_line(&report))
        );
    }
    Ok(report.exit_code)
}
