//! Command-line flags, as close to what the user types as possible (stage one of two).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// The exit codes every command shares (`src/exit.rs`), shown under `--help`.
const EXIT_CODES: &str = "Exit codes:
  0  pass; selftest: every mutant caught; conformance: every check passed
  1  a gate failed, a mutant escaped, or a conformance check failed
  2  bad input: flags, scenario or gates files (file:line:column)
  3  INCOMPLETE: the evidence cannot decide (too few sessions, missing
     shards or trials)
  4  the run itself failed (run storage, an internal error); a failure of
     the system under test or its provider is a failed or errored trial

Where the rest is explained:
  stop reasons: docs/agent-protocol.md, \"Reasons\"
  agent failures: docs/agent-protocol.md, \"Failures of the agent…\"
  conformance checks: docs/runtime-authors.md
  gates and INCOMPLETE: docs/gates.md
  scenario and gates-file errors: docs/scenario-format.md";

/// What a runtime author meets, shown under `conformance --help` (pinned to the reason
/// vocabulary by a test below).
const AGENT_HELP: &str = "Exit codes:
  0  every check passed
  1  a check failed: each check prints its outcome and detail
  2  bad input: --sut is not exec:COMMAND, or the command cannot be parsed

Checks: handshake, a turn, restart, instruction edit, compact dry-run, garbage
tolerance, shutdown (docs/runtime-authors.md).

Reasons a turn that does not complete may carry (docs/agent-protocol.md, \"Reasons\"):
  limit_reached: mandatory_context_exceeds_budget, context_exhausted
  failed: provider_overflow, provider_overflow_after_output, provider_rejected,
    round_limit, infrastructure
  either, when a failed compaction stopped the turn: no_safe_completed_span,
    summarizer_failed, summary_invalid, summary_input_too_large,
    strategy_unavailable, no_progress, does_not_fit, checkpoint_write_failed,
    instructions_unreadable
Compaction outcomes: failed with a reason above; unchanged with already_compacted,
  nothing_to_compact, dry_run, mode_not_compact.

Failures of the agent itself end its trial as failed (docs/agent-protocol.md):
  agent_timeout, agent_crashed, agent_malformed_output, agent_protocol_version,
  agent_protocol_violation, agent_error, agent_io; agent_spawn_failed (the command
  cannot be started) leaves the trial errored.";

/// `report --help`: its exit codes are its verdict's.
const REPORT_HELP: &str =
    "Exit codes (the verdict's, as `ctxbench gate`; the report is written whatever the verdict):
  0  PASS: every gate passed
  1  FAIL: a gate failed
  2  bad input, no report: flags, gates file, an unreadable run directory, or
     directories that are not shards of one run (another system under test, seed,
     provider, --trials, ctxbench version, modes, suite, shard count, matrix size,
     registered gates or scenario text)
  3  INCOMPLETE: too little evidence, missing shards or trials, or gates other than
     the registered ones without --exploratory";

/// ctxbench — evaluate LLM-agent context management (budgeting, compaction, overflow
/// recovery) against a deterministic fake provider, and gate on the evidence.
#[derive(Debug, Parser)]
#[command(
    name = "ctxbench",
    version,
    about,
    long_about = None,
    propagate_version = true,
    after_help = EXIT_CODES
)]
pub struct Cli {
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// Commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the suite (built in by default) in every mode and write runs/<id>/ with its report.
    Run(Box<RunArgs>),
    /// Check scenario files; every problem with file:line:column and what was expected.
    Validate(ValidateArgs),
    /// (Re)build the report of one or more run directories (shards of one run merge); exit
    /// with its verdict, as gate does: 0 pass, 1 fail, 3 cannot evaluate.
    #[command(after_help = REPORT_HELP)]
    Report(ReportArgs),
    /// Evaluate the gates of a run; exit 0 pass, 1 fail, 3 cannot evaluate.
    Gate(GateArgs),
    /// List the scenarios of a suite with their tags.
    List(ListArgs),
    /// Run the suite against the reference engine and every deliberately broken variant;
    /// print which graders caught which mutant and the mutation score (exit 1 below 100%).
    Selftest(SelftestArgs),
    /// Serve the fake provider over HTTP in the OpenAI and Anthropic wire formats, streaming or
    /// not (loopback by default),
    /// with HTTP fault injection; prints `CTXBENCH_FAKE_URL=…` once it listens.
    ServeFake(ServeFakeArgs),
    /// The reference engine as an external agent speaking the `ctxbench.agent/1` protocol
    /// on stdio (use with `--sut exec:"ctxbench agent"`; see docs/agent-protocol.md).
    Agent,
    /// Check that an external agent speaks the `ctxbench.agent/1` protocol: handshake, a
    /// turn, restart, instruction edit, compact dry-run, garbage tolerance, shutdown.
    #[command(after_help = AGENT_HELP)]
    Conformance(ConformanceArgs),
    /// Show a run's trials in the terminal: failed trials first; with `--trial`, each
    /// request's budget by category, estimate against provider count, flags, compaction
    /// outcomes and what changed, then the failing graders' evidence.
    Inspect(InspectArgs),
}

/// `ctxbench inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// Run directory (also one still being written).
    #[arg(value_name = "RUN_DIR")]
    pub run: PathBuf,
    /// A trial id, e.g. `long-recall/compact/0`.
    #[arg(long, value_name = "ID")]
    pub trial: Option<String>,
    /// Only this request of the trial (its 1-based `seq`), with every message excerpt.
    #[arg(long, value_name = "N", requires = "trial")]
    pub request: Option<u64>,
    /// Colour: `auto` (on a terminal, unless NO_COLOR is set), `always` or `never`.
    #[arg(long, value_name = "WHEN", default_value = "auto")]
    pub color: String,
}

/// `ctxbench conformance`.
#[derive(Debug, Args)]
pub struct ConformanceArgs {
    /// The agent: `exec:COMMAND ARGS`.
    #[arg(long, value_name = "exec:CMD")]
    pub sut: String,
    /// Longest silence while a reply is pending, in seconds.
    #[arg(long, default_value_t = 30, value_name = "SECS")]
    pub agent_timeout: u64,
}

/// `ctxbench serve-fake`.
#[derive(Debug, Args)]
pub struct ServeFakeArgs {
    /// Scenario file or directory whose scripts it serves (default: the built-in suite).
    #[arg(long, value_name = "PATH")]
    pub suite: Option<PathBuf>,
    /// Address to bind. Anything but loopback exposes the fake to the network.
    #[arg(long, default_value = "127.0.0.1", value_name = "ADDR")]
    pub bind: String,
    /// Port (0 picks a free one).
    #[arg(long, default_value_t = 0, value_name = "PORT")]
    pub port: u16,
    /// Scenario played for requests that name no trial (no `/t/<key>/` path and no
    /// `x-ctxbench-trial` header) — e.g. an agent pointed at the plain base URL.
    #[arg(long, value_name = "ID")]
    pub scenario: Option<String>,
    /// Run seed for --scenario (trial 0's seed is derived from it, as `ctxbench run` does).
    #[arg(long, default_value_t = 0, value_name = "S")]
    pub seed: u64,
    /// Inject an HTTP fault at the N-th request of every trial: N:KIND with KIND one of
    /// 429[:RETRY_MS], 500, 502, 503, hang[:MS], truncated, malformed (repeatable).
    #[arg(long = "fault", value_name = "N:KIND")]
    pub faults: Vec<String>,
    /// Also fault this fraction of requests at random (seeded, reproducible).
    #[arg(long, value_name = "RATE")]
    pub fault_rate: Option<f64>,
    /// Kinds for --fault-rate, comma-separated (default: 429,503,truncated,malformed).
    #[arg(long, value_delimiter = ',', value_name = "KINDS")]
    pub fault_kinds: Vec<String>,
    /// Seed for --fault-rate.
    #[arg(long, default_value_t = 0, value_name = "S")]
    pub fault_seed: u64,
    /// Most trials held at once: a new trial key beyond it evicts the least recently used
    /// idle trial (whose next request is answered 410 `evicted_trial`).
    #[arg(long, default_value_t = 4096, value_name = "N")]
    pub max_trials: usize,
    /// Seconds of idleness after which a trial is evicted (0: never).
    #[arg(long, default_value_t = 1800, value_name = "SECS")]
    pub trial_ttl: u64,
    /// Instantiated scripts kept in memory (by scenario and trial seed); a script not kept
    /// is rebuilt on its trial's next request.
    #[arg(long, default_value_t = 32, value_name = "N")]
    pub script_cache: usize,
}

/// `ctxbench selftest`.
#[derive(Debug, Args)]
pub struct SelftestArgs {
    /// Scenario file or directory (default: the built-in suite).
    #[arg(long, value_name = "PATH")]
    pub suite: Option<PathBuf>,
    /// Modes to run (`off` makes no context decisions to break).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "warn,compact",
        value_name = "MODES"
    )]
    pub modes: Vec<String>,
    /// Run seed.
    #[arg(long, default_value_t = 0, value_name = "S")]
    pub seed: u64,
    /// Concurrent trials (default: number of CPUs).
    #[arg(long, value_name = "N")]
    pub concurrency: Option<usize>,
    /// System under test: `reference` (in process) or `exec:COMMAND ARGS`, an external
    /// agent speaking the `ctxbench.agent/1` protocol (mutants reach it through a test-only
    /// field only `ctxbench agent` honours).
    #[arg(long, default_value = "reference", value_name = "SUT")]
    pub sut: String,
    /// Longest silence of an external agent while a reply is pending, in seconds.
    #[arg(long, default_value_t = 120, value_name = "SECS")]
    pub agent_timeout: u64,
}

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProgressArg {
    /// A bar on a terminal, plain lines otherwise.
    Auto,
    /// Plain periodic lines.
    Plain,
    /// Nothing.
    None,
}

/// `ctxbench run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Scenario file or directory (default: the built-in suite).
    #[arg(long, value_name = "PATH")]
    pub suite: Option<PathBuf>,
    /// Only these scenario ids (repeatable).
    #[arg(long = "scenario", value_name = "ID")]
    pub scenarios: Vec<String>,
    /// Only scenarios with one of these tags (repeatable).
    #[arg(long = "tag", value_name = "TAG")]
    pub tags: Vec<String>,
    /// Modes to run, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "off,warn,compact",
        value_name = "MODES"
    )]
    pub modes: Vec<String>,
    /// Provider: `fake` (deterministic, in process), `openai[:MODEL]` (any OpenAI-compatible
    /// server; without MODEL each scenario's model name is sent), `anthropic:MODEL`,
    /// `deepseek:MODEL`, `ollama:MODEL`. Keys come from OPENAI_API_KEY, ANTHROPIC_API_KEY,
    /// DEEPSEEK_API_KEY.
    #[arg(long, default_value = "fake", value_name = "PROVIDER")]
    pub provider: String,
    /// Base URL of an OpenAI-compatible or Anthropic server, e.g. the one
    /// `ctxbench serve-fake` prints, or llama.cpp's `http://127.0.0.1:8080/v1`.
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Continue a killed or capped run: complete trials are kept, torn records cut off, the
    /// rest run (the plan comes from RUN_DIR's manifest).
    #[arg(long, value_name = "RUN_DIR", conflicts_with_all = [
        "suite", "scenarios", "tags", "modes", "provider", "base_url", "trials", "seed",
        "gates", "out", "shard", "record", "replay", "sut",
    ])]
    pub resume: Option<PathBuf>,
    /// Run only shard K of N of the trial matrix (merge shards with `ctxbench report`).
    #[arg(long, value_name = "K/N")]
    pub shard: Option<String>,
    /// Record every provider exchange to this cassette (JSON lines).
    #[arg(long, value_name = "FILE", conflicts_with = "replay")]
    pub record: Option<PathBuf>,
    /// Answer every provider request from this cassette; a request it lacks is an error
    /// naming scenario, mode, trial and step.
    #[arg(long, value_name = "FILE")]
    pub replay: Option<PathBuf>,
    /// Stop starting trials once the run has used this many provider tokens (input + output).
    #[arg(long, value_name = "TOKENS")]
    pub max_tokens: Option<u64>,
    /// Stop starting trials once the estimated cost reaches this many US dollars
    /// (needs --price).
    #[arg(long, value_name = "USD", requires = "price")]
    pub max_cost: Option<f64>,
    /// Prices for the cost estimate: US dollars per million input and output tokens.
    #[arg(long, value_name = "IN,OUT")]
    pub price: Option<String>,
    /// Timeout of one HTTP attempt, in seconds.
    #[arg(long, default_value_t = 180, value_name = "SECS")]
    pub request_timeout: u64,
    /// Longest wait a server's `Retry-After` is honoured for, in seconds (a longer ask
    /// waits this long and is counted in `retries_retry_after_capped`). Default: the smaller
    /// of --request-timeout and 60.
    #[arg(long, value_name = "SECS")]
    pub max_retry_after: Option<u64>,
    /// Attempts per HTTP request (the first included) before the trial counts as errored.
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub max_attempts: u32,
    /// Trials per scenario × mode [default: each scenario's `vary: {instances: N}`, else 1].
    #[arg(long, value_name = "N")]
    pub trials: Option<u32>,
    /// Concurrent trials (default: number of CPUs).
    #[arg(long, value_name = "N")]
    pub concurrency: Option<usize>,
    /// Run seed: the same seed gives byte-identical requests and CSVs (timing columns aside).
    #[arg(long, default_value_t = 0, value_name = "S")]
    pub seed: u64,
    /// Gates file (default: the built-in gates); registered in the manifest before the run.
    #[arg(long, value_name = "FILE")]
    pub gates: Option<PathBuf>,
    /// Run directory (default: runs/<run-id>).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// System under test: `reference` (the in-process reference engine) or
    /// `exec:COMMAND ARGS`, an external agent speaking the `ctxbench.agent/1` protocol on
    /// stdio, whose model is served on loopback (the fake provider, or `--provider`
    /// through ctxbench's recording proxy; docs/agent-protocol.md).
    #[arg(long, default_value = "reference", value_name = "SUT")]
    pub sut: String,
    /// Longest silence of an external agent while a reply is pending, in seconds; past
    /// it the trial errors with `agent_timeout`.
    #[arg(long, default_value_t = 120, value_name = "SECS")]
    pub agent_timeout: u64,
    /// Progress display.
    #[arg(long, value_enum, default_value_t = ProgressArg::Auto)]
    pub progress: ProgressArg,
    /// Print only the verdict line.
    #[arg(long, short)]
    pub quiet: bool,
}

/// `ctxbench validate`.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Scenario files or directories (default: the built-in suite).
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

/// `ctxbench report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Run directories (several shards merge into one report).
    #[arg(required = true, value_name = "RUN_DIR")]
    pub runs: Vec<PathBuf>,
    /// Gates file (default: the gates registered in the first run's manifest, else the
    /// built-in gates).
    #[arg(long, value_name = "FILE")]
    pub gates: Option<PathBuf>,
    /// Output directory (default: <first RUN_DIR>/report).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// A baseline run to compare with (repeat for its shards): per-mode and per-scenario
    /// differences in index.html, summary.md and baseline.csv.
    #[arg(long, value_name = "BASE_RUN_DIR")]
    pub baseline: Vec<PathBuf>,
    /// The run of another system under test on the same suite (repeatable, one directory
    /// each): shown side by side with this run in index.html, summary.md and systems.csv.
    #[arg(long = "system", value_name = "OTHER_RUN_DIR")]
    pub systems: Vec<PathBuf>,
    /// Evaluate `--gates` that differ from the registered ones as exploratory (stamped in
    /// every output); without it they give no verdict (exit 3).
    #[arg(long)]
    pub exploratory: bool,
}

/// `ctxbench gate`.
#[derive(Debug, Args)]
pub struct GateArgs {
    /// Run directory.
    #[arg(value_name = "RUN_DIR")]
    pub run: PathBuf,
    /// Gates file (default: the gates registered in the run's manifest, else the built-in
    /// gates).
    #[arg(long, value_name = "FILE")]
    pub gates: Option<PathBuf>,
    /// Evaluate gates that differ from the ones registered before the run: the verdict and
    /// every output are stamped exploratory. Without it such gates give no verdict (exit 3).
    #[arg(long)]
    pub exploratory: bool,
    /// Print the gate report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `ctxbench list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Scenario file or directory (default: the built-in suite).
    #[arg(long, value_name = "PATH")]
    pub suite: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    #[test]
    fn cli_is_consistent() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }

    use super::AGENT_HELP;
    use ctxbench_sut::outcome::reasons;

    /// Every reason of the vocabulary, and every agent failure, is named in the help a
    /// runtime author reads.
    #[test]
    fn the_agent_help_names_every_reason() {
        let agent = [
            "agent_spawn_failed",
            "agent_timeout",
            "agent_crashed",
            "agent_malformed_output",
            "agent_protocol_version",
            "agent_protocol_violation",
            "agent_error",
            "agent_io",
        ];
        for r in reasons::TURN
            .iter()
            .chain(reasons::COMPACTION_FAILED)
            .chain(reasons::UNCHANGED)
            .chain(&agent)
        {
            assert!(
                AGENT_HELP.contains(r),
                "{r} missing from conformance --help"
            );
        }
    }
}
