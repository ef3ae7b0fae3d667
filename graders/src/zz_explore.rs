#[cfg(test)]
mod tests {
    use crate::testing::judge_with;
    use ctxbench_harness::Mode;
    use ctxbench_harness::engine::EngineEvent;

    #[tokio::test]
    #[ignore]
    async fn explore() {
        let only = std::env::var("SCN").ok();
        let mode: Mode = std::env::var("MODE").ok().map(|m| m.parse().unwrap()).unwrap_or(Mode::Compact);
        for entry in std::fs::read_dir("../scenarios").unwrap() {
            let p = entry.unwrap().path();
            let name = p.file_stem().unwrap().to_string_lossy().to_string();
            if let Some(o) = &only { if !o.split(',').any(|x| x == name) { continue; } }
            let yaml = std::fs::read_to_string(&p).unwrap();
            let t0 = std::time::Instant::now();
            let (rec, j) = judge_with(&yaml, mode, None).await;
            println!("=== {name} {:?} {:?} reqs={} ms={}", rec.outcome.status, rec.outcome.reason, rec.stats.requests, t0.elapsed().as_millis());
            for v in &j.verdicts { println!("   {} {:?} {}", v.grader, v.status, v.summary); }
            for e in &rec.events {
                match &e.event {
                    EngineEvent::Budgeted(_) | EngineEvent::Usage{..} | EngineEvent::RunStarted{..} => {}
                    ev => println!("   ev{} s{} {}", e.seq, e.step, serde_json::to_string(ev).unwrap().chars().take(300).collect::<String>()),
                }
            }
            for c in &rec.compactions { println!("   compaction s{} {:?}", c.step, c.outcome); }
        }
    }
}
