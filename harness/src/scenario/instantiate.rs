//! [`Scenario::instantiate`]: one trial's flat script and the fake provider's script.
//!
//! Pure and deterministic: the output depends only on the scenario, the seed and the
//! counter. Filler is keyed by the step's path in the unexpanded script plus the repeat
//! iterations that led to it (e.g. `/3.17/1/call0`), so editing one step does not reshuffle
//! the filler of unrelated steps, and no mode or wall-clock input is involved — the same
//! seed gives byte-identical steps in every mode.

use ctxbench_adapters::fake::{FakeFact, FakeFault, FakeReply, FakeScript, FakeToolCall, FakeTurn};
use ctxbench_adapters::fake::{FakeHostile, FakeSummaryDefect};
use serde_json::{Map, Value};

use super::compiled::{Fault, Instance, Scenario, ScriptedCall, Step, SummaryDefect, Turn};
use super::generate::{self, Counter};
use super::model::{ArgValue, Content, InstructionEdit, ScriptStep};
use super::template::{Piece, Template};
use super::PROBE_LEAD_IN;

impl Scenario {
    /// Expands this scenario for one trial: repeat blocks unrolled, placeholders
    /// substituted, filler generated from `seed`, turns grouped; plus the [`FakeScript`]
    /// the fake provider plays (turns, facts, faults).
    ///
    /// `counter` is the fake provider's true tokenizer; filler sizes are measured with it.
    /// Same scenario + seed + counter → byte-identical [`Instance`].
    pub fn instantiate(&self, seed: u64, counter: &dyn Fn(&str) -> u64) -> Instance {
        self.expand(seed, None, Counter::general(counter))
    }

    /// [`Scenario::instantiate_trial`] with a counter that whitespace separates (the fake
    /// provider's tokenizer; see [`Counter::separable`]): the same instance, sized without
    /// recounting whole filler prefixes.
    pub fn instantiate_trial_separable(
        &self,
        seed: u64,
        trial: u32,
        counter: &dyn Fn(&str) -> u64,
    ) -> Instance {
        self.expand(
            seed,
            self.trial_variation(trial),
            Counter::separable(counter),
        )
    }

    /// [`Scenario::instantiate`] for trial `trial` of a run: trial 0 plays the script as
    /// written; later trials of a scenario with `vary:` scale its filler sizes and repeat
    /// counts by seeded factors (see [`super::Variation`]).
    pub fn instantiate_trial(
        &self,
        seed: u64,
        trial: u32,
        counter: &dyn Fn(&str) -> u64,
    ) -> Instance {
        self.expand(seed, self.trial_variation(trial), Counter::general(counter))
    }

    /// Trial `trial`'s variation: none for trial 0 or a scenario without `vary:`.
    fn trial_variation(&self, trial: u32) -> Option<super::Variation> {
        (trial > 0 && self.vary.varies()).then_some(self.vary)
    }

    fn expand(&self, seed: u64, vary: Option<super::Variation>, counter: Counter<'_>) -> Instance {
        let mut x = Expander {
            scenario: self,
            seed,
            vary,
            counter,
            steps: Vec::new(),
            open: None,
            instructions: self.instructions.clone(),
        };
        x.walk(&self.script, "", None);
        x.close();
        let fake = fake_script(self, &x.steps, seed);
        Instance {
            steps: x.steps,
            fake,
        }
    }
}

/// The text of a probe turn: a fixed lead-in, then `N. question` lines.
pub(crate) fn probe_text(scenario: &Scenario, ids: &[String]) -> String {
    let mut s = String::from(PROBE_LEAD_IN);
    for (n, id) in ids.iter().enumerate() {
        let q = scenario
            .facts
            .iter()
            .find(|f| &f.id == id)
            .map(|f| f.question.as_str())
            .unwrap_or_default();
        s.push_str(&format!("\n{}. {q}", n + 1));
    }
    s
}

struct Expander<'a> {
    scenario: &'a Scenario,
    seed: u64,
    /// This trial's variation, if it varies the script.
    vary: Option<super::Variation>,
    counter: Counter<'a>,
    steps: Vec<Step>,
    open: Option<Turn>,
    /// The instruction text as edited so far (edits are cumulative).
    instructions: String,
}

impl Expander<'_> {
    fn close(&mut self) {
        if let Some(t) = self.open.take() {
            self.steps.push(Step::Turn(t));
        }
    }

    fn walk(&mut self, steps: &[ScriptStep], path: &str, index: Option<u64>) {
        for (k, step) in steps.iter().enumerate() {
            let key = format!("{path}/{k}");
            match step {
                ScriptStep::User(t) => {
                    self.close();
                    let user = self.render(t, index, &key);
                    self.open = Some(Turn {
                        user,
                        tool_rounds: Vec::new(),
                        reply: None,
                        probe: None,
                    });
                }
                ScriptStep::Probe(ids) => {
                    self.close();
                    self.steps.push(Step::Turn(Turn {
                        user: probe_text(self.scenario, ids),
                        tool_rounds: Vec::new(),
                        reply: None,
                        probe: Some(ids.clone()),
                    }));
                }
                ScriptStep::Assistant(c) => {
                    let text = self.content(c, index, &key);
                    if let Some(mut t) = self.open.take() {
                        t.reply = Some(text);
                        self.steps.push(Step::Turn(t));
                    }
                }
                ScriptStep::ToolCalls(calls) => {
                    let round: Vec<ScriptedCall> = calls
                        .iter()
                        .enumerate()
                        .map(|(j, c)| ScriptedCall {
                            name: c.name.clone(),
                            arguments: self.args(&c.args, index, &format!("{key}/call{j}/args")),
                            result: self.content(&c.result, index, &format!("{key}/call{j}")),
                        })
                        .collect();
                    if let Some(t) = self.open.as_mut() {
                        t.tool_rounds.push(round);
                    }
                }
                ScriptStep::Restart => {
                    self.close();
                    self.steps.push(Step::Restart);
                }
                ScriptStep::EditInstructions(edit) => {
                    self.close();
                    let text = match edit {
                        InstructionEdit::Set(t) => self.render(t, index, &key),
                        InstructionEdit::Append(t) => {
                            let add = self.render(t, index, &key);
                            let mut s = self.instructions.clone();
                            if !s.is_empty() && !s.ends_with('\n') {
                                s.push('\n');
                            }
                            s.push_str(&add);
                            s
                        }
                    };
                    self.instructions = text.clone();
                    self.steps.push(Step::EditInstructions { text });
                }
                ScriptStep::Compact { dry_run } => {
                    self.close();
                    self.steps.push(Step::Compact { dry_run: *dry_run });
                }
                ScriptStep::CorruptCheckpoint(how) => {
                    self.close();
                    self.steps.push(Step::CorruptCheckpoint { how: *how });
                }
                ScriptStep::Repeat { times, steps } => {
                    let times = self.scaled(*times, |v| v.repeats, &key);
                    for r in 0..times {
                        self.walk(steps, &format!("{key}.{r}"), Some(r));
                    }
                }
            }
        }
    }

    /// `n` scaled by this trial's seeded factor for `key` in `[1 − x, 1 + x]` (x chosen by
    /// `spread`), at least 1 when `n` was; `n` itself without variation.
    fn scaled(&self, n: u64, spread: fn(&super::Variation) -> f64, key: &str) -> u64 {
        match self.vary {
            Some(v) if spread(&v) > 0.0 && n > 0 => generate::vary(self.seed, key, n, spread(&v)),
            _ => n,
        }
    }

    fn render(&self, t: &Template, index: Option<u64>, key: &str) -> String {
        let mut out = String::new();
        for (n, p) in t.pieces.iter().enumerate() {
            match p {
                Piece::Text(s) => out.push_str(s),
                Piece::Index { zero_based } => {
                    let i = index.unwrap_or(0);
                    out.push_str(&if *zero_based { i } else { i + 1 }.to_string());
                }
                Piece::Fact { id, version } => {
                    if let Some(s) = self
                        .scenario
                        .facts
                        .iter()
                        .find(|f| &f.id == id)
                        .and_then(|f| f.statements.get(*version))
                    {
                        out.push_str(s);
                    }
                }
                Piece::Hostile { id } => {
                    if let Some(h) = self.scenario.hostile.iter().find(|h| &h.id == id) {
                        out.push_str(&h.text);
                    }
                }
                Piece::Filler { tokens, kind } => {
                    let key = format!("{key}#{n}");
                    let tokens = self.scaled(*tokens, |v| v.sizes, &key);
                    out.push_str(&generate::filler(
                        self.seed,
                        &key,
                        tokens,
                        *kind,
                        self.counter,
                    ))
                }
            }
        }
        out
    }

    fn content(&self, c: &Content, index: Option<u64>, key: &str) -> String {
        match c {
            Content::Text(t) => self.render(t, index, key),
            Content::Filler { tokens, kind } => {
                let tokens = self.scaled(*tokens, |v| v.sizes, key);
                generate::filler(self.seed, key, tokens, *kind, self.counter)
            }
        }
    }

    fn args(&self, v: &ArgValue, index: Option<u64>, key: &str) -> Value {
        match v {
            ArgValue::Plain(v) => v.clone(),
            ArgValue::Text(t) => Value::String(self.render(t, index, key)),
            ArgValue::Array(a) => {
                Value::Array(a.iter().map(|x| self.args(x, index, key)).collect())
            }
            ArgValue::Object(o) => {
                let mut m = Map::new();
                for (k, x) in o {
                    m.insert(k.clone(), self.args(x, index, key));
                }
                Value::Object(m)
            }
        }
    }
}

/// What the fake provider plays: one [`FakeTurn`] per turn (tool rounds, then the final
/// text or the probe), every fact with all its statements, the provider faults, the
/// summary defects and whether it offers native compaction. Engine faults (summarizer
/// failure, crash during a checkpoint write) are not the provider's: they stay in
/// [`Scenario::faults`] for the driver to hand to the engine.
fn fake_script(scenario: &Scenario, steps: &[Step], seed: u64) -> FakeScript {
    let turns = steps
        .iter()
        .filter_map(|s| match s {
            Step::Turn(t) => Some(t),
            _ => None,
        })
        .map(|t| {
            let mut replies: Vec<FakeReply> = t
                .tool_rounds
                .iter()
                .map(|round| FakeReply::ToolCalls {
                    calls: round
                        .iter()
                        .map(|c| FakeToolCall {
                            name: c.name.clone(),
                            arguments: c.arguments.clone(),
                        })
                        .collect(),
                })
                .collect();
            if let Some(ids) = &t.probe {
                replies.push(FakeReply::Probe { facts: ids.clone() });
            } else if let Some(text) = &t.reply {
                replies.push(FakeReply::Text { text: text.clone() });
            }
            FakeTurn {
                user: t.user.clone(),
                replies,
            }
        })
        .collect();
    FakeScript {
        model: scenario.model.model.clone(),
        context_window: scenario.model.context_window,
        turns,
        facts: scenario
            .facts
            .iter()
            .map(|f| FakeFact {
                id: f.id.clone(),
                statements: f.statements.clone(),
                values: f.values.clone(),
                about: f.about.clone(),
            })
            .collect(),
        hostile: scenario
            .hostile
            .iter()
            .map(|h| FakeHostile {
                id: h.id.clone(),
                text: h.text.clone(),
                // Where the user says it, saying it is not laundering.
                origins: steps
                    .iter()
                    .filter_map(|s| match s {
                        Step::Turn(t) if t.user.contains(&h.text) => Some(t.user.clone()),
                        _ => None,
                    })
                    .collect(),
            })
            .collect(),
        faults: scenario
            .faults
            .iter()
            .filter_map(|f| match f {
                Fault::ProviderOverflow { at_request } => Some(FakeFault::OverflowAtRequest {
                    request: *at_request,
                }),
                Fault::OverflowAfterPartialOutput { at_request } => {
                    Some(FakeFault::OverflowAfterPartialOutput {
                        request: *at_request,
                    })
                }
                Fault::SummarizerFailure { .. }
                | Fault::CrashDuringCheckpointWrite { .. }
                | Fault::SummaryDefect { .. } => None,
            })
            .collect(),
        summary_profile: scenario.summary_profile,
        summary_defects: scenario
            .faults
            .iter()
            .filter_map(|f| match f {
                Fault::SummaryDefect { defect } => Some(defect),
                _ => None,
            })
            .flat_map(|defect| match defect {
                // The scenario names a fact; the fake is told only which texts to drop.
                SummaryDefect::DropFact { fact } => scenario
                    .facts
                    .iter()
                    .filter(|f| &f.id == fact)
                    .flat_map(|f| f.statements.iter())
                    .map(|t| FakeSummaryDefect::DropMatching { text: t.clone() })
                    .collect::<Vec<_>>(),
                SummaryDefect::InventConstraint { text } => {
                    vec![FakeSummaryDefect::InventConstraint { text: text.clone() }]
                }
                SummaryDefect::CarryApproval => vec![FakeSummaryDefect::CarryHostile],
                SummaryDefect::Truncate => vec![FakeSummaryDefect::Truncate],
            })
            .collect(),
        native_compaction: scenario.native_compaction(),
        token_scale: scenario.token_scale,
        // What the system under test declares is filled in by the driver.
        memory: None,
        summary_marker: None,
        instructions: std::iter::once(scenario.instructions.clone())
            .chain(steps.iter().filter_map(|s| match s {
                Step::EditInstructions { text } => Some(text.clone()),
                _ => None,
            }))
            .collect(),
        seed,
    }
}
