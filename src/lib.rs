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
    quiet_on_closed_stdout();
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

/// Exit status when the reader of standard output went away (`ctxbench run | head`): what
/// a process killed by SIGPIPE reports, as every classic Unix tool does. The run itself is
/// complete and on disk; only printing stopped.
pub const EXIT_CLOSED_STDOUT: i32 = 141;

/// `println!` panics when stdout is a closed pipe (Rust ignores SIGPIPE). That is not a
/// crash of ctxbench: exit quietly with [`EXIT_CLOSED_STDOUT`] instead of printing a panic.
fn quiet_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(EXIT_CLOSED_STDOUT);
        }
        default(info);
    }));
}
