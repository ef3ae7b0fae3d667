//! # ctxbench — the command-line tool
//!
//! Thin commands wiring the crates together: `ctxbench-harness` runs trials,
//! `ctxbench-graders` judges them, `ctxbench-reports` aggregates, gates and renders.
//! Parsing happens in two stages: [`cli`] mirrors the flags; each command resolves them into
//! a plan (scenarios loaded, gates registered, output opened) before anything runs.

pub mod cli;
pub mod commands;
pub mod exit;
pub mod suite;

use clap::Parser;

/// Untrusted text as printed on a terminal: control characters and bidirectional
/// overrides spelled out (see [`ctxbench_harness::visible`]).
pub(crate) fn safe(s: &str) -> std::borrow::Cow<'_, str> {
    ctxbench_harness::visible::terminal_safe(s)
}

/// Parse arguments, run the command, map the result to an exit code.
pub fn main_impl() -> i32 {
    let cli = match cli::Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = match e.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                    exit::OK
                }
                _ => exit::USAGE,
            };
            let _ = e.print();
            return code;
        }
    };
    match commands::dispatch(cli) {
        Ok(code) => code,
        Err(err) => {
            if is_broken_pipe(&err) {
                return exit::OK;
            }
            eprintln!("ctxbench: error: {}", safe(&err.to_string()));
            for cause in err.chain().skip(1) {
                eprintln!("  caused by: {}", safe(&cause.to_string()));
            }
            err.downcast_ref::<exit::Coded>()
                .map(|c| c.code)
                .unwrap_or(exit::FAILURE)
        }
    }
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
