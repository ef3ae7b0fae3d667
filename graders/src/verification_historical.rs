//! `verification-historical` (seed 000 invariant 3): a summary cannot mark a previously
//! failing verification as currently passing.
//!
//! Every verification result that reaches checkpoint memory ("tests pass", "all green",
//! "build failed", "CI is red", …) must be labelled historical — its line says
//! "historical" (the extractive summarizer writes `(historical, turn N)`, a model summary
//! lists them under `## Verification (historical)`). An unlabelled result in memory reads
//! as current truth after later code changes.

use ctxbench_adapters::conventions::{MEMORY_CLOSE, MEMORY_OPEN};
use ctxbench_harness::storage::schema::{Evidence, Verdict};
use regex::Regex;

use crate::{excerpt, verdict, GradeContext, Grader};

/// The grader.
pub struct VerificationHistorical;

/// Compiled once per process: compiling it per trial was 15% of a large run's CPU.
fn verification() -> &'static Regex {
    static R: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    R.get_or_init(|| {
        Regex::new(r"(?i)\b(tests? (pass|passed|passing|fail|failed|failing)|all (tests )?green|build (succeeded|passed|failed)|ci (is )?(green|red))\b")
            .expect("static regex")
    })
}

impl Grader for VerificationHistorical {
    fn name(&self) -> &'static str {
        "verification-historical"
    }

    fn grade(&self, ctx: &GradeContext<'_>) -> Verdict {
        let rec = ctx.record;
        let re = verification();
        let mut failures = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        let mut checked = 0usize;
        for r in rec.requests.iter().filter(|r| r.row.sent) {
            for m in rec.request_messages(r) {
                let Some(start) = m.content.find(MEMORY_OPEN) else {
                    continue;
                };
                let block = &m.content[start..];
                let block = &block[..block.find(MEMORY_CLOSE).unwrap_or(block.len())];
                if !seen.insert(block.to_string()) {
                    continue;
                }
                let mut section_historical = false;
                for line in block.lines() {
                    if line.starts_with("## ") {
                        section_historical = line.to_lowercase().contains("historical");
                        continue;
                    }
                    if !re.is_match(line) {
                        continue;
                    }
                    checked += 1;
                    if !section_historical && !line.to_lowercase().contains("historical") {
                        failures.push(Evidence {
                            request: Some(r.row.seq),
                            step: Some(r.row.step),
                            expected: Some("a verification result labelled historical".into()),
                            seen: Some(excerpt(line, 160)),
                            note: format!(
                                "request {}: checkpoint memory states a verification result as current",
                                r.row.seq
                            ),
                            ..Default::default()
                        });
                    }
                }
            }
        }
        verdict(
            self.name(),
            format!("{checked} verification result(s) in memory, all labelled historical"),
            failures,
        )
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::judge_with;
    use ctxbench_engine::mutants::Mutation;
    use ctxbench_harness::storage::schema::VerdictStatus;
    use ctxbench_harness::Mode;

    const SCENARIO: &str = include_str!("../../scenarios/verification-freshness.yaml");

    #[tokio::test]
    async fn labelled_results_pass_and_the_unlabelled_mutant_fails() {
        let status = |j: &ctxbench_harness::runner::Judgement| {
            j.verdicts
                .iter()
                .find(|v| v.grader == "verification-historical")
                .map(|v| (v.status, v.summary.clone()))
        };
        let (_, good) = judge_with(SCENARIO, Mode::Compact, None).await;
        let (s, summary) = status(&good).unwrap();
        assert_eq!(s, VerdictStatus::Pass);
        assert!(summary.starts_with("1 verification"), "{summary}");
        let (_, bad) = judge_with(
            SCENARIO,
            Mode::Compact,
            Some(Mutation::UnlabelledVerification),
        )
        .await;
        assert_eq!(status(&bad).unwrap().0, VerdictStatus::Fail);
    }
}
