//! The gates of issue #14's audit: the candidate's own pass rate, recall over every probe
//! (pooled and per kind), the baseline's own outcomes, and the distinct-scenario minimums.

use ctxbench_harness::storage::schema::OutcomeStatus;
use ctxbench_harness::Mode;
use ctxbench_reports::gates::{GateStatus, GatesFile};
use ctxbench_reports::{evaluate, load_run, GateReport, GateResult};

use crate::fixture::Fx;

fn eval(fx: &Fx, gates: &GatesFile) -> GateReport {
    let tmp = tempfile::tempdir().expect("tempdir");
    fx.write(tmp.path());
    let run = load_run(tmp.path()).expect("load");
    evaluate(&run, gates)
}

fn gate<'a>(r: &'a GateReport, name: &str) -> &'a GateResult {
    r.gates
        .iter()
        .find(|g| g.name == name)
        .unwrap_or_else(|| panic!("gate {name} missing"))
}

fn gates(body: &str) -> GatesFile {
    GatesFile::parse(&format!("version: 1\ngates:\n{body}"), "g.yaml").expect("gates")
}

/// Fails every trial of `mode` in scenarios `s1`…`s{n}` (outcome and pass).
fn fail_mode(fx: &mut Fx, mode: Mode, n: u32, status: OutcomeStatus) {
    for k in 1..=n {
        for t in 0..2 {
            let tr = fx.trial_mut(&format!("s{k}/{mode}/{t}"));
            tr.passed = false;
            tr.outcome.status = status;
            tr.outcome.reason = "provider_rejected".into();
        }
    }
}

/// The fixture's scenarios turned into `vary:` instances of one scenario `s1` (scenario
/// `sK`'s trial `t` becomes trial `2(K−1) + t`, an instance of its own).
fn one_scenario(fx: &mut Fx) {
    let renumber = |scenario: &str, trial: u32| -> u32 {
        let k: u32 = scenario.trim_start_matches('s').parse().expect("sK");
        2 * (k - 1) + trial
    };
    for t in fx.trials.iter_mut() {
        t.trial = renumber(&t.scenario, t.trial);
        t.instance = format!("varied-{}", t.trial);
        t.scenario = "s1".into();
        t.trial_id = format!("s1/{}/{}", t.mode, t.trial);
    }
    for r in fx.requests.iter_mut() {
        r.trial = renumber(&r.scenario, r.trial);
        r.scenario = "s1".into();
        r.trial_id = format!("s1/{}/{}", r.mode, r.trial);
    }
    fx.manifest.scenarios.truncate(1);
    fx.manifest.scenarios[0].trials = fx.trials.len() as u32 / 3;
    fx.manifest.matrix_size = fx.trials.len() as u64;
}

#[test]
fn candidate_pass_rate_judges_the_candidates_own_sessions_on_the_lower_wilson_bound() {
    let g = gates("  candidate_pass_rate: {min: 0.85, min_units: 20, min_scenarios: 10}\n");
    let fx = Fx::wide("r", 40);
    let r = eval(&fx, &g);
    let c = gate(&r, "candidate_pass_rate");
    assert_eq!(c.status, GateStatus::Pass, "{c:?}");
    assert!(
        c.detail.contains("40/40 session(s) of 40 scenario(s)"),
        "{}",
        c.detail
    );

    // A candidate that refuses 5 of 40 sessions: 35/40, lower bound 0.739 < 0.85. The
    // comparisons against `warn` are not what catches it.
    let mut weak = Fx::wide("r", 40);
    fail_mode(&mut weak, Mode::Compact, 5, OutcomeStatus::Failed);
    let r = eval(&weak, &g);
    let c = gate(&r, "candidate_pass_rate");
    assert_eq!(c.status, GateStatus::Fail, "{c:?}");
    assert!(
        c.observed.is_some_and(|v| (v - 0.7385).abs() < 1e-3),
        "{c:?}"
    );
    assert!(c.detail.contains("failed: s1, s2, s3"), "{}", c.detail);

    // Sessions expected to end `any` are not counted.
    let mut any = Fx::wide("r", 40);
    for t in any.trials.iter_mut() {
        t.expected_outcome = "any".into();
    }
    let c = eval(&any, &g).gates[0].clone();
    assert_eq!(c.status, GateStatus::NotEvaluated, "{c:?}");
    assert!(c
        .detail
        .starts_with("inconclusive: needs 20 session(s) from 10 distinct"));
}

#[test]
fn vary_instances_of_one_scenario_do_not_decide_a_statistical_gate() {
    let g = gates(
        "  candidate_pass_rate: {min: 0.85, min_units: 20, min_scenarios: 10}\n  \
         pass_rate_regression_vs_warn: {max: 0.05, min_units: 5, min_scenarios: 3}\n  \
         completion_regression_vs_warn: {max: 0.05, min_units: 5, min_scenarios: 3}\n  \
         seeded_recall: {min: 0.9, min_probes: 20, min_scenarios: 2}\n  \
         probe_recall: {min: 0.9, min_per_kind: 0.9, min_probes: 20, min_scenarios: 2}\n  \
         token_reduction_vs_off: {min: 0.3, min_clusters: 3, min_scenarios: 2}\n",
    );
    let mut fx = Fx::wide("r", 80);
    one_scenario(&mut fx);
    let r = eval(&fx, &g);
    for name in [
        "candidate_pass_rate",
        "pass_rate_regression_vs_warn",
        "completion_regression_vs_warn",
        "seeded_recall",
        "probe_recall",
        "token_reduction_vs_off",
    ] {
        let c = gate(&r, name);
        assert_eq!(c.status, GateStatus::NotEvaluated, "{name}: {c:?}");
        assert!(
            c.detail.starts_with("inconclusive: needs "),
            "{name}: {}",
            c.detail
        );
        assert!(
            c.detail.contains("distinct scenario"),
            "{name}: {}",
            c.detail
        );
    }
    // The same sessions as 80 scenarios decide every one of them.
    let r = eval(&Fx::wide("r", 80), &g);
    for c in &r.gates {
        assert_eq!(c.status, GateStatus::Pass, "{c:?}");
    }
}

#[test]
fn a_baseline_that_misses_its_own_expected_outcome_is_no_baseline() {
    let g = gates(
        "  pass_rate_regression_vs_warn: {max: 0.05, min_units: 5, max_baseline_misses: 0.1}\n  \
         completion_regression_vs_warn: {max: 0.05, min_units: 5, max_baseline_misses: 0.1}\n",
    );
    // `warn` refuses every session it is expected to complete: without the check the
    // candidate would be "non-inferior" for free.
    let mut fx = Fx::wide("r", 80);
    fail_mode(&mut fx, Mode::Warn, 80, OutcomeStatus::Failed);
    let r = eval(&fx, &g);
    for c in &r.gates {
        assert_eq!(c.status, GateStatus::NotEvaluated, "{c:?}");
        assert!(
            c.detail.contains("`warn` itself did not complete 80 of 80"),
            "{}",
            c.detail
        );
    }
    // A few (≤ 10%) leave the comparison, named; the rest decide it.
    let mut few = Fx::wide("r", 80);
    fail_mode(&mut few, Mode::Warn, 4, OutcomeStatus::LimitReached);
    let r = eval(&few, &g);
    let c = gate(&r, "pass_rate_regression_vs_warn");
    assert_eq!(c.status, GateStatus::Pass, "{c:?}");
    assert!(c.detail.contains("on 76 session(s)"), "{}", c.detail);
    assert!(
        c.detail
            .contains("left out, `warn` did not complete them: s1, s2, s3, s4"),
        "{}",
        c.detail
    );
}

#[test]
fn probe_recall_gates_every_kind_with_enough_probes_on_its_own() {
    let g = gates(
        "  probe_recall: {min: 0.80, min_per_kind: 0.88, min_kind_probes: 20, min_probes: 20, \
         min_scenarios: 2}\n",
    );
    // 40 scenarios × 2 probes (copies count once): `db` a constraint, `lang` a task.
    let mut fx = Fx::wide("r", 40);
    for t in fx.trials.iter_mut() {
        t.recall[1].kind = "task".into();
    }
    let c = eval(&fx, &g).gates[0].clone();
    assert_eq!(c.status, GateStatus::Pass, "{c:?}");
    assert!(c.detail.contains("80/80 probes"), "{}", c.detail);
    // Four sessions lose the task: the pool (76/80, bound 0.878) clears 0.80, but the task
    // kind (36/40, bound 0.769) is below 0.88.
    for k in 1..=4 {
        for t in 0..2 {
            fx.trial_mut(&format!("s{k}/compact/{t}")).recall[1].correct = false;
        }
    }
    let c = eval(&fx, &g).gates[0].clone();
    assert_eq!(c.status, GateStatus::Fail, "{c:?}");
    assert!(c.observed.is_some_and(|v| v >= 0.80), "{c:?}");
    assert!(c.detail.contains("below it: task (0.7"), "{}", c.detail);
    // A copy that misses counts the session's probe as missed.
    let mut copy = Fx::wide("r", 40);
    copy.trial_mut("s1/compact/1").recall[0].correct = false;
    let c = eval(&copy, &g).gates[0].clone();
    assert!(c.detail.contains("79/80 probes"), "{}", c.detail);
    // A kind too small for a perfect record to reach `min_per_kind` counts in the pool only.
    let mut small = Fx::wide("r", 40);
    for k in 1..=10 {
        for t in 0..2 {
            small.trial_mut(&format!("s{k}/compact/{t}")).recall[1].kind = "detail".into();
        }
    }
    let c = eval(&small, &g).gates[0].clone();
    assert_eq!(c.status, GateStatus::Pass, "{c:?}");
    assert!(
        c.detail.contains("detail 10/10 (under 29: pool only)"),
        "{}",
        c.detail
    );
}

#[test]
fn new_gate_fields_are_validated_with_their_location() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "version: 1\ngates:\n  candidate_pass_rate: {min: 0.9, min_scenarios: 0}\n",
            "g.yaml:3:",
            "min_scenarios: 0 is out of range",
        ),
        (
            "version: 1\ngates:\n  candidate_pass_rate: {min: 1.2}\n",
            "g.yaml:3:",
            "candidate_pass_rate.min: 1.2 is out of range",
        ),
        (
            "version: 1\ngates:\n  probe_recall:\n    min: 0.9\n    min_per_kind: 0.9\n    min_kind_probes: 0\n",
            "g.yaml:6:",
            "min_kind_probes: 0 is out of range",
        ),
        (
            "version: 1\ngates:\n  probe_recall: {min: 0.9}\n",
            "g.yaml:3:",
            "min_per_kind",
        ),
        (
            "version: 1\ngates:\n  probe_recall: {min: 0.9, min_per_kind: 0.9, kinds: [task]}\n",
            "g.yaml:3:",
            "kinds",
        ),
        (
            "version: 1\ngates:\n  pass_rate_regression_vs_warn: {max: 0.05, max_baseline_misses: 1.5}\n",
            "g.yaml:3:",
            "max_baseline_misses: 1.5 is out of range",
        ),
        (
            "version: 1\ngates:\n  seeded_recall:\n    min: 0.9\n    min_scenarios: 0\n",
            "g.yaml:5:",
            "seeded_recall.min_scenarios: 0 is out of range",
        ),
        (
            "version: 1\ngates:\n  token_reduction_vs_off: {min: 0.3, min_scenarios: 0}\n",
            "g.yaml:3:",
            "token_reduction_vs_off.min_scenarios: 0",
        ),
    ];
    for (text, at, needle) in cases {
        let msg = GatesFile::parse(text, "g.yaml")
            .expect_err(needle)
            .to_string();
        assert!(msg.starts_with(at), "{at}: {msg}");
        assert!(msg.contains(needle), "{needle}: {msg}");
    }
}
