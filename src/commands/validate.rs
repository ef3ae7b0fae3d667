//! `ctxbench validate`.

use crate::cli::ValidateArgs;
use crate::exit;

pub fn validate(args: ValidateArgs) -> anyhow::Result<i32> {
    let mut problems = 0usize;
    let mut scenarios = 0usize;
    if args.paths.is_empty() {
        match crate::suite::builtin() {
            Ok(s) => scenarios += s.len(),
            Err(d) => {
                problems += d.0.len();
                eprintln!("{}", crate::safe(&d.to_string()));
            }
        }
    }
    for path in &args.paths {
        match ctxbench_harness::scenario::load_suite(path) {
            Ok(s) => scenarios += s.len(),
            Err(d) => {
                problems += d.0.len();
                eprintln!("{}", crate::safe(&d.to_string()));
            }
        }
    }
    if problems > 0 {
        eprintln!("ctxbench: {problems} problem(s) found; nothing was run");
        Ok(exit::USAGE)
    } else {
        println!("ok: {scenarios} scenario(s) valid");
        Ok(exit::OK)
    }
}
