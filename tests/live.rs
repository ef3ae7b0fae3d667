//! Live-trial plumbing end to end, on loopback only: `ctxbench serve-fake` plus
//! `ctxbench run --provider openai --base-url …` gives the in-process results; HTTP faults
//! are retried away or end a trial as `errored`; cassettes record and replay; a canary API
//! key appears in no byte ctxbench writes.

mod support;

use std::path::Path;
use std::process::Command;

use support::{csv_split, ctxbench, text, without_timing, FakeServer};

const CANARY: &str = "sk-ctxbench-CANARY-7f3a9c1e5b";

/// Scenarios whose trials do not rely on provider-native compaction (which does not travel
/// over HTTP) — between them every other engine path: overflow retry, partial output,
/// tools, model summaries, instruction edits, hostile history.
const SCENARIOS: &[&str] = &[
    "overflow-retry",
    "overflow-partial",
    "tool-pressure",
    "model-summary",
    "instruction-change",
    "hostile-history",
];

fn run(dir: &Path, out: &str, provider: &[&str], extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "run",
        "--out",
        out,
        "--progress",
        "none",
        "--seed",
        "3",
        "--trials",
        "1",
    ];
    for s in SCENARIOS {
        args.extend_from_slice(&["--scenario", s]);
    }
    args.extend_from_slice(provider);
    args.extend_from_slice(extra);
    Command::new(env!("CARGO_BIN_EXE_ctxbench"))
        .args(&args)
        .current_dir(dir)
        .env("OPENAI_API_KEY", CANARY)
        .env("ANTHROPIC_API_KEY", CANARY)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

/// A report CSV without timing columns, the provider's name (fake vs openai) and the
/// retry layer's counters (there is none in process).
fn comparable(run: &Path, name: &str) -> String {
    let csv = std::fs::read_to_string(run.join("report").join(name)).unwrap();
    let rows = csv_split(&without_timing(&csv).replace('\u{1f}', ","));
    let header = rows[0].clone();
    let drop: Vec<usize> = header
        .iter()
        .enumerate()
        .filter(|(_, h)| {
            h.as_str() == "provider" || h.starts_with("retries") || h.as_str() == "http_attempts"
        })
        .map(|(i, _)| i)
        .collect();
    rows.iter()
        .map(|r| {
            r.iter()
                .enumerate()
                .filter(|(i, _)| !drop.contains(i))
                .map(|(_, c)| c.as_str())
                .collect::<Vec<_>>()
                .join("\u{1f}")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push(p);
        }
    }
    out
}

fn assert_no_canary(dir: &Path, outputs: &[&std::process::Output]) {
    for f in files(dir) {
        let bytes = std::fs::read(&f).unwrap();
        assert!(
            !bytes.windows(CANARY.len()).any(|w| w == CANARY.as_bytes()),
            "the API key leaked into {}",
            f.display()
        );
    }
    for o in outputs {
        assert!(!text(o).contains(CANARY), "the API key leaked into output");
    }
}

#[test]
fn openai_adapter_against_serve_fake_matches_the_in_process_fake() {
    let dir = tempfile::tempdir().unwrap();
    let server = FakeServer::start(dir.path(), &[]);
    let http = run(
        dir.path(),
        "http",
        &["--provider", "openai", "--base-url", &server.url],
        &[],
    );
    assert!(
        matches!(http.status.code(), Some(0 | 1 | 3)),
        "{}",
        text(&http)
    );
    let local = run(dir.path(), "local", &["--provider", "fake"], &[]);
    assert_eq!(http.status.code(), local.status.code(), "{}", text(&http));
    for csv in ["trials.csv", "requests.csv"] {
        assert_eq!(
            comparable(&dir.path().join("http"), csv),
            comparable(&dir.path().join("local"), csv),
            "{csv}: over HTTP differs from in process"
        );
    }
    let manifest = std::fs::read_to_string(dir.path().join("http/manifest.json")).unwrap();
    assert!(manifest.contains("\"kind\": \"openai\""), "{manifest}");
    assert!(manifest.contains("OPENAI_API_KEY"), "{manifest}");
    drop(server);
    assert_no_canary(dir.path(), &[&http, &local]);
}

/// The Anthropic Messages wire end to end: `--provider anthropic` against serve-fake's
/// `/v1/messages`, with its `count_tokens` endpoint as the engine's exact estimator — every
/// sent request is planned on the provider's own count, so the estimate the budget used
/// equals the usage the provider then reports.
#[test]
fn anthropic_wire_with_exact_counts_against_serve_fake() {
    let dir = tempfile::tempdir().unwrap();
    let server = FakeServer::start(dir.path(), &[]);
    let o = run(
        dir.path(),
        "anthropic",
        &[
            "--provider",
            "anthropic",
            "--base-url",
            &server.anthropic_url,
        ],
        &[],
    );
    assert!(matches!(o.status.code(), Some(0 | 1 | 3)), "{}", text(&o));
    let run_dir = dir.path().join("anthropic");
    let trials = std::fs::read_to_string(run_dir.join("trials.jsonl")).unwrap();
    assert_eq!(trials.lines().count(), SCENARIOS.len() * 3, "{trials}");
    for l in trials.lines() {
        let t: serde_json::Value = serde_json::from_str(l).unwrap();
        assert_ne!(t["outcome"]["status"], "errored", "{t}");
        assert_eq!(t["stats"]["infrastructure"]["gave_up"], 0, "{t}");
    }
    let mut exact = 0;
    for l in std::fs::read_to_string(run_dir.join("requests.jsonl"))
        .unwrap()
        .lines()
    {
        let r: serde_json::Value = serde_json::from_str(l).unwrap();
        if r["sent"] != true || r["purpose"] != "turn" {
            continue;
        }
        assert_eq!(r["confidence"], "exact", "{r}");
        assert_eq!(r["estimation_method"], "provider-tokenizer", "{r}");
        if let Some(used) = r["provider_input_tokens"].as_u64() {
            let planned = r["budget"]["total"].as_u64().unwrap();
            // The budget's total is the provider's count of the request sent (the
            // categories are rescaled to it).
            assert_eq!(planned, used, "{r}");
            exact += 1;
        }
    }
    assert!(exact > 20, "{exact} answered requests");
    let manifest = std::fs::read_to_string(run_dir.join("manifest.json")).unwrap();
    assert!(manifest.contains("ANTHROPIC_API_KEY"), "{manifest}");
    drop(server);
    assert_no_canary(dir.path(), &[&o]);
}

#[test]
fn http_faults_are_retried_away_or_end_trials_as_errored() {
    let dir = tempfile::tempdir().unwrap();
    // Every trial meets each fault kind once; retries make the results identical.
    let flaky = FakeServer::start(
        dir.path(),
        &[
            "--fault",
            "2:429:20",
            "--fault",
            "3:503",
            "--fault",
            "5:truncated",
            "--fault",
            "7:malformed",
            "--fault",
            "9:hang:30000",
        ],
    );
    let retried = run(
        dir.path(),
        "retried",
        &["--provider", "openai", "--base-url", &flaky.url],
        &["--request-timeout", "1", "--concurrency", "4"],
    );
    let local = run(dir.path(), "local", &["--provider", "fake"], &[]);
    assert_eq!(
        retried.status.code(),
        local.status.code(),
        "{}",
        text(&retried)
    );
    assert_eq!(
        comparable(&dir.path().join("retried"), "trials.csv"),
        comparable(&dir.path().join("local"), "trials.csv")
    );
    drop(flaky);

    // A provider that always fails: every trial errored, none passes, none is dropped.
    let broken = FakeServer::start(dir.path(), &["--fault-rate", "1", "--fault-kinds", "503"]);
    let errored = run(
        dir.path(),
        "errored",
        &["--provider", "openai", "--base-url", &broken.url],
        &["--max-attempts", "2"],
    );
    assert_eq!(errored.status.code(), Some(1), "{}", text(&errored));
    let trials = std::fs::read_to_string(dir.path().join("errored/trials.jsonl")).unwrap();
    let rows: Vec<serde_json::Value> = trials
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let local_trials = std::fs::read_to_string(dir.path().join("local/trials.jsonl")).unwrap();
    assert_eq!(rows.len(), local_trials.lines().count());
    for r in &rows {
        assert_eq!(r["outcome"]["status"], "errored", "{r}");
        assert_eq!(r["passed"], false);
    }
    assert!(String::from_utf8_lossy(&errored.stdout).contains("errored"));
    assert_no_canary(dir.path(), &[&retried, &local, &errored]);
}

#[test]
fn cassettes_replay_a_recorded_run_and_name_the_first_miss() {
    let dir = tempfile::tempdir().unwrap();
    let server = FakeServer::start(dir.path(), &[]);
    let recorded = run(
        dir.path(),
        "recorded",
        &["--provider", "openai", "--base-url", &server.url],
        &["--record", "c.jsonl"],
    );
    assert!(
        matches!(recorded.status.code(), Some(0 | 1 | 3)),
        "{}",
        text(&recorded)
    );
    drop(server);

    // No server any more: every answer comes from the cassette.
    let replayed = run(
        dir.path(),
        "replayed",
        &[
            "--provider",
            "openai",
            "--base-url",
            "http://127.0.0.1:9/v1",
        ],
        &["--replay", "c.jsonl"],
    );
    assert_eq!(
        replayed.status.code(),
        recorded.status.code(),
        "{}",
        text(&replayed)
    );
    for csv in ["trials.csv", "requests.csv"] {
        assert_eq!(
            comparable(&dir.path().join("replayed"), csv),
            comparable(&dir.path().join("recorded"), csv),
            "{csv}"
        );
    }

    // Another seed sends other requests: each trial misses, errored, with the place named.
    let mut args = vec![
        "run",
        "--out",
        "missed",
        "--progress",
        "none",
        "--seed",
        "4",
        "--scenario",
        "overflow-retry",
        "--provider",
        "openai",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--replay",
        "c.jsonl",
    ];
    args.extend_from_slice(&["--modes", "compact"]);
    let missed = ctxbench(dir.path(), &args);
    assert_eq!(missed.status.code(), Some(1), "{}", text(&missed));
    let trials = std::fs::read_to_string(dir.path().join("missed/trials.jsonl")).unwrap();
    for needle in [
        "cassette miss",
        "scenario `overflow-retry`",
        "mode `compact`",
        "trial 0",
        ", step ",
    ] {
        assert!(trials.contains(needle), "{needle} not in {trials}");
    }
    assert_no_canary(dir.path(), &[&recorded, &replayed, &missed]);
}

/// A server asking for a ten-minute wait on every trial's second request: with
/// `--max-retry-after 1` each such retry waits one second, the trials finish with the
/// fault-free results, and the capped asks are counted per trial.
#[test]
fn retry_after_is_honoured_only_up_to_the_configured_cap() {
    let dir = tempfile::tempdir().unwrap();
    let slow = FakeServer::start(dir.path(), &["--fault", "2:429:600000"]);
    let args = |out: &str, provider: &[&str], extra: &[&str]| {
        let mut a = vec![
            "run",
            "--out",
            out,
            "--progress",
            "none",
            "--scenario",
            "overflow-retry",
            "--modes",
            "compact",
        ];
        a.extend_from_slice(provider);
        a.extend_from_slice(extra);
        a.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let capped = args(
        "capped",
        &["--provider", "openai", "--base-url", &slow.url],
        &["--max-retry-after", "1"],
    );
    let capped_args: Vec<&str> = capped.iter().map(String::as_str).collect();
    let o = ctxbench(dir.path(), &capped_args);
    let local = args("local", &["--provider", "fake"], &[]);
    let local_args: Vec<&str> = local.iter().map(String::as_str).collect();
    let l = ctxbench(dir.path(), &local_args);
    assert_eq!(o.status.code(), l.status.code(), "{}", text(&o));
    assert_eq!(
        comparable(&dir.path().join("capped"), "trials.csv"),
        comparable(&dir.path().join("local"), "trials.csv")
    );
    let rows =
        csv_split(&std::fs::read_to_string(dir.path().join("capped/report/trials.csv")).unwrap());
    let col = |name: &str| rows[0].iter().position(|h| h == name).unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[1][col("retries_rate_limited")], "1");
    assert_eq!(rows[1][col("retries_retry_after_capped")], "1");
    let waited: u64 = rows[1][col("retries_wait_ms")].parse().unwrap();
    assert_eq!(
        waited, 1_000,
        "the wait is the cap, not the server's ten minutes"
    );
    let trial: serde_json::Value = serde_json::from_str(
        std::fs::read_to_string(dir.path().join("capped/trials.jsonl"))
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(trial["stats"]["infrastructure"]["retry_after_capped"], 1);
    assert_eq!(trial["stats"]["infrastructure"]["retry_after_ms"], 1_000);
}

/// The listed secret of [`LEAKY`].
const LISTED_SECRET: &str = "sk-leak-4Fz9Qw2Lm7";

/// A scenario whose model repeats its listed secret in a reply and in tool-call arguments
/// (the built-in `hostile-history` only sends its secret to the model).
const LEAKY: &str = r#"
id: leaky
title: Secrets in replies and tool-call arguments
tags: [recall]
model: {context_window: 8192, max_output: 512}
context: {reserved_output_tokens: 512, buffer_tokens: 1024}
instructions: "You are a coding agent."
secrets: [sk-leak-4Fz9Qw2Lm7]
tools:
  - name: login
    description: Log in to the staging API.
    parameters: {type: object, properties: {key: {type: string}}, required: [key]}
facts:
  - id: db
    states: "All storage must use PostgreSQL 16."
    question: "Which database must all storage use?"
    expect: {contains: PostgreSQL}
  - id: key
    states: "The staging key is sk-leak-4Fz9Qw2Lm7."
    question: "What is the staging key?"
    expect: {contains: sk-leak-4Fz9Qw2Lm7}
script:
  - user: "Start. {fact:db} {fact:key}"
  - tool_calls:
      - call: {name: login, args: {key: sk-leak-4Fz9Qw2Lm7}}
        result: "logged in with sk-leak-4Fz9Qw2Lm7"
  - assistant: "Logged in with sk-leak-4Fz9Qw2Lm7."
  - probe: [db, key]
expect:
  graders: [recall]
  outcome: any
"#;

/// A recorded run with listed secrets, then its replay: not one byte ctxbench wrote — run
/// storage, reports, the cassette, the serve-fake log, the workspaces, stdout and stderr —
/// holds the secret, and the replay still matches the recording request for request.
#[test]
fn listed_secrets_reach_no_byte_ctxbench_writes_cassettes_included() {
    // The suite lives outside the directory searched: ctxbench did not write it.
    let src = tempfile::tempdir().unwrap();
    std::fs::write(src.path().join("leaky.yaml"), LEAKY).unwrap();
    std::fs::write(
        src.path().join("hostile-history.yaml"),
        include_str!("../scenarios/hostile-history.yaml"),
    )
    .unwrap();
    let suite = src.path().to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("workspaces");
    std::fs::create_dir_all(&work).unwrap();
    let server = FakeServer::start(dir.path(), &["--suite", suite]);
    let go = |out: &str, extra: &[&str]| {
        let mut args = vec![
            "run",
            "--out",
            out,
            "--progress",
            "plain",
            "--seed",
            "3",
            "--suite",
            suite,
            "--trials",
            "2",
        ];
        args.extend_from_slice(extra);
        Command::new(env!("CARGO_BIN_EXE_ctxbench"))
            .args(&args)
            .current_dir(dir.path())
            .env("CTXBENCH_WORKDIR", &work)
            .env("NO_COLOR", "1")
            .output()
            .unwrap()
    };
    let recorded = go(
        "recorded",
        &[
            "--provider",
            "openai",
            "--base-url",
            &server.url,
            "--record",
            "secrets.cassette.jsonl",
        ],
    );
    // Two scenarios are too few to evaluate every gate (exit 3); the run itself completes.
    assert!(
        matches!(recorded.status.code(), Some(0 | 1 | 3)),
        "{}",
        text(&recorded)
    );
    drop(server);
    let replayed = go(
        "replayed",
        &[
            "--provider",
            "openai",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--replay",
            "secrets.cassette.jsonl",
        ],
    );
    assert_eq!(
        replayed.status.code(),
        recorded.status.code(),
        "{}",
        text(&replayed)
    );
    for csv in ["trials.csv", "requests.csv"] {
        assert_eq!(
            comparable(&dir.path().join("replayed"), csv),
            comparable(&dir.path().join("recorded"), csv),
            "{csv}: the replay diverged from the recording"
        );
    }
    // The secret did travel: the model saw it and the cassette holds its placeholder.
    let cassette = std::fs::read_to_string(dir.path().join("secrets.cassette.jsonl")).unwrap();
    assert!(
        cassette.matches("[REDACTED#1]").count() >= 6,
        "the model never repeated the secret"
    );
    let written = files(dir.path());
    assert!(written.len() > 20, "{written:?}");
    let mut hits = Vec::new();
    for f in &written {
        let bytes = std::fs::read(f).unwrap();
        let n = bytes
            .windows(LISTED_SECRET.len())
            .filter(|w| *w == LISTED_SECRET.as_bytes())
            .count();
        if n > 0 {
            hits.push(format!("{}: {n}", f.display()));
        }
    }
    assert!(hits.is_empty(), "the listed secret was written: {hits:?}");
    for o in [&recorded, &replayed] {
        assert!(
            !text(o).contains(LISTED_SECRET),
            "the secret reached the output"
        );
    }
    // Workspaces are gone after the run.
    assert_eq!(std::fs::read_dir(&work).unwrap().count(), 0);
}
