//! `verification-historical` (seed 000 invariant 3): a summary cannot present an old
//! verification result as current truth.
//!
//! The scenario marks its verification reports (`verifications:`, e.g. "CI is green and all
//! tests pass on main"). Wherever a marked report reaches **memory** (derived conversation
//! memory, by the declared markup or the default rule) — verbatim or lightly reworded (the
//! fake model's presence rule, [`tainted`]) — the line carrying it must frame it as past, with
//! a word of time ([`PAST_MARKERS`]: *earlier, previously, historical, at the time, as of,
//! was, were, …*); a bare source citation such as a turn number does not date a claim. A report quoted in the present
//! tense as memory reads as current truth after later code changes.
//!
//! Not applicable to a scenario that marks no verification report.

use ctxbench_adapters::fake::layout::Place;
use ctxbench_adapters::fake::tainted;
use ctxbench_adapters::fake::text::words;
use ctxbench_harness::storage::schema::{Evidence, Verdict};

use crate::common::{redacted_excerpt, turn_requests};
use crate::{skip, verdict, GradeContext, Grader};

/// Words that frame a report as past (whole words, case-insensitive). The grader's own,
/// deliberately broad list: any honest temporal framing counts.
pub const PAST_MARKERS: &[&str] = &[
    "historical",
    "history",
    "earlier",
    "previously",
    "previous",
    "past",
    "formerly",
    "once",
    "then",
    "before",
    "old",
    "stale",
    "outdated",
    "was",
    "were",
    "had",
    "reported",
    "as of",
    "at the time",
    "at that time",
    "last known",
    "no longer",
    "since",
];

/// The grader.
pub struct VerificationHistorical;

fn framed_as_past(line: &str) -> bool {
    let w = words(line);
    let joined = format!(" {} ", w.join(" "));
    PAST_MARKERS
        .iter()
        .any(|m| joined.contains(&format!(" {m} ")))
}

impl Grader for VerificationHistorical {
    fn name(&self) -> &'static str {
        "verification-historical"
    }

    fn grade(&self, ctx: &GradeContext<'_>) -> Verdict {
        let rec = ctx.record;
        if ctx.scenario.verifications.is_empty() {
            return skip(
                self.name(),
                "not-applicable: the scenario marks no verification report (`verifications:`)",
            );
        }
        let mut failures = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        let mut checked = 0usize;
        for r in turn_requests(rec) {
            for seg in ctx.read.pieces(r, Place::Memory) {
                if !seen.insert(seg.text.to_string()) {
                    continue;
                }
                for line in seg.text.lines() {
                    for v in ctx
                        .scenario
                        .verifications
                        .iter()
                        .filter(|v| tainted(&v.text, line))
                    {
                        checked += 1;
                        if !framed_as_past(line) {
                            failures.push(Evidence {
                                request: Some(r.row.seq),
                                step: Some(r.row.step),
                                expected: Some(format!(
                                    "verification `{}` framed as past in memory",
                                    v.id
                                )),
                                seen: Some(redacted_excerpt(ctx.scenario, line, 160)),
                                note: format!(
                                    "request {}: memory states verification `{}` as current",
                                    r.row.seq, v.id
                                ),
                                ..Default::default()
                            });
                        }
                    }
                }
            }
        }
        verdict(
            self.name(),
            format!("{checked} verification report(s) in memory, all framed as past"),
            failures,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_framing() {
        assert!(framed_as_past(
            "- (historical, turn 1) CI is green and all tests pass."
        ));
        assert!(framed_as_past("Earlier the user said CI is green."));
        assert!(!framed_as_past("CI is green and all tests pass on main."));
        assert!(!framed_as_past("The theme is nice."));
    }
}
