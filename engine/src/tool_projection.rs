//! Tool-output projection (seed 000 §In-run context pressure, step 4).
//!
//! An older, completed tool interaction keeps its call/result pair in the request, but a
//! large result is replaced — in the request only, never in the transcript — by an explicit
//! bounded projection: tool name, success state, a truncation marker, the content hash, a
//! short excerpt, the result's few key lines (a setting, a version, a test outcome, an
//! error — what the agent looked the output up for, wherever it sat in the output; see
//! `summarize::extractive`), and any `archive://` references so the output stays
//! addressable. The newest round's results (what the model has not answered yet) are never
//! projected.

use ctxbench_adapters::estimate::RequestEstimator;
use ctxbench_adapters::{ContentHash, Message, Role};

use crate::session::Entry;

/// Results at or below this many estimated tokens are kept verbatim.
pub const PROJECTION_MIN_TOKENS: u64 = 120;
/// Characters of excerpt kept in a projection.
pub const EXCERPT_CHARS: usize = 160;
/// A result at most this large whose lines are mostly key lines (a table, a settings
/// listing) is data, not bulk, and is never projected.
pub const DATA_MAX_TOKENS: u64 = 1000;
/// Fewest key lines a projection may keep, and the characters each may take.
pub const PROJECTION_KEY_LINES: (usize, usize) = (3, 240);
/// A projection may keep one key line per this many tokens of the result (at least
/// [`PROJECTION_KEY_LINES`]`.0`, at most [`MAX_PROJECTION_KEY_LINES`]): a long file holds
/// more settings than a short one, and a fixed count loses the ones in its middle.
pub const TOKENS_PER_KEY_LINE: u64 = 100;
/// Most key lines a projection keeps.
pub const MAX_PROJECTION_KEY_LINES: usize = 40;

/// Project large tool results in `entries` except those at index ≥ `protect_from`.
/// Returns the (possibly) rewritten entries and how many results were projected.
pub fn project_tool_outputs(
    entries: &[Entry],
    protect_from: usize,
    estimator: &RequestEstimator,
) -> (Vec<Entry>, usize) {
    project_oldest(entries, protect_from, estimator, u64::MAX)
}

/// Project large tool results, **oldest first**, only until the projections have saved
/// `excess` tokens (estimated per message); later results stay verbatim, and so does data
/// ([`DATA_MAX_TOKENS`]). Pressure is met
/// with the least loss: what the agent read most recently is what it most likely still
/// needs, and a projection keeps only a result's key lines. `u64::MAX` projects every
/// eligible result. Returns the entries and how many results were projected.
pub fn project_oldest(
    entries: &[Entry],
    protect_from: usize,
    estimator: &RequestEstimator,
    excess: u64,
) -> (Vec<Entry>, usize) {
    let mut out = Vec::with_capacity(entries.len());
    let mut projected = 0;
    let mut saved = 0u64;
    for (i, e) in entries.iter().enumerate() {
        if saved < excess && i < protect_from && e.message.role == Role::Tool {
            // Cached per message: pruning runs before every request once a session is
            // large, so it must not re-tokenize the history.
            let tokens = estimator.message_tokens(&e.message, &e.hash);
            if tokens > PROJECTION_MIN_TOKENS {
                let name = tool_name(entries, i).unwrap_or("unknown");
                let p = projected_entry(e, name, tokens);
                if p.hash != e.hash {
                    saved = saved.saturating_add(
                        tokens.saturating_sub(estimator.message_tokens(&p.message, &p.hash)),
                    );
                    out.push(p);
                    projected += 1;
                    continue;
                }
            }
        }
        out.push(e.clone());
    }
    (out, projected)
}

/// Projections already made, by (result's content hash, tool name, tokens): a pure function
/// of those, and pruning re-projects every older result before every request, so a long
/// session would otherwise redo the same projections (key-line extraction) turn after turn.
/// Bounded: two generations of [`MEMO_GENERATION`] entries.
type Memo = std::collections::HashMap<(ContentHash, String, u64), Entry>;
const MEMO_GENERATION: usize = 4096;
static MEMO: std::sync::OnceLock<std::sync::Mutex<(Memo, Memo)>> = std::sync::OnceLock::new();

fn memo() -> std::sync::MutexGuard<'static, (Memo, Memo)> {
    MEMO.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

fn projected_entry(e: &Entry, name: &str, tokens: u64) -> Entry {
    let key = (e.hash, name.to_string(), tokens);
    {
        let mut memo = memo();
        let (young, old) = &mut *memo;
        if let Some(hit) = young.get(&key) {
            return hit.clone();
        }
        if let Some(hit) = old.remove(&key) {
            young.insert(key, hit.clone());
            return hit;
        }
    }
    let entry = if tokens <= DATA_MAX_TOKENS
        && crate::summarize::extractive::mostly_key_lines(&e.message.content)
    {
        // Data (a table, a listing of settings) is already as dense as a projection
        // would be: it stays whole.
        e.clone()
    } else {
        let message = projection(&e.message, name, tokens, &e.hash.to_hex());
        let hash = message.content_hash();
        Entry { message, hash }
    };
    let mut memo = memo();
    let (young, old) = &mut *memo;
    if young.len() >= MEMO_GENERATION {
        *old = std::mem::take(young);
    }
    young.insert(key, entry.clone());
    entry
}

fn tool_name(entries: &[Entry], result_index: usize) -> Option<&str> {
    let id = entries[result_index].message.tool_call_id.as_deref()?;
    entries[..result_index].iter().rev().find_map(|e| {
        e.message
            .tool_calls
            .iter()
            .find(|c| c.id == id)
            .map(|c| c.name.as_str())
    })
}

/// The projection of one tool result.
pub fn projection(original: &Message, tool: &str, tokens: u64, hash_hex: &str) -> Message {
    let ok = !original
        .content
        .trim_start()
        .to_lowercase()
        .starts_with("error");
    let excerpt: String = original
        .content
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(EXCERPT_CHARS)
        .collect();
    let refs: Vec<&str> = original
        .content
        .split_whitespace()
        .filter(|w| w.starts_with("archive://"))
        .collect();
    let (min_lines, line_chars) = PROJECTION_KEY_LINES;
    let max_lines =
        ((tokens / TOKENS_PER_KEY_LINE) as usize).clamp(min_lines, MAX_PROJECTION_KEY_LINES);
    let key_lines: Vec<String> =
        crate::summarize::extractive::tool_key_lines(&original.content, max_lines)
            .into_iter()
            .filter(|k| !excerpt.contains(k.text.as_str()))
            .map(|k| {
                if k.text.chars().count() > line_chars {
                    format!("{}…", k.text.chars().take(line_chars).collect::<String>())
                } else {
                    k.text
                }
            })
            .collect();
    let key_lines = if key_lines.is_empty() {
        String::new()
    } else {
        format!(" · key lines: {}", key_lines.join(" | "))
    };
    let mut text = format!(
        "[tool output projected · tool={tool} · {} · truncated: {tokens} tokens not shown · sha256:{} · excerpt: {excerpt}…{key_lines}]",
        if ok { "ok" } else { "error" },
        &hash_hex[..16.min(hash_hex.len())],
    );
    if !refs.is_empty() {
        text.push_str(&format!(" refs: {}", refs.join(" ")));
    }
    Message::tool_result(original.tool_call_id.clone().unwrap_or_default(), text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctxbench_adapters::estimate::EstimatorKind;
    use ctxbench_adapters::ToolCall;

    fn e(m: Message) -> Entry {
        let hash = m.content_hash();
        Entry { message: m, hash }
    }

    #[test]
    fn large_old_results_are_projected_pairs_and_newest_kept() {
        let big =
            "fn main() { println!(\"hello\"); }\n".repeat(80) + " see archive://runs/1/out.log";
        let call = Message {
            role: Role::Assistant,
            content: String::new(),
            tool_calls: vec![ToolCall {
                id: "c1".into(),
                name: "read_file".into(),
                arguments: serde_json::json!({"path": "a.rs"}),
            }],
            tool_call_id: None,
        };
        let entries = vec![
            e(Message::user("read")),
            e(call.clone()),
            e(Message::tool_result("c1", big.clone())),
            e(Message::tool_result("c1", big)),
        ];
        let est = RequestEstimator::new(EstimatorKind::Cl100kBase);
        let (out, n) = project_tool_outputs(&entries, 3, &est);
        assert_eq!(n, 1);
        assert_eq!(out[2].message.tool_call_id.as_deref(), Some("c1"));
        assert!(out[2].message.content.contains("tool=read_file"));
        assert!(out[2].message.content.contains("archive://runs/1/out.log"));
        assert_eq!(out[3], entries[3], "protected result untouched");
        assert!(est.count_text(&out[2].message.content) < 120);
    }

    #[test]
    fn pressure_projects_the_oldest_results_first_and_only_as_far_as_needed() {
        let big = "fn main() { println!(\"hello\"); }\n".repeat(80);
        let mut entries = vec![e(Message::user("read"))];
        for i in 0..4 {
            entries.push(e(Message {
                role: Role::Assistant,
                content: String::new(),
                tool_calls: vec![ToolCall {
                    id: format!("c{i}"),
                    name: "read_file".into(),
                    arguments: serde_json::json!({"path": "a.rs"}),
                }],
                tool_call_id: None,
            }));
            entries.push(e(Message::tool_result(format!("c{i}"), big.clone())));
        }
        let est = RequestEstimator::new(EstimatorKind::Cl100kBase);
        let one = est.message_tokens(&entries[2].message, &entries[2].hash);
        // Saving a little more than one result's worth takes exactly two, the oldest.
        let (out, n) = project_oldest(&entries, entries.len(), &est, one);
        assert_eq!(n, 2);
        assert!(out[2].message.content.starts_with("[tool output projected"));
        assert!(out[4].message.content.starts_with("[tool output projected"));
        assert_eq!(out[6], entries[6]);
        assert_eq!(out[8], entries[8]);
        let (_, all) = project_tool_outputs(&entries, entries.len(), &est);
        assert_eq!(all, 4);
    }

    #[test]
    fn a_table_is_data_and_stays_whole() {
        let mut table = String::from("| service | owner | tier |\n|---|---|---|\n");
        for i in 0..24 {
            table.push_str(&format!("| svc-{i} | owner{} | tier-{} |\n", i * 7, i % 3));
        }
        let entries = vec![
            e(Message::user("read")),
            e(Message::tool_result("c1", table.clone())),
        ];
        let est = RequestEstimator::new(EstimatorKind::Cl100kBase);
        assert!(est.message_tokens(&entries[1].message, &entries[1].hash) > PROJECTION_MIN_TOKENS);
        let (out, n) = project_tool_outputs(&entries, 2, &est);
        assert_eq!(n, 0);
        assert_eq!(out[1].message.content, table);
    }

    #[test]
    fn a_projection_keeps_the_key_lines_of_the_output() {
        let file = format!(
            "{}MAX_RETRIES = 7\n{}",
            "    let v = compute(x);\n".repeat(40),
            "    step(v);\n".repeat(40)
        );
        let m = projection(&Message::tool_result("c2", file), "read_file", 600, "abcd");
        assert!(
            m.content.contains(" · key lines: MAX_RETRIES = 7]"),
            "{}",
            m.content
        );
        let est = RequestEstimator::new(EstimatorKind::Cl100kBase);
        assert!(est.count_text(&m.content) < 120);
    }
}
