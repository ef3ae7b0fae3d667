//! Compaction metrics (events.jsonl), request purposes and the token-reduction columns.

use std::collections::HashMap;
use std::path::Path;

use ctxbench_harness::storage::schema::ManifestScenario;
use ctxbench_harness::Mode;
use ctxbench_reports::frames::{trial_columns, REQUEST_COLUMNS};
use ctxbench_reports::gates::GateStatus;
use ctxbench_reports::summary::SUMMARY_COLUMNS;
use ctxbench_reports::{load_gates, load_run, write_report, ReportData, SummaryRow};
use serde_json::json;

use crate::fixture::{append, event, request, trial, Fx};

const XSS: &str = "<img src=x onerror=alert(1)>";

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() < 5e-4)
}

/// The good fixture plus:
///
/// - `s1/compact/0`: two completed compactions (reclaimed 300 + 200, summary tokens 50 +
///   70, one summarizer call each), one failed (`summarizer_failed`, 2 calls), one
///   unchanged, a rejected and a reused checkpoint, two tool-output projections, a
///   `no_progress` and another limit stop; and a **summarization request** at step 1:
///   provider input 5000 against an estimate of 0, over budget, unwarned;
/// - `s1/compact/1`: one failed compaction (`does_not_fit`), a rejected checkpoint whose
///   reason is an HTML payload, and an overflow recovery (attempt 2, provider 150 = est);
/// - `s1/warn/0`: 25 unchanged compactions (`mode_not_compact`), to bound the drill-down;
/// - scenario `s2`, **not** tagged `long-session`: off and compact trial 0, both 100 + 100;
/// - events the report ignores (budgets) and an event of a trial that never finished.
fn compaction_fx() -> Fx {
    let mut fx = Fx::good("r1");
    let c0 = "s1/compact/0";
    let mut seq = 0;
    let mut ev = |fx: &mut Fx, id: &str, step: u64, kind: &str, data: serde_json::Value| {
        seq += 1;
        fx.events.push(event(id, seq, step, kind, data));
    };
    ev(&mut fx, c0, 0, "context.budgeted", json!({"round": 0}));
    ev(
        &mut fx,
        c0,
        0,
        "context.compaction.started",
        json!({"trigger": "automatic", "strategy": "extractive"}),
    );
    ev(
        &mut fx,
        c0,
        0,
        "context.compaction.completed",
        json!({"trigger": "automatic", "checkpoint_id": "ck_a", "previous_id": null,
               "strategy": "extractive", "summarized_from": 0, "summarized_through": 5,
               "tail_start": 6, "tail_end": 10, "reclaimed_tokens": 300,
               "summary_tokens": 50, "summarizer_calls": 1, "content_hash": "h",
               "content_bytes": 10}),
    );
    ev(
        &mut fx,
        c0,
        0,
        "context.tool_output.projected",
        json!({"round": 0, "results": 2}),
    );
    ev(
        &mut fx,
        c0,
        1,
        "context.compaction.completed",
        json!({"trigger": "overflow", "checkpoint_id": "ck_b", "previous_id": "ck_a",
               "strategy": "extractive", "summarized_from": 6, "summarized_through": 9,
               "tail_start": 10, "tail_end": 12, "reclaimed_tokens": 200,
               "summary_tokens": 70, "summarizer_calls": 1, "content_hash": "h",
               "content_bytes": 10}),
    );
    ev(
        &mut fx,
        c0,
        1,
        "context.compaction.failed",
        json!({"trigger": "manual", "reason": "summarizer_failed",
               "detail": "injected", "summarizer_calls": 2}),
    );
    ev(
        &mut fx,
        c0,
        1,
        "context.compaction.unchanged",
        json!({"trigger": "manual", "reason": "already_compacted"}),
    );
    ev(
        &mut fx,
        c0,
        1,
        "context.checkpoint.rejected",
        json!({"reason": "source hash mismatch"}),
    );
    ev(
        &mut fx,
        c0,
        1,
        "context.checkpoint.reused",
        json!({"checkpoint_id": "ck_b"}),
    );
    ev(
        &mut fx,
        c0,
        1,
        "context.tool_output.projected",
        json!({"round": 1, "results": 1}),
    );
    ev(
        &mut fx,
        c0,
        1,
        "context.limit_reached",
        json!({"reason": "no_progress", "detail": "", "budget": {}}),
    );
    ev(
        &mut fx,
        c0,
        1,
        "context.limit_reached",
        json!({"reason": "mandatory_context_exceeds_budget", "detail": "", "budget": {}}),
    );
    let c1 = "s1/compact/1";
    ev(
        &mut fx,
        c1,
        1,
        "context.compaction.failed",
        json!({"trigger": "overflow", "reason": "does_not_fit", "detail": "",
               "summarizer_calls": 0}),
    );
    ev(
        &mut fx,
        c1,
        1,
        "context.checkpoint.rejected",
        json!({"reason": XSS}),
    );
    for _ in 0..25 {
        ev(
            &mut fx,
            "s1/warn/0",
            1,
            "context.compaction.unchanged",
            json!({"trigger": "manual", "reason": "mode_not_compact"}),
        );
    }
    // A trial that never finished: its events are orphans.
    ev(
        &mut fx,
        "s1/compact/9",
        0,
        "context.compaction.completed",
        json!({"reclaimed_tokens": 9999}),
    );

    // The summarization request: judged by nothing but the window, no engine budget.
    let t0 = fx.trial_mut(c0).clone();
    let mut summary = request(&t0, 3, 1, 0, Some(5000));
    summary.purpose = "summary".into();
    summary.over_budget = true;
    summary.warned = false;
    fx.requests.push(summary);
    // An overflow recovery in compact/1, step 1 (smaller than that step's 200).
    let t1 = fx.trial_mut(c1).clone();
    let mut retry = request(&t1, 3, 1, 150, Some(150));
    retry.attempt = 2;
    retry.retry_reason = Some("provider_overflow".into());
    fx.requests.push(retry);

    // Scenario s2, untagged: equal sizes in off and compact (reduction 0).
    fx.manifest.scenarios.push(ManifestScenario {
        id: "s2".into(),
        title: "Short".into(),
        tags: vec![],
        source: "builtin:s2.yaml".into(),
        source_hash: "cd".repeat(32),
        modes: vec![Mode::Off, Mode::Compact],
        trials: 1,
    });
    fx.manifest.matrix_size += 2;
    for mode in [Mode::Off, Mode::Compact] {
        let mut t = trial("s2", mode, 0);
        t.tags = vec![];
        for step in 0..2u64 {
            fx.requests
                .push(request(&t, step + 1, step, 100, Some(100)));
        }
        fx.trials.push(t);
    }
    fx
}

fn build(fx: &Fx, dir: &Path) -> ctxbench_reports::RunData {
    fx.write(dir);
    load_run(dir).expect("load")
}

fn row<'a>(rows: &'a [SummaryRow], scope: &str, mode: Mode) -> &'a SummaryRow {
    rows.iter()
        .find(|r| r.scope == scope && r.mode == mode)
        .unwrap_or_else(|| panic!("{scope}/{mode}"))
}

/// `trials.csv` as trial_id → column → cell.
fn csv_by_trial(text: &str) -> HashMap<String, HashMap<String, String>> {
    let mut lines = text.lines();
    let header: Vec<String> = lines
        .next()
        .expect("header")
        .split(',')
        .map(str::to_string)
        .collect();
    let id = header
        .iter()
        .position(|c| c == "trial_id")
        .expect("trial_id");
    lines
        .map(|l| {
            let cells: Vec<&str> = l.split(',').collect();
            assert_eq!(cells.len(), header.len(), "{l}");
            (
                cells[id].to_string(),
                header
                    .iter()
                    .cloned()
                    .zip(cells.iter().map(|c| c.to_string()))
                    .collect(),
            )
        })
        .collect()
}

#[test]
fn events_are_read_filtered_and_orphans_counted() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut fx = compaction_fx();
    // A resumed trial re-appended an event: the later copy of (trial, seq) wins.
    let mut again = fx
        .events
        .iter()
        .find(|e| e.kind == "context.compaction.failed")
        .expect("failed event")
        .clone();
    again.data["reason"] = json!("resumed_copy");
    fx.events.push(again);
    fx.write(tmp.path());
    // A torn final event line is skipped like in the other files.
    append(
        &tmp.path().join("events.jsonl"),
        br#"{"schema":"ctxbench.event/1","trial_id":"s1/comp"#,
    );
    let run = load_run(tmp.path()).expect("load");
    assert!(run.runs[0].has_events);
    assert_eq!(run.torn_lines, 1);
    assert_eq!(run.orphan_events, 1);
    assert_eq!(run.duplicate_events, 1);
    assert!(run
        .events
        .iter()
        .any(|e| e.data["reason"] == "resumed_copy"));
    // The budget event is not retained; the rest are, in trial order then seq.
    assert_eq!(run.events.len(), 11 + 2 + 25);
    assert!(run.events.iter().all(|e| e.kind != "context.budgeted"));
    assert_eq!(run.events[0].trial_id, "s1/warn/0");
    assert_eq!(
        run.events.last().map(|e| e.trial_id.as_str()),
        Some("s1/compact/1")
    );
}

#[test]
fn trial_compaction_columns_from_events_and_requests() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let fx = compaction_fx();
    let run_dir = tmp.path().join("run");
    fx.write(&run_dir);
    let out = tmp.path().join("report");
    write_report(&[run_dir], &out, &load_gates(None).expect("gates")).expect("report");
    let text = std::fs::read_to_string(out.join("trials.csv")).expect("csv");
    let graders: Vec<String> = ["budget-respected", "recall", "transcript-immutable"]
        .map(String::from)
        .to_vec();
    assert_eq!(
        text.lines().next(),
        Some(trial_columns(&graders).join(",").as_str())
    );
    let t = csv_by_trial(&text);
    let c0 = &t["s1/compact/0"];
    for (col, want) in [
        ("compactions", "2"),
        ("compaction_failures", "1"),
        ("compaction_unchanged", "1"),
        ("compaction_failure_reasons", "summarizer_failed"),
        ("reclaimed_tokens", "500"),
        ("summary_tokens", "120"),
        ("summarizer_calls", "4"),
        ("summary_requests", "1"),
        ("summary_input_tokens", "5000"),
        ("checkpoint_rejections", "1"),
        ("checkpoint_reuses", "1"),
        ("tool_output_projections", "2"),
        ("overflow_recoveries", "0"),
        ("no_progress_stops", "1"),
    ] {
        assert_eq!(c0[col], want, "s1/compact/0 {col}");
    }
    let c1 = &t["s1/compact/1"];
    for (col, want) in [
        ("compactions", "0"),
        ("compaction_failures", "1"),
        ("compaction_failure_reasons", "does_not_fit"),
        ("summary_requests", "0"),
        ("summary_input_tokens", "0"),
        ("overflow_recoveries", "1"),
        ("checkpoint_rejections", "1"),
    ] {
        assert_eq!(c1[col], want, "s1/compact/1 {col}");
    }
    assert_eq!(t["s1/warn/0"]["compaction_unchanged"], "25");
    // No events: zeros and an empty (quoted) reasons cell.
    let off = &t["s1/off/0"];
    assert_eq!(off["compactions"], "0");
    assert_eq!(off["compaction_failure_reasons"], "\"\"");

    // requests.csv carries the purpose right after `sent`.
    let requests = std::fs::read_to_string(out.join("requests.csv")).expect("csv");
    let header: Vec<&str> = requests
        .lines()
        .next()
        .expect("header")
        .split(',')
        .collect();
    assert_eq!(header, REQUEST_COLUMNS);
    let sent = header.iter().position(|c| *c == "sent").expect("sent");
    assert_eq!(header[sent + 1], "purpose");
    let purposes: Vec<&str> = requests
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(sent + 1).expect("purpose cell"))
        .collect();
    assert_eq!(purposes.iter().filter(|p| **p == "summary").count(), 1);
    assert_eq!(
        purposes.iter().filter(|p| **p == "turn").count(),
        purposes.len() - 1
    );
}

#[test]
fn summary_requests_are_excluded_from_error_stats_and_gates() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let fx = compaction_fx();
    let run = build(&fx, tmp.path());
    let data = ReportData::build(&run, &load_gates(None).expect("gates")).expect("build");
    let c = row(&data.summary, "suite", Mode::Compact);
    // Turn requests only: |est − provider| {0, 10, 10, 0, 0} (s1) + {0, 0} (s2).
    assert!(close(c.est_error_mean_abs, 20.0 / 7.0), "{c:?}");
    assert!(close(c.est_bias, 0.0), "{c:?}");
    // |rel| {0, .1, .1, 0, 0, 0, 0} → p95 (linear) .1; the summary request's −1 is out.
    assert!(close(c.est_rel_error_p95, 0.1), "{c:?}");
    // The summary request is over budget and unwarned, but it is compaction cost.
    assert_eq!((c.over_budget_sent, c.over_budget_unwarned), (0, 0));
    assert_eq!((c.summary_requests, c.summary_input_tokens), (1, 5000));
    let g = |name: &str| {
        data.gates
            .gates
            .iter()
            .find(|g| g.name == name)
            .unwrap_or_else(|| panic!("{name}"))
    };
    let unwarned = g("unwarned_over_budget_requests");
    assert_eq!(unwarned.status, GateStatus::Pass, "{unwarned:?}");
    assert_eq!(unwarned.observed, Some(0.0));
    // Undercount shares of turn requests {0, .1, 0, 0, 0, 0, 0} → p95 (linear) .07;
    // with the summary request (rel −1) it would fail.
    let under = g("estimator_p95_undercount");
    assert!(close(under.observed, 0.07), "{under:?}");
    assert_eq!(under.status, GateStatus::Pass);
    // Pairing ignores the 5000-token summary request at compact/0 step 1.
    // (One session is too few for the gate to decide, but its detail names the pairing.)
    let red = g("token_reduction_vs_off");
    assert!(
        red.detail.contains("median 50.0% over 4 paired steps"),
        "{red:?}"
    );
}

#[test]
fn summary_compaction_and_token_reduction_columns() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let fx = compaction_fx();
    let run = build(&fx, tmp.path());
    let data = ReportData::build(&run, &load_gates(None).expect("gates")).expect("build");
    let rows = &data.summary;

    let c = row(rows, "suite", Mode::Compact);
    assert_eq!((c.trials, c.compactions, c.compaction_failures), (3, 2, 2));
    assert!(close(c.compactions_per_trial, 2.0 / 3.0), "{c:?}");
    assert_eq!(
        c.compaction_failure_reasons,
        "does_not_fit=1;summarizer_failed=1"
    );
    assert_eq!(c.compaction_unchanged, 1);
    assert_eq!((c.reclaimed_tokens, c.summary_tokens), (500, 120));
    assert!(close(c.reclaimed_per_compaction, 250.0));
    assert!(close(c.summary_tokens_mean, 60.0));
    assert_eq!(c.summarizer_calls, 4);
    assert_eq!((c.checkpoint_rejections, c.checkpoint_reuses), (2, 1));
    assert_eq!(c.tool_output_projections, 2);
    assert_eq!((c.overflow_recoveries, c.no_progress_stops), (1, 1));
    // Long-session (s1) only: 1 − {100/200, 100/400, 100/200, 200/400} → .5;
    // against warn: 1 − {100/150, 100/300, 100/150, 200/300} → 1/3.
    assert!(close(c.token_reduction_vs_off, 0.5), "{c:?}");
    assert!(close(c.token_reduction_vs_warn, 1.0 / 3.0), "{c:?}");

    let w = row(rows, "suite", Mode::Warn);
    assert_eq!((w.compactions, w.compaction_unchanged), (0, 25));
    assert_eq!(w.compactions_per_trial, Some(0.0));
    assert_eq!(
        (w.reclaimed_per_compaction, w.summary_tokens_mean),
        (None, None)
    );
    assert!(close(w.token_reduction_vs_off, 0.25), "{w:?}");
    assert_eq!(w.token_reduction_vs_warn, None, "baseline itself");

    let o = row(rows, "suite", Mode::Off);
    assert_eq!(o.token_reduction_vs_off, None, "baseline itself");
    assert!(close(o.token_reduction_vs_warn, -1.0 / 3.0), "{o:?}");

    // Scenario rows: every step of that scenario, tagged or not; unpaired → empty.
    let s2 = row(rows, "s2", Mode::Compact);
    assert!(close(s2.token_reduction_vs_off, 0.0), "{s2:?}");
    assert_eq!(s2.token_reduction_vs_warn, None, "s2 has no warn trials");
    assert_eq!(s2.compactions, 0);
    let s1 = row(rows, "s1", Mode::Compact);
    assert!(close(s1.token_reduction_vs_off, 0.5), "{s1:?}");
    assert_eq!(s1.compaction_failure_reasons, c.compaction_failure_reasons);
    assert!(close(s1.compactions_per_trial, 1.0));

    // Without a long-session scenario the suite columns are empty, scenario rows are not.
    let mut untagged = compaction_fx();
    for s in &mut untagged.manifest.scenarios {
        s.tags.clear();
    }
    for t in &mut untagged.trials {
        t.tags.clear();
    }
    let tmp2 = tempfile::tempdir().expect("tempdir");
    let run = build(&untagged, tmp2.path());
    let data = ReportData::build(&run, &load_gates(None).expect("gates")).expect("build");
    assert_eq!(
        row(&data.summary, "suite", Mode::Compact).token_reduction_vs_off,
        None
    );
    assert!(close(
        row(&data.summary, "s1", Mode::Compact).token_reduction_vs_off,
        0.5
    ));
}

#[test]
fn summary_csv_and_html_show_compaction() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let fx = compaction_fx();
    let run_dir = tmp.path().join("run");
    fx.write(&run_dir);
    let out = tmp.path().join("report");
    write_report(&[run_dir], &out, &load_gates(None).expect("gates")).expect("report");

    let summary = std::fs::read_to_string(out.join("summary.csv")).expect("csv");
    let mut lines = summary.lines();
    let header: Vec<&str> = lines.next().expect("header").split(',').collect();
    assert_eq!(header, SUMMARY_COLUMNS);
    let at = |line: &str, name: &str| {
        let i = header.iter().position(|c| *c == name).expect("col");
        line.split(',').nth(i).expect("cell").to_string()
    };
    let compact = lines
        .clone()
        .find(|l| l.starts_with("suite,compact,"))
        .expect("suite compact");
    assert_eq!(
        at(compact, "compaction_failure_reasons"),
        "does_not_fit=1;summarizer_failed=1"
    );
    assert_eq!(at(compact, "reclaimed_per_compaction"), "250.000000");
    assert_eq!(at(compact, "token_reduction_vs_off"), "0.500000");
    let off = lines
        .find(|l| l.starts_with("suite,off,"))
        .expect("suite off");
    assert_eq!(at(off, "token_reduction_vs_off"), "");
    assert_eq!(at(off, "reclaimed_per_compaction"), "");
    assert_eq!(at(off, "compaction_failure_reasons"), "\"\"");

    let html = std::fs::read_to_string(out.join("index.html")).expect("html");
    // Labels are escaped text too (`/` → `&#x2F;`).
    assert!(html.contains("compactions &#x2F; trial"));
    assert!(html.contains("reclaimed tokens &#x2F; compaction"));
    assert!(html.contains("token reduction vs off"));
    assert!(html.contains("<b>compaction events</b> (2 completed, 1 failed, 1 unchanged)"));
    assert!(html.contains("ck_a") && html.contains("summarizer_failed"));
    assert!(html.contains("<td class=\"n\">0–5</td>"), "range shown");
    // Escaped, never raw.
    assert!(!html.to_ascii_lowercase().contains("<img"));
    assert!(html.contains("&lt;img src=x onerror=alert(1)&gt;"));
    // Bounded: warn/0 has 25 events, 20 shown.
    assert!(html.contains("… 5 more (see events.jsonl)"));
    assert_eq!(html.matches("mode_not_compact").count(), 20);
}
