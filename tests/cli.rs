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
