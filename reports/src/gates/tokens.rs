//! The token gates: input-token reduction of the candidate against `off`, paired per step
//! (METRICS.md §Token reduction), and the estimator's undercount against provider counts.

use std::collections::{BTreeMap, BTreeSet};

use ctxbench_harness::scenario::AS_WRITTEN;
use ctxbench_harness::Mode;
use polars::prelude::*;

use super::{Bound, Ctx, GateResult, MaxShareOfBuffer, MinReduction};
use crate::read::RunData;
use crate::stats::{
    bootstrap_median, BootstrapInterval, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, QUANTILE_METHOD,
};

/// Scenarios carrying `tag`, by the trials' tags or the manifests' scenario list.
pub(crate) fn tagged_scenarios<'a>(run: &'a RunData, tag: &str) -> BTreeSet<&'a str> {
    let mut tagged: BTreeSet<&str> = run
        .trials
        .iter()
        .filter(|tr| tr.tags.iter().any(|x| x == tag))
        .map(|tr| tr.scenario.as_str())
        .collect();
    for s in run.scenarios() {
        if s.tags.iter().any(|x| x == tag) {
            tagged.insert(s.id.as_str());
        }
    }
    tagged
}

/// Steps of two modes paired by (scenario, trial, step): see [`pair_steps`].
pub(crate) struct Pairing {
    /// Columns `scenario`, `trial`, `step`, `cand`, `base` (step sizes), `cand_est`,
    /// `base_est` (1 when sized by the estimate) and `reduction` = 1 − cand/base.
    pub paired: DataFrame,
    /// Steps the candidate has.
    pub cand_steps: usize,
    /// Steps the baseline has.
    pub base_steps: usize,
}

impl Pairing {
    /// Steps of either side without a partner.
    pub fn unpaired(&self) -> usize {
        (self.cand_steps + self.base_steps).saturating_sub(2 * self.paired.height())
    }
}

/// Pairs the **sent turn** requests (`purpose = turn`; summarization requests are
/// compaction cost, not a step's size) of `cand` and `base` by (scenario, trial, step),
/// restricted to `scenarios` when given. A step's size is its largest request, sized by
/// provider input tokens, else the provider's overflow count, else the estimate (flagged).
/// Pairs whose baseline size is 0 are left out (no reduction is defined).
pub(crate) fn pair_steps(
    requests: &DataFrame,
    scenarios: Option<&BTreeSet<&str>>,
    cand: Mode,
    base: Mode,
) -> PolarsResult<Pairing> {
    let mut lf = requests
        .clone()
        .lazy()
        .filter(col("sent").and(crate::frames::is_turn()));
    if let Some(ids) = scenarios {
        let ids: Vec<&str> = ids.iter().copied().collect();
        let frame = DataFrame::new(ids.len(), vec![Column::new("scenario".into(), ids)])?;
        lf = lf.join(
            frame.lazy(),
            [col("scenario")],
            [col("scenario")],
            JoinArgs::new(JoinType::Inner),
        );
    }
    let size = col("provider_input_tokens")
        .fill_null(col("overflow_input_tokens"))
        .fill_null(col("est_total"))
        .cast(DataType::Float64);
    let estimated = col("provider_input_tokens")
        .is_null()
        .and(col("overflow_input_tokens").is_null());
    let keys = [col("scenario"), col("trial"), col("step")];
    let per_step = |mode: Mode, size_name: &str, est_name: &str| {
        lf.clone()
            .filter(col("mode").eq(lit(mode.as_str())))
            .group_by(keys.clone())
            .agg([
                size.clone().max().alias(size_name),
                estimated
                    .clone()
                    .cast(DataType::UInt32)
                    .max()
                    .alias(est_name),
            ])
    };
    let c = per_step(cand, "cand", "cand_est").collect()?;
    let b = per_step(base, "base", "base_est").collect()?;
    let (cand_steps, base_steps) = (c.height(), b.height());
    let paired = c
        .lazy()
        .join(b.lazy(), keys.clone(), keys, JoinArgs::new(JoinType::Inner))
        .filter(col("base").gt(lit(0.0)))
        .with_column((lit(1.0) - col("cand") / col("base")).alias("reduction"))
        .sort(
            ["scenario", "trial", "step"],
            SortMultipleOptions::default(),
        )
        .collect()?;
    Ok(Pairing {
        paired,
        cand_steps,
        base_steps,
    })
}

/// Median of the `reduction` column of a [`Pairing`] (linear interpolation); `None` when
/// nothing is paired.
pub(crate) fn median_reduction(p: &Pairing) -> PolarsResult<Option<f64>> {
    if p.paired.height() == 0 {
        return Ok(None);
    }
    let m = p
        .paired
        .clone()
        .lazy()
        .select([col("reduction")
            .quantile(lit(0.5), QUANTILE_METHOD)
            .alias("median")])
        .collect()?;
    Ok(m.column("median")?
        .as_materialized_series()
        .f64()?
        .get(0)
        .filter(|v| v.is_finite()))
}

/// The session instance each (scenario, trial) played (see [`unit_clusters`]).
pub(crate) type Instances<'a> = BTreeMap<(&'a str, u32), &'a str>;

/// Which session instance every (scenario, trial) of the run played.
pub(crate) fn instances(run: &RunData) -> Instances<'_> {
    run.trials
        .iter()
        .map(|t| ((t.scenario.as_str(), t.trial), t.instance.as_str()))
        .collect()
}

/// The paired reductions grouped by **unit**: all the steps of the trials of one scenario
/// that played the same session instance form one cluster. Trials of the deterministic fake
/// playing the script as written are near-copies, so such a scenario is one unit; trials a
/// scenario's `vary:` turned into different sessions are units of their own.
pub(crate) fn unit_clusters(p: &Pairing, instances: &Instances<'_>) -> PolarsResult<Vec<Vec<f64>>> {
    let df = &p.paired;
    let scenario = df
        .column("scenario")?
        .as_materialized_series()
        .str()?
        .clone();
    let trial = df
        .column("trial")?
        .as_materialized_series()
        .cast(&DataType::UInt32)?;
    let trial = trial.u32()?;
    let reduction = df
        .column("reduction")?
        .as_materialized_series()
        .f64()?
        .clone();
    let mut clusters: BTreeMap<(&str, &str), Vec<f64>> = BTreeMap::new();
    for ((s, t), r) in scenario.iter().zip(trial.iter()).zip(reduction.iter()) {
        let (Some(s), Some(t), Some(r)) = (s, t, r) else {
            continue;
        };
        let instance = instances.get(&(s, t)).copied().unwrap_or(AS_WRITTEN);
        clusters.entry((s, instance)).or_default().push(r);
    }
    Ok(clusters.into_values().collect())
}

/// Seeded cluster-bootstrap 95% interval ([`crate::stats::bootstrap_median`]) of the
/// median `reduction` of a [`Pairing`], resampling its units ([`unit_clusters`]); `None`
/// with fewer than two.
pub(crate) fn reduction_interval(
    p: &Pairing,
    instances: &Instances<'_>,
) -> PolarsResult<Option<BootstrapInterval>> {
    if p.paired.height() == 0 {
        return Ok(None);
    }
    let clusters = unit_clusters(p, instances)?;
    Ok(bootstrap_median(
        &clusters,
        BOOTSTRAP_RESAMPLES,
        BOOTSTRAP_SEED,
        0.95,
    ))
}

/// Trials whose `script-adherence` verdict failed: the fake model improvised, so their
/// requests are not the script's and cannot be paired.
pub(crate) fn off_script_trials(run: &RunData) -> BTreeSet<&str> {
    run.trials
        .iter()
        .filter(|t| {
            t.verdicts.iter().any(|v| {
                v.grader == "script-adherence"
                    && v.status == ctxbench_harness::storage::schema::VerdictStatus::Fail
            })
        })
        .map(|t| t.trial_id.as_str())
        .collect()
}

/// `requests` without the rows of `trials`.
fn without_trials(requests: &DataFrame, trials: &BTreeSet<&str>) -> PolarsResult<DataFrame> {
    if trials.is_empty() {
        return Ok(requests.clone());
    }
    let ids: Vec<&str> = trials.iter().copied().collect();
    let n = ids.len();
    let drop = DataFrame::new(
        n,
        vec![
            Column::new("trial_id".into(), ids),
            Column::new("__drop".into(), vec![true; n]),
        ],
    )?;
    requests
        .clone()
        .lazy()
        .join(
            drop.lazy(),
            [col("trial_id")],
            [col("trial_id")],
            JoinArgs::new(JoinType::Left),
        )
        .filter(col("__drop").is_null())
        .select([all().exclude_cols(["__drop"]).as_expr()])
        .collect()
}

/// Median per-step reduction, paired by (scenario, trial, step); judged on the lower bound
/// of its scenario-cluster bootstrap interval.
pub(super) fn token_reduction(
    ctx: &Ctx<'_>,
    requests: &DataFrame,
    t: &MinReduction,
) -> PolarsResult<GateResult> {
    let name = "token_reduction_vs_off";
    let result = |observed, detail| Ctx::result(name, Bound::Min, t.min, observed, detail);
    let off_script = off_script_trials(ctx.run);
    let requests = &without_trials(requests, &off_script)?;

    let (tagged, scope) = match &t.tag {
        Some(tag) => {
            let tagged = tagged_scenarios(ctx.run, tag);
            if tagged.is_empty() {
                return Ok(result(
                    None,
                    format!("no scenario in the run is tagged `{tag}`"),
                ));
            }
            let scope = format!("{} scenario(s) tagged `{tag}`", tagged.len());
            (Some(tagged), scope)
        }
        None => (None, "all scenarios".to_string()),
    };
    let pairing = pair_steps(requests, tagged.as_ref(), ctx.candidate, Mode::Off)?;
    let pairs = pairing.paired.height();
    if pairs == 0 {
        return Ok(result(
            None,
            format!(
                "no step of {scope} ran in both `{}` ({} steps) and `off` ({} steps)",
                ctx.candidate, pairing.cand_steps, pairing.base_steps
            ),
        ));
    }
    let median = median_reduction(&pairing)?;
    let instances = instances(ctx.run);
    let units = unit_clusters(&pairing, &instances)?.len() as u64;
    if units < t.min_clusters {
        return Ok(result(
            None,
            format!(
                "inconclusive: needs {} independent session(s) of {scope} paired with `off` \
                 (the interval's clusters: scenarios, or the instances `vary:` makes of \
                 one), has {units}; median {} over {pairs} paired steps",
                t.min_clusters,
                median
                    .map(|m| format!("{:.1}%", m * 100.0))
                    .unwrap_or_else(|| "—".into())
            ),
        ));
    }
    let scenarios = pairing
        .paired
        .column("scenario")?
        .as_materialized_series()
        .n_unique()? as u64;
    if scenarios < t.min_scenarios {
        return Ok(result(
            None,
            format!(
                "inconclusive: needs {} distinct scenario(s) of {scope} paired with `off`, has \
                 {scenarios} ({units} session(s)): the instances `vary:` makes of one \
                 scenario are one design — add scenarios",
                t.min_scenarios
            ),
        ));
    }
    let estimated = pairing
        .paired
        .clone()
        .lazy()
        .select([(col("cand_est") + col("base_est"))
            .gt(lit(0u32))
            .cast(DataType::UInt64)
            .sum()
            .alias("estimated")])
        .collect()?;
    let estimated_pairs = estimated
        .column("estimated")?
        .as_materialized_series()
        .u64()?
        .get(0)
        .unwrap_or(0);
    let unpaired = pairing.unpaired();
    let mut detail = format!(
        "lower bound of the 95% interval on the median of 1 − {}/off over {pairs} paired steps \
         of {scope}",
        ctx.candidate
    );
    let lower = match reduction_interval(&pairing, &instances)? {
        Some(ci) => {
            detail.push_str(&format!(
                "; median {:.1}%, percentile bootstrap 95% [{:.1}%, {:.1}%] ({} resamples of \
                 {} session clusters, seed {:#x})",
                median.unwrap_or(f64::NAN) * 100.0,
                ci.lo * 100.0,
                ci.hi * 100.0,
                ci.resamples,
                ci.clusters,
                ci.seed
            ));
            Some(ci.lo)
        }
        None => None,
    };
    if !off_script.is_empty() {
        detail.push_str(&format!(
            "; {} off-script trial(s) left out (script-adherence failed)",
            off_script.len()
        ));
    }
    if unpaired > 0 {
        detail.push_str(&format!("; {unpaired} step(s) without a partner left out"));
    }
    if estimated_pairs > 0 {
        detail.push_str(&format!(
            "; {estimated_pairs} pair(s) sized by the estimate (no provider count)"
        ));
    }
    Ok(result(lower, detail))
}

/// p95 undercount share against the buffer's share of the window.
pub(super) fn undercount(
    ctx: &Ctx<'_>,
    requests: &DataFrame,
    t: &MaxShareOfBuffer,
) -> PolarsResult<GateResult> {
    let name = "estimator_p95_undercount";
    let excluded: BTreeSet<&str> = t
        .exclude_tags
        .iter()
        .flat_map(|tag| tagged_scenarios(ctx.run, tag))
        .collect();
    // Every request the provider counted — answered (usage) or rejected for its size (the
    // overflow error's count) — against the estimate the system planned it with (its
    // declared budget, calibrated; ctxbench's own estimate when it declared none).
    let provider = col("provider_input_tokens")
        .fill_null(col("overflow_input_tokens"))
        .cast(DataType::Float64);
    let estimate = when(col("est_total").gt(lit(0u64)))
        .then(col("est_total"))
        .otherwise(col("observed_estimate"))
        .cast(DataType::Float64);
    let mut keep = col("mode")
        .eq(lit(ctx.candidate.as_str()))
        .and(col("sent"))
        .and(crate::frames::is_turn())
        .and(provider.clone().is_not_null())
        .and(provider.clone().gt(lit(0.0)))
        .and(col("window").gt(lit(0u64)));
    for s in &excluded {
        keep = keep.and(col("scenario").neq(lit(*s)));
    }
    let counted = requests.clone().lazy().filter(keep);
    let under = (provider.clone() - estimate) / provider;
    let stats = counted
        .select([
            when(under.clone().gt(lit(0.0)))
                .then(under)
                .otherwise(lit(0.0))
                .quantile(lit(0.95), QUANTILE_METHOD)
                .alias("p95"),
            (col("buffer").cast(DataType::Float64) / col("window").cast(DataType::Float64))
                .min()
                .alias("share"),
            len().cast(DataType::UInt64).alias("n"),
        ])
        .collect()?;
    let get_f = |c: &str| -> PolarsResult<Option<f64>> {
        Ok(stats
            .column(c)?
            .as_materialized_series()
            .cast(&DataType::Float64)?
            .f64()?
            .get(0))
    };
    let n = get_f("n")?.unwrap_or(0.0) as u64;
    let (p95, share) = (get_f("p95")?, get_f("share")?);
    let left_out = if excluded.is_empty() {
        String::new()
    } else {
        format!(
            "; {} scenario(s) tagged {} left out",
            excluded.len(),
            t.exclude_tags
                .iter()
                .map(|x| format!("`{x}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let (Some(p95), Some(share), true) = (p95, share, n > 0) else {
        return Ok(Ctx::result(
            name,
            Bound::Max,
            t.max_share_of_buffer,
            None,
            format!(
                "no candidate turn request with a provider count and a declared budget{left_out}"
            ),
        ));
    };
    let threshold = t.max_share_of_buffer * share;
    let detail = format!(
        "p95 undercount {:.2}% of the provider's count over {n} counted turn requests \
         (answered or overflowed; the estimate the system planned with); limit {} × smallest \
         buffer/window share {:.2}%{left_out}",
        p95 * 100.0,
        t.max_share_of_buffer,
        share * 100.0
    );
    Ok(Ctx::result(name, Bound::Max, threshold, Some(p95), detail))
}
