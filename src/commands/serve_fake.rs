//! `ctxbench serve-fake`: the fake provider over HTTP, for any agent runtime or for
//! `ctxbench run --provider openai --base-url …`.

use std::io::Write;
use std::sync::Arc;

use anyhow::Context;
use ctxbench_adapters::serve::{
    FakeServer, FakeServerConfig, FaultPlan, HttpFault, RandomFaults, ScheduledFault, TrialLimits,
};
use ctxbench_harness::connect::trial_key;
use ctxbench_harness::fake_server::SuiteScripts;
use ctxbench_harness::seed::trial_seed;
use ctxbench_harness::Mode;

use crate::cli::ServeFakeArgs;
use crate::exit;

pub fn serve_fake(args: ServeFakeArgs) -> anyhow::Result<i32> {
    let suite = crate::suite::load(args.suite.as_deref()).map_err(|d| {
        eprintln!("{}", crate::safe(&d.to_string()));
        exit::usage(format!("{} problem(s) in the suite", d.0.len()))
    })?;
    let default_key = match &args.scenario {
        Some(id) => {
            if !suite.iter().any(|s| &s.id == id) {
                return Err(exit::usage(format!("unknown scenario `{id}`")));
            }
            trial_key(id, trial_seed(args.seed, id, 0), Mode::Compact, 0)
        }
        None => ctxbench_adapters::serve::DEFAULT_TRIAL_KEY.to_string(),
    };
    let faults = fault_plan(&args)?;
    if args.max_trials == 0 {
        return Err(exit::usage("--max-trials must be at least 1"));
    }
    let resolver = Arc::new(SuiteScripts::with_cache(
        suite.into_iter().map(Arc::new),
        args.script_cache,
    ));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind((args.bind.as_str(), args.port))
            .await
            .with_context(|| format!("binding {}:{}", args.bind, args.port))
            .map_err(|e| exit::usage(format!("{e:#}")))?;
        let server = FakeServer::new(
            resolver,
            FakeServerConfig {
                default_key,
                faults,
                limits: TrialLimits {
                    max_trials: args.max_trials,
                    idle_ttl: (args.trial_ttl > 0)
                        .then(|| std::time::Duration::from_secs(args.trial_ttl)),
                    ..TrialLimits::default()
                },
            },
        );
        let (_, handle) = server.spawn_on(listener).context("starting the server")?;
        let mut out = std::io::stdout();
        writeln!(out, "CTXBENCH_FAKE_URL={}", handle.base_url())?;
        writeln!(
            out,
            "CTXBENCH_FAKE_ANTHROPIC_URL={}",
            handle.anthropic_base_url()
        )?;
        out.flush()?;
        eprintln!(
            "serving the fake provider at {} (OpenAI chat completions; per trial: {}/t/<scenario>~<trial-seed>~<mode>~<trial>/v1) \
             and {} (Anthropic messages and count_tokens); Ctrl-C stops",
            handle.base_url(),
            format_args!("http://{}", handle.addr()),
            handle.anthropic_base_url(),
        );
        tokio::signal::ctrl_c().await.context("waiting for Ctrl-C")?;
        handle.shutdown().await;
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(exit::OK)
}

fn fault_kind(text: &str) -> Result<HttpFault, String> {
    let (name, arg) = match text.split_once(':') {
        Some((n, a)) => (n, Some(a)),
        None => (text, None),
    };
    let num = |default: u64| -> Result<u64, String> {
        arg.map_or(Ok(default), |a| {
            a.parse()
                .map_err(|_| format!("fault `{text}`: `{a}` is not a number of milliseconds"))
        })
    };
    Ok(match name.trim() {
        "429" => HttpFault::RateLimit {
            retry_after_ms: num(1000)?,
        },
        "hang" => HttpFault::Hang { ms: num(600_000)? },
        "truncated" => HttpFault::TruncatedBody,
        "malformed" => HttpFault::MalformedBody,
        s => match s.parse::<u16>() {
            Ok(status) if (500..=599).contains(&status) && arg.is_none() => {
                HttpFault::ServerError { status }
            }
            _ => {
                return Err(format!(
                "fault `{text}`: expected 429[:RETRY_MS], 5xx, hang[:MS], truncated or malformed"
            ))
            }
        },
    })
}

fn fault_plan(args: &ServeFakeArgs) -> anyhow::Result<FaultPlan> {
    let mut plan = FaultPlan::default();
    for f in &args.faults {
        let (n, kind) = f
            .split_once(':')
            .ok_or_else(|| exit::usage(format!("--fault `{f}`: expected N:KIND, e.g. 3:429")))?;
        let request: u64 =
            n.parse().ok().filter(|&n| n > 0).ok_or_else(|| {
                exit::usage(format!("--fault `{f}`: N must be a request number ≥ 1"))
            })?;
        plan.at_request.push(ScheduledFault {
            request,
            fault: fault_kind(kind).map_err(exit::usage)?,
        });
    }
    if let Some(rate) = args.fault_rate {
        if !(0.0..=1.0).contains(&rate) {
            return Err(exit::usage("--fault-rate must be between 0 and 1"));
        }
        let names: Vec<String> = if args.fault_kinds.is_empty() {
            ["429", "503", "truncated", "malformed"]
                .map(String::from)
                .to_vec()
        } else {
            args.fault_kinds.clone()
        };
        let kinds = names
            .iter()
            .map(|k| fault_kind(k))
            .collect::<Result<Vec<_>, _>>()
            .map_err(exit::usage)?;
        plan.random = Some(RandomFaults {
            rate,
            seed: args.fault_seed,
            kinds,
        });
    }
    Ok(plan)
}
