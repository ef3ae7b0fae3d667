//! `junit.xml`: the run as JUnit XML, for CI test reporters (nextest's habit: one file,
//! written at the end of the run, never appended to).
//!
//! # Layout
//!
//! ```text
//! <testsuites name="ctxbench" tests failures errors skipped time>
//!   <testsuite name="<scenario>.<mode>" …>        one per scenario × mode (scenario id, then
//!     <properties> role, trials, errored </properties>   modes off → warn → compact)
//!     <testcase name="<grader>" classname="<scenario>.<mode>"/>   one per grader (by name)
//!     <testcase name="outcome" …/>                 the outcome matched what the scenario expects
//!     <testcase name="trial <t>" …><error/></testcase>   one per errored trial
//!   </testsuite>
//!   <testsuite name="gates">                        one testcase per gate, in gates-file order
//! </testsuites>
//! ```
//!
//! A grader's testcase aggregates its verdicts over the non-errored trials of the
//! scenario × mode (METRICS.md: "one test case per scenario × mode × grader"): it carries
//! a `<failure>` when any trial's verdict failed — message `k of n trials failed: <first
//! summary>`, body one block per failing trial with its summary and first
//! [`EVIDENCE_SHOWN`] evidence notes — and `<skipped>` when every verdict was `skip`.
//! Errored trials are counted apart, as everywhere in the report: each is an `<error>`
//! testcase, and its verdicts are not in the grader testcases. `outcome` fails for a trial
//! that did not pass although none of its graders failed (its outcome was not the one
//! the scenario expects), so the file never shows green where `trials.csv` says failed.
//! A gate that fails is a `<failure>` (message: observed value, threshold and detail — the
//! detail matters for `pass_rate_regression_vs_warn`, which judges an interval, not the
//! observed point value), one that could not be evaluated `<skipped>`, and every gate's
//! detail is in its `<system-out>`.
//!
//! Baseline modes (`off`, `warn`) are reported like the candidate — an `off` trial over
//! the window is expected to fail — and their suites carry the property `role = baseline`;
//! the verdict belongs to the gates suite.
//!
//! # Escaping
//!
//! Every string from run storage is XML-escaped ([`escape_xml`]): `& < > " '` become
//! entities; in attribute values tab, newline and carriage return become character
//! references (so a parser's attribute normalisation keeps them); characters XML 1.0 cannot
//! carry at all (other C0 controls, U+FFFE, U+FFFF) become U+FFFD. No CDATA is used, so
//! `]]>` in a summary is harmless. Messages are bounded to [`MESSAGE_CHARS`] characters.
//!
//! The only timing in the file is each suite's `time` (the sum of its trials' wall time),
//! so writing the same run twice gives the same bytes.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Write};

use ctxbench_harness::storage::schema::{OutcomeStatus, TrialRow, VerdictStatus};
use ctxbench_harness::Mode;

use crate::error::ExportError;
use crate::export::{Exporter, ReportData};
use crate::gates::{Bound, GateReport, GateStatus};

/// Evidence notes quoted per failing trial of a grader testcase (the rest are counted).
pub const EVIDENCE_SHOWN: usize = 3;

/// Longest `message` attribute and evidence line, in characters (the rest is elided).
pub const MESSAGE_CHARS: usize = 500;

/// Writes `junit.xml`.
#[derive(Debug, Clone, Copy)]
pub struct JunitExporter;

impl Exporter for JunitExporter {
    fn file_name(&self) -> &'static str {
        "junit.xml"
    }

    fn export(&self, data: &ReportData<'_>, out: &mut dyn Write) -> Result<(), ExportError> {
        render(data, out)?;
        Ok(())
    }
}

/// How one testcase ended.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    Passed,
    Failure {
        message: String,
        body: String,
    },
    Error {
        kind: String,
        message: String,
        body: String,
    },
    Skipped {
        message: String,
    },
}

#[derive(Debug, Clone)]
struct Case {
    name: String,
    classname: String,
    outcome: Outcome,
    system_out: Option<String>,
}

#[derive(Debug, Clone, Default)]
struct Suite {
    name: String,
    properties: Vec<(&'static str, String)>,
    cases: Vec<Case>,
    /// Wall time in milliseconds, when known.
    time_ms: Option<u64>,
}

impl Suite {
    fn count(&self, f: impl Fn(&Outcome) -> bool) -> usize {
        self.cases.iter().filter(|c| f(&c.outcome)).count()
    }
    fn failures(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Failure { .. }))
    }
    fn errors(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Error { .. }))
    }
    fn skipped(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Skipped { .. }))
    }
}

/// Renders `junit.xml` into `out`.
pub fn render(data: &ReportData<'_>, out: &mut dyn Write) -> io::Result<()> {
    let mut suites = trial_suites(&data.run.trials, data.gates.candidate);
    suites.push(gates_suite(&data.gates));
    out.write_all(to_xml(&suites).as_bytes())
}

/// One suite per scenario × mode.
fn trial_suites(trials: &[TrialRow], candidate: Mode) -> Vec<Suite> {
    let mode_pos = |m: Mode| Mode::ALL.iter().position(|&x| x == m).unwrap_or(usize::MAX);
    let mut groups: BTreeMap<(&str, usize), Vec<&TrialRow>> = BTreeMap::new();
    for t in trials {
        groups
            .entry((t.scenario.as_str(), mode_pos(t.mode)))
            .or_default()
            .push(t);
    }
    groups
        .into_values()
        .map(|mut group| {
            group.sort_by(|a, b| (a.trial, &a.trial_id).cmp(&(b.trial, &b.trial_id)));
            scenario_mode_suite(&group, candidate)
        })
        .collect()
}

fn scenario_mode_suite(group: &[&TrialRow], candidate: Mode) -> Suite {
    let first = group[0];
    let classname = format!("{}.{}", first.scenario, first.mode);
    let errored: Vec<&TrialRow> = group
        .iter()
        .copied()
        .filter(|t| t.outcome.status == OutcomeStatus::Errored)
        .collect();
    let graded: Vec<&TrialRow> = group
        .iter()
        .copied()
        .filter(|t| t.outcome.status != OutcomeStatus::Errored)
        .collect();
    let graders: std::collections::BTreeSet<&str> = group
        .iter()
        .flat_map(|t| t.verdicts.iter().map(|v| v.grader.as_str()))
        .collect();

    let mut cases: Vec<Case> = graders
        .into_iter()
        .map(|g| Case {
            name: g.to_string(),
            classname: classname.clone(),
            outcome: grader_outcome(g, &graded),
            system_out: None,
        })
        .collect();
    cases.push(Case {
        name: "outcome".into(),
        classname: classname.clone(),
        outcome: outcome_outcome(&graded),
        system_out: None,
    });
    for t in errored {
        let reason = if t.outcome.reason.is_empty() {
            "errored".to_string()
        } else {
            t.outcome.reason.clone()
        };
        let message = if t.outcome.detail.is_empty() {
            format!("trial {} errored: {reason}", t.trial_id)
        } else {
            format!(
                "trial {} errored: {reason}: {}",
                t.trial_id, t.outcome.detail
            )
        };
        cases.push(Case {
            name: format!("trial {}", t.trial),
            classname: classname.clone(),
            outcome: Outcome::Error {
                kind: reason,
                message: bounded(&message),
                body: t.outcome.detail.clone(),
            },
            system_out: None,
        });
    }
    let role = if first.mode == candidate {
        "candidate"
    } else {
        "baseline"
    };
    Suite {
        name: classname,
        properties: vec![
            ("role", role.to_string()),
            ("trials", group.len().to_string()),
            ("errored", (group.len() - graded.len()).to_string()),
        ],
        cases,
        time_ms: Some(group.iter().map(|t| t.elapsed_ms).sum()),
    }
}

/// A grader's verdicts over the non-errored trials of one scenario × mode.
fn grader_outcome(grader: &str, graded: &[&TrialRow]) -> Outcome {
    let verdicts: Vec<(&TrialRow, &ctxbench_harness::storage::schema::Verdict)> = graded
        .iter()
        .flat_map(|t| {
            t.verdicts
                .iter()
                .filter(move |v| v.grader == grader)
                .map(move |v| (*t, v))
        })
        .collect();
    if verdicts.is_empty() {
        return Outcome::Skipped {
            message: "no verdict on a trial that did not error".into(),
        };
    }
    let failed: Vec<_> = verdicts
        .iter()
        .filter(|(_, v)| v.status == VerdictStatus::Fail)
        .collect();
    if let Some((_, first)) = failed.first() {
        let mut body = String::new();
        for (t, v) in &failed {
            let _ = writeln!(body, "trial {} ({}): {}", t.trial, t.trial_id, v.summary);
            for e in v.evidence.iter().take(EVIDENCE_SHOWN) {
                let _ = writeln!(body, "  - {}", bounded(&e.note));
            }
            if v.evidence.len() > EVIDENCE_SHOWN {
                let _ = writeln!(
                    body,
                    "  … {} more evidence item(s)",
                    v.evidence.len() - EVIDENCE_SHOWN
                );
            }
        }
        return Outcome::Failure {
            message: bounded(&format!(
                "{} of {} trials failed: {}",
                failed.len(),
                verdicts.len(),
                first.summary
            )),
            body,
        };
    }
    if verdicts
        .iter()
        .all(|(_, v)| v.status == VerdictStatus::Skip)
    {
        return Outcome::Skipped {
            message: bounded(&verdicts[0].1.summary),
        };
    }
    Outcome::Passed
}

/// Trials that did not pass although no grader failed: their outcome was not the expected
/// one.
fn outcome_outcome(graded: &[&TrialRow]) -> Outcome {
    if graded.is_empty() {
        return Outcome::Skipped {
            message: "every trial errored".into(),
        };
    }
    let mismatched: Vec<&&TrialRow> = graded
        .iter()
        .filter(|t| !t.passed && t.verdicts.iter().all(|v| v.status != VerdictStatus::Fail))
        .collect();
    let Some(first) = mismatched.first() else {
        return Outcome::Passed;
    };
    let describe = |t: &TrialRow| {
        let mut s = format!(
            "trial {} ({}): outcome {}",
            t.trial,
            t.trial_id,
            t.outcome.status.as_str()
        );
        if !t.outcome.reason.is_empty() {
            let _ = write!(s, " ({})", t.outcome.reason);
        }
        let _ = write!(s, ", expected {}", t.expected_outcome);
        s
    };
    let mut body = String::new();
    for t in &mismatched {
        let _ = writeln!(body, "{}", describe(t));
        if !t.outcome.detail.is_empty() {
            let _ = writeln!(body, "  - {}", bounded(&t.outcome.detail));
        }
    }
    Outcome::Failure {
        message: bounded(&format!(
            "{} of {} trials ended otherwise than expected: {}",
            mismatched.len(),
            graded.len(),
            describe(first)
        )),
        body,
    }
}

fn gates_suite(g: &GateReport) -> Suite {
    let mut properties = vec![
        ("verdict", g.headline()),
        ("exploratory", g.exploratory.to_string()),
        ("reason", g.reason.clone()),
        ("exit_code", g.exit_code.to_string()),
        ("candidate", g.candidate.as_str().to_string()),
        ("gates_source", g.gates_source.clone()),
        ("gates_sha256", g.gates_sha256.clone()),
    ];
    if let Some(note) = &g.note {
        properties.push(("note", note.clone()));
    }
    let cases = g
        .gates
        .iter()
        .map(|r| {
            let op = match r.bound {
                Bound::Max => "≤",
                Bound::Min => "≥",
            };
            let outcome = match r.status {
                GateStatus::Pass => Outcome::Passed,
                GateStatus::Fail => Outcome::Failure {
                    message: bounded(&format!(
                        "observed {} (threshold {op} {}): {}",
                        r.observed.map(num).unwrap_or_else(|| "none".into()),
                        num(r.threshold),
                        r.detail
                    )),
                    body: r.detail.clone(),
                },
                GateStatus::NotEvaluated => Outcome::Skipped {
                    message: bounded(&format!("not evaluated: {}", r.detail)),
                },
            };
            Case {
                name: r.name.clone(),
                classname: "gates".into(),
                outcome,
                system_out: Some(r.detail.clone()),
            }
        })
        .collect();
    Suite {
        name: "gates".into(),
        properties,
        cases,
        time_ms: None,
    }
}

/// Compact number: integers without decimals, others with up to 4.
fn num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.4}")
    }
}

/// At most [`MESSAGE_CHARS`] characters, cut on a character boundary.
fn bounded(s: &str) -> String {
    match s.char_indices().nth(MESSAGE_CHARS) {
        None => s.to_string(),
        Some((i, _)) => format!("{}…", &s[..i]),
    }
}

fn secs(ms: u64) -> String {
    format!("{}.{:03}", ms / 1000, ms % 1000)
}

fn to_xml(suites: &[Suite]) -> String {
    let sum = |f: fn(&Suite) -> usize| suites.iter().map(f).sum::<usize>();
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let total_ms: u64 = suites.iter().filter_map(|s| s.time_ms).sum();
    let _ = writeln!(
        x,
        "<testsuites name=\"ctxbench\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" \
         time=\"{}\">",
        sum(|s| s.cases.len()),
        sum(Suite::failures),
        sum(Suite::errors),
        sum(Suite::skipped),
        secs(total_ms)
    );
    for s in suites {
        let _ = write!(
            x,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\"",
            attr(&s.name),
            s.cases.len(),
            s.failures(),
            s.errors(),
            s.skipped()
        );
        if let Some(ms) = s.time_ms {
            let _ = write!(x, " time=\"{}\"", secs(ms));
        }
        x.push_str(">\n");
        if !s.properties.is_empty() {
            x.push_str("    <properties>\n");
            for (k, v) in &s.properties {
                let _ = writeln!(
                    x,
                    "      <property name=\"{}\" value=\"{}\"/>",
                    attr(k),
                    attr(v)
                );
            }
            x.push_str("    </properties>\n");
        }
        for c in &s.cases {
            let _ = write!(
                x,
                "    <testcase name=\"{}\" classname=\"{}\"",
                attr(&c.name),
                attr(&c.classname)
            );
            if c.outcome == Outcome::Passed && c.system_out.is_none() {
                x.push_str("/>\n");
                continue;
            }
            x.push_str(">\n");
            match &c.outcome {
                Outcome::Passed => {}
                Outcome::Failure { message, body } => {
                    let _ = writeln!(
                        x,
                        "      <failure message=\"{}\" type=\"failure\">{}</failure>",
                        attr(message),
                        text(body)
                    );
                }
                Outcome::Error {
                    kind,
                    message,
                    body,
                } => {
                    let _ = writeln!(
                        x,
                        "      <error message=\"{}\" type=\"{}\">{}</error>",
                        attr(message),
                        attr(kind),
                        text(body)
                    );
                }
                Outcome::Skipped { message } => {
                    let _ = writeln!(x, "      <skipped message=\"{}\"/>", attr(message));
                }
            }
            if let Some(out) = &c.system_out {
                let _ = writeln!(x, "      <system-out>{}</system-out>", text(out));
            }
            x.push_str("    </testcase>\n");
        }
        x.push_str("  </testsuite>\n");
    }
    x.push_str("</testsuites>\n");
    x
}

/// Where an escaped string goes: attribute values also encode tab, newline and carriage
/// return (attribute-value normalisation would turn them into spaces); text keeps tab and
/// newline and encodes only carriage return (line-end normalisation would drop it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XmlContext {
    /// A double- or single-quoted attribute value.
    Attribute,
    /// Element content.
    Text,
}

/// Escapes `s` for XML 1.0 in `ctx`: `& < > " '` as entities, whitespace controls as
/// described in [`XmlContext`], and characters XML 1.0 cannot carry (C0 controls other
/// than tab, newline and carriage return; U+FFFE; U+FFFF) replaced by U+FFFD.
pub fn escape_xml(s: &str, ctx: XmlContext) -> String {
    let s = ctxbench_harness::visible::bidi_visible(s);
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\r' => out.push_str("&#13;"),
            '\t' if ctx == XmlContext::Attribute => out.push_str("&#9;"),
            '\n' if ctx == XmlContext::Attribute => out.push_str("&#10;"),
            '\t' | '\n' => out.push(ch),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

fn attr(s: &str) -> String {
    escape_xml(s, XmlContext::Attribute)
}

fn text(s: &str) -> String {
    escape_xml(s, XmlContext::Text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_quotes_and_controls() {
        let hostile = "<a href=\"x\">'&amp;'</a>]]>\u{0}\u{1b}[31m\u{FFFF}";
        let a = escape_xml(hostile, XmlContext::Attribute);
        assert_eq!(
            a,
            "&lt;a href=&quot;x&quot;&gt;&apos;&amp;amp;&apos;&lt;/a&gt;]]&gt;\u{FFFD}\u{FFFD}[31m\u{FFFD}"
        );
        assert_eq!(
            escape_xml("a\tb\nc\rd", XmlContext::Attribute),
            "a&#9;b&#10;c&#13;d"
        );
        assert_eq!(escape_xml("a\tb\nc\rd", XmlContext::Text), "a\tb\nc&#13;d");
        assert_eq!(escape_xml("ünïcødé ✓", XmlContext::Text), "ünïcødé ✓");
        assert_eq!(
            escape_xml("a\u{202E}b", XmlContext::Text),
            "a&lt;U+202E&gt;b"
        );
    }

    #[test]
    fn messages_are_bounded_on_char_boundaries() {
        let long = "é".repeat(MESSAGE_CHARS + 10);
        let b = bounded(&long);
        assert_eq!(b.chars().count(), MESSAGE_CHARS + 1);
        assert!(b.ends_with('…'));
        assert_eq!(bounded("short"), "short");
    }

    #[test]
    fn counts_roll_up_into_the_root() {
        let case = |name: &str, outcome| Case {
            name: name.into(),
            classname: "s.m".into(),
            outcome,
            system_out: None,
        };
        let suites = vec![Suite {
            name: "s.m".into(),
            properties: vec![],
            cases: vec![
                case("a", Outcome::Passed),
                case(
                    "b",
                    Outcome::Failure {
                        message: "m".into(),
                        body: String::new(),
                    },
                ),
                case(
                    "c",
                    Outcome::Skipped {
                        message: "s".into(),
                    },
                ),
            ],
            time_ms: Some(1234),
        }];
        let x = to_xml(&suites);
        assert!(x.contains(
            "<testsuites name=\"ctxbench\" tests=\"3\" failures=\"1\" errors=\"0\" skipped=\"1\" time=\"1.234\">"
        ), "{x}");
        assert!(
            x.contains("<testcase name=\"a\" classname=\"s.m\"/>"),
            "{x}"
        );
        assert!(x.contains("<skipped message=\"s\"/>"), "{x}");
    }
}
