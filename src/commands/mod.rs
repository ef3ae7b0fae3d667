//! One module per command; each resolves its flags into a plan, then runs it.

mod agent;
mod conformance;
mod gate;
mod inspect;
mod list;
mod report;
mod run;
mod selftest;
mod serve_fake;
mod validate;

use crate::cli::{Cli, Command};

/// Run the parsed command; returns the exit code.
pub fn dispatch(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Run(a) => run::run(*a),
        Command::Validate(a) => validate::validate(a),
        Command::Report(a) => report::report(a),
        Command::Gate(a) => gate::gate(a),
        Command::List(a) => list::list(a),
        Command::Selftest(a) => selftest::selftest(a),
        Command::ServeFake(a) => serve_fake::serve_fake(a),
        Command::Agent => agent::agent(),
        Command::Conformance(a) => conformance::conformance(a),
        Command::Inspect(a) => inspect::inspect(a),
    }
}
