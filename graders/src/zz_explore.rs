#[cfg(test)]
mod tests {
    use crate::testing::judge_with;
    use ctxbench_harness::Mode;
    use ctxbench_harness::engine::EngineEvent;
    use ctxbench_harness::engine::mutants::Mutation;

    #[tokio::test]
    #[ignore]
    async fn explore() {
        let mode: Mode = std::env::var("MODE").ok().map(|m| m.parse().unwrap()).unwrap_or(Mode::Compact);
        let mutation = std::env::var("MUT").ok().and_then(|m| Mutation::from_name(&m));
        let files: Vec<std::path::PathBuf> = match std::env::var("FILE") {
            Ok(f) => f.split(',').map(Into::into).collect(),
            Err(_) => std::fs::read_dir("../scenarios").unwrap().map(|e| e.unwrap().path()).collect(),
        };
        let only = std::env::var("SCN").ok();
        let verbose = std::env::var("V").is_ok();
        for p in files {
            let name = p.file_stem().unwrap().to_string_lossy().to_string();
            if let Some(o) = &only { if !o.split(',').any(|x| x == name) { continue; } }
            let mut yaml = std::fs::read_to_string(&p).unwrap();
            if std::env::var("ALLG").is_ok() {
                let names = crate::GRADER_NAMES.join(", ");
                let re = regex::Regex::new(r"(?m)^  graders: \[.*\]$").unwrap();
                yaml = re.replace(&yaml, format!("  graders: [{names}]").as_str()).into_owned();
            }
            let t0 = std::time::Instant::now();
            let (rec, j) = judge_with(&yaml, mode, mutation).await;
            println!("=== {name} {mode} {:?} {:?} {:?} reqs={} ms={}", mutation, rec.outcome.status, rec.outcome.reason, rec.stats.requests, t0.elapsed().as_millis());
            for v in &j.verdicts { println!("   {} {:?} {}", v.grader, v.status, v.summary); for e in v.evidence.iter().take(3) { println!("      {}", serde_json::to_string(e).unwrap().chars().take(600).collect::<String>()); } }
            if let Ok(n) = std::env::var("REQ") {
                let n: u64 = n.parse().unwrap();
                if let Some(r) = rec.requests.iter().find(|r| r.row.seq == n) {
                    println!("--- REQUEST {n} step {} ih {} ck {:?}", r.row.step, r.row.instruction_hash, r.row.checkpoint_id);
                    for (h, m) in r.row.message_hashes.iter().zip(rec.request_messages(r)) { println!("  {:?} {} {:?} calls={:?} {}", m.role, &h[..12], m.tool_call_id, m.tool_calls.iter().map(|c| c.id.clone()).collect::<Vec<_>>(), m.content.chars().take(120).collect::<String>().replace('\n', " ")); }
                }
            }
            if std::env::var("MEM").is_ok() {
                let mut seen = std::collections::HashSet::new();
                for r in &rec.requests { for m in rec.request_messages(r) { if m.content.contains("conversation-memory") && seen.insert(m.content.clone()) { println!("--- MEMORY (req {}):\n{}", r.row.seq, m.content); } } }
            }
            if verbose {
            for e in &rec.events {
                match &e.event {
                    EngineEvent::Usage{..} | EngineEvent::RunStarted{..} => {}
                    EngineEvent::Budgeted(b) => println!("   ev{} s{} budgeted r{} a{} total={} avail={} ck={:?}", e.seq, e.step, b.round, b.attempt, b.budget.total, b.budget.available_input, b.checkpoint_id),
                    ev => println!("   ev{} s{} {}", e.seq, e.step, serde_json::to_string(ev).unwrap().chars().take(400).collect::<String>()),
                }
            }
            for c in &rec.compactions { println!("   compaction s{} {:?}", c.step, c.outcome); }
            for t in &rec.turns { println!("   turn s{} {:?} reqs={:?}", t.step, format!("{:?}", t.outcome).chars().take(150).collect::<String>(), t.requests); }
            }
        }
    }
}
