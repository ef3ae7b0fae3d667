//! `tool-pairs`: every request keeps tool calls and their results paired (seed 000
//! invariant 5; seed 004: a completed turn — with every parallel batch in it — is the
//! atomic retention boundary).
//!
//! In every sent turn request, read in order:
//!
//! - each assistant message with tool calls opens a batch; every call in it must be
//!   answered by exactly one tool result carrying its id, and all of them must come right
//!   after it, before any other message (a parallel batch is never split, and a request
//!   never ends with an unanswered call);
//! - every tool result must answer a call of the batch just before it (never an orphan
//!   whose call was summarized away or dropped, never a second answer to one call).
//!
//! Projected tool results keep their call id, so a projection counts as the result.

use std::collections::BTreeSet;

use ctxbench_adapters::Role;
use ctxbench_harness::storage::schema::{Evidence, Verdict};

use crate::common::turn_requests;
use crate::{verdict, GradeContext, Grader};

/// The tool-pairing grader.
pub struct ToolPairs;

impl Grader for ToolPairs {
    fn name(&self) -> &'static str {
        "tool-pairs"
    }

    fn grade(&self, ctx: &GradeContext<'_>) -> Verdict {
        let rec = ctx.record;
        let mut failures = Vec::new();
        let mut requests = 0;
        let mut batches = 0;
        for r in turn_requests(rec) {
            requests += 1;
            let msgs = ctx.read.messages(r);
            // The open batch: index of its assistant message and the calls still unanswered.
            let mut open: Option<(usize, BTreeSet<String>)> = None;
            let mut problem: Option<(usize, String, String, String)> = None;
            for (i, (h, m)) in msgs.iter().enumerate() {
                let Some(m) = m else { continue };
                if m.role == Role::Tool {
                    let id = m.tool_call_id.clone().unwrap_or_default();
                    match &mut open {
                        Some((_, pending)) if pending.contains(&id) => {
                            pending.remove(&id);
                        }
                        Some((at, _)) => {
                            problem = Some((
                                i,
                                h.to_string(),
                                format!("a result for a call of the batch at message {at}"),
                                format!("tool result `{id}` answers no pending call of that batch"),
                            ));
                            break;
                        }
                        None => {
                            problem = Some((
                                i,
                                h.to_string(),
                                "the assistant message with its call right before it".into(),
                                format!(
                                    "orphan tool result `{id}`: its call is not in the request"
                                ),
                            ));
                            break;
                        }
                    }
                    continue;
                }
                if let Some((at, pending)) = &open {
                    if !pending.is_empty() {
                        problem = Some((
                            i,
                            h.to_string(),
                            format!("results for {} before any other message", join(pending)),
                            format!(
                                "the batch at message {at} is split: a {} message comes before \
                                 its results for {}",
                                m.role.as_str(),
                                join(pending)
                            ),
                        ));
                        break;
                    }
                }
                open = None;
                if m.role == Role::Assistant && !m.tool_calls.is_empty() {
                    batches += 1;
                    let mut ids = BTreeSet::new();
                    for c in &m.tool_calls {
                        if !ids.insert(c.id.clone()) {
                            problem = Some((
                                i,
                                h.to_string(),
                                "distinct call ids in one batch".into(),
                                format!("call id `{}` appears twice in one batch", c.id),
                            ));
                        }
                    }
                    if problem.is_some() {
                        break;
                    }
                    open = Some((i, ids));
                }
            }
            if problem.is_none() {
                if let Some((at, pending)) = &open {
                    if !pending.is_empty() {
                        problem = Some((
                            *at,
                            msgs[*at].0.to_string(),
                            format!("results for {}", join(pending)),
                            format!(
                                "the request ends with the batch at message {at} unanswered ({})",
                                join(pending)
                            ),
                        ));
                    }
                }
            }
            if let Some((i, hash, expected, what)) = problem {
                failures.push(Evidence {
                    request: Some(r.row.seq),
                    step: Some(r.row.step),
                    expected: Some(expected),
                    seen: Some(format!("message {i}: {what}")),
                    excerpt: Some(shape(msgs, i)),
                    hashes: vec![hash],
                    note: format!("request {} (step {}): {what}", r.row.seq, r.row.step),
                });
            }
        }
        verdict(
            self.name(),
            format!(
                "{requests} request(s), {batches} tool-call batch(es) across them, every call \
                 paired"
            ),
            failures,
        )
    }
}

fn join(ids: &BTreeSet<String>) -> String {
    ids.iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The roles around message `i`, e.g. `… assistant(calls: a, b) → tool(a) → [user] …`.
fn shape(msgs: &[(&str, Option<&ctxbench_adapters::Message>)], i: usize) -> String {
    let from = i.saturating_sub(3);
    let to = (i + 2).min(msgs.len());
    let parts: Vec<String> = (from..to)
        .map(|k| {
            let s = match msgs[k].1 {
                None => "?".to_string(),
                Some(m) if !m.tool_calls.is_empty() => format!(
                    "assistant(calls: {})",
                    m.tool_calls
                        .iter()
                        .map(|c| c.id.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                Some(m) if m.role == Role::Tool => {
                    format!("tool({})", m.tool_call_id.as_deref().unwrap_or("?"))
                }
                Some(m) => m.role.as_str().to_string(),
            };
            if k == i {
                format!("[{s}]")
            } else {
                s
            }
        })
        .collect();
    format!(
        "{}{}{}",
        if from > 0 { "… " } else { "" },
        parts.join(" → "),
        if to < msgs.len() { " …" } else { "" }
    )
}
