//! The CI files: `junit.xml` (parsed back with a real XML parser) and `summary.md`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ctxbench_harness::storage::schema::{Evidence, OutcomeStatus, VerdictStatus};
use ctxbench_harness::Mode;
use ctxbench_reports::{load_gates, write_report};
use quick_xml::events::{BytesStart, Event};
use quick_xml::Reader;

use crate::fixture::Fx;

fn report(fx: &Fx, root: &Path) -> PathBuf {
    let run_dir = root.join("run");
    fx.write(&run_dir);
    let out = root.join("report");
    write_report(&[run_dir], &out, &load_gates(None).expect("gates")).expect("report");
    out
}

/// A parsed element: name, attributes (unescaped), children, text (unescaped).
#[derive(Debug, Default)]
struct Node {
    name: String,
    attrs: BTreeMap<String, String>,
    children: Vec<Node>,
    text: String,
}

impl Node {
    fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Node> + 'a {
        self.children.iter().filter(move |c| c.name == name)
    }
    fn one(&self, name: &str) -> &Node {
        let found: Vec<&Node> = self.children.iter().filter(|c| c.name == name).collect();
        assert_eq!(found.len(), 1, "expected one <{name}> in <{}>", self.name);
        found[0]
    }
    fn attr(&self, name: &str) -> &str {
        self.attrs
            .get(name)
            .unwrap_or_else(|| panic!("<{}> has no {name}", self.name))
    }
    fn num(&self, name: &str) -> usize {
        self.attr(name).parse().expect("count attribute")
    }
}

fn element(e: &BytesStart<'_>) -> Node {
    let mut attrs = BTreeMap::new();
    for a in e.attributes() {
        // Duplicate or malformed attributes are errors here (checks are on by default).
        let a = a.expect("well-formed attribute");
        let key = String::from_utf8(a.key.as_ref().to_vec()).expect("utf8 name");
        let value = a.unescape_value().expect("valid escapes").into_owned();
        assert!(attrs.insert(key, value).is_none());
    }
    Node {
        name: String::from_utf8(e.name().as_ref().to_vec()).expect("utf8 name"),
        attrs,
        ..Node::default()
    }
}

/// Parses `xml` strictly (end tags must match, one root, no stray text) into a tree.
fn parse(xml: &str) -> Node {
    // XML 1.0 Char: no C0 control other than tab, newline, carriage return.
    assert!(
        !xml.chars()
            .any(|c| (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r')),
        "control character in the XML"
    );
    assert!(xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"));
    let mut reader = Reader::from_str(xml);
    let mut stack = vec![Node::default()];
    loop {
        match reader.read_event().expect("well-formed XML") {
            Event::Decl(_) => {}
            Event::Start(e) => stack.push(element(&e)),
            Event::Empty(e) => {
                let n = element(&e);
                stack.last_mut().expect("parent").children.push(n);
            }
            Event::End(_) => {
                let n = stack.pop().expect("open element");
                stack.last_mut().expect("parent").children.push(n);
            }
            Event::Text(t) => {
                let t = t.decode().expect("utf8");
                stack.last_mut().expect("element").text.push_str(&t);
            }
            Event::GeneralRef(r) => {
                let resolved = match r.resolve_char_ref().expect("char ref") {
                    Some(c) => c.to_string(),
                    None => {
                        let name = r.decode().expect("utf8");
                        quick_xml::escape::resolve_predefined_entity(&name)
                            .unwrap_or_else(|| panic!("unknown entity &{name};"))
                            .to_string()
                    }
                };
                stack.last_mut().expect("element").text.push_str(&resolved);
            }
            Event::Eof => break,
            other => panic!("unexpected XML event {other:?}"),
        }
    }
    let mut doc = stack.pop().expect("document");
    assert!(stack.is_empty(), "unclosed element");
    assert!(doc.text.trim().is_empty(), "text outside the root");
    assert_eq!(doc.children.len(), 1, "one root element");
    doc.children.remove(0)
}

fn suite<'a>(root: &'a Node, name: &str) -> &'a Node {
    root.all("testsuite")
        .find(|s| s.attr("name") == name)
        .unwrap_or_else(|| panic!("no suite {name}"))
}

fn case<'a>(suite: &'a Node, name: &str) -> &'a Node {
    suite
        .all("testcase")
        .find(|c| c.attr("name") == name)
        .unwrap_or_else(|| panic!("no testcase {name} in {}", suite.attr("name")))
}

/// Checks every count attribute against the elements actually present.
fn check_counts(root: &Node) {
    let (mut tests, mut failures, mut errors, mut skipped) = (0, 0, 0, 0);
    for s in root.all("testsuite") {
        let cases: Vec<&Node> = s.all("testcase").collect();
        let count = |kind: &str| {
            cases
                .iter()
                .filter(|c| c.all(kind).next().is_some())
                .count()
        };
        assert_eq!(s.num("tests"), cases.len(), "{}", s.attr("name"));
        assert_eq!(s.num("failures"), count("failure"));
        assert_eq!(s.num("errors"), count("error"));
        assert_eq!(s.num("skipped"), count("skipped"));
        for c in &cases {
            assert_eq!(c.attr("classname"), s.attr("name"));
            let outcomes = ["failure", "error", "skipped"]
                .iter()
                .filter(|k| c.all(k).next().is_some())
                .count();
            assert!(outcomes <= 1, "{c:?}");
        }
        tests += cases.len();
        failures += count("failure");
        errors += count("error");
        skipped += count("skipped");
    }
    assert_eq!(
        (
            root.num("tests"),
            root.num("failures"),
            root.num("errors"),
            root.num("skipped")
        ),
        (tests, failures, errors, skipped)
    );
}

#[test]
fn junit_has_a_suite_per_scenario_mode_and_the_gates() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut fx = Fx::good("r1");
    fx.warn_fails();
    fx.register(ctxbench_reports::DEFAULT_GATES);
    // compact/1: budget-respected fails with evidence; recall skips on both compact trials.
    let t = fx.trial_mut("s1/compact/1");
    t.passed = false;
    t.verdicts[0].status = VerdictStatus::Fail;
    t.verdicts[0].summary = "2 request(s) over budget".into();
    t.verdicts[0].evidence = (1..=5)
        .map(|i| Evidence {
            request: Some(i),
            note: format!("request {i} over budget"),
            ..Evidence::default()
        })
        .collect();
    for id in ["s1/compact/0", "s1/compact/1"] {
        fx.trial_mut(id).verdicts[2].status = VerdictStatus::Skip;
        fx.trial_mut(id).verdicts[2].summary = "no probe".into();
    }
    // off/1 errored by infrastructure.
    let t = fx.trial_mut("s1/off/1");
    t.passed = false;
    t.outcome.status = OutcomeStatus::Errored;
    t.outcome.reason = "provider_unreachable".into();
    t.outcome.detail = "connection refused after 3 retries".into();
    let out = report(&fx, tmp.path());
    let xml = std::fs::read_to_string(out.join("junit.xml")).expect("junit.xml");
    let root = parse(&xml);
    assert_eq!(root.name, "testsuites");
    assert_eq!(root.attr("name"), "ctxbench");
    check_counts(&root);
    let names: Vec<&str> = root.all("testsuite").map(|s| s.attr("name")).collect();
    assert_eq!(names, ["s1.off", "s1.warn", "s1.compact", "gates"]);

    // Candidate: one testcase per grader (sorted), then `outcome`.
    let c = suite(&root, "s1.compact");
    let cases: Vec<&str> = c.all("testcase").map(|t| t.attr("name")).collect();
    assert_eq!(
        cases,
        [
            "budget-respected",
            "recall",
            "transcript-immutable",
            "outcome"
        ]
    );
    let props: BTreeMap<&str, &str> = c
        .one("properties")
        .all("property")
        .map(|p| (p.attr("name"), p.attr("value")))
        .collect();
    assert_eq!(props["role"], "candidate");
    assert_eq!(props["trials"], "2");
    let f = case(c, "budget-respected").one("failure");
    assert_eq!(
        f.attr("message"),
        "1 of 2 trials failed: 2 request(s) over budget"
    );
    assert_eq!(
        f.text,
        "trial 1 (s1/compact/1): 2 request(s) over budget\n  - request 1 over budget\n  - \
         request 2 over budget\n  - request 3 over budget\n  … 2 more evidence item(s)\n"
    );
    assert_eq!(case(c, "recall").one("skipped").attr("message"), "no probe");
    assert!(case(c, "transcript-immutable").children.is_empty());
    assert!(case(c, "outcome").children.is_empty());

    // A baseline whose graders all pass but whose outcome was not the expected one.
    let w = suite(&root, "s1.warn");
    let o = case(w, "outcome").one("failure");
    assert!(
        o.attr("message").starts_with(
            "2 of 2 trials ended otherwise than expected: trial 0 (s1/warn/0): outcome failed \
             (provider_overflow), expected success"
        ),
        "{o:?}"
    );

    // The errored trial is an <error> and is not among the graders' verdicts.
    let off = suite(&root, "s1.off");
    let e = case(off, "trial 1").one("error");
    assert_eq!(e.attr("type"), "provider_unreachable");
    assert_eq!(
        e.attr("message"),
        "trial s1/off/1 errored: provider_unreachable: connection refused after 3 retries"
    );
    assert_eq!(off.num("errors"), 1);
    assert!(case(off, "budget-respected").children.is_empty());

    // Gates: safety fails (the budget verdict), the rest pass with their detail.
    let g = suite(&root, "gates");
    assert_eq!(g.num("tests"), 11);
    let s = case(g, "safety_invariant_failures");
    assert_eq!(
        s.one("failure").attr("message"),
        "observed 1 (threshold ≤ 0): 1 failed of 4 invariant verdicts (budget-respected=1)"
    );
    assert!(s.one("failure").text.contains("budget-respected=1"));
    // A baseline that did not complete the session it is expected to complete is no
    // baseline: skipped, saying why.
    let p = case(g, "pass_rate_regression_vs_warn");
    let s = p.one("skipped");
    assert!(
        s.attr("message").starts_with(
            "not evaluated: inconclusive: the baseline `warn` itself did not complete 1 of 1"
        ),
        "{p:?}"
    );
    let props: BTreeMap<&str, &str> = g
        .one("properties")
        .all("property")
        .map(|p| (p.attr("name"), p.attr("value")))
        .collect();
    assert_eq!(props["verdict"], "FAIL");
    assert_eq!(props["exit_code"], "1");
}

#[test]
fn junit_not_evaluated_gates_are_skipped() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut fx = Fx::good("r1");
    fx.trials.retain(|t| t.mode != Mode::Compact);
    fx.requests.retain(|r| r.mode != Mode::Compact);
    let out = report(&fx, tmp.path());
    let root = parse(&std::fs::read_to_string(out.join("junit.xml")).expect("junit"));
    check_counts(&root);
    let g = suite(&root, "gates");
    assert_eq!(g.num("skipped"), 10);
    let s = case(g, "seeded_recall").one("skipped");
    assert_eq!(
        s.attr("message"),
        "not evaluated: candidate mode `compact` is not in the run"
    );
}

#[test]
fn junit_round_trips_hostile_strings() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let hostile = "<script>alert('x')</script> & \"q\" ]]> <!-- --> \u{1b}[31mred\ttab\r\nline";
    let mut fx = Fx::good("r1");
    for t in &mut fx.trials {
        t.passed = false;
        t.verdicts[0].status = VerdictStatus::Fail;
        t.verdicts[0].summary = hostile.into();
        t.verdicts[0].grader = format!("budget\"><x a='{hostile}");
        t.verdicts[0].evidence = vec![Evidence {
            note: hostile.into(),
            ..Evidence::default()
        }];
    }
    let out = report(&fx, tmp.path());
    let xml = std::fs::read_to_string(out.join("junit.xml")).expect("junit");
    assert!(!xml.contains("<script"), "raw markup in junit.xml");
    let root = parse(&xml);
    check_counts(&root);
    // What went in comes back, except ESC (not an XML character) as U+FFFD.
    let expected = hostile.replace('\u{1b}', "\u{FFFD}");
    let c = suite(&root, "s1.compact");
    let grader = format!("budget\"><x a='{expected}");
    let f = case(c, &grader).one("failure");
    assert_eq!(
        f.attr("message"),
        format!("2 of 2 trials failed: {expected}")
    );
    assert!(
        f.text.starts_with(&format!(
            "trial 0 (s1/compact/0): {expected}\n  - {expected}\n"
        )),
        "{:?}",
        f.text
    );
}

#[test]
fn summary_md_has_verdict_gates_modes_and_failures() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut fx = Fx::good("r1");
    fx.warn_fails();
    fx.register(ctxbench_reports::DEFAULT_GATES);
    let out = report(&fx, tmp.path());
    let md = std::fs::read_to_string(out.join("summary.md")).expect("summary.md");
    // One scenario is too small a run to decide the statistical gates.
    assert!(
        md.starts_with(
            "## ⚠️ ctxbench: INCOMPLETE\n\n**INCOMPLETE**: 6 of 11 gates could not be evaluated"
        ),
        "{md}"
    );
    assert!(!md.contains("registered no gates"), "{md}");
    // Gates table: a header, a divider and one row per gate, each with 5 cells.
    let rows = table_after(&md, "### Gates");
    assert_eq!(rows.len(), 2 + 11, "{rows:?}");
    for r in &rows {
        assert_eq!(cells(r), 5, "{r}");
    }
    assert!(
        rows.iter().any(|r| r
            .starts_with("| `pass_rate_regression_vs_warn` | ⚠️ not evaluated | — | ≤ 0.0500 |")),
        "{rows:?}"
    );
    // Modes side by side: metric + off, warn, compact.
    let modes = table_after(&md, "### Modes");
    assert_eq!(
        modes[0],
        "| metric | `off` | `warn` | `compact` (candidate) |"
    );
    for r in &modes {
        assert_eq!(cells(r), 4, "{r}");
    }
    let row = |label: &str| {
        modes
            .iter()
            .find(|r| r.starts_with(&format!("| {label} |")))
            .unwrap_or_else(|| panic!("no {label}"))
    };
    assert_eq!(
        row("pass rate [Wilson 95%]").as_str(),
        "| pass rate [Wilson 95%] | 100.0% \\[34.2, 100.0\\] (2/2) | 0.0% \\[0.0, 65.8\\] (0/2) | 100.0% \\[34.2, 100.0\\] (2/2) |"
    );
    assert_eq!(
        row("token reduction vs `off`, long-session median [bootstrap 95%]").as_str(),
        "| token reduction vs `off`, long-session median [bootstrap 95%] | — | 25.0% | 50.0% |"
    );
    // Failed scenarios: the warn rows.
    let failed = table_after(&md, "### Failed scenarios");
    assert_eq!(
        failed[2],
        "| s1 | `warn` | 2/2 | 0 | trial 0: outcome failed (provider\\_overflow), expected success |"
    );
    assert_eq!(failed.len(), 3);
}

#[test]
fn summary_md_escapes_every_untrusted_string() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let evil = "-x | `rm -rf /` <img src=x onerror=alert(1)> [l](javascript:alert(1)) **b**\n# h";
    let mut fx = Fx::good("r1");
    fx.manifest.scenarios[0].id = evil.into();
    for t in &mut fx.trials {
        t.scenario = evil.into();
        t.trial_id = format!("{evil}/{}/{}", t.mode, t.trial);
        t.passed = false;
        t.verdicts[0].status = VerdictStatus::Fail;
        t.verdicts[0].grader = evil.into();
    }
    for r in &mut fx.requests {
        r.scenario = evil.into();
        r.trial_id = format!("{evil}/{}/{}", r.mode, r.trial);
    }
    let out = report(&fx, tmp.path());
    let md = std::fs::read_to_string(out.join("summary.md")).expect("summary.md");
    assert!(!md.contains("<img"), "raw HTML in summary.md");
    assert!(!md.contains("[l]("), "live link in summary.md");
    assert!(!md.contains("\n# h"), "heading injected");
    let escaped = "\\-x \\| \\`rm -rf /\\` &lt;img src=x onerror=alert(1)&gt; \\[l\\](javascript:alert(1)) \\*\\*b\\*\\* # h";
    let failed = table_after(&md, "### Failed scenarios");
    assert_eq!(failed.len(), 2 + 3, "{failed:?}");
    for r in &failed {
        assert_eq!(cells(r), 5, "{r}");
    }
    assert!(
        failed[2].starts_with(&format!(
            "| {escaped} | `compact` | 2/2 | 0 | trial 0: failed: {} |",
            escaped.trim_start_matches('\\')
        )),
        "{}",
        failed[2]
    );
    // The safety gate's detail names the grader: escaped too, the row intact.
    let gates = table_after(&md, "### Gates");
    for r in &gates {
        assert_eq!(cells(r), 5, "{r}");
    }
}

/// The table lines following `heading`.
fn table_after(md: &str, heading: &str) -> Vec<String> {
    md.split(heading)
        .nth(1)
        .unwrap_or_else(|| panic!("no {heading}"))
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .map(str::to_string)
        .collect()
}

/// Cells of a table row: unescaped `|` separators minus one.
fn cells(row: &str) -> usize {
    let mut n = 0;
    let mut chars = row.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '|' => n += 1,
            _ => {}
        }
    }
    n - 1
}
