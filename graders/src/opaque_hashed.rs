//! `opaque-items-hashed` (seed 000 invariant 12): opaque provider items are sensitive
//! session state — trace events carry only their metadata and hashes.
//!
//! Every opaque compaction item a request carried (`<provider-compaction-item …>DATA</…>`)
//! is collected; no engine event payload may contain its data.

use ctxbench_adapters::conventions::{OPAQUE_CLOSE, OPAQUE_OPEN};
use ctxbench_harness::storage::schema::{Evidence, Verdict};

use crate::{verdict, GradeContext, Grader};

/// The grader.
pub struct OpaqueItemsHashed;

/// Payloads of opaque items in a text.
fn payloads(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(OPAQUE_OPEN) {
        let after = &rest[i + OPAQUE_OPEN.len()..];
        let Some(gt) = after.find('>') else { break };
        let body = &after[gt + 1..];
        let end = body.find(OPAQUE_CLOSE).unwrap_or(body.len());
        if end > 0 {
            out.push(&body[..end]);
        }
        rest = &body[end..];
    }
    out
}

impl Grader for OpaqueItemsHashed {
    fn name(&self) -> &'static str {
        "opaque-items-hashed"
    }

    fn grade(&self, ctx: &GradeContext<'_>) -> Verdict {
        if crate::common::black_box(ctx.record) {
            return crate::skip(self.name(), crate::common::NO_EVENTS);
        }
        let rec = ctx.record;
        let mut items: Vec<String> = Vec::new();
        for m in rec.messages.values() {
            for p in payloads(&m.content) {
                if !items.iter().any(|x| x == p) {
                    items.push(p.to_string());
                }
            }
        }
        let mut failures = Vec::new();
        for e in &rec.events {
            let data = e.event.data().to_string();
            if let Some(p) = items.iter().find(|p| data.contains(p.as_str())) {
                failures.push(Evidence {
                    step: Some(e.step),
                    expected: Some("only the item's hash and size".into()),
                    seen: Some(format!(
                        "`{}` carries {} bytes of the opaque payload",
                        e.event.kind(),
                        p.len()
                    )),
                    note: format!(
                        "event {} ({}) carries an opaque provider item",
                        e.seq,
                        e.event.kind()
                    ),
                    ..Default::default()
                });
            }
        }
        verdict(
            self.name(),
            format!("{} opaque item(s); no trace event carries one", items.len()),
            failures,
        )
    }
}
