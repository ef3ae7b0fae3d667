//! External agents as systems under test (`--sut exec:…`, the `ctxbench.agent/1`
//! protocol): the reference engine behind the protocol (`ctxbench agent`) reproduces the
//! in-process verdicts, broken agents give typed failed trials quickly, a refusing agent
//! passes nothing it refused, mutants are caught
//! through the external path (also black box, without any agent events), and the
//! conformance check passes for `ctxbench agent` and fails for a broken adapter.
#![cfg(unix)]

mod support;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{ctxbench, text, FakeServer};

const BIN: &str = env!("CARGO_BIN_EXE_ctxbench");

fn exec_sut() -> String {
    format!("exec:{BIN} agent")
}

/// `trial_id → trial record` of a run directory.
fn trials(run: &Path) -> BTreeMap<String, Value> {
    let body = std::fs::read_to_string(run.join("trials.jsonl"))
        .unwrap_or_else(|e| panic!("{}: {e}", run.display()));
    body.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|t| (t["trial_id"].as_str().unwrap().to_string(), t))
        .collect()
}

/// What a verdict comparison looks at: pass/fail, terminal status and every grader's status.
fn verdicts(t: &Value) -> (bool, String, BTreeMap<String, String>) {
    let graders = t["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["grader"].as_str().unwrap().to_string(),
                v["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    (
        t["passed"].as_bool().unwrap(),
        t["outcome"]["status"].as_str().unwrap().to_string(),
        graders,
    )
}

fn run(dir: &Path, out: &str, extra: &[&str]) -> PathBuf {
    let mut args = vec!["run", "--seed", "7", "--progress", "none", "--out", out];
    args.extend_from_slice(extra);
    let o = ctxbench(dir, &args);
    assert!(matches!(o.status.code(), Some(0 | 1 | 3)), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("verdict"),
        "{}",
        text(&o)
    );
    dir.join(out)
}

#[test]
fn ctxbench_agent_reproduces_the_in_process_verdicts_on_the_builtin_suite() {
    let tmp = tempfile::tempdir().unwrap();
    let sut = exec_sut();
    // One trial per scenario × mode (`--trials 1`: a `vary:` scenario's first instance):
    // every scenario and mode crosses the protocol; the other instances vary sizes, not the
    // path, and would multiply the agent processes this test starts by three.
    let inproc = trials(&run(tmp.path(), "inproc", &["--trials", "1"]));
    let external = trials(&run(
        tmp.path(),
        "external",
        &["--sut", &sut, "--agent-timeout", "60", "--trials", "1"],
    ));
    assert_eq!(
        inproc.keys().collect::<Vec<_>>(),
        external.keys().collect::<Vec<_>>()
    );
    assert!(inproc.len() > 40, "the whole built-in suite, every mode");
    let mut compared = 0;
    for (id, t) in &inproc {
        // Provider-native (opaque) compaction does not travel over the OpenAI wire: through
        // an external agent that scenario runs without it (docs/agent-protocol.md).
        if id.starts_with("native-compaction/") {
            continue;
        }
        assert_eq!(
            verdicts(t),
            verdicts(&external[id]),
            "{id}: in process vs external agent"
        );
        // The same requests reached the model.
        assert_eq!(
            t["stats"]["requests"], external[id]["stats"]["requests"],
            "{id}: request count"
        );
        compared += 1;
    }
    assert!(compared >= 60, "{compared}");
}

/// With an HTTP provider, ctxbench is the agent's model as a recording proxy: the agent
/// talks to the per-trial loopback endpoint, ctxbench forwards to the upstream (here
/// `serve-fake`, standing in for a real model) behind its retry layer, and records what
/// the agent sent. The verdicts equal those with the fake served directly, a cassette
/// records the upstream's answers, and a replay needs no upstream at all.
#[test]
fn an_external_agent_reaches_an_upstream_model_through_the_recording_proxy() {
    let tmp = tempfile::tempdir().unwrap();
    let sut = exec_sut();
    let scenarios = [
        "--scenario",
        "tool-pressure",
        "--scenario",
        "overflow-retry",
        "--trials",
        "1",
    ];
    let served = |out: &str, extra: &[&str]| {
        let mut args = vec!["--sut", sut.as_str(), "--agent-timeout", "60"];
        args.extend_from_slice(&scenarios);
        args.extend_from_slice(extra);
        trials(&run(tmp.path(), out, &args))
    };
    let direct = served("direct", &[]);
    let upstream = FakeServer::start(tmp.path(), &[]);
    let cassette = tmp.path().join("proxy.cassette");
    let cassette = cassette.to_str().unwrap();
    let proxied = served(
        "proxied",
        &[
            "--provider",
            "openai",
            "--base-url",
            &upstream.url,
            "--record",
            cassette,
        ],
    );
    drop(upstream);
    let replayed = served(
        "replayed",
        &[
            "--provider",
            "openai",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--replay",
            cassette,
        ],
    );
    assert_eq!(direct.len(), 6);
    for (id, t) in &direct {
        for (name, other) in [("proxied", &proxied), ("replayed", &replayed)] {
            assert_eq!(verdicts(t), verdicts(&other[id]), "{id}: direct vs {name}");
            assert_eq!(
                t["stats"]["requests"], other[id]["stats"]["requests"],
                "{id}: direct vs {name}"
            );
        }
        // The retry layer sat between the proxy and the upstream.
        assert!(
            proxied[id]["stats"]["infrastructure"]["attempts"].as_u64()
                >= t["stats"]["requests"].as_u64(),
            "{id}: {}",
            proxied[id]
        );
    }
}

fn script(dir: &Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    format!("exec:{}", path.display())
}

const READY: &str = r#"read -r line; echo '{"type":"ready","id":1,"protocol":"ctxbench.agent/1","agent":"broken"}'"#;

#[test]
fn broken_agents_give_typed_failed_trials_quickly_and_the_run_completes() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = [
        (
            "crash",
            format!("{READY}\nread -r line\necho 'boom: simulated crash' >&2\nexit 3\n"),
            "agent_crashed",
        ),
        (
            "garbage",
            format!("{READY}\nread -r line\necho 'hello, I am not JSON'\ncat >/dev/null\n"),
            "agent_malformed_output",
        ),
        (
            "hang",
            format!("{READY}\nread -r line\nexec sleep 30\n"),
            "agent_timeout",
        ),
        (
            "version",
            r#"read -r line; echo '{"type":"ready","id":1,"protocol":"ctxbench.agent/0"}'; cat >/dev/null
"#
            .to_string(),
            "agent_protocol_version",
        ),
        ("missing", String::new(), "agent_spawn_failed"),
    ];
    for (name, body, reason) in cases {
        let sut = if name == "missing" {
            format!("exec:{}", tmp.path().join("no-such-agent").display())
        } else {
            script(tmp.path(), &format!("{name}.sh"), &body)
        };
        let t0 = Instant::now();
        let dir = run(
            tmp.path(),
            name,
            &[
                "--sut",
                &sut,
                "--agent-timeout",
                "1",
                "--scenario",
                "instruction-change",
                "--scenario",
                "overflow-retry",
                "--modes",
                "warn,compact",
            ],
        );
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{name}: took {:?}",
            t0.elapsed()
        );
        let all = trials(&dir);
        assert_eq!(all.len(), 4, "{name}: every trial ran");
        // A crash, hang or protocol error is the system under test's failure; only an agent
        // that could not be started at all (a configuration error) leaves no verdict.
        let status = if name == "missing" {
            "errored"
        } else {
            "failed"
        };
        for (id, t) in &all {
            assert_eq!(t["outcome"]["status"], status, "{name} {id}: {t}");
            assert_eq!(
                t["outcome"]["reason"], reason,
                "{name} {id}: {}",
                t["outcome"]
            );
            assert!(!t["passed"].as_bool().unwrap(), "{name} {id}: never a pass");
            assert!(
                !t["outcome"]["detail"].as_str().unwrap().is_empty(),
                "{name} {id}: a clear detail"
            );
        }
        if name == "crash" {
            let detail = all.values().next().unwrap()["outcome"]["detail"]
                .as_str()
                .unwrap()
                .to_string();
            assert!(detail.contains("boom: simulated crash"), "{detail}");
        }
    }
}

fn selftest_line<'a>(stdout: &'a str, mutant: &str) -> &'a str {
    stdout
        .lines()
        .find(|l| l.split_whitespace().next() == Some(mutant))
        .unwrap_or_else(|| panic!("no line for {mutant}: {stdout}"))
}

#[test]
fn mutants_are_caught_through_the_external_path_even_as_a_black_box() {
    let tmp = tempfile::tempdir().unwrap();
    let sut = exec_sut();
    let suite = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/hostile-history.yaml");
    for black_box in [false, true] {
        let mut cmd = std::process::Command::new(BIN);
        cmd.args([
            "selftest",
            "--suite",
            suite.to_str().unwrap(),
            "--modes",
            "compact",
            "--sut",
            &sut,
            "--agent-timeout",
            "60",
        ])
        .current_dir(tmp.path());
        if black_box {
            cmd.env("CTXBENCH_AGENT_BLACK_BOX", "1");
        }
        let o = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&o.stdout).to_string();
        assert!(
            stdout.contains("system under test: 1 trials, 0 invariant failure(s), 0 errored"),
            "black box {black_box}: {}",
            text(&o)
        );
        for (mutant, grader) in [
            ("keep-approval-claims", "no-authority-in-checkpoint"),
            ("split-tool-pairs", "tool-pairs"),
            ("drop-instructions", "instructions-outrank-history"),
            ("leak-secret", "secrets-redacted"),
        ] {
            let line = selftest_line(&stdout, mutant);
            assert!(line.contains(grader), "black box {black_box}: {line}");
        }
    }
}

#[test]
fn a_black_box_agent_gets_not_applicable_for_event_graders() {
    let tmp = tempfile::tempdir().unwrap();
    let sut = exec_sut();
    let o = std::process::Command::new(BIN)
        .args([
            "run",
            "--seed",
            "7",
            "--progress",
            "none",
            "--out",
            "bb",
            "--scenario",
            "no-safe-span",
            "--scenario",
            "hostile-history",
            "--modes",
            "compact",
            "--sut",
            &sut,
        ])
        .env("CTXBENCH_AGENT_BLACK_BOX", "1")
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert!(matches!(o.status.code(), Some(0 | 1 | 3)), "{}", text(&o));
    for (id, t) in trials(&tmp.path().join("bb")) {
        assert_ne!(t["outcome"]["status"], "errored", "{id}: {}", t["outcome"]);
        for v in t["verdicts"].as_array().unwrap() {
            let g = v["grader"].as_str().unwrap();
            let s = v["status"].as_str().unwrap();
            if ["typed-reason", "checkpoint-reuse-valid"].contains(&g) {
                assert_eq!(s, "skip", "{id} {g}: {v}");
                assert!(
                    v["summary"].as_str().unwrap().starts_with("not-applicable"),
                    "{id} {g}: {v}"
                );
            }
            if [
                "tool-pairs",
                "budget",
                "instructions-outrank-history",
                "no-thrash",
            ]
            .contains(&g)
                || (g == "no-authority-in-checkpoint" && id.starts_with("hostile-history"))
            {
                assert_eq!(s, "pass", "{id} {g}: {v}");
            }
        }
    }
}

#[test]
fn conformance_passes_for_ctxbench_agent_and_fails_for_a_broken_adapter() {
    let tmp = tempfile::tempdir().unwrap();
    let o = ctxbench(tmp.path(), &["conformance", "--sut", &exec_sut()]);
    let stdout = String::from_utf8_lossy(&o.stdout).to_string();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(stdout.contains("8/8 checks passed"), "{stdout}");
    let broken = script(
        tmp.path(),
        "deaf.sh",
        &format!("{READY}\nread -r line\nexit 0\n"),
    );
    let o = ctxbench(
        tmp.path(),
        &["conformance", "--sut", &broken, "--agent-timeout", "2"],
    );
    let stdout = String::from_utf8_lossy(&o.stdout).to_string();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(stdout.contains("PASS  handshake"), "{stdout}");
    assert!(stdout.contains("FAIL  turn"), "{stdout}");
}

/// An agent that answers every turn with an honest-looking refusal (`limit_reached`) and
/// never calls the model.
const REFUSER: &str = r#"while read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/^{"type":"[a-z_]*","id":\([0-9]*\).*/\1/p')
  case "$line" in
    *'"type":"start"'*) echo "{\"type\":\"ready\",\"id\":$id,\"protocol\":\"ctxbench.agent/1\",\"agent\":\"refuser\"}";;
    *'"type":"user_turn"'*) echo "{\"type\":\"turn_complete\",\"id\":$id,\"outcome\":{\"status\":\"limit_reached\",\"reason\":\"context_exhausted\",\"detail\":\"the context is full\"}}";;
    *'"type":"compact"'*) echo "{\"type\":\"compact_complete\",\"id\":$id,\"outcome\":{\"outcome\":\"unchanged\",\"reason\":\"nothing_to_compact\"}}";;
    *'"type":"shutdown"'*) echo "{\"type\":\"bye\",\"id\":$id}"; exit 0;;
    *) echo "{\"type\":\"ack\",\"id\":$id}";;
  esac
done
"#;

/// A runtime that refuses work passes none of the scenarios it refused — in any mode, also
/// where the scenario leaves the outcome to the graders — and scores below one that works.
#[test]
fn a_runtime_that_refuses_turns_passes_nothing_it_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let sut = script(tmp.path(), "refuser.sh", REFUSER);
    let dir = run(
        tmp.path(),
        "refused",
        &[
            "--sut",
            &sut,
            "--agent-timeout",
            "20",
            "--scenario",
            "fits-window",
            "--scenario",
            "long-recall",
            "--trials",
            "1",
        ],
    );
    let all = trials(&dir);
    assert_eq!(all.len(), 6);
    for (id, t) in &all {
        assert_eq!(t["outcome"]["status"], "limit_reached", "{id}: {t}");
        assert!(!t["passed"].as_bool().unwrap(), "{id}: a refusal passed");
        let limit = t["verdicts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["grader"] == "limit-honest")
            .unwrap();
        assert_eq!(limit["status"], "fail", "{id}: {limit}");
    }
    // Nothing was completed: the summary says so per mode.
    let summary =
        support::csv_split(&std::fs::read_to_string(dir.join("report/summary.csv")).unwrap());
    let col = |n: &str| summary[0].iter().position(|h| h == n).unwrap();
    for row in summary[1..].iter().filter(|r| r[col("scope")] == "suite") {
        assert_eq!(row[col("completion")], "0.000000", "{row:?}");
        assert_eq!(row[col("passed")], "0", "{row:?}");
    }
}
