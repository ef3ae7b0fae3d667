//! One run (user turn): the physical requests — prepare, count, budget, send — the overflow
//! recovery and the tool rounds.

use super::*;

impl ReferenceEngine {
    pub(super) async fn play_rounds(
        &mut self,
        snapshot: &InstructionSnapshot,
        turn_start: usize,
        provider: &dyn Provider,
        tools: &mut dyn ToolExecutor,
        events: &mut dyn EventSink,
    ) -> TurnOutcome {
        let mutation = self.config.mutation;
        let mut state = TurnState::default();
        for round in 0..MAX_ROUNDS_PER_TURN {
            let mut attempt: u32 = 1;
            let mut retry_reason: Option<String> = None;
            let mut target: Option<u64> = None;
            let mut trigger = Trigger::Automatic;
            let response = loop {
                let reloaded;
                let snapshot = if mutation == Some(Mutation::ReloadInstructionsPerAttempt) {
                    // Mutant: re-read the instruction file before every physical request.
                    let text = self.load_instructions().map(|s| s.text).unwrap_or_default();
                    reloaded = InstructionSnapshot::of(format!(
                        "{text}\n(re-read before round {round}, attempt {attempt})"
                    ));
                    &reloaded
                } else {
                    snapshot
                };
                let mut prepared = self
                    .prepare(
                        snapshot, turn_start, round, target, trigger, &mut state, provider, events,
                    )
                    .await;
                // With an exact counter, the local estimate only plans: count the planned
                // request and learn the ratio; when the count shows it over the allowance in
                // compact mode, re-plan with that ratio — which compacts — and count again.
                // The budget then reports the count (categories rescaled proportionally).
                let mut counted = None;
                let mut counts = 0;
                while let Ok(p) = &prepared {
                    let Some(n) = self.exact_count(&p.request, provider).await else {
                        break;
                    };
                    counts += 1;
                    counted = Some(n);
                    if p.raw_total > 0 {
                        self.calibration = n as f64 / p.raw_total as f64;
                    }
                    let allowance = target
                        .unwrap_or(p.budget.available_input)
                        .min(p.budget.available_input);
                    let over = self.config.mode == Mode::Compact && n > allowance;
                    if !over || counts == MAX_EXACT_COUNTS_PER_REQUEST {
                        break;
                    }
                    counted = None;
                    prepared = self
                        .prepare(
                            snapshot, turn_start, round, target, trigger, &mut state, provider,
                            events,
                        )
                        .await;
                }
                let exact = counted.is_some();
                if let (Some(n), Ok(p)) = (counted, &mut prepared) {
                    p.budget = p.budget.scaled_to(n);
                }
                let projection = match prepared {
                    Ok(p) => p,
                    Err(outcome) => {
                        return match (attempt, outcome) {
                            // Recovery could not make room: the overflow stands, reported.
                            (2, TurnOutcome::LimitReached { reason, detail, .. }) => {
                                TurnOutcome::Failed {
                                    reason: "provider_overflow".into(),
                                    detail: format!(
                                        "overflow recovery failed ({reason}): {detail}"
                                    ),
                                }
                            }
                            (_, o) => o,
                        };
                    }
                };
                let budget = projection.budget;
                events.emit(EngineEvent::Budgeted(Budgeted {
                    round,
                    attempt,
                    model: self.config.model.model.clone(),
                    window_source: self.window_source().into(),
                    estimator: self.estimator.kind().as_str().into(),
                    estimation_method: if exact {
                        EstimationMethod::ProviderTokenizer
                    } else {
                        self.estimator.method()
                    }
                    .as_str()
                    .into(),
                    confidence: if exact {
                        Confidence::Exact
                    } else {
                        self.estimator.confidence()
                    }
                    .as_str()
                    .into(),
                    budget,
                    retained_messages: projection.retained_messages,
                    checkpoint_id: if self.config.mode == Mode::Compact {
                        self.session.checkpoint().map(|c| c.id.clone())
                    } else {
                        None
                    },
                    instruction_hash: snapshot.hash.to_hex(),
                    retry_reason: retry_reason.clone(),
                }));
                if self.config.mode == Mode::Warn {
                    if budget.mandatory() > budget.available_input
                        && mutation != Some(Mutation::IgnoreMandatoryLimit)
                    {
                        return self.limit(
                            events,
                            REASON_MANDATORY,
                            mandatory_detail(&budget),
                            budget,
                        );
                    }
                    if budget.over_budget() && mutation != Some(Mutation::SilentOverBudget) {
                        events.emit(EngineEvent::Warning {
                            round,
                            attempt,
                            total: budget.total,
                            available_input: budget.available_input,
                            over_by: budget.total - budget.available_input,
                        });
                    }
                }
                match provider.complete(&projection.request).await {
                    Ok(r) => {
                        self.learn_calibration(projection.raw_total, r.usage.input_tokens);
                        events.emit(EngineEvent::Usage {
                            round,
                            attempt,
                            estimated_input: budget.total,
                            provider_input: r.usage.input_tokens,
                            provider_output: r.usage.output_tokens,
                        });
                        break r;
                    }
                    Err(err) => {
                        let (limit, input_tokens, partial) = match &err {
                            ProviderError::ContextOverflow {
                                limit,
                                input_tokens,
                                partial_output,
                                ..
                            } => (*limit, *input_tokens, partial_output.clone()),
                            _ => (None, None, None),
                        };
                        events.emit(EngineEvent::ProviderError {
                            round,
                            attempt,
                            error_kind: err.kind().into(),
                            estimated_input: budget.total,
                            provider_limit: limit,
                            message: err.to_string(),
                        });
                        match err {
                            ProviderError::ContextOverflow { .. } if partial.is_some() => {
                                return TurnOutcome::Failed {
                                    reason: "provider_overflow_after_output".into(),
                                    detail: format!(
                                        "{err}; visible output was produced, so the attempt is not retried"
                                    ),
                                };
                            }
                            ProviderError::ContextOverflow { .. }
                                if self.config.mode == Mode::Compact
                                    && ((attempt == 1 && !state.overflow_recovered)
                                        || (mutation == Some(Mutation::RetryTwice)
                                            && attempt == 2)) =>
                            {
                                // One recovery per input: compact to a target scaled by how
                                // much the provider counted over our estimate, then retry the
                                // same admitted input (it is not appended again).
                                state.overflow_recovered = true;
                                let provider_count =
                                    input_tokens.unwrap_or(budget.total + budget.total / 10);
                                let ratio = (provider_count as f64 / budget.total.max(1) as f64)
                                    .max(1.0)
                                    + 0.02;
                                // Retrying the identical request is pointless: the retry must
                                // also be at least 10% smaller than the rejected one.
                                let shrink = (budget.total / 10).max(MIN_USEFUL_RECLAIM_TOKENS);
                                target = Some(
                                    ((budget.available_input as f64 / ratio) as u64)
                                        .min(budget.total.saturating_sub(shrink)),
                                );
                                trigger = Trigger::Overflow;
                                attempt += 1;
                                retry_reason = Some("provider_overflow".into());
                                if mutation == Some(Mutation::DuplicateInputOnRetry) {
                                    // Mutant: admit the user input a second time.
                                    let again = self.session.entries()[turn_start].message.clone();
                                    if let Err(e) = self.session.append(again) {
                                        return TurnOutcome::Errored {
                                            detail: e.to_string(),
                                        };
                                    }
                                }
                                continue;
                            }
                            ProviderError::ContextOverflow { .. } => {
                                return TurnOutcome::Failed {
                                    reason: "provider_overflow".into(),
                                    detail: format!(
                                        "{err} (estimated input {} of {} available; attempt {attempt})",
                                        budget.total, budget.available_input
                                    ),
                                };
                            }
                            ProviderError::Rejected { .. } => {
                                return TurnOutcome::Failed {
                                    reason: "provider_rejected".into(),
                                    detail: err.to_string(),
                                }
                            }
                            other => {
                                return TurnOutcome::Errored {
                                    detail: other.to_string(),
                                }
                            }
                        }
                    }
                }
            };
            let message = response.message;
            let calls = message.tool_calls.clone();
            let text = message.content.clone();
            if let Err(e) = self.session.append(message) {
                return TurnOutcome::Errored {
                    detail: e.to_string(),
                };
            }
            if calls.is_empty() {
                return TurnOutcome::Completed { reply: text };
            }
            for call in &calls {
                let out = tools.execute(call);
                if let Err(e) = self
                    .session
                    .append(Message::tool_result(call.id.clone(), out.content))
                {
                    return TurnOutcome::Errored {
                        detail: e.to_string(),
                    };
                }
            }
        }
        TurnOutcome::Failed {
            reason: "round_limit".into(),
            detail: format!("the model kept calling tools for {MAX_ROUNDS_PER_TURN} rounds"),
        }
    }
}
