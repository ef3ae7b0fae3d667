//! Per-trial compaction metrics, derived from the engine events of `events.jsonl`
//! (kinds in [`crate::read::REPORT_EVENT_KINDS`]).
//!
//! | metric | from |
//! | --- | --- |
//! | `compactions` | `context.compaction.completed` events |
//! | `compaction_failures`, failure reasons | `context.compaction.failed` events (`reason`) |
//! | `compaction_unchanged` | `context.compaction.unchanged` events |
//! | `reclaimed_tokens`, `summary_tokens` | sums of `reclaimed_tokens` / `summary_tokens` of completed compactions |
//! | `summarizer_calls` | sum of `summarizer_calls` of completed **and** failed compactions |
//! | `checkpoint_rejections`, `checkpoint_reuses` | `context.checkpoint.rejected` / `.reused` |
//! | `tool_output_projections` | `context.tool_output.projected` events |
//! | `no_progress_stops` | `context.limit_reached` with reason `no_progress` |
//!
//! Payload fields are read leniently: a field missing from a payload (an older or newer
//! payload version) counts as 0 / empty rather than failing the report. Request-derived
//! compaction metrics (summary requests, overflow recoveries) are computed from the
//! requests frame in [`crate::frames`].

use std::collections::{BTreeMap, HashMap};

use ctxbench_harness::storage::schema::EventRow;
use serde_json::Value;

use crate::read::RunData;

/// Compaction events shown per trial in the HTML drill-down (the rest are counted).
pub const COMPACTION_EVENTS_SHOWN: usize = 20;

/// `reason` of a `context.limit_reached` stop that the no-progress guard caused.
pub const NO_PROGRESS_REASON: &str = "no_progress";

/// Event-derived compaction counters of one trial.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TrialCompaction {
    /// Completed compactions (a new checkpoint was written).
    pub completed: u64,
    /// Failed compactions.
    pub failed: u64,
    /// Compactions that changed nothing.
    pub unchanged: u64,
    /// Failed compactions by reason.
    pub failure_reasons: BTreeMap<String, u64>,
    /// Sum of `reclaimed_tokens` of completed compactions.
    pub reclaimed_tokens: u64,
    /// Sum of `summary_tokens` (memory-message tokens) of completed compactions.
    pub summary_tokens: u64,
    /// Summarizer model calls of completed and failed compactions.
    pub summarizer_calls: u64,
    /// Stored checkpoints rejected on load.
    pub checkpoint_rejections: u64,
    /// Stored checkpoints reused after a restart.
    pub checkpoint_reuses: u64,
    /// Requests in which older tool outputs were projected.
    pub tool_output_projections: u64,
    /// `context.limit_reached` stops with reason `no_progress`.
    pub no_progress_stops: u64,
    /// The trial's compaction and checkpoint events, in `seq` order, for the drill-down.
    pub events: Vec<CompactionEvent>,
}

impl TrialCompaction {
    /// Failure reasons, sorted and unique, joined with `;` (empty when none).
    pub fn reasons_joined(&self) -> String {
        self.failure_reasons
            .keys()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(";")
    }
}

/// One row of the drill-down table: a compaction outcome, a dry-run preview or a
/// checkpoint load decision. Every text field comes from run storage (escape it).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CompactionEvent {
    /// Event number within the trial.
    pub seq: u64,
    /// Script step.
    pub step: u64,
    /// `completed`, `failed`, `unchanged`, `preview`, `checkpoint_rejected` or
    /// `checkpoint_reused`.
    pub outcome: &'static str,
    /// `manual`, `automatic` or `overflow`, when the event has one.
    pub trigger: Option<String>,
    /// Stable reason (failed, unchanged, rejected).
    pub reason: Option<String>,
    /// Checkpoint written (completed) or reused.
    pub checkpoint_id: Option<String>,
    /// Summarized messages, inclusive (`completed`: from–through; `preview`: from–to−1).
    pub range: Option<(u64, u64)>,
    /// Tokens reclaimed (completed).
    pub reclaimed_tokens: Option<u64>,
    /// Memory-message tokens (completed).
    pub summary_tokens: Option<u64>,
}

/// Compaction counters per trial id. Trials without any such event have no entry
/// ([`CompactionIndex::get`] returns an all-zero default for them).
#[derive(Debug, Clone, Default)]
pub struct CompactionIndex {
    by_trial: HashMap<String, TrialCompaction>,
    empty: TrialCompaction,
}

impl CompactionIndex {
    /// Builds the index from the run's retained events.
    pub fn build(run: &RunData) -> CompactionIndex {
        let mut by_trial: HashMap<String, TrialCompaction> = HashMap::new();
        for e in &run.events {
            if let Some(tc) = classify(e) {
                let entry = by_trial.entry(e.trial_id.clone()).or_default();
                apply(entry, e, tc);
            }
        }
        CompactionIndex {
            by_trial,
            empty: TrialCompaction::default(),
        }
    }

    /// The counters of one trial (all zero when it had no compaction event).
    pub fn get(&self, trial_id: &str) -> &TrialCompaction {
        self.by_trial.get(trial_id).unwrap_or(&self.empty)
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Started,
    Completed,
    Failed,
    Unchanged,
    Preview,
    Rejected,
    Reused,
    Projected,
    LimitReached,
}

fn classify(e: &EventRow) -> Option<Kind> {
    Some(match e.kind.as_str() {
        "context.compaction.started" => Kind::Started,
        "context.compaction.completed" => Kind::Completed,
        "context.compaction.failed" => Kind::Failed,
        "context.compaction.unchanged" => Kind::Unchanged,
        "context.compaction.preview" => Kind::Preview,
        "context.checkpoint.rejected" => Kind::Rejected,
        "context.checkpoint.reused" => Kind::Reused,
        "context.tool_output.projected" => Kind::Projected,
        "context.limit_reached" => Kind::LimitReached,
        _ => return None,
    })
}

fn u(data: &Value, field: &str) -> Option<u64> {
    data.get(field).and_then(Value::as_u64)
}

fn s(data: &Value, field: &str) -> Option<String> {
    data.get(field).and_then(Value::as_str).map(str::to_string)
}

fn apply(t: &mut TrialCompaction, e: &EventRow, kind: Kind) {
    let d = &e.data;
    let row = |outcome: &'static str| CompactionEvent {
        seq: e.seq,
        step: e.step,
        outcome,
        trigger: s(d, "trigger"),
        ..CompactionEvent::default()
    };
    match kind {
        // The outcome event repeats the trigger; a start alone is not a row.
        Kind::Started => {}
        Kind::Completed => {
            t.completed += 1;
            let reclaimed = u(d, "reclaimed_tokens").unwrap_or(0);
            let summary = u(d, "summary_tokens").unwrap_or(0);
            t.reclaimed_tokens += reclaimed;
            t.summary_tokens += summary;
            t.summarizer_calls += u(d, "summarizer_calls").unwrap_or(0);
            let range = match (u(d, "summarized_from"), u(d, "summarized_through")) {
                (Some(a), Some(b)) => Some((a, b)),
                _ => None,
            };
            t.events.push(CompactionEvent {
                checkpoint_id: s(d, "checkpoint_id"),
                range,
                reclaimed_tokens: Some(reclaimed),
                summary_tokens: Some(summary),
                ..row("completed")
            });
        }
        Kind::Failed => {
            t.failed += 1;
            t.summarizer_calls += u(d, "summarizer_calls").unwrap_or(0);
            let reason = s(d, "reason").unwrap_or_default();
            *t.failure_reasons.entry(reason.clone()).or_default() += 1;
            t.events.push(CompactionEvent {
                reason: Some(reason),
                ..row("failed")
            });
        }
        Kind::Unchanged => {
            t.unchanged += 1;
            t.events.push(CompactionEvent {
                reason: s(d, "reason"),
                ..row("unchanged")
            });
        }
        Kind::Preview => {
            let range = match (u(d, "from"), u(d, "to")) {
                (Some(a), Some(b)) if b > a => Some((a, b - 1)),
                _ => None,
            };
            t.events.push(CompactionEvent {
                range,
                ..row("preview")
            });
        }
        Kind::Rejected => {
            t.checkpoint_rejections += 1;
            t.events.push(CompactionEvent {
                reason: s(d, "reason"),
                ..row("checkpoint_rejected")
            });
        }
        Kind::Reused => {
            t.checkpoint_reuses += 1;
            t.events.push(CompactionEvent {
                checkpoint_id: s(d, "checkpoint_id"),
                ..row("checkpoint_reused")
            });
        }
        Kind::Projected => t.tool_output_projections += 1,
        Kind::LimitReached => {
            if d.get("reason").and_then(Value::as_str) == Some(NO_PROGRESS_REASON) {
                t.no_progress_stops += 1;
            }
        }
    }
}

/// `reason=count` pairs sorted by reason, joined with `;` (empty when none).
pub fn reason_counts(m: &BTreeMap<String, u64>) -> String {
    m.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(";")
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctxbench_harness::storage::schema::EVENT_SCHEMA;
    use serde_json::json;

    fn ev(seq: u64, kind: &str, data: Value) -> EventRow {
        EventRow {
            schema: EVENT_SCHEMA.into(),
            trial_id: "t".into(),
            segment: 0,
            seq,
            step: seq,
            kind: kind.into(),
            data,
        }
    }

    #[test]
    fn counts_and_sums_with_lenient_payloads() {
        let mut t = TrialCompaction::default();
        let events = [
            ev(
                1,
                "context.compaction.started",
                json!({"trigger": "manual"}),
            ),
            ev(
                2,
                "context.compaction.completed",
                json!({"trigger": "manual", "checkpoint_id": "ck", "summarized_from": 0,
                       "summarized_through": 9, "reclaimed_tokens": 100, "summary_tokens": 30,
                       "summarizer_calls": 2}),
            ),
            // Missing numeric fields count as 0.
            ev(3, "context.compaction.completed", json!({})),
            ev(
                4,
                "context.compaction.failed",
                json!({"reason": "b", "summarizer_calls": 1}),
            ),
            ev(5, "context.compaction.failed", json!({"reason": "a"})),
            ev(6, "context.compaction.failed", json!({"reason": "b"})),
            ev(7, "context.limit_reached", json!({"reason": "no_progress"})),
            ev(8, "context.limit_reached", json!({"reason": "other"})),
            ev(9, "context.compaction.preview", json!({"from": 4, "to": 8})),
        ];
        for e in &events {
            apply(&mut t, e, classify(e).expect("kind"));
        }
        assert_eq!((t.completed, t.failed, t.unchanged), (2, 3, 0));
        assert_eq!((t.reclaimed_tokens, t.summary_tokens), (100, 30));
        assert_eq!(t.summarizer_calls, 3);
        assert_eq!(t.no_progress_stops, 1);
        assert_eq!(t.reasons_joined(), "a;b");
        assert_eq!(reason_counts(&t.failure_reasons), "a=1;b=2");
        // started is not a row; preview ranges are made inclusive.
        assert_eq!(t.events.len(), 6);
        assert_eq!(t.events[0].range, Some((0, 9)));
        assert_eq!(t.events[5].range, Some((4, 7)));
    }
}
