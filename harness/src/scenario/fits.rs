//! `expect.outcome: {warn: success}` (or `off`, or a bare `success`, which covers every mode)
//! declares that a mode that never compacts completes the script: its last request carries
//! the whole session. A scenario whose script cannot fit its own window that way is
//! mislabelled — it would make the pass-rate and completion comparisons against `warn`
//! judge sessions the baseline cannot complete (issue #14, L5) — and is rejected.
//!
//! **The bound.** An exact check would need every message's provider count, which depends
//! on the seeded filler, the placeholders and the system under test's own framing. The
//! check uses a *lower* bound on what the last request of a non-compacting mode must carry,
//! and the most lenient limit, so a scenario that really fits is never rejected:
//!
//! - only generated filler counts (user text, assistant text, tool results), each piece at
//!   its declared size less [`FILLER_SLACK`] tokens (filler is sized by the fake provider's
//!   tokenizer to within one word below its size); literal text, tool calls, instructions,
//!   tool schemas and framing count zero;
//! - only the steps after the last `restart` and up to the last turn (a turn's user message
//!   or a probe); trailing steps are left out;
//! - the script as written (trial 0, which every run plays): `vary:` only adds larger
//!   sessions;
//! - the provider's count is that × `provider.token_scale` when the scale is below 1;
//! - it must exceed the **whole** `model.context_window` (not the input budget: `off` and
//!   `warn` send over-budget requests, and the provider decides at its window).

use super::compiled::Scenario;
use super::diagnostics::Reporter;
use super::model::{Content, ScriptStep};
use super::template::{Piece, Template};
use super::validate::Compiled;
use super::ExpectedOutcome;
use ctxbench_sut::Mode;

/// Tokens a filler piece may fall short of its declared size (one word of the fake
/// tokenizer costs at most a few; this is generous).
pub(crate) const FILLER_SLACK: u64 = 8;

fn template_lower(t: &Template) -> u64 {
    t.pieces
        .iter()
        .map(|p| match p {
            Piece::Filler { tokens, .. } => tokens.saturating_sub(FILLER_SLACK),
            _ => 0,
        })
        .fold(0, u64::saturating_add)
}

fn content_lower(c: &Content) -> u64 {
    match c {
        Content::Text(t) => template_lower(t),
        Content::Filler { tokens, .. } => tokens.saturating_sub(FILLER_SLACK),
    }
}

fn has_turn(s: &ScriptStep) -> bool {
    match s {
        ScriptStep::User(_) | ScriptStep::Probe(_) => true,
        ScriptStep::Repeat { steps, .. } => steps.iter().any(has_turn),
        _ => false,
    }
}

/// Lower bound of the filler every copy of `s` adds to the conversation.
fn step_lower(s: &ScriptStep) -> u64 {
    match s {
        ScriptStep::User(t) => template_lower(t),
        ScriptStep::Assistant(c) => content_lower(c),
        ScriptStep::ToolCalls(calls) => calls
            .iter()
            .map(|c| content_lower(&c.result))
            .fold(0, u64::saturating_add),
        ScriptStep::Repeat { times, steps } => steps
            .iter()
            .map(step_lower)
            .fold(0u64, u64::saturating_add)
            .saturating_mul(*times),
        ScriptStep::Probe(_)
        | ScriptStep::Restart
        | ScriptStep::EditInstructions(_)
        | ScriptStep::Compact { .. }
        | ScriptStep::CorruptCheckpoint(_) => 0,
    }
}

/// Lower bound of the filler the last turn's request of `steps` carries: everything up to
/// and including the last step holding a turn (inside a repeat: its earlier copies whole,
/// the last one up to its own last turn).
fn sent_lower(steps: &[ScriptStep]) -> u64 {
    let Some(last) = steps.iter().rposition(has_turn) else {
        return 0;
    };
    let before = steps[..last]
        .iter()
        .map(step_lower)
        .fold(0u64, u64::saturating_add);
    let tail = match &steps[last] {
        ScriptStep::Repeat { times, steps: body } => body
            .iter()
            .map(step_lower)
            .fold(0u64, u64::saturating_add)
            .saturating_mul(times.saturating_sub(1))
            .saturating_add(sent_lower(body)),
        other => step_lower(other),
    };
    before.saturating_add(tail)
}

/// The lower bound of the module docs: tokens the last request of a non-compacting mode
/// carries at least (provider count).
pub(crate) fn uncompacted_lower_bound(s: &Scenario) -> u64 {
    let from = s
        .script
        .iter()
        .rposition(|st| matches!(st, ScriptStep::Restart))
        .map_or(0, |i| i + 1);
    let filler = sent_lower(&s.script[from..]);
    if s.token_scale.is_finite() && s.token_scale > 0.0 && s.token_scale < 1.0 {
        (filler as f64 * s.token_scale).floor() as u64
    } else {
        filler
    }
}

/// Rejects `expect.outcome` `success` for `off` or `warn` when the script cannot fit the
/// window uncompacted (see the module docs for the bound).
pub(crate) fn check_uncompacted_success_fits(c: &Compiled, rep: &mut Reporter<'_>) {
    let s = &c.scenario;
    let claimed: Vec<&str> = [Mode::Off, Mode::Warn]
        .into_iter()
        .filter(|m| s.modes.contains(m))
        .filter(|m| matches!(s.expect.outcome_for(*m), ExpectedOutcome::Success))
        .map(|m| m.as_str())
        .collect();
    if claimed.is_empty() {
        return;
    }
    let lower = uncompacted_lower_bound(s);
    let window = s.model.context_window;
    if lower <= window {
        return;
    }
    rep.error(
        c.outcome_at.or(c.id_at),
        format!(
            "expected outcome `success` for {} cannot hold: a mode that never compacts sends \
             the whole session, and the script's generated filler alone is at least {lower} \
             tokens by its last turn (each filler piece less {FILLER_SLACK}, after the last \
             restart), more than the whole context window of {window}",
            claimed
                .iter()
                .map(|m| format!("`{m}`"))
                .collect::<Vec<_>>()
                .join(" and ")
        ),
        Some(format!(
            "`{}` for {} (e.g. `outcome: {{off: any, warn: any, compact: success}}`), or a \
             shorter script / larger `model.context_window`",
            "any",
            claimed.join(" and ")
        )),
    );
}

#[cfg(test)]
mod tests {
    /// A script of `reads` tool reads of `size` filler tokens each, in a 16k window.
    fn scenario(reads: u64, size: u64, outcome: &str, tail: &str) -> String {
        format!(
            r#"id: outgrows
model: {{context_window: 16384, max_output: 1024}}
tools:
  - name: read_file
    description: Read a file.
    parameters: {{type: object, properties: {{path: {{type: string}}}}}}
script:
  - user: "Start."
  - repeat: {reads}
    steps:
      - user: "Read part {{i}}."
      - tool_calls:
          - call: {{name: read_file, args: {{path: "p{{i}}.rs"}}}}
            result: {{filler: {{tokens: {size}, kind: code}}}}
      - assistant: "Read it."
{tail}expect:
  outcome: {outcome}
"#
        )
    }

    #[test]
    fn uncompacted_success_that_cannot_fit_the_window_is_rejected_with_its_location() {
        // 20 reads of 1,000 filler tokens; the last read follows the last turn's user message,
        // so at least 19 × 992 = 18,848 > 16,384.
        let text = scenario(20, 1000, "{off: any, warn: success, compact: success}", "");
        let err = super::super::load_str("o.yaml", &text)
            .expect_err("warn cannot complete it")
            .to_string();
        assert!(err.starts_with("o.yaml:17:12: "), "{err}");
        assert!(err.contains("`success` for `warn` cannot hold"), "{err}");
        assert!(err.contains("at least 18848 tokens"), "{err}");
        assert!(err.contains("context window of 16384"), "{err}");
        // A bare `success` claims every mode, `off` and `warn` among them.
        let err = super::super::load_str("o.yaml", &scenario(20, 1000, "success", ""))
            .expect_err("bare success")
            .to_string();
        assert!(err.contains("for `off` and `warn`"), "{err}");
        // Left to the graders in the modes that never compact: valid.
        super::super::load_str(
            "o.yaml",
            &scenario(20, 1000, "{off: any, warn: any, compact: success}", ""),
        )
        .expect("compact alone is claimed");
    }

    #[test]
    fn the_bound_is_conservative() {
        // 15 × 992 = 14,880 ≤ 16,384 by the last turn: not rejected
        // (the provider and the graders decide).
        super::super::load_str("o.yaml", &scenario(16, 1000, "success", ""))
            .expect("within the window by the lower bound");
        // A restart resets what the bound counts (a runtime may reload less than it had).
        let restarted = scenario(
            20,
            1000,
            "success",
            "  - restart: {}\n  - user: \"Go on.\"\n  - assistant: \"Ok.\"\n",
        );
        super::super::load_str("o.yaml", &restarted).expect("only steps after the restart count");
    }

    #[test]
    fn every_builtin_scenario_that_claims_warn_success_fits_by_the_bound() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios");
        let mut claimed = 0;
        for entry in std::fs::read_dir(dir).expect("scenarios dir") {
            let path = entry.expect("entry").path();
            if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("read");
            let s = super::super::load_str(&path.display().to_string(), &text)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            if matches!(
                s.expect.outcome_for(ctxbench_sut::Mode::Warn),
                super::ExpectedOutcome::Success
            ) {
                claimed += 1;
                assert!(super::uncompacted_lower_bound(&s) <= s.model.context_window);
            }
        }
        assert!(
            claimed >= 5,
            "{claimed} built-in scenarios claim warn success"
        );
    }
}
