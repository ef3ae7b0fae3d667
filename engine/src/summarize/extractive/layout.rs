//! Budget allocation and the written summary.
//!
//! The summary must stay within `summary_target_tokens`. After the header and the fixed
//! lines (archive references always; the newest files touched, as many as fit a sixteenth
//! of the budget), each kind of material gets a guaranteed share of what is left, in this
//! order:
//!
//! | section | share | why first |
//! | --- | --- | --- |
//! | task state | 15 % | the newest request and where the work stood are what a resumed agent needs first (when the retained tail holds a newer turn, there is little of it) |
//! | rules and facts the user stated | 35 % | the constraints real agents forget |
//! | tool key lines | 20 % | values the agent looked up and will need again |
//! | assistant answers | 30 % | what the agent concluded and told the user: diagnoses, decisions, computed numbers |
//!
//! (Measured on suites that compact four to six times: answers at 15 % lost most of the
//! diagnoses by the last checkpoint; 30 % with task state at 15 % kept the most overall.)
//!
//! Within a section, items go by rank (newer first on ties); the best item may take up to
//! twice the section's share, so a long diagnosis does not lose to a shorter, lesser
//! sentence that happens to fit. A section that needs less
//! leaves its share to the rest, which is then filled by rank across every section —
//! ordinary prose (no value, rule, decision or outcome) taking at most 10 %. No
//! single message may take more than a quarter of the budget beyond its first line (the
//! newest request's parts excepted: they are clipped to fit instead), so one huge paste
//! cannot evict everything else, and one long log row can still be kept. The written text
//! is measured at the end and trimmed, lowest rank first, should the
//! estimate of its line labels have been short.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::{Item, Section, LINE_JOINER};
use crate::summarize::SummaryRequest;

/// Guaranteed shares (percent of what the fixed lines leave), in allocation order.
const SHARES: [(Section, u64); 4] = [
    (Section::Task, 15),
    (Section::Statements, 35),
    (Section::ToolLines, 20),
    (Section::Answers, 30),
];
/// Most of what the fixed lines leave (percent) that ordinary prose may take.
const PROSE_SHARE: u64 = 10;
/// Most files listed on the files line.
const MAX_FILES: usize = 20;
/// The files line takes at most this fraction (1/n) of the budget.
const FILES_SHARE_DIVISOR: u64 = 16;
/// Bound on trimming rounds after measuring (each drops one item).
const MAX_TRIM_ROUNDS: usize = 512;

/// The line an item is written on.
fn line_key(it: &Item) -> (usize, &'static str, String) {
    match it.tag {
        "tool" => (it.turn, it.tag, format!("{}", it.source)),
        "command" => (it.turn, it.tag, it.label.clone().unwrap_or_default()),
        _ => (it.turn, it.tag, String::new()),
    }
}

/// The label that opens an item's line: `- [turn tag] `, then the call for tool lines.
/// Short on purpose: every line pays for it, and in a summary of a few hundred tokens
/// the longer `[turn N · tag]` took a fifth of the room.
fn line_prefix(it: &Item) -> String {
    format!(
        "- [{}] {}",
        line_head(it.turn, it.tag),
        it.label.as_deref().unwrap_or("")
    )
}

/// `turn tag`, as every line opens (the mutants write their lines with it too).
pub(super) fn line_head(turn: usize, tag: &str) -> String {
    format!("{turn} {tag}")
}

struct Allocation<'r, 'a> {
    req: &'r SummaryRequest<'a>,
    items: &'r [Item],
    chosen: Vec<bool>,
    used: u64,
    budget: u64,
    per_source: HashMap<usize, u64>,
    per_source_cap: u64,
    open_lines: HashSet<(usize, &'static str, String)>,
}

impl Allocation<'_, '_> {
    /// Take item `i` if it fits the budget, the section allowance and its source's cap;
    /// returns its cost when taken.
    fn take(&mut self, i: usize, allowance: u64) -> Option<u64> {
        let it = &self.items[i];
        let mut cost = self.req.estimator.count_text(&it.text) + 2;
        let key = line_key(it);
        if !self.open_lines.contains(&key) {
            cost += self.req.estimator.count_text(&line_prefix(it)) + 1;
        }
        if self.used + cost > self.budget || cost > allowance {
            return None;
        }
        let src = self.per_source.get(&it.source).copied().unwrap_or(0);
        // A source's first line passes the cap whatever its length (the budget and the
        // section's allowance still bound it): one line cannot crowd out everything else,
        // and a long log row may be the one the command was run for.
        if !it.whole && src > 0 && src + cost > self.per_source_cap {
            return None;
        }
        self.per_source.insert(it.source, src + cost);
        self.used += cost;
        self.open_lines.insert(key);
        self.chosen[i] = true;
        Some(cost)
    }
}

/// Rank order: score, then newer first.
fn by_rank(items: &[Item], mut idx: Vec<usize>) -> Vec<usize> {
    idx.sort_by(|&a, &b| {
        items[b]
            .score
            .cmp(&items[a].score)
            .then(items[b].seq.cmp(&items[a].seq))
    });
    idx
}

/// Write the summary: allocate, render, measure and trim.
pub(super) fn write(
    req: &SummaryRequest<'_>,
    items: Vec<Item>,
    files: &[String],
    refs: &[String],
    (first_turn, last_turn): (usize, usize),
) -> String {
    let est = req.estimator;
    let header = format!("Turns {first_turn}–{last_turn} (extractive, redacted):");
    let budget = req.target_tokens;
    let mut used = est.count_text(&header);
    let mut fixed: Vec<String> = Vec::new();
    let mut seen = HashSet::new();
    let refs: Vec<&String> = refs.iter().filter(|r| seen.insert(r.as_str())).collect();
    if !refs.is_empty() {
        // Always: an archived output must stay addressable.
        let line = format!(
            "- [{}] {}",
            line_head(last_turn, "archive"),
            refs.iter()
                .map(|r| r.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        );
        used += est.count_text(&line) + 1;
        fixed.push(line);
    }
    // The file in flight has its own line; listed again it would only cost room.
    let mut seen: HashSet<&str> = items
        .iter()
        .filter(|it| it.tag == "in-flight")
        .map(|it| it.text.as_str())
        .collect();
    let mut recent: Vec<&str> = Vec::new();
    let files_head = line_head(last_turn, "files");
    for f in files.iter().rev() {
        if recent.len() == MAX_FILES {
            break;
        }
        if seen.insert(f.as_str()) {
            let trial: Vec<&str> = std::iter::once(f.as_str())
                .chain(recent.iter().copied())
                .collect();
            let line = format!("- [{files_head}] {}", trial.join(", "));
            if est.count_text(&line) > budget / FILES_SHARE_DIVISOR {
                break;
            }
            recent = trial;
        }
    }
    if !recent.is_empty() {
        let line = format!("- [{files_head}] {}", recent.join(", "));
        let t = est.count_text(&line) + 1;
        if used + t <= budget {
            used += t;
            fixed.push(line);
        }
    }

    let rest = budget.saturating_sub(used);
    let mut a = Allocation {
        req,
        items: &items,
        chosen: vec![false; items.len()],
        used,
        budget,
        per_source: HashMap::new(),
        per_source_cap: (budget / 4).max(64),
        open_lines: HashSet::new(),
    };
    for (section, share) in SHARES {
        let mut allowance = rest * share / 100;
        let members: Vec<usize> = (0..items.len())
            .filter(|&i| items[i].section == section)
            .collect();
        for (k, i) in by_rank(&items, members).into_iter().enumerate() {
            // A section's best item is taken even when it alone outgrows the share (up to
            // twice it): a long diagnosis must not lose to a shorter, lesser sentence.
            let limit = if k == 0 { allowance * 2 } else { allowance };
            if let Some(cost) = a.take(i, limit) {
                allowance = allowance.saturating_sub(cost);
            }
        }
    }
    // Ordinary prose (no value, rule, decision or outcome) is the least useful memory:
    // it may fill at most a small share, however much room is left.
    let mut prose_allowance = rest * PROSE_SHARE / 100;
    for i in by_rank(&items, (0..items.len()).collect()) {
        if a.chosen[i] {
            continue;
        }
        if items[i].section == Section::Other {
            if let Some(cost) = a.take(i, prose_allowance) {
                prose_allowance -= cost;
            }
        } else {
            a.take(i, u64::MAX);
        }
    }
    let mut chosen = a.chosen;

    let mut out = render(&header, &items, &chosen, &fixed);
    let mut rounds = 0;
    while est.count_text(&out) > budget && rounds < MAX_TRIM_ROUNDS {
        let Some(worst) = by_rank(&items, (0..items.len()).filter(|&i| chosen[i]).collect())
            .last()
            .copied()
        else {
            break;
        };
        chosen[worst] = false;
        out = render(&header, &items, &chosen, &fixed);
        rounds += 1;
    }
    out
}

/// The summary text: header, the chosen items in conversation order (one line per turn and
/// tag; one per result for tool lines), then the fixed lines.
fn render(header: &str, items: &[Item], chosen: &[bool], fixed: &[String]) -> String {
    // (turn, first seq) → (prefix, joiner, texts)
    let mut lines: BTreeMap<(usize, usize), (String, &str, Vec<&str>)> = BTreeMap::new();
    let mut first_seq: HashMap<(usize, &'static str, String), usize> = HashMap::new();
    let mut order: Vec<usize> = (0..items.len()).filter(|&i| chosen[i]).collect();
    order.sort_by_key(|&i| items[i].seq);
    for i in order {
        let it = &items[i];
        let first = *first_seq.entry(line_key(it)).or_insert(it.seq);
        let joiner = if it.label.is_some() { LINE_JOINER } else { " " };
        let line = lines
            .entry((it.turn, first))
            .or_insert_with(|| (line_prefix(it), joiner, Vec::new()));
        if !it.text.is_empty() {
            line.2.push(&it.text);
        }
    }
    let mut out = header.to_string();
    for (prefix, joiner, texts) in lines.into_values() {
        out.push('\n');
        let labelled = !prefix.ends_with("] ");
        match (labelled, texts.is_empty()) {
            (true, true) => out.push_str(&prefix),
            (true, false) => {
                out.push_str(&prefix);
                out.push_str(": ");
                out.push_str(&texts.join(joiner));
            }
            (false, _) => {
                out.push_str(&prefix);
                out.push_str(&texts.join(joiner));
            }
        }
    }
    for f in fixed {
        out.push('\n');
        out.push_str(f);
    }
    out
}
