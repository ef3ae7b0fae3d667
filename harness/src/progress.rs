//! Progress display: an indicatif bar on a terminal, plain periodic lines otherwise (CI
//! logs), nothing when quiet. The runner only calls [`RunObserver`]; it never prints.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use crate::storage::schema::TrialRow;

/// Receives runner progress.
pub trait RunObserver: Send + Sync {
    /// The matrix is about to run.
    fn started(&self, total: u64);
    /// One trial finished.
    fn trial_finished(&self, row: &TrialRow, done: u64, total: u64);
    /// Every trial finished.
    fn finished(&self);
}

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressMode {
    /// A bar on a terminal, plain lines otherwise.
    Auto,
    /// Plain lines.
    Plain,
    /// Nothing.
    Quiet,
}

/// The standard observer.
pub struct Progress {
    bar: Option<ProgressBar>,
    plain: bool,
    last_line: Mutex<Instant>,
    every: Duration,
}

impl Progress {
    /// One progress factory for every command.
    pub fn new(mode: ProgressMode) -> Self {
        let tty = std::io::stderr().is_terminal();
        let (bar, plain) = match mode {
            ProgressMode::Quiet => (None, false),
            ProgressMode::Plain => (None, true),
            ProgressMode::Auto if tty => (Some(ProgressBar::hidden()), false),
            ProgressMode::Auto => (None, true),
        };
        Progress {
            bar,
            plain,
            last_line: Mutex::new(Instant::now()),
            every: Duration::from_secs(5),
        }
    }
}

impl RunObserver for Progress {
    fn started(&self, total: u64) {
        if let Some(bar) = &self.bar {
            bar.set_length(total);
            bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            if let Ok(style) = ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} trials  {msg}",
            ) {
                bar.set_style(style);
            }
        } else if self.plain {
            eprintln!("ctxbench: running {total} trials");
        }
    }

    fn trial_finished(&self, row: &TrialRow, done: u64, total: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(done);
            bar.set_message(format!(
                "{} {}",
                crate::visible::terminal_safe(&row.trial_id),
                row.outcome.status.as_str()
            ));
        } else if self.plain {
            let mut last = self.last_line.lock().unwrap_or_else(|e| e.into_inner());
            if done == total || last.elapsed() >= self.every {
                *last = Instant::now();
                eprintln!(
                    "ctxbench: {done}/{total} trials done (last: {} {})",
                    crate::visible::terminal_safe(&row.trial_id),
                    row.outcome.status.as_str()
                );
            }
        }
    }

    fn finished(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
