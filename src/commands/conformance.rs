//! `ctxbench conformance --sut exec:…`: the protocol checks a runtime adapter must pass.
//!
//! Each check is independent of the model's answers (a scripted scenario of the built-in
//! suite is served on loopback); the output is one `PASS`/`FAIL` line per check.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use ctxbench_adapters::fake::FakeTokenizer;
use ctxbench_adapters::serve::{FakeServer, FakeServerHandle};
use ctxbench_harness::external::process::AgentProcess;
use ctxbench_harness::external::protocol::{
    FromAgent, ModelEndpoint, Start, TestHooks, ToAgent, PROTOCOL_VERSION,
};
use ctxbench_harness::external::{materialise_tools, tools_index_path, SutSpec};
use ctxbench_harness::scenario::{Scenario, Step};
use ctxbench_sut::TurnOutcome;

use crate::cli::ConformanceArgs;
use crate::exit;

/// The scenario the checks play (small, with a tool call and an instruction edit).
const SCENARIO: &str = "instruction-change";
const KEY: &str = "conformance";

struct Outcome {
    name: &'static str,
    result: Result<String, String>,
}

pub fn conformance(args: ConformanceArgs) -> anyhow::Result<i32> {
    let spec = match crate::commands::run::sut(&args.sut, args.agent_timeout)? {
        SutSpec::External(e) => e,
        SutSpec::InProcess(_) => {
            return Err(exit::usage(
                "conformance checks an external agent: --sut exec:COMMAND ARGS",
            ))
        }
    };
    let suite = crate::suite::load(None).map_err(|d| exit::usage(d.to_string()))?;
    let scenario = suite
        .into_iter()
        .find(|s| s.id == SCENARIO)
        .with_context(|| format!("built-in scenario `{SCENARIO}` missing"))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let outcomes = runtime.block_on(checks(&spec.argv, spec.timeout, &scenario))?;
    let mut failed = 0;
    for o in &outcomes {
        match &o.result {
            Ok(note) => println!("PASS  {:<22} {note}", o.name),
            Err(why) => {
                failed += 1;
                println!("FAIL  {:<22} {why}", o.name)
            }
        }
    }
    println!(
        "conformance ({PROTOCOL_VERSION}): {}/{} checks passed",
        outcomes.len() - failed,
        outcomes.len()
    );
    Ok(if failed == 0 {
        exit::OK
    } else {
        exit::GATE_FAILED
    })
}

fn start_message(scenario: &Scenario, server: &FakeServerHandle, dir: &Path) -> Start {
    Start {
        id: 0,
        protocol: PROTOCOL_VERSION.into(),
        trial: format!("{}/warn/0", scenario.id),
        scenario: scenario.id.clone(),
        mode: "warn".into(),
        model: ModelEndpoint {
            base_url: server.trial_base_url(KEY),
            anthropic_base_url: Some(server.trial_anthropic_base_url(KEY)),
            name: scenario.model.model.clone(),
            context_window: scenario.model.context_window,
            max_output_tokens: scenario.model.max_output_tokens,
            capabilities: scenario.model.clone(),
        },
        workspace: dir.to_path_buf(),
        instructions_path: dir.join("AGENTS.md"),
        session_dir: dir.join("session"),
        context: scenario.context,
        tools: scenario.tools.clone(),
        redact: scenario.secrets.clone(),
        test: TestHooks::default(),
    }
}

async fn checks(
    argv: &[String],
    timeout: Duration,
    scenario: &Scenario,
) -> anyhow::Result<Vec<Outcome>> {
    let tokenizer = FakeTokenizer::new();
    let instance = scenario.instantiate(0, &|t: &str| tokenizer.count_text(t));
    let script = instance.fake.clone();
    let (_, server) = FakeServer::new(
        Arc::new(move |_: &str| Some(script.clone())),
        Default::default(),
    )
    .spawn()
    .await
    .context("starting the loopback model")?;
    let dir = tempfile::tempdir().context("creating a workspace")?;
    std::fs::write(dir.path().join("AGENTS.md"), &scenario.instructions)?;
    let turns: Vec<(u64, &ctxbench_harness::scenario::Turn)> = instance
        .steps
        .iter()
        .enumerate()
        .filter_map(|(i, s)| match s {
            Step::Turn(t) => Some((i as u64, t)),
            _ => None,
        })
        .collect();
    for (step, turn) in &turns {
        let calls: Vec<_> = turn.tool_rounds.iter().flatten().cloned().collect();
        materialise_tools(dir.path(), *step, &calls)?;
    }
    let mut out = Vec::new();
    let mut ignore = |_: FromAgent| {};

    // 1. Handshake.
    let mut agent = match AgentProcess::spawn(argv, dir.path(), &[], timeout) {
        Ok(a) => a,
        Err(e) => {
            out.push(Outcome {
                name: "handshake",
                result: Err(e.to_string()),
            });
            return Ok(out);
        }
    };
    let mut start = start_message(scenario, &server, dir.path());
    start.id = agent.next_id();
    let r = agent
        .request(&ToAgent::Start(Box::new(start.clone())), &mut ignore)
        .await;
    let ok = match r {
        Ok(FromAgent::Ready { protocol, .. }) if protocol == PROTOCOL_VERSION => {
            Ok(format!("ready, {protocol}"))
        }
        Ok(FromAgent::Ready { protocol, .. }) => Err(format!("announced `{protocol}`")),
        Ok(other) => Err(format!("unexpected reply {other:?}")),
        Err(e) => Err(e.to_string()),
    };
    let alive = ok.is_ok();
    out.push(Outcome {
        name: "handshake",
        result: ok,
    });
    if !alive {
        agent.close(Duration::from_secs(1)).await;
        return Ok(out);
    }

    // 2. A turn that reaches the model.
    let turn = |agent_step: usize| {
        turns
            .get(agent_step)
            .map(|(step, t)| (*step, t.user.clone()))
    };
    let (step, text) = turn(0).unwrap_or((0, "hello".into()));
    let id = agent.next_id();
    let r = agent
        .request(
            &ToAgent::UserTurn {
                id,
                step,
                text,
                tools_index: tools_index_path(dir.path(), step),
            },
            &mut ignore,
        )
        .await;
    let requests = server.provider_requests(KEY);
    out.push(Outcome {
        name: "turn",
        result: match r {
            Ok(FromAgent::TurnComplete { outcome, .. })
                if requests > 0 && matches!(outcome, TurnOutcome::Completed { .. }) =>
            {
                Ok(format!(
                    "turn_complete (completed), {requests} model request(s) on loopback"
                ))
            }
            Ok(FromAgent::TurnComplete { outcome, .. }) if requests > 0 => Err(format!(
                "the turn reached the model ({requests} request(s)) but did not complete: {}",
                describe(&outcome)
            )),
            Ok(FromAgent::TurnComplete { outcome, .. }) => Err(format!(
                "turn_complete {} without any request to the model endpoint (send the model's \
                 requests to `start.model.base_url`, with the model name `start.model.name`)",
                describe(&outcome)
            )),
            Ok(other) => Err(format!("unexpected reply {other:?}")),
            Err(e) => Err(e.to_string()),
        },
    });

    // 3. Instruction edit.
    std::fs::write(
        dir.path().join("AGENTS.md"),
        format!("{}\nAlso: answer briefly.\n", scenario.instructions),
    )?;
    let id = agent.next_id();
    let r = agent
        .request(
            &ToAgent::InstructionsEdited {
                id,
                step,
                path: dir.path().join("AGENTS.md"),
            },
            &mut ignore,
        )
        .await;
    out.push(ack("instruction edit", r));

    // 4. Restart.
    let id = agent.next_id();
    let r = agent
        .request(&ToAgent::Restart { id, step }, &mut ignore)
        .await;
    out.push(ack("restart", r));

    // 5. Compact dry-run: no model call.
    let before = server.provider_requests(KEY);
    let id = agent.next_id();
    let r = agent
        .request(
            &ToAgent::Compact {
                id,
                step,
                dry_run: true,
            },
            &mut ignore,
        )
        .await;
    let after = server.provider_requests(KEY);
    out.push(Outcome {
        name: "compact dry-run",
        result: match r {
            Ok(FromAgent::CompactComplete { .. }) if after == before => {
                Ok("compact_complete, no model call".into())
            }
            Ok(FromAgent::CompactComplete { .. }) => Err(format!(
                "a dry run sent {} model request(s)",
                after - before
            )),
            Ok(other) => Err(format!("unexpected reply {other:?}")),
            Err(e) => Err(e.to_string()),
        },
    });

    // 6. Garbage on stdin: tolerated, the next turn still works.
    let garbage = agent
        .send_raw("this is not a protocol message {", "garbage")
        .await;
    let (step, text) = turn(1).unwrap_or((step, "hello again".into()));
    let id = agent.next_id();
    let r = match garbage {
        Err(e) => Err(e),
        Ok(()) => {
            agent
                .request(
                    &ToAgent::UserTurn {
                        id,
                        step,
                        text,
                        tools_index: tools_index_path(dir.path(), step),
                    },
                    &mut ignore,
                )
                .await
        }
    };
    out.push(Outcome {
        name: "garbage tolerance",
        result: match r {
            Ok(FromAgent::TurnComplete {
                outcome: TurnOutcome::Completed { .. },
                ..
            }) => Ok("malformed input survived; next turn completed".into()),
            Ok(FromAgent::TurnComplete { outcome, .. }) => Err(format!(
                "after malformed input the next turn did not complete: {}",
                describe(&outcome)
            )),
            Ok(other) => Err(format!("unexpected reply {other:?}")),
            Err(e) => Err(e.to_string()),
        },
    });

    // 7. Shutdown: `bye`, then the process exits.
    let id = agent.next_id();
    let r = agent.request(&ToAgent::Shutdown { id }, &mut ignore).await;
    out.push(Outcome {
        name: "shutdown",
        result: match r {
            Ok(FromAgent::Bye { transcript, .. }) => Ok(match transcript {
                Some(t) => format!("bye with a transcript of {} message(s)", t.len()),
                None => "bye (no transcript: transcript graders will be not-applicable)".into(),
            }),
            Ok(other) => Err(format!("unexpected reply {other:?}")),
            Err(e) => Err(e.to_string()),
        },
    });
    agent.close(Duration::from_secs(5)).await;

    // 8. Version mismatch: a `start` in another protocol version must not be accepted.
    let dir2 = tempfile::tempdir().context("creating a workspace")?;
    std::fs::write(dir2.path().join("AGENTS.md"), &scenario.instructions)?;
    let result = match AgentProcess::spawn(argv, dir2.path(), &[], timeout) {
        Err(e) => Err(e.to_string()),
        Ok(mut agent) => {
            let mut start = start_message(scenario, &server, dir2.path());
            start.id = agent.next_id();
            start.protocol = "ctxbench.agent/0".into();
            let r = agent
                .request(&ToAgent::Start(Box::new(start)), &mut ignore)
                .await;
            agent.close(Duration::from_secs(1)).await;
            match r {
                Ok(FromAgent::Ready { protocol, .. }) if protocol == "ctxbench.agent/0" => {
                    Err("accepted a start in protocol `ctxbench.agent/0`".into())
                }
                Ok(FromAgent::Ready { protocol, .. }) => Ok(format!(
                    "announced its own version `{protocol}` (ctxbench rejects the mismatch)"
                )),
                Err(e) => Ok(format!("refused: {e}")),
                Ok(other) => Err(format!("unexpected reply {other:?}")),
            }
        }
    };
    out.push(Outcome {
        name: "version mismatch",
        result,
    });
    server.shutdown().await;
    Ok(out)
}

fn ack(
    name: &'static str,
    r: Result<FromAgent, ctxbench_harness::external::AgentError>,
) -> Outcome {
    Outcome {
        name,
        result: match r {
            Ok(FromAgent::Ack { .. }) => Ok("ack".into()),
            Ok(other) => Err(format!("unexpected reply {other:?}")),
            Err(e) => Err(e.to_string()),
        },
    }
}

/// A turn outcome for a person: its status, reason and detail.
fn describe(outcome: &TurnOutcome) -> String {
    match outcome {
        TurnOutcome::Completed { .. } => "(completed)".into(),
        TurnOutcome::LimitReached { reason, detail, .. }
        | TurnOutcome::Failed { reason, detail } => {
            format!("({}: {reason}: {detail})", outcome.status())
        }
        TurnOutcome::Errored { detail } => format!("(errored: {detail})"),
    }
}
