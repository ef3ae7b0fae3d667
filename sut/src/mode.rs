//! Context-management modes (seed 000 §Budget calculation, "Recommended modes").

use serde::{Deserialize, Serialize};

/// How the engine manages context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Send everything; report budgets and provider usage, never warn or stop.
    Off,
    /// Preflight every request; warn before an over-budget one; stop only when mandatory
    /// context cannot fit.
    Warn,
    /// Use and create checkpoints to stay within budget.
    Compact,
}

impl Mode {
    /// All modes, in report order.
    pub const ALL: [Mode; 3] = [Mode::Off, Mode::Warn, Mode::Compact];

    /// `off`, `warn` or `compact`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Off => "off",
            Mode::Warn => "warn",
            Mode::Compact => "compact",
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "off" => Ok(Mode::Off),
            "warn" => Ok(Mode::Warn),
            "compact" => Ok(Mode::Compact),
            other => Err(format!(
                "unknown mode `{other}` (expected one of: off, warn, compact)"
            )),
        }
    }
}
