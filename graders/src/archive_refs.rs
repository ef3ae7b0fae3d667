//! `archive-refs`: an archived tool result stays addressable (seed 004 finding P1: a
//! checkpoint must not erase the only model-visible address of an archive that still
//! exists).
//!
//! Every `archive://…` reference that appeared in a tool result of a sent turn request must
//! be present in every later sent turn request — verbatim history, a projected tool result,
//! checkpoint memory or anywhere else the model can read it (message text or tool-call
//! arguments). Each lost reference is reported once, at the first request that lacks it.

use std::collections::{BTreeMap, HashSet};
use std::sync::OnceLock;

use ctxbench_adapters::Role;
use ctxbench_harness::storage::schema::{Evidence, Verdict};
use regex::Regex;

use crate::common::turn_requests;
use crate::{skip, verdict, GradeContext, Grader};

/// The archive-reference grader.
pub struct ArchiveRefs;

fn refs_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| Regex::new(r#"archive://[^\s)\]}>,;'"`]+"#).expect("static regex"))
}

/// The archive references in `text`, without trailing sentence punctuation.
pub fn archive_refs(text: &str) -> impl Iterator<Item = &str> {
    refs_re()
        .find_iter(text)
        .map(|m| m.as_str().trim_end_matches(['.', ':', '!', '?']))
}

impl Grader for ArchiveRefs {
    fn name(&self) -> &'static str {
        "archive-refs"
    }

    fn grade(&self, ctx: &GradeContext<'_>) -> Verdict {
        let rec = ctx.record;
        let mut failures = Vec::new();
        // ref → (request, step) where it first appeared in a tool result.
        let mut known: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        let mut lost: HashSet<String> = HashSet::new();
        let mut checked = 0;
        for r in turn_requests(rec) {
            let msgs = ctx.read.messages(r);
            let mut present: HashSet<&str> = HashSet::new();
            let mut args = Vec::new();
            for (_, m) in msgs {
                let Some(m) = m else { continue };
                present.extend(archive_refs(&m.content));
                for c in &m.tool_calls {
                    args.push(c.arguments.to_string());
                }
            }
            for a in &args {
                present.extend(archive_refs(a));
            }
            if !known.is_empty() {
                checked += 1;
            }
            for (reference, (first, step)) in &known {
                if !present.contains(reference.as_str()) && lost.insert(reference.clone()) {
                    failures.push(Evidence {
                        request: Some(r.row.seq),
                        step: Some(r.row.step),
                        expected: Some(format!(
                            "{reference} (first in a tool result of request {first}, step {step})"
                        )),
                        seen: Some(format!(
                            "absent from all {} message(s) of the request{}",
                            msgs.len(),
                            r.row
                                .checkpoint_id
                                .as_deref()
                                .map(|c| format!(" (checkpoint {c})"))
                                .unwrap_or_default()
                        )),
                        excerpt: Some(reference.clone()),
                        note: format!(
                            "request {} (step {}) lost the archive reference {reference}",
                            r.row.seq, r.row.step
                        ),
                        ..Default::default()
                    });
                }
            }
            for (_, m) in msgs {
                let Some(m) = m.filter(|m| m.role == Role::Tool) else {
                    continue;
                };
                for reference in archive_refs(&m.content) {
                    known
                        .entry(reference.to_string())
                        .or_insert((r.row.seq, r.row.step));
                }
            }
        }
        if known.is_empty() {
            return skip(self.name(), "no tool result carried an archive reference");
        }
        verdict(
            self.name(),
            format!(
                "{} archive reference(s) kept addressable in {checked} later request(s)",
                known.len()
            ),
            failures,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_are_trimmed() {
        let v: Vec<&str> =
            archive_refs("see archive://a/b.log. and (archive://c/d), archive://e").collect();
        assert_eq!(v, vec!["archive://a/b.log", "archive://c/d", "archive://e"]);
    }
}
