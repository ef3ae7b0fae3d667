//! `ctxbench list`.

use std::io::Write;

use crate::cli::ListArgs;
use crate::exit;

pub fn list(args: ListArgs) -> anyhow::Result<i32> {
    let scenarios = match crate::suite::load(args.suite.as_deref()) {
        Ok(s) => s,
        Err(d) => {
            eprintln!("{}", crate::safe(&d.to_string()));
            return Ok(exit::USAGE);
        }
    };
    let mut out = std::io::stdout().lock();
    let width = scenarios.iter().map(|s| s.id.len()).max().unwrap_or(2);
    for s in &scenarios {
        let modes: Vec<&str> = s.modes.iter().map(|m| m.as_str()).collect();
        let line = format!(
            "{:width$}  [{}]  ({})  {}",
            s.id,
            s.tags.join(", "),
            modes.join(","),
            s.title
        );
        writeln!(out, "{}", crate::safe(&line))?;
    }
    Ok(exit::OK)
}
