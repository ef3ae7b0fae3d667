//! `ctxbench list`.

use std::io::Write;

use crate::cli::ListArgs;
use crate::exit;

pub fn list(args: ListArgs) -> anyhow::Result<i32> {
    let scenarios = match crate::suite::load(args.suite.as_deref()) {
        Ok(s) => s,
        Err(d) => {
            eprintln!("{d}");
            return Ok(exit::USAGE);
        }
    };
    let mut out = std::io::stdout().lock();
    let width = scenarios.iter().map(|s| s.id.len()).max().unwrap_or(2);
    for s in &scenarios {
        let modes: Vec<&str> = s.modes.iter().map(|m| m.as_str()).collect();
        writeln!(
            out,
            "{:width$}  [{}]  ({})  {}",
            s.id,
            s.tags.join(", "),
            modes.join(","),
            s.title
        )?;
    }
    Ok(exit::OK)
}
