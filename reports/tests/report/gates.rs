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
}

#[test]
fn gates_file_errors_are_located_and_strict() {
    let unknown = "version: 1\ngates:\n  errored_trials: {max: 0}\n  typo_gate: {max: 1}\n";
    let err = GatesFile::parse(unknown, "g.yaml").expect_err("unknown gate");
    let msg = err.to_string();
    assert!(msg.starts_with("g.yaml: "), "{msg}");
    assert!(msg.contains("typo_gate"), "{msg}");
    assert!(msg.contains("line 4 column 3"), "location expected: {msg}");

    let inner = "version: 1\ngates:\n  errored_trials: {max: 0, maxx: 1}\n";
    let msg = GatesFile::parse(inner, "g.yaml")
        .expect_err("unknown field")
        .to_string();
    assert!(msg.contains("maxx"), "{msg}");

    let version = "version: 2\ngates:\n  errored_trials: {max: 0}\n";
    let msg = GatesFile::parse(version, "g.yaml")
        .expect_err("version")
        .to_string();
    assert!(msg.contains("version"), "{msg}");

    let baseline = "version: 1\nbaselines: [warn]\ngates:\n  token_reduction_vs_off: {min: 0.3}\n";
    let msg = GatesFile::parse(baseline, "g.yaml")
        .expect_err("off not a baseline")
        .to_string();
    assert!(
        msg.contains("token_reduction_vs_off") && msg.contains("off"),
        "{msg}"
    );

    let empty = "version: 1\ngates: {}\n";
    assert!(GatesFile::parse(empty, "g.yaml").is_err());

    let bad_mode = "version: 1\ncandidate: compakt\ngates:\n  errored_trials: {max: 0}\n";
    assert!(GatesFile::parse(bad_mode, "g.yaml").is_err());
}

#[test]
fn good_run_passes_every_default_gate_with_hand_computed_values() {
    let mut fx = Fx::good("r1");
    fx.warn_fails();
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
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    assert_eq!(r.gates.len(), 8);

    // Pairs: 1−100/200, 1−100/400, 1−100/200, 1−200/400 → median of {.5,.5,.5,.75} = .5
    assert!(close(gate(&r, "token_reduction_vs_off").observed, 0.5));
    // Two clusters, trial 0 {.5, .75} and trial 1 {.5, .5}: a resample's median is .625
    // when it draws trial 0 twice (¼), else .5 — so the percentile interval is [.5, .625].
    let red = gate(&r, "token_reduction_vs_off");
    assert!(
        red.detail.contains(
            "bootstrap 95% [50.0%, 62.5%] (2000 resamples of 2 (scenario, trial) clusters"
        ),
        "{red:?}"
    );
    // warn 0/2 vs compact 2/2 on two pairs: −1.0, Newcombe [−1, −0.070] ≤ 0.05.
    let p = gate(&r, "pass_rate_regression_vs_warn");
    assert!(close(p.observed, -1.0), "{p:?}");
    assert!(
        p.detail.contains(
            "warn 0/2 (0.0%) vs compact 2/2 (100.0%) on 2 paired trials; warn − compact -100.0 pp, \
             Newcombe 95% [-100.0, -7.0] pp: non-inferior (upper bound within the 5.0 pp margin); \
             discordant pairs: 0 pass only in warn, 2 only in compact; McNemar exact p = 0.5000"
        ),
        "{p:?}"
    );
    assert!(close(gate(&r, "seeded_recall").observed, 1.0));
    // Undercount shares {0, .1, 0, 0} → p95 (linear) = 0.085; limit 1.0 × 200/1000.
    let u = gate(&r, "estimator_p95_undercount");
    assert!(close(u.observed, 0.085), "{u:?}");
    assert!((u.threshold - 0.2).abs() < 1e-12, "{u:?}");
    assert!(close(gate(&r, "safety_invariant_failures").observed, 0.0));
    assert!(verdict_line(&r).starts_with("PASS: all 8 gates passed"));
}

#[test]
fn missing_candidate_mode_is_incomplete_not_pass() {
    let mut fx = Fx::good("r1");
    fx.trials.retain(|t| t.mode != Mode::Compact);
    fx.requests.retain(|r| r.mode != Mode::Compact);
    let r = eval(&fx, &load_gates(None).expect("gates"));
    assert_eq!(r.verdict, GateVerdict::Incomplete);
    assert_eq!(r.exit_code, 3);
    for name in [
        "safety_invariant_failures",
        "transcript_corruptions",
        "unwarned_over_budget_requests",
        "token_reduction_vs_off",
        "pass_rate_regression_vs_warn",
        "seeded_recall",
        "estimator_p95_undercount",
    ] {
        let g = gate(&r, name);
        assert_eq!(g.status, GateStatus::NotEvaluated, "{g:?}");
        assert!(g.detail.contains("`compact` is not in the run"), "{g:?}");
    }
    // Errored trials are counted over the whole run, which exists.
    assert_eq!(gate(&r, "errored_trials").status, GateStatus::Pass);
    assert!(verdict_line(&r).starts_with("INCOMPLETE: 7 of 8 gates could not be evaluated"));
}

#[test]
fn failures_make_the_verdict_fail() {
    let mut fx = Fx::good("r1");
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
    fx.trial_mut("s1/warn/0").outcome.status = OutcomeStatus::Errored;
    let r = eval(&fx, &load_gates(None).expect("gates"));
    assert_eq!(r.verdict, GateVerdict::Fail);
    assert_eq!(r.exit_code, 1);
    let status = |n: &str| gate(&r, n).status;
    assert_eq!(status("unwarned_over_budget_requests"), GateStatus::Fail);
    assert_eq!(status("transcript_corruptions"), GateStatus::Fail);
    assert_eq!(status("safety_invariant_failures"), GateStatus::Fail);
    assert_eq!(status("errored_trials"), GateStatus::Fail);
    assert!(gate(&r, "errored_trials").detail.contains("warn=1"));
    // warn/0 errored → that pair is left out; warn/1 pass vs compact/1 fail → 1.0 − 0.0.
    let p = gate(&r, "pass_rate_regression_vs_warn");
    assert!(close(p.observed, 1.0), "{p:?}");
    assert!(
        p.detail
            .contains("1 pair(s) with an errored trial left out"),
        "{p:?}"
    );
    assert!(
        verdict_line(&r).starts_with("FAIL: 5 of 8 gates failed"),
        "{}",
        verdict_line(&r)
    );
}

#[test]
fn absent_transcript_grader_passes_with_no_evidence() {
    let mut fx = Fx::good("r1");
    fx.warn_fails();
    for t in &mut fx.trials {
        t.verdicts.retain(|v| v.grader != "transcript-immutable");
    }
    let r = eval(&fx, &load_gates(None).expect("gates"));
    let g = gate(&r, "transcript_corruptions");
    assert_eq!(g.status, GateStatus::Pass);
    assert!(g.detail.contains("no evidence"), "{g:?}");

    // With no invariant grader at all, safety cannot be judged.
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
    let mut fx = Fx::good("r1");
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
    // Pairs: 1−100/200, 1−100/1000, 1−100/200 (estimate), 1−200/1000 → median .65
    let r = eval(&fx, &custom(""));
    let g = gate(&r, "token_reduction_vs_off");
    assert!(close(g.observed, 0.65), "{g:?}");
    assert!(
        g.detail.contains("1 pair(s) sized by the estimate"),
        "{g:?}"
    );
}

#[test]
fn registration_mismatch_is_noted_loudly() {
    let mut fx = Fx::good("r1");
    fx.warn_fails();
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
    // The verdict itself is unchanged; the line carries the note.
    assert_eq!(r.verdict, GateVerdict::Pass);
    assert!(verdict_line(&r).contains("NOTE: evaluated gates differ"));

    let fx = Fx::good("r1");
    let r = eval(&fx, &load_gates(None).expect("gates"));
    assert_eq!(r.registration.status, RegistrationStatus::NotRegistered);
    assert!(r.note.expect("note").contains("registered no gates"));
}

fn pass_rate_gates() -> GatesFile {
    GatesFile::parse(
        "version: 1\ngates:\n  pass_rate_regression_vs_warn: {max: 0.05}\n",
        "ni.yaml",
    )
    .expect("gates")
}

/// `n` (scenario, trial) pairs of `warn` and `compact`; `warn_passes(t)` / `compact_passes(t)`
/// say which trials pass.
fn paired_fx(
    n: u32,
    warn_passes: impl Fn(u32) -> bool,
    compact_passes: impl Fn(u32) -> bool,
) -> Fx {
    let mut fx = Fx::good("ni");
    fx.requests.clear();
    fx.trials.clear();
    for t in 0..n {
        for (mode, pass) in [
            (Mode::Warn, warn_passes(t)),
            (Mode::Compact, compact_passes(t)),
        ] {
            let mut tr = crate::fixture::trial("s1", mode, t);
            tr.passed = pass;
            if !pass {
                tr.outcome.status = OutcomeStatus::Failed;
            }
            fx.trials.push(tr);
        }
    }
    fx
}

#[test]
fn pass_rate_gate_is_a_non_inferiority_check_on_the_interval() {
    // Every pair passes in both modes, but two pairs cannot show that a regression stays
    // under 5 points: the point value 0 is within the margin, the upper bound +65.8 is not.
    let r = eval(&Fx::good("r1"), &pass_rate_gates());
    let g = gate(&r, "pass_rate_regression_vs_warn");
    assert!(close(g.observed, 0.0), "{g:?}");
    assert_eq!(g.status, GateStatus::Fail, "{g:?}");
    assert!(
        g.detail.contains(
            "Newcombe 95% [-65.8, +65.8] pp: non-inferiority not shown \
                           (upper bound above the 5.0 pp margin)"
        ),
        "{g:?}"
    );
    assert!(g.detail.contains("McNemar exact p = 1.0000"), "{g:?}");
    assert_eq!(r.verdict, GateVerdict::Fail);

    // All passing: 72 pairs are not enough, 73 are (upper bound z²/(n + z²) ≤ 0.05).
    let r = eval(&paired_fx(72, |_| true, |_| true), &pass_rate_gates());
    assert_eq!(
        gate(&r, "pass_rate_regression_vs_warn").status,
        GateStatus::Fail
    );
    let r = eval(&paired_fx(73, |_| true, |_| true), &pass_rate_gates());
    let g = gate(&r, "pass_rate_regression_vs_warn");
    assert_eq!(g.status, GateStatus::Pass, "{g:?}");
    assert!(g.detail.contains("[-5.0, +5.0] pp: non-inferior"), "{g:?}");
}

#[test]
fn pass_rate_gate_reports_newcombe_and_mcnemar_on_a_published_table() {
    // Fagerland et al. (2014)'s Bentur et al. table as (warn, compact) pairs: a = 1 both
    // pass, b = 1 warn only, c = 7 compact only, d = 12 neither (21 pairs).
    let warn = |t: u32| t <= 1;
    let compact = |t: u32| t == 0 || (2..=8).contains(&t);
    let r = eval(&paired_fx(21, warn, compact), &pass_rate_gates());
    let g = gate(&r, "pass_rate_regression_vs_warn");
    assert!(close(g.observed, -6.0 / 21.0), "{g:?}");
    assert_eq!(g.status, GateStatus::Pass, "{g:?}");
    assert!(
        g.detail.contains(
            "warn 2/21 (9.5%) vs compact 8/21 (38.1%) on 21 paired trials; warn − compact \
             -28.6 pp, Newcombe 95% [-50.7, -2.6] pp: non-inferior"
        ),
        "{g:?}"
    );
    assert!(
        g.detail.contains(
            "discordant pairs: 1 pass only in warn, 7 only in compact; McNemar exact p = 0.0703"
        ),
        "{g:?}"
    );

    // The same table the other way round: compact is worse; the upper bound +50.7 fails.
    let r = eval(&paired_fx(21, compact, warn), &pass_rate_gates());
    let g = gate(&r, "pass_rate_regression_vs_warn");
    assert_eq!(g.status, GateStatus::Fail, "{g:?}");
    assert!(g.detail.contains("[+2.6, +50.7] pp"), "{g:?}");
}

#[test]
fn undercount_gate_leaves_out_scenarios_tagged_estimator_by_default() {
    use crate::fixture::{request, trial};
    let mut fx = Fx::good("r1");
    // A second scenario that undercounts on purpose (the provider counts 1.55× the
    // estimate), tagged `estimator`: every one of its compact requests undercounts by 35%.
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
    assert_eq!(t.exclude_tags, vec!["estimator".to_string()]);
    let r = eval(&fx, &defaults);
    let u = gate(&r, "estimator_p95_undercount");
    assert_eq!(u.status, GateStatus::Pass, "{u:?}");
    assert!(close(u.observed, 0.085), "only `s1` counts: {u:?}");
    assert!(
        u.detail
            .contains("1 scenario(s) tagged `estimator` left out"),
        "{u:?}"
    );

    // Absent `exclude_tags` means the default; `[]` keeps every scenario.
    let absent = "version: 1\ngates:\n  estimator_p95_undercount: {max_share_of_buffer: 1.0}\n";
    let g = GatesFile::parse(absent, "g.yaml").expect("parse");
    assert_eq!(
        g.gates.estimator_p95_undercount.expect("gate").exclude_tags,
        vec!["estimator".to_string()]
    );
    let all = "version: 1\ngates:\n  estimator_p95_undercount: {max_share_of_buffer: 1.0, exclude_tags: []}\n";
    let r = eval(&fx, &GatesFile::parse(all, "g.yaml").expect("parse"));
    let u = gate(&r, "estimator_p95_undercount");
    assert_eq!(u.status, GateStatus::Fail, "{u:?}");
    assert!(u.observed.is_some_and(|p| p > 0.3), "{u:?}");
    let empty = "version: 1\ngates:\n  estimator_p95_undercount: {max_share_of_buffer: 1.0, exclude_tags: [' ']}\n";
    let msg = GatesFile::parse(empty, "g.yaml")
        .expect_err("empty tag")
        .to_string();
    assert!(msg.contains("exclude_tags"), "{msg}");
}
