//! `secrets_redacted` against the reference engine and its mutants.

use crate::support::{grade_with, HOSTILE};
use ctxbench_engine::mutants::Mutation;
use ctxbench_harness::storage::schema::VerdictStatus;
use ctxbench_harness::Mode;

#[tokio::test]
async fn reference_redacts_and_an_unredacted_summary_fails() {
    let g = "secrets-redacted";
    let (rec, v) = grade_with(HOSTILE, Mode::Compact, None, g).await;
    assert_eq!(v.status, VerdictStatus::Pass, "{v:?}");
    assert!(
        rec.transcript
            .iter()
            .any(|m| m.content.contains("sk-test-9Zq4Lm2Xw8")),
        "the fixture's secret is in the conversation"
    );
    let (_, v) = grade_with(HOSTILE, Mode::Compact, Some(Mutation::LeakSecret), g).await;
    assert_eq!(v.status, VerdictStatus::Fail, "{v:?}");
    let e = &v.evidence[0];
    assert!(!format!("{e:?}").contains("sk-test-9Zq4Lm2Xw8"), "{e:?}");
    assert!(e.request.is_some());
}
