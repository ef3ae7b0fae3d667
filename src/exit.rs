//! Documented exit codes.
//!
//! | code | meaning |
//! | --- | --- |
//! | 0 | success; for `run`/`gate`: every gate passed |
//! | 1 | a gate failed |
//! | 2 | bad input: arguments, scenario files, gates file, run directory |
//! | 3 | gates could not be evaluated (missing data, candidate mode absent); runs that are not shards of one run are bad input (2) |
//! | 4 | the run itself failed (storage, harness error) |

/// Success.
pub const OK: i32 = 0;
/// A gate failed.
pub const GATE_FAILED: i32 = 1;
/// Bad input.
pub const USAGE: i32 = 2;
/// Gates could not be evaluated.
pub const CANNOT_EVALUATE: i32 = 3;
/// The run failed.
pub const FAILURE: i32 = 4;

/// An error that carries its exit code through anyhow.
#[derive(Debug)]
pub struct Coded {
    /// Exit code.
    pub code: i32,
    /// Message.
    pub message: String,
}

impl std::fmt::Display for Coded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Coded {}

/// A bad-input error (exit 2).
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Coded {
        code: USAGE,
        message: message.into(),
    })
}
