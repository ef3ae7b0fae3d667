//! Gates: parsing, statuses, verdicts and pre-registration.

use ctxbench_harness::storage::schema::{Evidence, OutcomeStatus, VerdictStatus};
use ctxbench_harness::Mode;
use ctxbench_reports::gates::{GateStatus, GateVerdict, GatesFile, RegistrationStatus};
use ctxbench_reports::{evaluate, load_gates, load_run, verdict_line, GateReport, DEFAULT_GATES};

use crate::fixture::Fx;

fn eval(fx: &Fx, gates: &GatesFile) -> GateReport {
    let tmp = tempfile::tempdir().expect("tempdir");
    fx.write(tmp.path());
    let run = load_run(tmp.path()).expect("load");
    evaluate(&run, gates)
}

fn gate<'a>(r: &'a GateReport, name: &str) -> &'a ctxbench_reports::GateResult {
    r.gates
        .iter()
        .find(|g| g.name == name)
        .unwrap_or_else(|| panic!("gate {name} missing"))
}

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() < 1e-9)
}

#[test]
fn default_gates_parse_and_match_the_file_on_disk() {
    let g = load_gates(None).expect("default gates");
    assert_eq!(g.candidate, Mode::Compact);
    assert_eq!(g.baselines, vec![Mode::Off, Mode::Warn]);
    assert_eq!(g.source, "builtin");
    assert_eq!(g.sha256.len(), 64);
    let on_disk =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/gates/default.yaml"))
            .expect("default.yaml");
    assert_eq!(on_disk, DEFAULT_GATES);
    let t = g.gates.token_reduction_vs_off.expect("token gate");
    assert_eq!((t.min, t.tag.as_deref()), (0.30, Some("long-session")));
    assert_eq!(t.min_clusters, 3);
    let r = g.gates.seeded_recall.clone().expect("recall gate");
    assert_eq!((r.min, r.tag.as_deref()), (0.95, Some("long-session")));
    assert_eq!(r.kinds, vec!["constraint".to_string()]);
    for ni in [
        g.gates.pass_rate_regression_vs_warn,
        g.gates.completion_regression_vs_warn,
    ] {
        let ni = ni.expect("non-inferiority gate");
        assert_eq!((ni.max, ni.min_units), (0.05, 5));
    }
    assert!(g
        .gates
        .estimator_p95_undercount
        .expect("undercount")
        .exclude_tags
        .is_empty());
}

#[test]
fn gates_file_errors_are_located_and_strict() {
    // Every error names the file, line and column.
    let cases: &[(&str, &str, &str)] = &[
        (
            "version: 1\ngates:\n  errored_trials: {max: 0}\n  typo_gate: {max: 1}\n",
            "g.yaml:4:3: ",
            "typo_gate",
        ),
        (
            "version: 1\ngates:\n  errored_trials: {max: 0, maxx: 1}\n",
            "g.yaml:3:",
            "maxx",
        ),
        (
            "version: 2\ngates:\n  errored_trials: {max: 0}\n",
            "g.yaml:1:",
            "version",
        ),
        (
            "version: 1\ngates:\n  seeded_recall: {min: 1.5}\n",
            "g.yaml:3:",
            "seeded_recall.min: 1.5 is out of range",
        ),
        (
            "version: 1\ngates:\n  pass_rate_regression_vs_warn: {max: -0.1}\n",
            "g.yaml:3:",
            "pass_rate_regression_vs_warn.max: -0.1 is out of range",
        ),
        (
            "version: 1\ngates:\n  pass_rate_regression_vs_warn:\n    max: 0.05\n    min_units: 0\n",
            "g.yaml:5:",
            "min_units: 0 is out of range",
        ),
        (
            "version: 1\ngates:\n  token_reduction_vs_off: {min: 0.3, min_clusters: 0}\n",
            "g.yaml:3:",
            "min_clusters: 0 is out of range",
        ),
        (
            "version: 1\ngates:\n  seeded_recall: {min: 0.9, min_probes: 0}\n",
            "g.yaml:3:",
            "min_probes: 0 is out of range",
        ),
        (
            "version: 1\ngates:\n  seeded_recall: {min: 0.9, kinds: [constraint, archive]}\n",
            "g.yaml:3:",
            "unknown kind `archive`",
        ),
        (
            "version: 1\nbaselines: [warn]\ngates:\n  token_reduction_vs_off: {min: 0.3}\n",
            "g.yaml:4:",
            "not among the baselines",
        ),
    ];
    for (text, at, needle) in cases {
        let msg = GatesFile::parse(text, "g.yaml")
            .expect_err(needle)
            .to_string();
        assert!(msg.starts_with(at), "{at}: {msg}");
        assert!(msg.contains(needle), "{needle}: {msg}");
    }

    let empty = "version: 1\ngates: {}\n";
    assert!(GatesFile::parse(empty, "g.yaml").is_err());

    let bad_mode = "version: 1\ncandidate: compakt\ngates:\n  errored_trials: {max: 0}\n";
    assert!(GatesFile::parse(bad_mode, "g.yaml").is_err());
}

/// Newcombe's upper bound when all `n` pairs pass in both modes: z² / (n + z²).
fn concordant_upper(n: f64) -> f64 {
    let z2 = 1.959_963_984_540_054_f64.powi(2);
    z2 / (n + z2)
}

#[test]
fn good_run_passes_every_default_gate_with_hand_computed_values() {
    let mut fx = Fx::wide("r1", 80);
    fx.register(DEFAULT_GATES);
    let gates = load_gates(None).expect("gates");
    let r = eval(&fx, &gates);
    for g in &r.gates {
        assert_eq!(g.status, GateStatus::Pass, "{g:?}");
    }
    assert_eq!(r.verdict, GateVerdict::Pass);
    assert_eq!(r.exit_code, 0);
    assert_eq!(r.registration.status, RegistrationStatus::Matches);
    assert_eq!(r.note, None);
    assert!(!r.exploratory);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    assert_eq!(r.gates.len(), 11);

    // Per scenario: 1−100/200, 1−100/400, 1−100/200, 1−200/400 → median of {.5,.75,.5,.5}
    // = .5; all 80 session clusters alike, so the interval is [.5, .5] and the gate judges
    // its lower bound.
    let red = gate(&r, "token_reduction_vs_off");
    assert!(close(red.observed, 0.5), "{red:?}");
    assert!(
        red.detail
            .contains("median 50.0%, percentile bootstrap 95% [50.0%, 50.0%] (2000 resamples of 80 session clusters"),
        "{red:?}"
    );
    // 80 sessions pass in both modes: warn − compact 0, upper bound z²/(80 + z²) = 4.6 pp.
    let p = gate(&r, "pass_rate_regression_vs_warn");
    assert!(close(p.observed, 0.0), "{p:?}");
    let hi = concordant_upper(80.0) * 100.0;
    assert!(
        p.detail.contains(&format!(
            "on 80 session(s) whose warn is expected to complete: warn 80/80 vs compact 80/80; \
             warn − compact +0.0 pp, Newcombe 95% [-{hi:.1}, +{hi:.1}] pp: non-inferior"
        )),
        "{p:?}"
    );
    assert!(close(
        gate(&r, "completion_regression_vs_warn").observed,
        0.0
    ));
    // 320 constraint probes, all correct: lower Wilson bound 320 / (320 + z²).
    let rec = gate(&r, "seeded_recall");
    let z2 = 1.959_963_984_540_054_f64.powi(2);
    assert!(close(rec.observed, 320.0 / (320.0 + z2)), "{rec:?}");
    assert!(
        rec.detail
            .contains("320/320 constraint probes in scenarios tagged `long-session`"),
        "{rec:?}"
    );
    // Undercount shares per scenario {0, .1, 0, 0}: a quarter of 320 values are .1, so the
    // p95 is .1; limit 1.0 × 200/1000.
    let u = gate(&r, "estimator_p95_undercount");
    assert!(close(u.observed, 0.1), "{u:?}");
    assert!((u.threshold - 0.2).abs() < 1e-12, "{u:?}");
    assert!(close(gate(&r, "safety_invariant_failures").observed, 0.0));
    assert!(verdict_line(&r).starts_with("PASS: all 11 gates passed"));
}

#[test]
fn small_runs_are_inconclusive_and_say_what_they_need() {
    // One scenario, 100% vs 100%: not a FAIL, an "inconclusive: needs N" for every
    // statistical gate, and the verdict line says what would decide them.
    let mut fx = Fx::good("r1");
    fx.register(DEFAULT_GATES);
    let r = eval(&fx, &load_gates(None).expect("gates"));
    assert_eq!(r.verdict, GateVerdict::Incomplete);
    assert_eq!(r.exit_code, 3);
    for (name, needs) in [
        ("token_reduction_vs_off", "needs 3 independent session(s)"),
        (
            "pass_rate_regression_vs_warn",
            "needs 5 independent session(s)",
        ),
        (
            "completion_regression_vs_warn",
            "needs 5 independent session(s)",
        ),
        ("seeded_recall", "needs 20 constraint probes"),
    ] {
        let g = gate(&r, name);
        assert_eq!(g.status, GateStatus::NotEvaluated, "{g:?}");
        assert!(g.detail.starts_with("inconclusive: "), "{g:?}");
        assert!(g.detail.contains(needs), "{g:?}");
        assert_eq!(g.observed, None, "{g:?}");
    }
    let line = verdict_line(&r);
    assert!(line.contains("To conclude: "), "{line}");
    assert!(line.contains("seeded_recall — "), "{line}");

    // 72 sessions cannot show non-inferiority within 5 points even when identical; from the
    // smallest n where z²/(n + z²) ≤ 0.05 on, they can.
    let need = (1..200)
        .find(|&n| concordant_upper(f64::from(n)) <= 0.05)
        .expect("n");
    for (n, status) in [
        (need - 1, GateStatus::NotEvaluated),
        (need, GateStatus::Pass),
    ] {
        let r = eval(&Fx::wide("r", n), &pass_rate_gates());
        let g = gate(&r, "pass_rate_regression_vs_warn");
        assert_eq!(g.status, status, "{n}: {g:?}");
    }
}

#[test]
fn missing_candidate_mode_is_incomplete_not_pass() {
    let mut fx = Fx::wide("r1", 80);
    fx.trials.retain(|t| t.mode != Mode::Compact);
    fx.requests.retain(|r| r.mode != Mode::Compact);
    fx.manifest.matrix_size = fx.trials.len() as u64;
    fx.register(DEFAULT_GATES);
    let r = eval(&fx, &load_gates(None).expect("gates"));
    assert_eq!(r.verdict, GateVerdict::Incomplete);
    assert_eq!(r.exit_code, 3);
    for name in [
        "safety_invariant_failures",
        "transcript_corruptions",
        "unwarned_over_budget_requests",
        "token_reduction_vs_off",
        "pass_rate_regression_vs_warn",
        "completion_regression_vs_warn",
        "seeded_recall",
        "estimator_p95_undercount",
    ] {
        let g = gate(&r, name);
        assert_eq!(g.status, GateStatus::NotEvaluated, "{g:?}");
        assert!(g.detail.contains("`compact` is not in the run"), "{g:?}");
    }
    // Errored trials are counted over the whole run, which exists.
    assert_eq!(gate(&r, "errored_trials").status, GateStatus::Pass);
    assert!(verdict_line(&r).starts_with("INCOMPLETE: 10 of 11 gates could not be evaluated"));
}

#[test]
fn missing_trials_and_shards_are_incomplete_and_named() {
    let mut fx = Fx::wide("r1", 80);
    fx.register(DEFAULT_GATES);
    // A trial is missing from the matrix the manifest announced.
    fx.trials.retain(|t| t.trial_id != "s3/warn/1");
    let r = eval(&fx, &load_gates(None).expect("gates"));
    assert_eq!(r.verdict, GateVerdict::Incomplete);
    assert!(
        verdict_line(&r).starts_with("INCOMPLETE: INCOMPLETE RUN: 1 of 480 matrix trials missing"),
        "{}",
        verdict_line(&r)
    );
    // Shard 1 of 3 alone: the other shards are named.
    let mut fx = Fx::wide("r1", 80);
    fx.register(DEFAULT_GATES);
    fx.manifest.shard = Some(ctxbench_harness::storage::schema::Shard { index: 1, count: 3 });
    let r = eval(&fx, &load_gates(None).expect("gates"));
    assert_eq!(r.exit_code, 3);
    assert!(
        verdict_line(&r).contains("shard(s) 2/3, 3/3 missing"),
        "{}",
        verdict_line(&r)
    );
}

#[test]
fn failures_make_the_verdict_fail() {
    let mut fx = Fx::wide("r1", 80);
    fx.register(DEFAULT_GATES);
    // An over-budget compact request sent without a warning.
    let r = fx
        .requests
        .iter_mut()
        .find(|r| r.mode == Mode::Compact)
        .expect("compact request");
    r.over_budget = true;
    // A transcript corruption with evidence.
    let t = fx.trial_mut("s1/compact/1");
    t.passed = false;
    t.verdicts[1].status = VerdictStatus::Fail;
    t.verdicts[1].evidence.push(Evidence {
        step: Some(1),
        note: "message 3 changed".into(),
        ..Evidence::default()
    });
    // An errored baseline trial.
    fx.trial_mut("s2/warn/0").outcome.status = OutcomeStatus::Errored;
    let r = eval(&fx, &load_gates(None).expect("gates"));
    assert_eq!(r.verdict, GateVerdict::Fail);
    assert_eq!(r.exit_code, 1);
    let status = |n: &str| gate(&r, n).status;
    assert_eq!(status("unwarned_over_budget_requests"), GateStatus::Fail);
    assert_eq!(status("transcript_corruptions"), GateStatus::Fail);
    assert_eq!(status("safety_invariant_failures"), GateStatus::Fail);
    assert_eq!(status("errored_trials"), GateStatus::Fail);
    assert!(gate(&r, "errored_trials").detail.contains("warn=1"));
    // s1 passes in warn and fails in compact: shown worse than warn (a significant
    // difference is never "inconclusive"), so the pass-rate gate fails.
    let p = gate(&r, "pass_rate_regression_vs_warn");
    assert_eq!(p.status, GateStatus::Fail, "{p:?}");
    assert!(p.detail.contains("passed only in warn: s1"), "{p:?}");
    assert!(
        verdict_line(&r).starts_with("FAIL: 5 of 11 gates failed"),
        "{}",
        verdict_line(&r)
    );
}

#[test]
fn compact_failing_sessions_warn_completes_fails_the_pass_rate_gate() {
    // Five of 80 sessions that warn completes fail in compact (the issue's example): the
    // gate fails, however many sessions compact wins elsewhere.
    let mut fx = Fx::wide("r1", 80);
    for k in 1..=5 {
        for t in 0..2 {
            let tr = fx.trial_mut(&format!("s{k}/compact/{t}"));
            tr.passed = false;
            tr.outcome.status = OutcomeStatus::LimitReached;
            tr.outcome.reason = "context_limit".into();
            tr.stats.turns_scripted = 4;
            tr.stats.turns_completed = 2;
        }
        for t in 0..2 {
            fx.trial_mut(&format!("s{k}/warn/{t}")).stats.turns_scripted = 4;
            fx.trial_mut(&format!("s{k}/warn/{t}"))
                .stats
                .turns_completed = 4;
        }
    }
    // Sessions warn is not expected to complete (it fails them by design) do not count,
    // even if compact wins them: add ten such and the result is the same.
    for k in 81..=90 {
        let id = format!("s{k}");
        let mut more = Fx::wide("x", 1);
        for t in &mut more.trials {
            t.scenario = id.clone();
            t.trial_id = t.trial_id.replacen("s1", &id, 1);
            if t.mode == Mode::Warn {
                t.expected_outcome = "any".into();
                t.passed = false;
                t.outcome.status = OutcomeStatus::Failed;
            }
        }
        fx.trials.extend(more.trials);
    }
    let gates = GatesFile::parse(
        "version: 1\ngates:\n  pass_rate_regression_vs_warn: {max: 0.05}\n  completion_regression_vs_warn: {max: 0.05}\n",
        "g.yaml",
    )
    .expect("gates");
    let r = eval(&fx, &gates);
    let p = gate(&r, "pass_rate_regression_vs_warn");
    assert_eq!(p.status, GateStatus::Fail, "{p:?}");
    assert!(p.detail.contains("on 80 session(s)"), "{p:?}");
    assert!(p.detail.contains("warn 80/80 vs compact 75/80"), "{p:?}");
    let c = gate(&r, "completion_regression_vs_warn");
    assert_eq!(c.status, GateStatus::Fail, "{c:?}");
    assert!(
        c.detail
            .contains("fewer turns completed in: s1 (50% vs 100%)"),
        "{c:?}"
    );
}

#[test]
fn absent_transcript_grader_is_not_a_pass() {
    let mut fx = Fx::wide("r1", 80);
    for t in &mut fx.trials {
        t.verdicts.retain(|v| v.grader != "transcript-immutable");
    }
    let r = eval(&fx, &load_gates(None).expect("gates"));
    let g = gate(&r, "transcript_corruptions");
    assert_eq!(g.status, GateStatus::NotEvaluated, "{g:?}");
    assert!(g.detail.contains("no evidence"), "{g:?}");
    assert_eq!(r.verdict, GateVerdict::Incomplete);

    // Invariant graders that could not judge the system under test leave safety undecided.
    let mut fx = Fx::wide("r1", 80);
    for t in &mut fx.trials {
        for v in &mut t.verdicts {
            if v.grader == "budget-respected" {
                v.status = VerdictStatus::Skip;
                v.summary = format!(
                    "{}: it does not report budgets",
                    ctxbench_reports::gates::SUT_NOT_APPLICABLE
                );
            }
        }
    }
    let r = eval(&fx, &load_gates(None).expect("gates"));
    let g = gate(&r, "safety_invariant_failures");
    assert_eq!(g.status, GateStatus::NotEvaluated, "{g:?}");

    // With no invariant grader at all, safety cannot be judged.
    let mut fx = Fx::wide("r1", 80);
    for t in &mut fx.trials {
        t.verdicts.retain(|v| v.grader == "recall");
    }
    let r = eval(&fx, &load_gates(None).expect("gates"));
    assert_eq!(
        gate(&r, "safety_invariant_failures").status,
        GateStatus::NotEvaluated
    );
    assert_eq!(r.verdict, GateVerdict::Incomplete);
}

#[test]
fn token_reduction_tag_and_size_fallbacks() {
    let custom = |tag: &str| {
        GatesFile::parse(
            &format!("version: 1\ngates:\n  token_reduction_vs_off: {{min: 0.6{tag}}}\n"),
            "custom.yaml",
        )
        .expect("gates")
    };
    let mut fx = Fx::wide("r1", 3);
    let r = eval(&fx, &custom(", tag: none-such"));
    let g = gate(&r, "token_reduction_vs_off");
    assert_eq!(g.status, GateStatus::NotEvaluated);
    assert!(g.detail.contains("none-such"), "{g:?}");

    // Untagged: all scenarios; 0.5 < 0.6 fails.
    let r = eval(&fx, &custom(""));
    assert_eq!(gate(&r, "token_reduction_vs_off").status, GateStatus::Fail);

    // An off request rejected for overflow counts at the provider's overflow count, and a
    // request with neither count at its estimate (flagged).
    for r in fx.requests.iter_mut().filter(|r| r.mode == Mode::Off) {
        if r.step == 1 {
            r.provider_input_tokens = None;
            r.overflow_input_tokens = Some(1000);
            r.error_kind = Some("context_overflow".into());
        } else if r.trial == 1 {
            r.provider_input_tokens = None;
        }
    }
    // Pairs per scenario: 1−100/200, 1−100/1000, 1−100/200 (estimate), 1−200/1000 → median
    // .65, alike in every cluster.
    let r = eval(&fx, &custom(""));
    let g = gate(&r, "token_reduction_vs_off");
    assert!(close(g.observed, 0.65), "{g:?}");
    assert!(g.detail.contains("pair(s) sized by the estimate"), "{g:?}");
}

#[test]
fn token_reduction_passes_only_on_its_interval_lower_bound() {
    let gates = GatesFile::parse(
        "version: 1\ngates:\n  token_reduction_vs_off: {min: 0.3}\n",
        "g.yaml",
    )
    .expect("gates");
    // Three sessions: two reduce by 50%, one by nothing (compact as large as off). The
    // pooled median is 50% — the point value clears 30% — but the interval over three
    // clusters reaches down to 0%, so the gate fails.
    let mut fx = Fx::wide("r1", 3);
    for r in fx
        .requests
        .iter_mut()
        .filter(|r| r.scenario == "s3" && r.mode == Mode::Compact)
    {
        let size = if r.step == 0 { 200 } else { 400 };
        r.provider_input_tokens = Some(size);
        r.budget.total = size;
        r.observed_estimate = size;
    }
    let r = eval(&fx, &gates);
    let g = gate(&r, "token_reduction_vs_off");
    assert_eq!(g.status, GateStatus::Fail, "{g:?}");
    assert!(g.detail.contains("median 50.0%"), "{g:?}");
    assert!(g.observed.is_some_and(|lo| lo < 0.3), "{g:?}");
    // Two clusters are fewer than the default minimum of three.
    let mut fx = Fx::wide("r1", 2);
    fx.requests.retain(|r| r.scenario != "s3");
    let r = eval(&fx, &gates);
    let g = gate(&r, "token_reduction_vs_off");
    assert_eq!(g.status, GateStatus::NotEvaluated, "{g:?}");
    assert!(g.detail.contains("needs 3 independent session(s)"), "{g:?}");
}

#[test]
fn seeded_recall_counts_durable_constraints_in_long_sessions_on_the_lower_bound() {
    let mut fx = Fx::wide("r1", 80);
    // Abstention probes elsewhere are reported beside, not gated.
    for t in fx.trials.iter_mut().filter(|t| t.scenario == "s1") {
        for p in &mut t.recall {
            p.kind = "abstention".into();
            p.correct = false;
        }
    }
    let gates = GatesFile::parse(
        "version: 1\ngates:\n  seeded_recall: {min: 0.95, tag: long-session}\n",
        "g.yaml",
    )
    .expect("gates");
    let r = eval(&fx, &gates);
    let g = gate(&r, "seeded_recall");
    assert_eq!(g.status, GateStatus::Pass, "{g:?}");
    assert!(g.detail.contains("316/316 constraint probes"), "{g:?}");
    assert!(g.detail.contains("abstention 0/4"), "{g:?}");
    // Misses among the constraints pull the lower bound under 95% although the point value
    // (304/316 = 96.2%) is above it.
    for k in 2..=7 {
        for t in fx
            .trials
            .iter_mut()
            .filter(|t| t.scenario == format!("s{k}") && t.mode == Mode::Compact)
        {
            t.recall[0].correct = false;
        }
    }
    let r = eval(&fx, &gates);
    let g = gate(&r, "seeded_recall");
    assert_eq!(g.status, GateStatus::Fail, "{g:?}");
    assert!(g.detail.contains("304/316"), "{g:?}");
    assert!(g.detail.contains("(96.2%"), "{g:?}");
    // Scenarios without the tag do not count.
    for t in &mut fx.trials {
        t.tags.clear();
    }
    for s in &mut fx.manifest.scenarios {
        s.tags.clear();
    }
    let r = eval(&fx, &gates);
    assert_eq!(gate(&r, "seeded_recall").status, GateStatus::NotEvaluated);
}

#[test]
fn pre_registration_is_enforced_unless_exploratory() {
    let mut fx = Fx::wide("r1", 80);
    fx.register("version: 1\ngates:\n  errored_trials: {max: 0}\n");
    let r = eval(&fx, &load_gates(None).expect("gates"));
    assert_eq!(r.registration.status, RegistrationStatus::Differs);
    let note = r.note.clone().expect("note");
    assert!(
        note.starts_with(
            "evaluated gates differ from the gates registered before the run (registered sha256 "
        ),
        "{note}"
    );
    // Other gates than the registered ones give no verdict.
    assert_eq!(r.verdict, GateVerdict::Incomplete);
    assert_eq!(r.exit_code, 3);
    assert!(
        verdict_line(&r).contains("pass --exploratory"),
        "{}",
        verdict_line(&r)
    );
    assert!(!r.exploratory);

    // Declared exploratory: evaluated, and stamped.
    let mut gates = load_gates(None).expect("gates");
    gates.exploratory = true;
    let r = eval(&fx, &gates);
    assert_eq!(r.verdict, GateVerdict::Pass);
    assert!(r.exploratory);
    assert!(
        verdict_line(&r).contains("EXPLORATORY"),
        "{}",
        verdict_line(&r)
    );

    // Nothing registered at all: the same.
    let fx = Fx::wide("r1", 80);
    let r = eval(&fx, &load_gates(None).expect("gates"));
    assert_eq!(r.registration.status, RegistrationStatus::NotRegistered);
    assert_eq!(r.verdict, GateVerdict::Incomplete);
    assert!(r.note.expect("note").contains("registered no gates"));
}

fn pass_rate_gates() -> GatesFile {
    GatesFile::parse(
        "version: 1\ngates:\n  pass_rate_regression_vs_warn: {max: 0.05, min_scenarios: 1}\n",
        "ni.yaml",
    )
    .expect("gates")
}

/// `n` paired sessions (scenarios `p0`…) of `warn` and `compact`; `warn_passes(k)` /
/// `compact_passes(k)` say which pass.
fn paired_fx(
    n: u32,
    warn_passes: impl Fn(u32) -> bool,
    compact_passes: impl Fn(u32) -> bool,
) -> Fx {
    let mut fx = Fx::good("ni");
    fx.requests.clear();
    fx.trials.clear();
    for k in 0..n {
        for (mode, pass) in [
            (Mode::Warn, warn_passes(k)),
            (Mode::Compact, compact_passes(k)),
        ] {
            let mut tr = crate::fixture::trial(&format!("p{k}"), mode, 0);
            tr.passed = pass;
            // A failing `warn` completed its script and failed a grader (a baseline that does
            // not complete what it is expected to is no baseline); the candidate stops.
            if !pass && mode == Mode::Compact {
                tr.outcome.status = OutcomeStatus::Failed;
            }
            fx.trials.push(tr);
        }
    }
    fx.manifest.matrix_size = fx.trials.len() as u64;
    fx
}

#[test]
fn trials_of_one_session_are_one_unit() {
    // 73 trials of one scenario playing the same session are copies: one unit, too few.
    let mut fx = Fx::good("r1");
    fx.trials.clear();
    for t in 0..73 {
        for mode in [Mode::Warn, Mode::Compact] {
            fx.trials.push(crate::fixture::trial("s1", mode, t));
        }
    }
    fx.manifest.matrix_size = fx.trials.len() as u64;
    let r = eval(&fx, &pass_rate_gates());
    let g = gate(&r, "pass_rate_regression_vs_warn");
    assert_eq!(g.status, GateStatus::NotEvaluated, "{g:?}");
    assert!(g.detail.contains("has 1 (of 1 run in both modes)"), "{g:?}");
    // The same trials as sessions `vary:` made: 73 units.
    for t in &mut fx.trials {
        t.instance = format!("varied-{}", t.trial);
    }
    let r = eval(&fx, &pass_rate_gates());
    let g = gate(&r, "pass_rate_regression_vs_warn");
    assert_eq!(g.status, GateStatus::Pass, "{g:?}");
    assert!(g.detail.contains("on 73 session(s)"), "{g:?}");
}

#[test]
fn pass_rate_gate_reports_newcombe_and_mcnemar_on_a_published_table() {
    // Fagerland et al. (2014)'s Bentur et al. table as (warn, compact) sessions: a = 1 both
    // pass, b = 1 warn only, c = 7 compact only, d = 12 neither (21 sessions).
    let warn = |k: u32| k <= 1;
    let compact = |k: u32| k == 0 || (2..=8).contains(&k);
    let r = eval(&paired_fx(21, warn, compact), &pass_rate_gates());
    let g = gate(&r, "pass_rate_regression_vs_warn");
    assert!(close(g.observed, -6.0 / 21.0), "{g:?}");
    assert_eq!(g.status, GateStatus::Pass, "{g:?}");
    assert!(
        g.detail.contains(
            "warn 2/21 vs compact 8/21; warn − compact -28.6 pp, Newcombe 95% [-50.7, -2.6] pp: \
             non-inferior"
        ),
        "{g:?}"
    );
    assert!(g.detail.contains("McNemar exact p = 0.0703"), "{g:?}");

    // The same table the other way round: compact is shown worse (the interval excludes 0),
    // which fails however few the sessions.
    let r = eval(&paired_fx(21, compact, warn), &pass_rate_gates());
    let g = gate(&r, "pass_rate_regression_vs_warn");
    assert_eq!(g.status, GateStatus::Fail, "{g:?}");
    assert!(g.detail.contains("[+2.6, +50.7] pp"), "{g:?}");
}

#[test]
fn undercount_gate_counts_every_scenario_and_overflowed_requests() {
    use crate::fixture::{request, trial};
    let mut fx = Fx::good("r1");
    // A second scenario whose provider counts 1.55× the estimate: every one of its compact
    // requests undercounts by 35%. It is judged like any other.
    for t in 0..2u32 {
        let mut tr = trial("mismatch", Mode::Compact, t);
        tr.tags = vec!["estimator".into()];
        for i in 0..4u64 {
            fx.requests.push(request(&tr, i + 1, i, 100, Some(155)));
        }
        fx.trials.push(tr);
    }
    let defaults = load_gates(None).expect("gates");
    let t = defaults
        .gates
        .estimator_p95_undercount
        .clone()
        .expect("gate");
    assert!(t.exclude_tags.is_empty());
    let r = eval(&fx, &defaults);
    let u = gate(&r, "estimator_p95_undercount");
    assert_eq!(u.status, GateStatus::Fail, "{u:?}");
    assert!(u.observed.is_some_and(|p| p > 0.3), "{u:?}");

    // Leaving the tag out on purpose is still possible, and said.
    let only = "version: 1\ngates:\n  estimator_p95_undercount: {max_share_of_buffer: 1.0, exclude_tags: [estimator]}\n";
    let r = eval(&fx, &GatesFile::parse(only, "g.yaml").expect("parse"));
    let u = gate(&r, "estimator_p95_undercount");
    assert_eq!(u.status, GateStatus::Pass, "{u:?}");
    assert!(close(u.observed, 0.085), "only `s1` counts: {u:?}");
    assert!(
        u.detail
            .contains("1 scenario(s) tagged `estimator` left out"),
        "{u:?}"
    );

    // A request the provider rejected for overflow counts at the provider's overflow count.
    let mut fx = Fx::good("r1");
    for r in fx
        .requests
        .iter_mut()
        .filter(|r| r.mode == Mode::Compact && r.step == 1)
    {
        r.provider_input_tokens = None;
        r.overflow_input_tokens = Some(2 * r.observed_estimate);
        r.error_kind = Some("context_overflow".into());
    }
    let r = eval(&fx, &defaults);
    let u = gate(&r, "estimator_p95_undercount");
    assert_eq!(u.status, GateStatus::Fail, "{u:?}");
    assert!(u.observed.is_some_and(|p| p > 0.4), "{u:?}");

    let empty = "version: 1\ngates:\n  estimator_p95_undercount: {max_share_of_buffer: 1.0, exclude_tags: [' ']}\n";
    let msg = GatesFile::parse(empty, "g.yaml")
        .expect_err("empty tag")
        .to_string();
    assert!(msg.contains("exclude_tags"), "{msg}");
}
