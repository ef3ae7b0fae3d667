//! End-to-end tests: run the `ctxbench` binary as a user would.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use support::{csv_split, ctxbench, text, without_timing};

const SMALL: &str = r#"
id: small
title: "Small <script>alert('canary')</script> <img src=x onerror=alert(1)> & budget"
tags: [recall]
model: {context_window: 8192, max_output: 512}
context: {reserved_output_tokens: 512, buffer_tokens: 1024}
instructions: "You are a coding agent."
tools:
  - name: read_file
    description: Read a file.
    parameters: {type: object, properties: {path: {type: string}}, required: [path]}
facts:
  - id: db
    states: "All storage must use PostgreSQL 16."
    question: "Which database must all storage use?"
    expect: {contains: PostgreSQL}
script:
  - user: "Start. {fact:db}"
  - assistant: "Noted."
  - repeat: 24
    steps:
      - user: "Read part {i}."
      - tool_calls:
          - call: {name: read_file, args: {path: "src/p{i}.rs"}}
            result: {filler: {tokens: 400, kind: code}}
      - assistant: "Read part {i}."
  - probe: [db]
expect:
  graders: [recall, budget, limit-honest]
  outcome: any
"#;

fn small_suite(dir: &Path) -> PathBuf {
    let suite = dir.join("suite");
    std::fs::create_dir_all(&suite).unwrap();
    std::fs::write(suite.join("small.yaml"), SMALL).unwrap();
    suite
}

#[test]
fn run_writes_run_dir_and_report_and_is_deterministic() {
    let tmp = tempfile::tempdir().unwrap();
    let suite = small_suite(tmp.path());
    let mut outputs = Vec::new();
    for name in ["a", "b"] {
        let out = ctxbench(
            tmp.path(),
            &[
                "run",
                "--suite",
                suite.to_str().unwrap(),
                "--seed",
                "42",
                "--out",
                name,
                "--progress",
                "none",
            ],
        );
        assert!(
            matches!(out.status.code(), Some(0 | 1 | 3)),
            "{}",
            text(&out)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("verdict"), "{}", text(&out));
        let run = tmp.path().join(name);
        for f in [
            "manifest.json",
            "trials.jsonl",
            "requests.jsonl",
            "events.jsonl",
            "messages.jsonl",
        ] {
            assert!(run.join(f).is_file(), "missing {f}\n{}", text(&out));
        }
        for f in [
            "index.html",
            "trials.csv",
            "requests.csv",
            "summary.csv",
            "gates.json",
        ] {
            assert!(run.join("report").join(f).is_file(), "missing report/{f}");
        }
        outputs.push(run);
    }
    for f in ["trials.csv", "requests.csv"] {
        let a = std::fs::read_to_string(outputs[0].join("report").join(f)).unwrap();
        let b = std::fs::read_to_string(outputs[1].join("report").join(f)).unwrap();
        assert_eq!(
            without_timing(&a),
            without_timing(&b),
            "{f} differs between two runs with the same seed"
        );
    }
    // Warn mode: every over-budget request was preceded by a warning; requests.csv has
    // estimate and provider usage for every answered request.
    let requests = std::fs::read_to_string(outputs[0].join("report/requests.csv")).unwrap();
    let rows = csv_split(&requests);
    let header = &rows[0];
    let col = |name: &str| {
        header
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("no column {name}"))
    };
    let (mode, sent, over, warned, input, total, err) = (
        col("mode"),
        col("sent"),
        col("over_budget"),
        col("warned"),
        col("provider_input_tokens"),
        col("est_total"),
        col("error_kind"),
    );
    let mut warn_over = 0;
    for r in &rows[1..] {
        if r[mode] == "warn" && r[sent] == "true" && r[over] == "true" {
            warn_over += 1;
            assert_eq!(
                r[warned], "true",
                "unwarned over-budget request in warn: {r:?}"
            );
        }
        if r[sent] == "true" {
            assert!(!r[total].is_empty());
            assert!(
                !r[input].is_empty() || !r[err].is_empty(),
                "answered request without usage: {r:?}"
            );
        }
    }
    assert!(warn_over > 0, "the fixture should push warn over budget");
    // Off mode grows until the provider rejects a request with its typed overflow.
    assert!(rows[1..]
        .iter()
        .any(|r| r[mode] == "off" && r[err] == "context_overflow"));
    // Untrusted scenario text is escaped in the HTML.
    let html = std::fs::read_to_string(outputs[0].join("report/index.html")).unwrap();
    assert!(!html.contains("<script"), "raw script tag in the report");
    assert!(!html.contains("<img"), "raw img tag in the report");
    assert!(
        html.contains("&lt;script&gt;"),
        "the title should appear, escaped"
    );
    assert!(html.contains("Content-Security-Policy"));
    // Drilled-down trials carry an excerpt of their last request, from messages.jsonl.
    assert!(
        html.contains("transcript excerpt: the last 6 of"),
        "no excerpt"
    );
    assert!(
        html.contains("Read part 24."),
        "excerpt lacks the newest turns"
    );
}

#[test]
fn validate_reports_located_errors_and_runs_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "id: bad\ntitle: Bad\nmodel: {context_window: 8192, max_output: 512}\ninstructions: x\nscript:\n  - user: hi\n    colour: blue\n",
    )
    .unwrap();
    let out = ctxbench(tmp.path(), &["validate", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.yaml:"), "{}", text(&out));
    assert!(err.contains("colour"), "{}", text(&out));
    // And `run` refuses the same file before running anything.
    let out = ctxbench(
        tmp.path(),
        &["run", "--suite", bad.to_str().unwrap(), "--out", "r"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(!tmp.path().join("r").exists());
}

#[test]
fn validate_rejects_hostile_files_without_panicking() {
    let tmp = tempfile::tempdir().unwrap();
    let bomb = "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\nh: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\ni: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]\n";
    let deep = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("bomb.yaml", bomb.as_bytes().to_vec()),
        ("deep.yaml", deep.into_bytes()),
        (
            "garbage.yaml",
            (0..4096u32)
                .map(|i| (i.wrapping_mul(2654435761u32) >> 24) as u8)
                .collect(),
        ),
        ("empty.yaml", Vec::new()),
    ];
    for (name, bytes) in files {
        let p = tmp.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        let out = ctxbench(tmp.path(), &["validate", p.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{name}: {}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(name), "{name}: {}", text(&out));
        assert!(!err.contains("panicked"), "{name}: {}", text(&out));
    }
}

#[test]
fn builtin_suite_validates_and_lists() {
    let tmp = tempfile::tempdir().unwrap();
    let out = ctxbench(tmp.path(), &["validate"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let out = ctxbench(tmp.path(), &["list"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let s = String::from_utf8_lossy(&out.stdout);
    for id in ["long-recall", "schema-pressure", "instruction-change"] {
        assert!(s.contains(id), "{id} missing from list:\n{s}");
    }
}

#[test]
fn bad_flags_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let out = ctxbench(tmp.path(), &["run", "--modes", "sideways"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let out = ctxbench(tmp.path(), &["gate", "no-such-dir"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    // The codes are documented where a user looks first.
    let out = ctxbench(tmp.path(), &["--help"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let help = String::from_utf8_lossy(&out.stdout);
    for code in [
        "0  pass",
        "docs/agent-protocol.md",
        "1  a gate failed",
        "2  bad input",
        "3  INCOMPLETE",
        "4  the run itself failed",
    ] {
        assert!(help.contains(code), "{code} missing from --help:\n{help}");
    }
}

#[test]
fn selftest_catches_every_mutant_on_the_builtin_suite() {
    let tmp = tempfile::tempdir().unwrap();
    let out = ctxbench(tmp.path(), &["selftest"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(stdout.contains("system under test: "), "{stdout}");
    assert!(
        stdout.contains(", 0 invariant failure(s), 0 errored"),
        "{stdout}"
    );
    assert!(!stdout.contains("NOT CAUGHT"), "{stdout}");
    // Every variant is caught by a grader it declares, not by a crash or another grader.
    assert!(
        stdout.contains("(100%) caught by an intended grader"),
        "{stdout}"
    );
}

#[test]
fn default_run_passes_the_gates_with_compact() {
    let tmp = tempfile::tempdir().unwrap();
    let out = ctxbench(tmp.path(), &["run", "--out", "r", "--progress", "none"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("verdict: PASS"), "{stdout}");
    // `off` hits the provider's overflow on the long-session scenarios; compact does not
    // send a single over-budget request.
    let summary = std::fs::read_to_string(tmp.path().join("r/report/summary.csv")).unwrap();
    let rows = csv_split(&summary);
    let h = &rows[0];
    let col = |n: &str| {
        h.iter()
            .position(|x| x == n)
            .unwrap_or_else(|| panic!("no column {n}"))
    };
    let suite: Vec<&Vec<String>> = rows[1..]
        .iter()
        .filter(|r| r[col("scope")] == "suite")
        .collect();
    let by_mode = |m: &str| {
        suite
            .iter()
            .find(|r| r[col("mode")] == m)
            .unwrap_or_else(|| panic!("no {m} row"))
    };
    assert_ne!(by_mode("off")[col("provider_overflows")], "0");
    assert_eq!(by_mode("compact")[col("over_budget_sent")], "0");
    let reduction: f64 = by_mode("compact")[col("token_reduction_vs_off")]
        .parse()
        .unwrap();
    assert!(reduction >= 0.30, "{reduction}");
    // The gate judges the interval's lower bound, which clears the threshold too.
    let lower: f64 = by_mode("compact")[col("token_reduction_vs_off_lo")]
        .parse()
        .unwrap();
    assert!(lower >= 0.30, "{lower}");
    let completion: f64 = by_mode("compact")[col("completion")].parse().unwrap();
    assert!(completion > 0.9, "{completion}");

    // The registered gates decide; other gates give no verdict (exit 3) …
    let again = ctxbench(tmp.path(), &["gate", "r"]);
    assert_eq!(again.status.code(), Some(0), "{}", text(&again));
    std::fs::write(
        tmp.path().join("looser.yaml"),
        "version: 1\ngates:\n  errored_trials: {max: 5}\n",
    )
    .unwrap();
    let looser = ctxbench(tmp.path(), &["gate", "r", "--gates", "looser.yaml"]);
    assert_eq!(looser.status.code(), Some(3), "{}", text(&looser));
    assert!(text(&looser).contains("--exploratory"), "{}", text(&looser));
    // … unless evaluated as exploratory, which every output says.
    let exploratory = ctxbench(
        tmp.path(),
        &["gate", "r", "--gates", "looser.yaml", "--exploratory"],
    );
    assert_eq!(exploratory.status.code(), Some(0), "{}", text(&exploratory));
    assert!(
        text(&exploratory).contains("EXPLORATORY PASS"),
        "{}",
        text(&exploratory)
    );
    let rep = ctxbench(
        tmp.path(),
        &[
            "report",
            "r",
            "--gates",
            "looser.yaml",
            "--exploratory",
            "--out",
            "x",
        ],
    );
    assert_eq!(rep.status.code(), Some(0), "{}", text(&rep));
    for (file, needle) in [
        ("index.html", "<h1>EXPLORATORY PASS</h1>"),
        ("summary.md", "ctxbench: EXPLORATORY PASS"),
        ("junit.xml", "value=\"EXPLORATORY PASS\""),
        ("gates.json", "\"exploratory\": true"),
    ] {
        let body = std::fs::read_to_string(tmp.path().join("x").join(file)).unwrap();
        assert!(body.contains(needle), "{file} lacks {needle}");
    }
}

#[test]
fn a_subset_of_shards_cannot_give_a_verdict() {
    let tmp = tempfile::tempdir().unwrap();
    let shard = ctxbench(
        tmp.path(),
        &[
            "run",
            "--scenario",
            "fits-window",
            "--trials",
            "2",
            "--shard",
            "1/3",
            "--out",
            "s1",
            "--progress",
            "none",
        ],
    );
    assert_eq!(shard.status.code(), Some(3), "{}", text(&shard));
    for args in [&["report", "s1"][..], &["gate", "s1"][..]] {
        let o = ctxbench(tmp.path(), args);
        assert_eq!(o.status.code(), Some(3), "{args:?}: {}", text(&o));
        assert!(
            text(&o).contains("shard(s) 2/3, 3/3 missing"),
            "{args:?}: {}",
            text(&o)
        );
    }
}

/// Debian's Chromium, as `ci/test` installs it. Outside CI a missing browser skips the test;
/// under CI (`CI` set) it fails, so the check can never silently not run.
fn chromium() -> Option<PathBuf> {
    let found = std::env::var_os("CTXBENCH_CHROMIUM")
        .map(PathBuf::from)
        .into_iter()
        .chain(["/usr/bin/chromium", "/usr/bin/chromium-browser"].map(PathBuf::from))
        .find(|p| p.is_file());
    if found.is_none() && std::env::var_os("CI").is_some() {
        panic!("Chromium is required under CI (ci/test installs Debian's `chromium`)");
    }
    found
}

fn headless(browser: &Path, profile: &Path, args: &[&str]) -> Output {
    Command::new("timeout")
        .arg("120")
        .arg(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .output()
        .expect("run chromium")
}

#[test]
fn hostile_report_renders_in_a_real_browser_without_running_injected_script() {
    let Some(browser) = chromium() else {
        eprintln!("skipping: no Chromium (set CI to make this a failure)");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let out = ctxbench(
        tmp.path(),
        &[
            "run",
            "--scenario",
            "hostile-history",
            "--out",
            "r",
            "--progress",
            "none",
        ],
    );
    assert!(
        matches!(out.status.code(), Some(0 | 1 | 3)),
        "{}",
        text(&out)
    );
    let page = tmp.path().join("r/report/index.html");
    let url = format!("file://{}", page.display());
    // The DOM after parsing (and after any script would have run).
    let dom = headless(&browser, &tmp.path().join("p1"), &["--dump-dom", &url]);
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(dom.contains("</html>"), "no DOM dumped");
    assert!(
        !dom.contains("<script"),
        "a script element exists in the DOM"
    );
    assert!(
        !dom.contains("<img"),
        "an injected img element exists in the DOM"
    );
    assert!(
        dom.contains("&lt;script&gt;alert('ctxbench-xss')"),
        "the canary is shown as text"
    );
    // The page renders: a screenshot well above the size of a blank page (~5 KB).
    let png = tmp.path().join("shot.png");
    let shot = headless(
        &browser,
        &tmp.path().join("p2"),
        &[
            "--window-size=1200,900",
            &format!("--screenshot={}", png.display()),
            &url,
        ],
    );
    let size = std::fs::metadata(&png)
        .unwrap_or_else(|_| panic!("no screenshot: {}", text(&shot)))
        .len();
    assert!(size > 20_000, "screenshot looks blank ({size} bytes)");
}

/// A scenario title with a right-to-left override and a terminal escape sequence: every
/// place ctxbench shows it to a person spells both out instead of obeying them.
#[test]
fn bidi_overrides_and_escape_sequences_are_shown_not_obeyed() {
    let tmp = tempfile::tempdir().unwrap();
    let suite = tmp.path().join("suite");
    std::fs::create_dir_all(&suite).unwrap();
    let hostile = SMALL.replace(
        "title: \"Small <script>",
        "title: \"invoice\\u202Efdp.exe \\e[2J\\u2067x\\u2069 <script>",
    );
    std::fs::write(suite.join("small.yaml"), hostile).unwrap();
    let suite = suite.to_str().unwrap();
    let raw = ['\u{202E}', '\u{2067}', '\u{2069}', '\u{1b}'];
    let listed = ctxbench(tmp.path(), &["list", "--suite", suite]);
    assert!(listed.status.success(), "{}", text(&listed));
    let stdout = String::from_utf8_lossy(&listed.stdout);
    assert!(
        stdout.contains("invoice<U+202E>fdp.exe <U+001B>[2J<U+2067>x<U+2069>"),
        "{stdout}"
    );
    let run = ctxbench(
        tmp.path(),
        &[
            "run",
            "--suite",
            suite,
            "--out",
            "r",
            "--progress",
            "plain",
            "--modes",
            "warn",
        ],
    );
    assert!(
        matches!(run.status.code(), Some(0 | 1 | 3)),
        "{}",
        text(&run)
    );
    let mut shown = vec![("list", text(&listed)), ("run", text(&run))];
    for f in ["index.html", "summary.md", "junit.xml"] {
        let page = std::fs::read_to_string(tmp.path().join("r/report").join(f)).unwrap();
        shown.push((f, page));
    }
    for (what, s) in &shown {
        for c in raw {
            assert!(!s.contains(c), "{what} shows a raw {c:?}");
        }
    }
    assert!(
        shown[2].1.contains("invoice&lt;U+202E&gt;fdp.exe"),
        "{}",
        shown[2].1
    );
    // The data keeps the title as written: only its display is escaped.
    let manifest = std::fs::read_to_string(tmp.path().join("r/manifest.json")).unwrap();
    assert!(
        manifest.contains("\\u202e") || manifest.contains('\u{202E}'),
        "{manifest}"
    );
}

#[test]
fn inspect_shows_failed_trials_first_then_a_trials_requests_and_evidence() {
    let tmp = tempfile::tempdir().unwrap();
    let suite = small_suite(tmp.path());
    let run = ctxbench(
        tmp.path(),
        &[
            "run",
            "--suite",
            suite.to_str().unwrap(),
            "--out",
            "r",
            "--progress",
            "none",
        ],
    );
    assert!(
        matches!(run.status.code(), Some(0 | 1 | 3)),
        "{}",
        text(&run)
    );
    // The list: failed trials first (off overflows before the probe), plain when piped.
    let list = ctxbench(tmp.path(), &["inspect", "r"]);
    assert_eq!(list.status.code(), Some(0), "{}", text(&list));
    let shown = String::from_utf8_lossy(&list.stdout).to_string();
    assert!(!shown.contains('\u{1b}'), "colour when piped: {shown}");
    let failed_at = shown.find("\nfailed\n").expect("a failed section");
    let off_at = shown.find("small/off/0").expect("off listed");
    assert!(off_at > failed_at, "{shown}");
    assert!(shown.contains("recall"), "failing grader named: {shown}");
    // One trial: budget by category, estimate vs provider, flags, the grader's evidence.
    let one = ctxbench(tmp.path(), &["inspect", "r", "--trial", "small/off/0"]);
    assert_eq!(one.status.code(), Some(0), "{}", text(&one));
    let shown = String::from_utf8_lossy(&one.stdout).to_string();
    for needle in [
        "trial small/off/0",
        "failing graders",
        "recall —",
        "budget ",
        "available: instructions",
        "→ provider",
        "context_overflow",
    ] {
        assert!(shown.contains(needle), "missing {needle:?}:\n{shown}");
    }
    // Colour on demand; a single request in full.
    let coloured = ctxbench(
        tmp.path(),
        &[
            "inspect",
            "r",
            "--trial",
            "small/off/0",
            "--request",
            "1",
            "--color",
            "always",
        ],
    );
    let shown = String::from_utf8_lossy(&coloured.stdout).to_string();
    assert!(shown.contains("\u{1b}[1m#1\u{1b}[0m"), "{shown}");
    assert!(!shown.contains("#2 "), "{shown}");
    // Bad input: a clear error and exit 2.
    let missing = ctxbench(tmp.path(), &["inspect", "r", "--trial", "nope/off/0"]);
    assert_eq!(missing.status.code(), Some(2), "{}", text(&missing));
    assert!(text(&missing).contains("no finished trial `nope/off/0`"));
    let not_run = ctxbench(tmp.path(), &["inspect", "suite"]);
    assert_eq!(not_run.status.code(), Some(2), "{}", text(&not_run));
}

/// One trial's rows of a JSONL file of a run directory.
fn trial_rows(run: &Path, file: &str, trial: &str) -> Vec<serde_json::Value> {
    std::fs::read_to_string(run.join(file))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["trial_id"] == trial)
        .collect()
}

/// The timeline lines of `ctxbench inspect --trial`: (step, line) of each compaction or
/// checkpoint event (`step N …`), sent request (`#N step S …`) and stop (`stop step S …`).
fn timeline_lines(shown: &str) -> Vec<(u64, String)> {
    shown
        .lines()
        .filter_map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            let step = match words.as_slice() {
                ["step", n, ..] if l.starts_with("  step ") => n,
                [first, "step", n, ..] if first.starts_with('#') || *first == "stop" => n,
                _ => return None,
            };
            Some((step.parse().ok()?, l.trim().to_string()))
        })
        .collect()
}

/// Every compaction event of a trial, manual `compact:` steps included, appears once at its
/// step; requests stopped before sending sit at their steps, are counted apart from sent
/// requests the same way in both headers, and are selected with `--request 0`.
#[test]
fn inspect_shows_every_compaction_event_once_in_step_order_with_stops_counted() {
    let tmp = tempfile::tempdir().unwrap();
    let run = ctxbench(
        tmp.path(),
        &[
            "run",
            "--scenario",
            "failure-reason",
            "--scenario",
            "thrash-guard",
            "--modes",
            "compact",
            "--out",
            "r",
            "--progress",
            "none",
        ],
    );
    assert!(
        matches!(run.status.code(), Some(0 | 1 | 3)),
        "{}",
        text(&run)
    );
    let dir = tmp.path().join("r");
    for trial in ["failure-reason/compact/0", "thrash-guard/compact/0"] {
        let one = ctxbench(tmp.path(), &["inspect", "r", "--trial", trial]);
        assert_eq!(one.status.code(), Some(0), "{}", text(&one));
        let shown = String::from_utf8_lossy(&one.stdout).to_string();
        let lines = timeline_lines(&shown);
        // Step order throughout.
        let steps: Vec<u64> = lines.iter().map(|(s, _)| *s).collect();
        let mut sorted = steps.clone();
        sorted.sort();
        assert_eq!(steps, sorted, "not in step order:\n{shown}");
        // Each compaction event exactly once, at its step, in order.
        let events: Vec<(u64, String)> = trial_rows(&dir, "events.jsonl", trial)
            .into_iter()
            .filter(|e| {
                e["kind"]
                    .as_str()
                    .is_some_and(|k| k.starts_with("context.compaction"))
            })
            .map(|e| {
                let kind = e["kind"].as_str().unwrap().trim_start_matches("context.");
                (e["step"].as_u64().unwrap(), kind.replace('.', " "))
            })
            .collect();
        assert!(!events.is_empty(), "{trial}: no compaction events");
        let shown_events: Vec<&(u64, String)> = lines
            .iter()
            .filter(|(_, l)| l.starts_with("step "))
            .collect();
        assert_eq!(shown_events.len(), events.len(), "{trial}:\n{shown}");
        for ((step, kind), (at, line)) in events.iter().zip(&shown_events) {
            assert_eq!(step, at, "{trial}: {line}");
            assert!(
                line.contains(kind.as_str()),
                "{trial}: {kind} shown as {line}"
            );
        }
        // Every request row once; sent and stopped counted apart, alike in both headers.
        let requests = trial_rows(&dir, "requests.jsonl", trial);
        let sent = requests.iter().filter(|r| r["sent"] == true).count();
        let stops = requests.len() - sent;
        let request_lines = lines
            .iter()
            .filter(|(_, l)| !l.starts_with("step "))
            .count();
        assert_eq!(request_lines, requests.len(), "{trial}:\n{shown}");
        let counts = if stops > 0 {
            format!("{sent} sent, {stops} stopped before sending")
        } else {
            format!("{sent} sent")
        };
        assert!(
            shown.contains(&format!("requests {counts}")),
            "trial header: {counts}:\n{shown}"
        );
        let listing = if stops > 0 {
            format!("requests {sent} sent (#1–#{sent}), {stops} stopped before sending;")
        } else {
            format!("requests {sent} sent (#1–#{sent});")
        };
        assert!(
            shown.contains(&listing),
            "listing header {listing}:\n{shown}"
        );
    }

    // Manual compaction steps, with their outcomes and reasons.
    let one = ctxbench(
        tmp.path(),
        &["inspect", "r", "--trial", "failure-reason/compact/0"],
    );
    let shown = String::from_utf8_lossy(&one.stdout).to_string();
    for needle in [
        "compaction failed: summarizer_failed",
        "compaction unchanged: already_compacted",
        "compaction unchanged: nothing_to_compact",
        "compaction completed (trigger manual",
    ] {
        assert!(shown.contains(needle), "missing {needle:?}:\n{shown}");
    }

    // thrash-guard: a step's compaction failure once, its stop after it, in step order.
    let trial = "thrash-guard/compact/0";
    let one = ctxbench(tmp.path(), &["inspect", "r", "--trial", trial]);
    let shown = String::from_utf8_lossy(&one.stdout).to_string();
    let lines = timeline_lines(&shown);
    let stop_steps: Vec<u64> = lines
        .iter()
        .filter(|(_, l)| l.starts_with("stop "))
        .map(|(s, _)| *s)
        .collect();
    assert!(!stop_steps.is_empty(), "{shown}");
    assert!(
        !shown.contains("#0 "),
        "a stop shown as request #0:\n{shown}"
    );
    let first_stop = stop_steps[0];
    let failed: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, (s, l))| *s == first_stop && l.contains("compaction failed: no_progress"))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(failed.len(), 1, "step {first_stop}:\n{shown}");
    let stop_at = lines
        .iter()
        .position(|(s, l)| *s == first_stop && l.starts_with("stop "))
        .unwrap();
    assert!(failed[0] < stop_at, "{shown}");
    assert!(
        lines[stop_at]
            .1
            .contains("not sent: stopped before sending (no_progress)"),
        "{}",
        lines[stop_at].1
    );
    // The stops are selected with --request 0, and only they.
    let stops = ctxbench(
        tmp.path(),
        &["inspect", "r", "--trial", trial, "--request", "0"],
    );
    assert_eq!(stops.status.code(), Some(0), "{}", text(&stops));
    let shown = String::from_utf8_lossy(&stops.stdout).to_string();
    let lines = timeline_lines(&shown);
    let listed: Vec<u64> = lines
        .iter()
        .filter(|(_, l)| l.starts_with("stop "))
        .map(|(s, _)| *s)
        .collect();
    assert_eq!(listed, stop_steps, "{shown}");
    assert!(!lines.iter().any(|(_, l)| l.starts_with('#')), "{shown}");
    // A request number it lacks: an error that says how stops are selected.
    let missing = ctxbench(
        tmp.path(),
        &["inspect", "r", "--trial", trial, "--request", "999"],
    );
    assert_eq!(missing.status.code(), Some(2), "{}", text(&missing));
    assert!(text(&missing).contains("--request 0"), "{}", text(&missing));
}

/// `--modes off --trials 2` of the small suite, as shard `k` of 2, with `extra` flags: two
/// one-trial shards of a tiny matrix (the provider overflows `off` on every trial).
fn small_shard(dir: &Path, suite: &Path, k: u32, out: &str, extra: &[&str]) -> Output {
    let shard = format!("{k}/2");
    let mut args = vec![
        "run",
        "--suite",
        suite.to_str().unwrap(),
        "--modes",
        "off",
        "--trials",
        "2",
        "--shard",
        &shard,
        "--out",
        out,
        "--progress",
        "none",
    ];
    args.extend_from_slice(extra);
    let o = ctxbench(dir, &args);
    // A shard alone lacks the other shard: INCOMPLETE.
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    o
}

/// `ctxbench report` exits with its verdict exactly as `ctxbench gate` does — 1 when a
/// pre-registered gate fails, 3 when the gates are not the registered ones — and writes the
/// report either way (CI merge jobs act on its exit code).
#[test]
fn report_exits_with_the_verdict_of_merged_shards() {
    let tmp = tempfile::tempdir().unwrap();
    let suite = small_suite(tmp.path());
    // Impossible on `off`, which sends every over-budget request without a warning.
    std::fs::write(
        tmp.path().join("strict.yaml"),
        "version: 1\ncandidate: off\nbaselines: []\ngates:\n  unwarned_over_budget_requests: {max: 0}\n",
    )
    .unwrap();
    for (k, out) in [(1, "s1"), (2, "s2")] {
        small_shard(tmp.path(), &suite, k, out, &["--gates", "strict.yaml"]);
    }
    let files = [
        "index.html",
        "summary.md",
        "gates.json",
        "junit.xml",
        "trials.csv",
    ];
    let merged = ctxbench(tmp.path(), &["report", "s1", "s2", "--out", "merged"]);
    assert_eq!(merged.status.code(), Some(1), "{}", text(&merged));
    assert!(text(&merged).contains("verdict: FAIL"), "{}", text(&merged));
    for f in files {
        assert!(tmp.path().join("merged").join(f).is_file(), "missing {f}");
    }
    let gates: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(tmp.path().join("merged/gates.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(gates["verdict"], "fail");
    assert_eq!(gates["exit_code"], 1);

    // Other gates than the registered ones give no verdict (3) unless exploratory, which
    // then gives theirs; the report is written in both cases.
    std::fs::write(
        tmp.path().join("looser.yaml"),
        "version: 1\ncandidate: off\nbaselines: []\ngates:\n  unwarned_over_budget_requests: {max: 100000}\n",
    )
    .unwrap();
    let other = ctxbench(
        tmp.path(),
        &[
            "report",
            "s1",
            "s2",
            "--gates",
            "looser.yaml",
            "--out",
            "other",
        ],
    );
    assert_eq!(other.status.code(), Some(3), "{}", text(&other));
    assert!(
        text(&other).contains("verdict: INCOMPLETE"),
        "{}",
        text(&other)
    );
    let exploratory = ctxbench(
        tmp.path(),
        &[
            "report",
            "s1",
            "s2",
            "--gates",
            "looser.yaml",
            "--exploratory",
            "--out",
            "exploratory",
        ],
    );
    assert_eq!(exploratory.status.code(), Some(0), "{}", text(&exploratory));
    for dir in ["other", "exploratory"] {
        for f in files {
            assert!(tmp.path().join(dir).join(f).is_file(), "missing {dir}/{f}");
        }
    }
}

/// Shards of different systems under test are two experiments: `ctxbench report` refuses
/// to merge them (exit 2, naming the field and both values) and writes no report; the
/// report of one system names it.
#[test]
fn shards_of_different_systems_under_test_do_not_merge() {
    let tmp = tempfile::tempdir().unwrap();
    let suite = small_suite(tmp.path());
    let agent = format!("exec:{} agent", env!("CARGO_BIN_EXE_ctxbench"));
    small_shard(tmp.path(), &suite, 1, "ref-1", &[]);
    small_shard(tmp.path(), &suite, 2, "ref-2", &[]);
    small_shard(
        tmp.path(),
        &suite,
        2,
        "agent-2",
        &["--sut", &agent, "--agent-timeout", "60"],
    );
    let mixed = ctxbench(
        tmp.path(),
        &["report", "ref-1", "agent-2", "--out", "mixed"],
    );
    assert_eq!(mixed.status.code(), Some(2), "{}", text(&mixed));
    let err = String::from_utf8_lossy(&mixed.stderr).to_string();
    assert!(err.contains("system under test"), "{err}");
    assert!(
        err.contains("\"reference\"") && err.contains(&format!("{agent:?}")),
        "{err}"
    );
    assert!(
        !tmp.path().join("mixed").exists(),
        "a refused merge wrote a report"
    );

    // The same system's shards merge, and every output names it.
    let same = ctxbench(tmp.path(), &["report", "ref-1", "ref-2", "--out", "same"]);
    assert!(
        matches!(same.status.code(), Some(0 | 1 | 3)),
        "{}",
        text(&same)
    );
    let read = |dir: &str, f: &str| std::fs::read_to_string(tmp.path().join(dir).join(f)).unwrap();
    assert!(read("same", "index.html").contains("System under test: <b>reference</b>"));
    assert!(read("same", "summary.md").contains("System under test: **reference**"));
    assert!(read("same", "gates.json").contains("\"sut\": \"reference\""));
    // An external agent's command is untrusted text: escaped in the page.
    let one = ctxbench(tmp.path(), &["report", "agent-2", "--out", "agent"]);
    assert!(
        matches!(one.status.code(), Some(0 | 1 | 3)),
        "{}",
        text(&one)
    );
    let html = read("agent", "index.html");
    assert!(html.contains("System under test: <b>exec:&#x2F;"), "{html}");
    let gates: serde_json::Value = serde_json::from_str(&read("agent", "gates.json")).unwrap();
    assert_eq!(gates["sut"], agent.as_str());
}

/// `ctxbench run | head -0`: the reader goes away before the verdict is printed. That is
/// no crash of ctxbench: it exits 141 (as a process killed by SIGPIPE) without a panic
/// message, and the run on disk is complete.
#[test]
fn a_closed_stdout_ends_quietly_not_with_a_panic() {
    let dir = tempfile::tempdir().expect("tempdir");
    let suite = small_suite(dir.path());
    let mut child = Command::new(env!("CARGO_BIN_EXE_ctxbench"))
        .args(["run", "--suite"])
        .arg(&suite)
        .args([
            "--modes",
            "compact",
            "--trials",
            "1",
            "--progress",
            "none",
            "--out",
            "r",
        ])
        .current_dir(dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    drop(child.stdout.take()); // the reader is gone before anything is printed
    let out = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(141), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(dir.path().join("r/report/index.html").exists());
}
