//! The compaction transaction (see [`crate::compaction`]): one typed outcome for every
//! trigger, staged summarization, the strategy fallbacks ([`crate::strategy`]), the manual
//! `/compact` and its dry run.

use super::*;

impl ReferenceEngine {
    /// The compaction transaction (see [`super::compaction`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn transaction(
        &mut self,
        trigger: Trigger,
        snapshot: &InstructionSnapshot,
        current_start: Option<usize>,
        target: Option<u64>,
        prune: bool,
        state: &mut TurnState,
        provider: &dyn Provider,
        events: &mut dyn EventSink,
    ) -> CompactionOutcome {
        let calls_before = self.summarizer_calls;
        // Seed 000 step 6: native only when the provider offers it.
        let planned =
            strategy::by_capability(self.summarizer.strategy(), provider.native_compaction());
        let started = match &planned {
            Some(f) => strategy::label(self.fallback.strategy(), Some(f)),
            None => strategy::label(self.summarizer.strategy(), None),
        };
        events.emit(EngineEvent::CompactionStarted {
            trigger: trigger.as_str().into(),
            strategy: started,
        });
        let outcome = self
            .transaction_inner(
                trigger,
                snapshot,
                current_start,
                target,
                prune,
                state,
                planned,
                provider,
                events,
            )
            .await;
        let outcome = match outcome {
            CompactionOutcome::Failed { detail, .. }
                if self.config.mutation == Some(Mutation::MistypeFailureReason) =>
            {
                // Mutant: every failure is blamed on the summarizer.
                CompactionOutcome::Failed {
                    reason: "summarizer_failed".into(),
                    detail,
                }
            }
            other => other,
        };
        match &outcome {
            CompactionOutcome::Compacted { .. } => {}
            CompactionOutcome::Unchanged { reason } => {
                events.emit(EngineEvent::CompactionUnchanged {
                    trigger: trigger.as_str().into(),
                    reason: reason.clone(),
                })
            }
            CompactionOutcome::Failed { reason, detail } => {
                events.emit(EngineEvent::CompactionFailed {
                    trigger: trigger.as_str().into(),
                    reason: reason.clone(),
                    detail: detail.clone(),
                    summarizer_calls: (self.summarizer_calls - calls_before) as u32,
                })
            }
        }
        outcome
    }

    /// Summarize `entries[covered..tail_start]` rolling `previous`, in stages when the whole
    /// span is too large for one summarization request (seed 004: back down to a smaller
    /// completed prefix): the oldest part that fits — halving at turn boundaries — is
    /// summarized first, and each later part rolls the stage before it. At most
    /// [`MAX_SUMMARY_STAGES`] stages and [`MAX_SUMMARY_ATTEMPTS`] calls; the last stage's
    /// result is the checkpoint's content.
    ///
    /// A summary is only useful if the next request can carry it, so when the summarizer
    /// bounds its input, the checkpoint gets at most half of that bound and an intermediate
    /// stage a third (the rest is room for the part it rolls), whatever the configured
    /// target: a 12,000-token target with 4,384 tokens of summary input would otherwise
    /// write stages no later request could roll.
    ///
    /// `model_calls` counts the model calls made, failed ones included; a successful result
    /// reports the total.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn summarize_staged(
        &self,
        which: Which,
        previous: Option<&Checkpoint>,
        entries: &[Entry],
        covered: usize,
        tail_start: usize,
        boundaries: &[usize],
        instructions: &str,
        provider: &dyn Provider,
        model_calls: &mut u32,
    ) -> Result<SummaryResult, SummarizeError> {
        let summarizer = self.summarizer(which);
        let no_redaction = Redactor::default();
        let redactor = if self.config.mutation == Some(Mutation::LeakSecret) {
            &no_redaction
        } else {
            &self.redactor
        };
        let configured = self.config.context.summary_target_tokens;
        // Mutant (`unbounded-summary-request`): the request is not sized to the window at
        // all — neither its input nor the summary it asks for.
        let bound = summarizer
            .input_bound()
            .filter(|_| self.config.mutation != Some(Mutation::UnboundedSummaryRequest));
        let target_for = |end: usize| match bound {
            Some(bound) if end >= tail_start => configured.min((bound / 2).max(1)),
            Some(bound) => configured.min((bound / 3).max(1)),
            None => configured,
        };
        let mut staged: Option<Checkpoint> = previous.cloned();
        let mut start = covered;
        let mut calls = 0usize;
        let mut stages = 0usize;
        loop {
            let mut end = tail_start;
            let result = loop {
                let numbers = turn_numbers(self.session.turns(), start, end);
                calls += 1;
                let r = summarizer
                    .summarize(
                        SummaryRequest {
                            previous: staged.as_ref(),
                            covered: &entries[start..end],
                            first_index: start,
                            turn_numbers: &numbers,
                            target_tokens: target_for(end),
                            redactor,
                            estimator: &self.estimator,
                            model: &self.config.model.model,
                            later: Later::of(&entries[end..]),
                            instructions,
                        },
                        provider,
                    )
                    .await;
                match &r {
                    Ok(done) => *model_calls += done.model_calls,
                    // A rejected or failed answer was a model call too.
                    Err(SummarizeError::Invalid(_) | SummarizeError::Failed(_))
                        if summarizer.strategy() != SummaryStrategy::Extractive =>
                    {
                        *model_calls += 1
                    }
                    Err(_) => {}
                }
                // Too large: the turn boundary nearest the middle of what is left.
                let smaller = boundaries
                    .iter()
                    .copied()
                    .filter(|&b| b > start && b < end)
                    .min_by_key(|&b| b.abs_diff(start + (end - start) / 2));
                match (r, smaller) {
                    (Err(SummarizeError::InputTooLarge(_)), Some(b))
                        if calls < MAX_SUMMARY_ATTEMPTS =>
                    {
                        end = b
                    }
                    (r, _) => break r?,
                }
            };
            stages += 1;
            if end >= tail_start || stages >= MAX_SUMMARY_STAGES || calls >= MAX_SUMMARY_ATTEMPTS {
                if end < tail_start {
                    return Err(SummarizeError::InputTooLarge(format!(
                        "{stages} staged summarization requests ({calls} attempts) covered \
                         messages {covered}–{end} of {covered}–{tail_start}"
                    )));
                }
                return Ok(SummaryResult {
                    model_calls: *model_calls,
                    ..result
                });
            }
            // A stage: what the next part rolls up (never persisted).
            let (summary, opaque_item) = match result.content {
                SummaryContent::Text(t) => (Some(t), None),
                SummaryContent::Opaque(o) => (None, Some(o)),
            };
            staged = Some(Checkpoint {
                schema_version: CHECKPOINT_SCHEMA_VERSION,
                id: format!("stage-{end}"),
                strategy: summarizer.strategy(),
                summarized_through: end - 1,
                source_hash: range_hash(&entries[..end]),
                retained_tail_start: end,
                retained_tail_end: tail_start,
                retained_tail_hash: String::new(),
                summary,
                opaque_item,
                compaction_model_id: result.model_id.clone(),
                estimated_tokens: 0,
                source_message_count: end,
                created_at: String::new(),
                safety_labels: Vec::new(),
                previous_id: previous.map(|p| p.id.clone()),
            });
            start = end;
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) async fn transaction_inner(
        &mut self,
        trigger: Trigger,
        snapshot: &InstructionSnapshot,
        current_start: Option<usize>,
        target: Option<u64>,
        prune: bool,
        state: &mut TurnState,
        planned: Option<Fallback>,
        provider: &dyn Provider,
        events: &mut dyn EventSink,
    ) -> CompactionOutcome {
        let history_end = current_start.unwrap_or(self.session.entries().len());
        let previous = self.session.checkpoint().cloned();
        let covered = previous.as_ref().map(|c| c.covered_end()).unwrap_or(0);
        let spans = closed_turns(self.session.turns(), covered, history_end);
        if spans.is_empty() {
            return if previous.is_some() {
                CompactionOutcome::Unchanged {
                    reason: "already_compacted".into(),
                }
            } else if closed_turns(self.session.turns(), 0, history_end).is_empty() {
                CompactionOutcome::Failed {
                    reason: "no_safe_completed_span".into(),
                    detail: "no completed turn precedes the current one: an open turn and its \
                             pending tool calls cannot be summarized"
                        .into(),
                }
            } else {
                CompactionOutcome::Unchanged {
                    reason: "nothing_to_compact".into(),
                }
            };
        }
        let entries = self.session.entries().to_vec();
        let tokens = |s: usize, e: usize| -> u64 { self.range_tokens(s, e) };
        let mut candidates = tail_candidates(
            &spans,
            covered,
            history_end,
            self.config.context.recent_tail_tokens,
            &tokens,
        );
        if trigger == Trigger::Manual {
            // A manual compact keeps the configured verbatim tail; it never backs down.
            candidates.truncate(1);
        }
        candidates.retain(|&start| start > covered);
        if self.config.mutation == Some(Mutation::SplitToolPairs) {
            // Mutant: cut inside the turn, right after its first tool call.
            candidates = candidates
                .into_iter()
                .map(|start| mutant_mid_turn(&entries, start, history_end))
                .collect();
        }
        if candidates.is_empty() {
            return CompactionOutcome::Unchanged {
                reason: if previous.is_some() {
                    "already_compacted".into()
                } else {
                    "nothing_to_compact".into()
                },
            };
        }
        let before = self
            .project_with(snapshot, previous.as_ref(), current_start, prune)
            .0
            .budget
            .total;
        let mut tried = 0usize;
        // Once the configured strategy is unavailable or its summary rejected, the rest of
        // this transaction (every back-down candidate) uses the fallback.
        let mut fallback = planned;
        let mut summarized_from = covered;
        let mut smallest_total = None;
        for tail_start in candidates {
            if tried >= MAX_SUMMARIZER_CALLS_PER_TRANSACTION {
                break;
            }
            if !state
                .attempted_sources
                .insert(source_key(&entries[..tail_start]))
                && self.config.mutation != Some(Mutation::LoopCompaction)
            {
                continue;
            }
            tried += 1;
            self.summarizer_calls += 1;
            if self
                .config
                .faults
                .summarizer_failures
                .contains(&self.summarizer_calls)
            {
                return CompactionOutcome::Failed {
                    reason: "summarizer_failed".into(),
                    detail: format!(
                        "summarizer call {} failed (injected)",
                        self.summarizer_calls
                    ),
                };
            }
            let boundaries: Vec<usize> = spans.iter().map(|&(_, e)| e).collect();
            let mut model_calls = 0u32;
            let mut result = Err(SummarizeError::Failed("not run".into()));
            if fallback.is_none() {
                result = self
                    .summarize_staged(
                        Which::Configured,
                        previous.as_ref(),
                        &entries,
                        covered,
                        tail_start,
                        &boundaries,
                        &snapshot.text,
                        provider,
                        &mut model_calls,
                    )
                    .await;
                if let Err(e) = &result {
                    fallback = strategy::after_error(self.summarizer.strategy(), e);
                }
            }
            if fallback.is_some() {
                // The extractive summary stands in. It cannot read an opaque previous
                // checkpoint: then it rebuilds from the canonical transcript.
                let readable = previous.as_ref().filter(|p| p.summary.is_some());
                summarized_from = if readable.is_some() { covered } else { 0 };
                result = self
                    .summarize_staged(
                        Which::Fallback,
                        readable,
                        &entries,
                        summarized_from,
                        tail_start,
                        &boundaries,
                        &snapshot.text,
                        provider,
                        &mut model_calls,
                    )
                    .await;
            }
            let used = if fallback.is_some() {
                self.fallback.strategy()
            } else {
                self.summarizer.strategy()
            };
            let result = match result {
                Ok(r) => r,
                Err(e) => {
                    return CompactionOutcome::Failed {
                        reason: e.reason().into(),
                        detail: e.to_string(),
                    }
                }
            };
            let (summary, opaque_item) = match result.content {
                SummaryContent::Text(t) => (Some(t), None),
                SummaryContent::Opaque(o) => (None, Some(o)),
            };
            if let Some(t) = &summary {
                let limit = self.config.context.summary_target_tokens * 3 / 2 + 64;
                let size = self.estimator.count_text(t);
                if size > limit {
                    return CompactionOutcome::Failed {
                        reason: "summary_invalid".into(),
                        detail: format!("summary of {size} tokens exceeds the bound of {limit}"),
                    };
                }
            }
            let mut cp = Checkpoint {
                schema_version: CHECKPOINT_SCHEMA_VERSION,
                id: String::new(),
                strategy: used,
                summarized_through: tail_start - 1,
                source_hash: range_hash(&entries[..tail_start]),
                retained_tail_start: tail_start,
                retained_tail_end: history_end,
                retained_tail_hash: range_hash(&entries[tail_start..history_end]),
                summary,
                opaque_item,
                compaction_model_id: result.model_id.clone(),
                estimated_tokens: 0,
                source_message_count: tail_start,
                created_at: now_rfc3339(),
                safety_labels: SAFETY_LABELS.iter().map(|s| s.to_string()).collect(),
                previous_id: previous.as_ref().map(|p| p.id.clone()),
            };
            let memory = cp.memory_message();
            cp.estimated_tokens = self.estimator.message_tokens_uncached(&memory);
            cp.id = cp.compute_id();
            let after = self
                .project_with(snapshot, Some(&cp), current_start, prune)
                .0
                .budget
                .total;
            smallest_total = Some(smallest_total.map_or(after, |s: u64| s.min(after)));
            if let Some(target) = target {
                if after > target {
                    continue; // back down: fewer verbatim turns
                }
            }
            let reclaimed = before.saturating_sub(after);
            if trigger != Trigger::Manual
                && reclaimed < MIN_USEFUL_RECLAIM_TOKENS
                && self.config.mutation != Some(Mutation::LoopCompaction)
            {
                return CompactionOutcome::Failed {
                    reason: "no_progress".into(),
                    detail: format!(
                        "the checkpoint would reclaim {reclaimed} tokens (< {MIN_USEFUL_RECLAIM_TOKENS})"
                    ),
                };
            }
            self.checkpoint_writes += 1;
            if self
                .config
                .faults
                .checkpoint_write_crashes
                .contains(&self.checkpoint_writes)
            {
                self.session.crash_next_checkpoint_write();
            }
            let (content_hash, content_bytes) = match (&cp.summary, &cp.opaque_item) {
                (Some(s), _) => (
                    ctxbench_adapters::ContentHash::of_bytes(s.as_bytes()).to_hex(),
                    s.len() as u64,
                ),
                (None, Some(o)) => (o.hash().to_hex(), o.data.len() as u64),
                (None, None) => (String::new(), 0),
            };
            // Mutant (`opaque-in-trace`): the trace carries the opaque item itself.
            let content_hash = match (&cp.opaque_item, self.config.mutation) {
                (Some(o), Some(Mutation::OpaqueInTrace)) => o.data.clone(),
                _ => content_hash,
            };
            let completed = CompactionCompleted {
                trigger: trigger.as_str().into(),
                checkpoint_id: cp.id.clone(),
                previous_id: cp.previous_id.clone(),
                strategy: strategy::label(used, fallback.as_ref()),
                summarized_from: summarized_from as u64,
                summarized_through: cp.summarized_through as u64,
                tail_start: cp.retained_tail_start as u64,
                tail_end: cp.retained_tail_end as u64,
                reclaimed_tokens: reclaimed,
                summary_tokens: cp.estimated_tokens,
                summarizer_calls: result.model_calls,
                content_hash,
                content_bytes,
            };
            let id = cp.id.clone();
            if let Err(e) = self.session.set_checkpoint(cp) {
                return CompactionOutcome::Failed {
                    reason: "checkpoint_write_failed".into(),
                    detail: e.to_string(),
                };
            }
            events.emit(EngineEvent::CompactionCompleted(completed));
            if self.config.mutation == Some(Mutation::MutateTranscript) {
                // Mutant: destructive compaction rewrites what it summarized.
                for (i, e) in entries.iter().enumerate().take(tail_start).skip(covered) {
                    let mut m = e.message.clone();
                    m.content = format!("[compacted into {id}]");
                    self.session.mutant_rewrite(i, m);
                }
                self.forget_token_prefix(covered);
            }
            return CompactionOutcome::Compacted {
                checkpoint_id: id,
                reclaimed_tokens: reclaimed,
            };
        }
        if tried == 0 {
            return CompactionOutcome::Failed {
                reason: "no_progress".into(),
                detail: "every eligible prefix was already compacted for this input".into(),
            };
        }
        CompactionOutcome::Failed {
            reason: "does_not_fit".into(),
            detail: format!(
                "even with no verbatim history turns the request needs {} tokens, over the target {}",
                smallest_total.unwrap_or(before),
                target.unwrap_or(0)
            ),
        }
    }

    /// A manual `/compact` (or its dry run) between turns.
    pub async fn compact_manual(
        &mut self,
        dry_run: bool,
        provider: &dyn Provider,
        events: &mut dyn EventSink,
    ) -> CompactionOutcome {
        if self.config.mode != Mode::Compact {
            let reason = "mode_not_compact".to_string();
            events.emit(EngineEvent::CompactionUnchanged {
                trigger: Trigger::Manual.as_str().into(),
                reason: reason.clone(),
            });
            return CompactionOutcome::Unchanged { reason };
        }
        let snapshot = match self.load_instructions() {
            Ok(s) => s,
            Err(detail) => {
                return CompactionOutcome::Failed {
                    reason: "instructions_unreadable".into(),
                    detail,
                }
            }
        };
        if dry_run {
            return self.preview(&snapshot, events);
        }
        let mut state = TurnState::default();
        self.transaction(
            Trigger::Manual,
            &snapshot,
            None,
            None,
            false,
            &mut state,
            provider,
            events,
        )
        .await
    }

    pub(super) fn preview(
        &self,
        snapshot: &InstructionSnapshot,
        events: &mut dyn EventSink,
    ) -> CompactionOutcome {
        let entries = self.session.entries();
        let end = entries.len();
        let previous = self.session.checkpoint();
        let covered = previous.map(|c| c.covered_end()).unwrap_or(0);
        let spans = closed_turns(self.session.turns(), covered, end);
        let tokens = |s: usize, e: usize| -> u64 { self.range_tokens(s, e) };
        let (current, _) = self.project_with(snapshot, previous, None, false);
        let tail_start = tail_candidates(
            &spans,
            covered,
            end,
            self.config.context.recent_tail_tokens,
            &tokens,
        )
        .first()
        .copied()
        .unwrap_or(covered);
        let summarized =
            tokens(covered, tail_start) + previous.map(|c| c.estimated_tokens).unwrap_or(0);
        let projected = current
            .budget
            .total
            .saturating_sub(summarized)
            .saturating_add(if tail_start > covered || previous.is_some() {
                self.config.context.summary_target_tokens
            } else {
                0
            });
        events.emit(EngineEvent::CompactionPreview {
            from: covered as u64,
            to: tail_start as u64,
            tail_start: tail_start as u64,
            tail_end: end as u64,
            current_total: current.budget.total,
            projected_total: projected,
            available_input: current.budget.available_input,
        });
        CompactionOutcome::Unchanged {
            reason: "dry_run".into(),
        }
    }
}
