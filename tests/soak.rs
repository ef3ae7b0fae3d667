//! `ctxbench serve-fake` as a long-running service, on loopback: thousands of distinct trial
//! keys leave its memory flat and its latency where a single key has it (issue #18: every
//! new key used to keep a ≈450 KB script forever — 2,000 keys took it from 47 MB to 946 MB
//! and from ~2,000 to 15 requests/s).
//!
//! Bounded in count and time: `CTXBENCH_SOAK_KEYS` distinct keys (default 4,000), 16
//! concurrent clients. The figures are printed; docs/benchmarks.md has a larger run.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::FakeServer;

const CLIENTS: usize = 16;

/// The built-in scenario the keys name: a session without `vary:`, so that its script
/// depends only on the trial seed (with `vary:`, every trial after the first is a session
/// of its own, and every key would build a script).
const SCENARIO: &str = "recovery";
/// Its instructions and first user turn, so the fake plays a scripted reply.
const INSTRUCTIONS: &str =
    "You are a coding agent working in this repository. Follow the user's constraints.\n";
const FIRST_TURN: &str = "House rules: Library errors use thiserror; anyhow only in binaries. The minimum supported Rust version is 1.82.";

/// Resident memory of `pid` in KiB (Linux).
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Send one request per key of `keys` from [`CLIENTS`] concurrent clients; each request's
/// latency, in key order.
async fn drive(client: &reqwest::Client, base: &str, keys: Vec<String>) -> Vec<Duration> {
    let keys = Arc::new(keys);
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..CLIENTS {
        let (keys, next, client, base) =
            (keys.clone(), next.clone(), client.clone(), base.to_string());
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(key) = keys.get(i) else { break };
                // The scenario's first turn, so the fake plays a scripted reply.
                let body = serde_json::json!({
                    "model": "fake-16k",
                    "max_tokens": 256,
                    "messages": [
                        {"role": "system", "content": INSTRUCTIONS},
                        {"role": "user", "content": FIRST_TURN},
                    ],
                });
                let t0 = Instant::now();
                let resp = client
                    .post(format!("{base}/chat/completions"))
                    .header("x-ctxbench-trial", key)
                    .json(&body)
                    .send()
                    .await
                    .expect("request");
                let status = resp.status();
                let text = resp.text().await.expect("body");
                assert!(status.is_success(), "{key}: {status} {text}");
                out.push((i, t0.elapsed()));
            }
            out
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("client task"));
    }
    all.sort_by_key(|(i, _)| *i);
    all.into_iter().map(|(_, d)| d).collect()
}

fn percentile(d: &[Duration], p: f64) -> Duration {
    let mut v = d.to_vec();
    v.sort();
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

#[test]
fn memory_stays_flat_and_latency_holds_under_thousands_of_distinct_trial_keys() {
    let keys: usize = std::env::var("CTXBENCH_SOAK_KEYS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4_000)
        .max(1_000);
    let dir = tempfile::tempdir().unwrap();
    let server = FakeServer::start(dir.path(), &["--max-trials", "256", "--script-cache", "8"]);
    let pid = server.pid();
    if rss_kib(pid).is_none() {
        eprintln!("skipping: no /proc/PID/status on this system");
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let client = reqwest::Client::new();
    // Keys differ in their trial index; their seeds cycle over four scripts, as the modes
    // and repeated runs of a suite share scripts.
    let source = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("scenarios/{SCENARIO}.yaml")),
    )
    .expect("the scenario");
    assert!(
        !source.contains("\nvary:") && source.contains(FIRST_TURN.split(':').next().unwrap()),
        "the soak needs a scenario without `vary:` whose first turn is FIRST_TURN"
    );
    let key = |seed: usize, i: usize| format!("{SCENARIO}~{seed}~compact~{i}");
    rt.block_on(async {
        let t0 = Instant::now();
        let single = drive(&client, &server.url, vec![key(0, 0); keys / 2]).await;
        let single_secs = t0.elapsed().as_secs_f64();
        let warm: Vec<String> = (1..=1_000).map(|i| key(i % 4, i)).collect();
        drive(&client, &server.url, warm).await;
        let rss_warm = rss_kib(pid).unwrap();
        let t0 = Instant::now();
        let distinct: Vec<String> = (1_001..=keys).map(|i| key(i % 4, i)).collect();
        let lat = drive(&client, &server.url, distinct).await;
        let distinct_secs = t0.elapsed().as_secs_f64();
        let rss_end = rss_kib(pid).unwrap();
        // Fresh seeds: every key instantiates its own script (CPU-bound, still flat).
        let fresh: Vec<String> = (0..200).map(|i| key(1_000_000 + i, i)).collect();
        let t0 = Instant::now();
        let fresh_lat = drive(&client, &server.url, fresh).await;
        let fresh_secs = t0.elapsed().as_secs_f64();
        let rss_fresh = rss_kib(pid).unwrap();

        let (p50_1, p99_1) = (percentile(&single, 0.5), percentile(&single, 0.99));
        let (p50_n, p99_n) = (percentile(&lat, 0.5), percentile(&lat, 0.99));
        let quarter = lat.len() / 4;
        let first = percentile(&lat[..quarter], 0.5);
        let last = percentile(&lat[lat.len() - quarter..], 0.5);
        eprintln!(
            "soak: single key {} req in {single_secs:.2} s ({:.0} req/s) p50 {p50_1:?} p99 {p99_1:?}",
            single.len(),
            single.len() as f64 / single_secs
        );
        eprintln!(
            "soak: {} distinct keys in {distinct_secs:.2} s ({:.0} req/s) p50 {p50_n:?} p99 {p99_n:?}; \
             first quarter p50 {first:?}, last quarter p50 {last:?}",
            lat.len(),
            lat.len() as f64 / distinct_secs
        );
        eprintln!(
            "soak: 200 fresh-seed keys in {fresh_secs:.2} s ({:.0} req/s) p50 {:?} p99 {:?}",
            200.0 / fresh_secs,
            percentile(&fresh_lat, 0.5),
            percentile(&fresh_lat, 0.99)
        );
        eprintln!(
            "soak: RSS after 1,000 keys {} MiB, after {keys} keys {} MiB, after 200 fresh seeds {} MiB",
            rss_warm / 1024,
            rss_end / 1024,
            rss_fresh / 1024
        );
        // Flat: thousands more keys (and 200 more scripts built) add no more than noise.
        assert!(
            rss_end.saturating_sub(rss_warm) < 16 * 1024,
            "RSS grew from {rss_warm} KiB to {rss_end} KiB over {} keys",
            lat.len()
        );
        assert!(
            rss_fresh.saturating_sub(rss_warm) < 24 * 1024,
            "RSS grew from {rss_warm} KiB to {rss_fresh} KiB with fresh scripts"
        );
        // Latency holds: no drift as keys accumulate, and within reach of a single key.
        // (Ratios on one machine in one run, with slack for a shared 2-core box; the
        // measured figures are in docs/benchmarks.md.)
        assert!(last <= first * 3, "p50 drifted from {first:?} to {last:?}");
        assert!(p50_n <= p50_1 * 4, "p50 {p50_n:?} vs {p50_1:?} for one key");
    });
}
