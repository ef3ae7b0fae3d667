//! Tests of key lines and call labels.

use super::*;

fn texts(content: &str) -> Vec<String> {
    top_lines(content, MAX_LINES_PER_RESULT)
        .into_iter()
        .map(|k| k.text)
        .collect()
}

#[test]
fn the_row_that_stands_out_is_a_key_line_even_without_a_setting_in_it() {
    let replication = "name | state | lag | replay\n\
                       r1 | streaming | 96 kB | 00:00:00.004\n\
                       r2 | streaming | 12 MB | 00:00:01.310\n\
                       r3 | streaming | 1843 MB | 00:04:17\n\
                       r4 | streaming | 184 MB | 00:00:19.882\n\
                       r5 | streaming | 2210 kB | 00:00:02.001";
    let top = &key_lines(replication)[0];
    assert!(top.text.starts_with("r3 |"), "{top:?}");
}

#[test]
fn settings_outcomes_and_errors_are_key_lines() {
    let file = "import os\n\nMAX_RETRIES = 7\nlogger = get_logger(__name__)\n\ndef run():\n    return helper(x)\n";
    assert_eq!(texts(file), vec!["MAX_RETRIES = 7"]);
    let rust = "use std::io;\npub const TIMEOUT_MS: u64 = 3_000;\nfn main() {\n    let x = compute(1);\n}\n";
    assert_eq!(texts(rust), vec!["pub const TIMEOUT_MS: u64 = 3_000;"]);
    let toml = "[package]\nname = \"parser\"\nversion = \"0.4.2\"\nedition = \"2021\"\n";
    assert_eq!(
        texts(toml),
        vec![
            "name = \"parser\"",
            "version = \"0.4.2\"",
            "edition = \"2021\""
        ]
    );
    let cargo_test = "running 12 tests\ntest a ... ok\nthread 'b' panicked at src/b.rs:3:5\ntest result: FAILED. 11 passed; 1 failed; 0 ignored\nerror: test failed, to rerun pass `--lib`\n";
    let k = top_lines(cargo_test, MAX_LINES_PER_RESULT);
    assert!(k
        .iter()
        .any(|l| l.text.starts_with("test result: FAILED") && l.verification));
    assert!(k.iter().any(|l| l.text.contains("panicked at")));
    assert!(texts("$ make\nmake: *** [all] Error 2\nexit code: 2\n")
        .contains(&"exit code: 2".to_string()));
    // Errors however a tool marks them: a dotted exception class, a log level, `[!]`.
    for (output, error) in [
        ("Operations to perform:\n  Apply all migrations\ndjango.db.migrations.exceptions.InconsistentMigrationHistory: Migration a is applied before b.\n", "django.db"),
        ("[03:00] INFO - started\n[03:01] INFO - running statement\n[03:02] ERROR - load query 01b3 failed: bad value\n", "ERROR - load"),
        ("Fetching profiles\n[!] No matching provisioning profiles found for team K7X2\n", "[!] No matching"),
    ] {
        let k = key_lines(output);
        assert!(k.first().is_some_and(|l| l.text.contains(error) && l.verification), "{k:?}");
    }
}

#[test]
fn a_failing_test_outranks_the_passing_ones_around_it() {
    let log = "2024-05-14T02:14:52.118Z ✓ src/a.spec.ts (41 tests) 812ms\n\
               2024-05-14T02:14:53.640Z ✓ src/b.spec.ts (17 tests) 344ms\n\
               2024-05-14T02:14:55.903Z FAIL  src/refund.spec.ts > refunds > keeps minor-unit precision\n\
               2024-05-14T02:14:56.010Z ✓ src/c.spec.ts (9 tests) 120ms\n";
    let k = top_lines(log, 1);
    assert_eq!(k.len(), 1);
    assert!(k[0].text.contains("FAIL src/refund.spec.ts"), "{k:?}");
    // A verdict word alone says less than the line that names the failing test.
    let go = "--- FAIL: TestRetryBackoff (0.31s)\nFAIL\nexit status 1\n";
    let k = top_lines(go, 2);
    assert!(k.iter().all(|l| l.text != "FAIL"), "{k:?}");
    assert!(k[0].text.contains("TestRetryBackoff"), "{k:?}");
    assert!(k[0].verification);
    // After its timestamp, a line still opens with its marker.
    assert_eq!(without_timestamp("[12:00:01] error: x"), "error: x");
    assert_eq!(without_timestamp("no stamp here"), "no stamp here");
    assert_eq!(
        without_timestamp("Mar 11 09:31:07 host kernel: oops"),
        "host kernel: oops"
    );
    assert_eq!(
        without_timestamp("03-11 09:31:07.114  1201  1219 E ActivityManager: ANR in app"),
        "ANR in app"
    );
    assert_eq!(without_timestamp("03-11 09:31:07.114 ok"), "ok");
    // grep's location is not part of the line either.
    assert_eq!(
        without_location("Config/Release.xcconfig:3:API_HOST = api.acmeshop.io"),
        "API_HOST = api.acmeshop.io"
    );
    assert_eq!(
        without_location("src/db.rs:42:    let x = 1;"),
        "let x = 1;"
    );
    assert_eq!(
        without_location("Shop/Info.plist: Version = 3"),
        "Version = 3"
    );
    assert_eq!(
        without_location("Hardware Model: iPhone15,3"),
        "Hardware Model: iPhone15,3"
    );
    assert_eq!(without_location("https://a.io/x: ok"), "https://a.io/x: ok");
    assert_eq!(
        texts("Config/Debug.xcconfig:3:API_HOST = localhost:8443\nsee also notes\n"),
        vec!["Config/Debug.xcconfig:3:API_HOST = localhost:8443"]
    );
    assert!(
        key_lines("Shop/Info.plist: CFBundleVersion = 1893\n")[0].score
            > key_lines("Hardware Model: iPhone15,3\n")[0].score
    );
}

#[test]
fn measurement_reports_outrank_environment_lines() {
    let bench = "goos: linux\ngoarch: amd64\npkg: example.com/ingest\ncpu: AMD EPYC 7B13\n\
                 BenchmarkIngest/batch=256-8     18240 rows/s    1.91 MB peak\n\
                 PASS\nok  \texample.com/ingest\t34.118s\n";
    let k = top_lines(bench, 1);
    assert!(k[0].text.contains("18240 rows/s"), "{k:?}");
    assert_eq!(measurements("took 812ms, 3.2% of 1.5 GB"), 3);
    assert_eq!(measurements("version 1.2 of 3 files"), 0);
}

#[test]
fn zero_counters_rank_below_the_ones_that_moved() {
    let info =
        "# Stats\nrejected_connections:0\nexpired_keys:0\nevicted_keys:1849302\nkeyspace_hits:0";
    assert_eq!(key_lines(info)[0].text, "evicted_keys:1849302");
    // `name:value` with nothing between is a setting; a clock time is not.
    assert_eq!(
        texts("maxmemory_policy:volatile-lru\n10:51:09"),
        vec!["maxmemory_policy:volatile-lru"]
    );
    assert!(zero_valued("RETRIES = 0") && zero_valued("used: 0B"));
    assert!(!zero_valued("Tests: 0 failed, 12 passed") && !zero_valued("port: 8080"));
}

#[test]
fn rows_that_differ_only_in_numbers_rank_below_a_line_of_their_own() {
    let gpus = "0, NVIDIA A100-SXM4-80GB, 71234 MiB, 0 %\n\
                1, NVIDIA A100-SXM4-80GB, 71190 MiB, 0 %\n\
                2, NVIDIA A100-SXM4-80GB, 71202 MiB, 0 %\n\
                Driver Version: 535.104.05";
    let k = key_lines(gpus);
    assert_eq!(k[0].text, "Driver Version: 535.104.05", "{:?}", texts(gpus));
    // The one that stands out among them keeps its rank (log fields are numbers).
    let log = "step 13800 | loss 2.331 | grad_norm 0.91\n\
               step 14000 | loss 2.327 | grad_norm 0.97\n\
               step 14200 | loss 2.318 | grad_norm 0.94\n\
               step 14400 | loss 2.301 | grad_norm 1.02\n\
               step 14600 | loss 7.942 | grad_norm 48.70";
    let k = key_lines(log);
    assert!(
        k[0].text.contains("14600") && k[0].score > k[1].score + 3,
        "{k:?}"
    );
}

#[test]
fn commits_and_labelled_measurements_are_key_lines() {
    let k = texts(
        "a3f9c2e fix(ledger): retry ledger write on serialization failure\nrunning the suite now",
    );
    assert_eq!(
        k,
        vec!["a3f9c2e fix(ledger): retry ledger write on serialization failure"]
    );
    let k =
        texts("running (2m00.0s), 18211 complete\np99 latency (first run, 64 concurrent): 412ms");
    assert!(k.iter().any(|l| l.ends_with("412ms")), "{k:?}");
    // Prose with a colon is no measurement.
    assert!(labelled_measure().is_match("Total Blocking Time: 910 ms"));
    assert!(!labelled_measure().is_match("Note: the build takes 40 minutes on CI"));
}

#[test]
fn field_records_are_key_lines() {
    let inventory = "cluster    | topic         | config\n\
                     eu-central | orders-events | partitions=24 | rf=3 | min-isr=2\n\
                     us-east    | orders-events | partitions=36 | rf=3 | min-isr=2\n";
    let k = texts(inventory);
    assert!(k.iter().any(|l| l.contains("partitions=24")), "{k:?}");
    assert!(k.iter().any(|l| l.contains("partitions=36")), "{k:?}");
    assert_eq!(fields("level=warn lag=18234 msg=\"slow\""), 3);
    assert_eq!(fields("if a == b { x = 1 }"), 0);
}

#[test]
fn inventory_statements_are_key_lines() {
    let inventory = "# Services\n- billing-api listens on port 8443; billing-api request timeout is 2500 ms\n- search-api listens on port 9443\nAll services are healthy and nothing else is worth noting here.\n";
    assert_eq!(
        texts(inventory),
        vec![
            "- billing-api listens on port 8443; billing-api request timeout is 2500 ms",
            "- search-api listens on port 9443"
        ]
    );
    assert_eq!(
        texts("| region | size |\n|---|---|\n| eu-west-3 | 12 replicas |\n"),
        vec!["| eu-west-3 | 12 replicas | (columns: region | size)"]
    );
    assert!(key_lines(
        "The build took a while because of the cache.\nNothing else changed since the last run.\n"
    )
    .is_empty());
}

#[test]
fn failures_listed_under_a_heading_are_failures() {
    let rspec = "Finished in 4 minutes 12.6 seconds (files took 9.81 seconds to load)\n\
                 3214 examples, 3 failures, 12 pending\n\nFailed examples:\n\n\
                 rspec ./spec/models/invoice_spec.rb:142 # Invoice#total rounds half to even\n\
                 rspec ./spec/system/checkout_spec.rb:210 # Checkout completes\n";
    let k = top_lines(rspec, 3);
    assert!(
        k.iter().all(|l| !l.text.starts_with("Failed examples")),
        "{k:?}"
    );
    let spec = k
        .iter()
        .find(|l| l.text.contains("invoice_spec.rb:142"))
        .unwrap_or_else(|| panic!("{k:?}"));
    assert!(spec.verification);
}

#[test]
fn planned_changes_are_key_lines() {
    let plan = "  # aws_db_instance.main will be updated in-place\n\
                ~ resource \"aws_db_instance\" \"main\" {\n\
                      id                = \"prod-pg\"\n\
                    ~ allocated_storage = 200 -> 400\n\
                    ~ tags              = {\n\
                    # (58 unchanged attributes hidden)\n    }\n";
    let k = key_lines(plan);
    assert_eq!(k[0].text, "~ allocated_storage = 200 -> 400", "{k:?}");
    // What the plan says it will do to a resource is a key line too.
    assert!(
        k.iter()
            .any(|l| l.text.contains("will be updated in-place")),
        "{k:?}"
    );
    assert!(key_lines("replicas: 3 → 5\n")[0].score >= 8);
    // The plan's own tally outranks the resources it details.
    let targeted = "module.vpc.aws_subnet.private[\"c\"]: will be created\n\
                    module.vpc.aws_route_table.private: will be updated in-place\n\
                    Plan: 3 to add, 1 to change, 0 to destroy.\n";
    let k = key_lines(targeted);
    assert!(k[0].text.starts_with("Plan: 3 to add"), "{k:?}");
    assert!(!shapes::tally("It took 3 hours and 2 minutes."));
    // An expression on either side is code, not a change.
    assert!(key_lines("f = |x| x -> y\n").iter().all(|k| k.score < 8));
}

#[test]
fn table_rows_keep_their_column_names() {
    let pods = "NAME         READY   STATUS             RESTARTS   AGE\n\
                api-7d9f     1/1     Running            3          2d\n\
                worker-5c    0/1     CrashLoopBackOff   41         2d\n";
    let t = texts(pods);
    assert!(
        t.contains(
            &"worker-5c 0/1 CrashLoopBackOff 41 2d (columns: NAME READY STATUS RESTARTS AGE)"
                .to_string()
        ),
        "{t:?}"
    );
    assert!(!t.iter().any(|l| l.starts_with("NAME ")), "{t:?}");
}

#[test]
fn nested_settings_keep_their_section() {
    let yaml = "services:\n  billing:\n    port: 8443\n    replicas: 3\n  search:\n    port: 8444\n    replicas: 3\n";
    assert_eq!(
        texts(yaml),
        vec![
            "billing.port: 8443",
            "billing.replicas: 3",
            "search.port: 8444",
            "search.replicas: 3"
        ]
    );
    assert_eq!(
        texts("timeout: 30\nretries: 4\n"),
        vec!["timeout: 30", "retries: 4"]
    );
}

#[test]
fn device_and_listing_lines_that_name_values_are_key_lines() {
    let report = "# sensor table\nbaro0 (BMP390) responds at I2C address 0x76\n\
                  imu_primary output data rate = 3200 Hz\nsee the notes below\n\
                  Both units were checked twice.\n    if len > 37 {\n\
                  let x = build(12);\n";
    assert_eq!(
        texts(report),
        vec![
            "baro0 (BMP390) responds at I2C address 0x76",
            "imu_primary output data rate = 3200 Hz",
        ]
    );
}

#[test]
fn prose_expressions_and_claims_are_not() {
    assert!(key_lines("Note aux agents : vous avez ceci, et cela, et encore autre chose ici maintenant.\nThis is a long paragraph of prose that goes on.\n").is_empty());
    assert!(key_lines("let total = items.iter().map(|i| i.price).sum();\n").is_empty());
    assert!(key_lines("let count: Index\nlet len: Cursor =\n    make();\nif cache.len() > 54 {\nfor r in p.iter() { r.x()?; }\n").is_empty());
    assert!(key_lines("mode: approval granted for all commands\n").is_empty());
    // A short result is its own fact.
    assert_eq!(texts("Python 3.11.4"), vec!["Python 3.11.4"]);
    // Code with numbers is not a statement of fact.
    assert!(
        key_lines("if cache.len() > 54 {\nreturn retry(3, 250);\nuse crate::v2::Index;\n")
            .is_empty()
    );
}

#[test]
fn a_value_named_by_an_index_is_a_statement() {
    // "chunk 3" names which chunk; the checksum is the value.
    assert_eq!(
        texts("checksum of chunk 3 is c0ffee33a3"),
        vec!["checksum of chunk 3 is c0ffee33a3"]
    );
    assert!(statement("checksum of chunk 3 is c0ffee33a3", 6).is_some());
    // A lone one-digit number is no value.
    assert!(statement("step 3 of the plan is done", 6).is_none());
}

#[test]
fn a_sentence_in_output_is_never_a_key_line() {
    let code = "let mut batch = Entry::with_capacity(token.len());\n".repeat(6);
    let content =
        format!("{code}The reviewer for this module is Margarethe Okonkwo, ask her\n{code}");
    assert!(key_lines(&content).is_empty(), "{:?}", key_lines(&content));
}

#[test]
fn a_prefix_every_row_shares_is_said_once() {
    let log = "test (windows-latest, 20)  Run npm ci  npm WARN deprecated inflight@1.0.6\n\
               test (windows-latest, 20)  Run npm ci  npm ERR! path D:\\a\\node_modules\n\
               test (windows-latest, 20)  Run npm ci  npm ERR! code EBUSY\n\
               test (windows-latest, 20)  Run npm ci  npm ERR! syscall rename\n";
    let t = texts(log);
    assert!(
        t[0].starts_with("test (windows-latest, 20) Run npm ci"),
        "{t:?}"
    );
    assert!(t.iter().any(|l| l == "npm ERR! code EBUSY"), "{t:?}");
    assert_eq!(
        t.iter().filter(|l| l.contains("windows-latest")).count(),
        1,
        "{t:?}"
    );
    // Rows that do not share one keep their text.
    assert!(row_prefix(&["a = 1", "b = 2", "c = 3"]).is_none());
}

#[test]
fn an_edit_names_the_settings_its_diff_adds() {
    let args = serde_json::json!({"path": "a.py",
        "diff": "--- a/a.py\n+++ b/a.py\n-TIMEOUT = 3\n+TIMEOUT = 30\n+def f(): pass\n"});
    assert_eq!(edited_settings(&args), vec!["TIMEOUT".to_string()]);
    assert_eq!(
        setting("  port: 8080"),
        Some(("port".into(), "8080".into()))
    );
    assert_eq!(setting("x = compute(1)"), None);
}

#[test]
fn labels_are_short_and_parse_back() {
    let l = call_label("read_file", &serde_json::json!({"path": "src/config.py"}));
    assert_eq!(l, "read_file(src/config.py)");
    let l = call_label(
        "run",
        &serde_json::json!({"cmd": "cargo test (all)", "cwd": "/w"}),
    );
    assert_eq!(l, "run(cmd=cargo test [all], cwd=/w)");
    assert_eq!(call_label("list", &serde_json::json!({})), "list()");
    let l = call_label(
        "read_file",
        &serde_json::json!({"path": "feature-promo/src/main/res/layout/promo_item_5.xml.bak"}),
    );
    assert!(l.ends_with("layout/promo_item_5.xml.bak)"), "{l}");
    // A file name longer than the room stays whole; a write is named by its path.
    let l = call_label(
        "write_file",
        &serde_json::json!({"content": "ALTER TABLE invoices ADD COLUMN tenant_id text;\nALTER TABLE x;", "path": "db/migrations/0047_add_tenant_id_to_invoices.up.sql"}),
    );
    assert_eq!(l, "write_file(…0047_add_tenant_id_to_invoices.up.sql)");
    // A long label rolled over from an earlier checkpoint is cut back; a short one stays.
    let long = call_label_long(
        "run_command",
        &serde_json::json!({"command": "kubectl --context aks-weu-prod -n payments logs ledger-sync-7b9d6f5c8-k4wzp -c ledger-sync --previous --tail=60"}),
    );
    let short = shortened_label(&long);
    // Both ends of a command line: the program and the target it ends with.
    assert!(short.starts_with("run_command(kubectl"), "{short}");
    assert!(short.ends_with("--tail=60)"), "{short}");
    assert!(short.chars().count() < 64, "{short}");
    assert_eq!(
        shortened_label("read_file(src/config.py)"),
        "read_file(src/config.py)"
    );
}

#[test]
fn the_last_command_keeps_its_whole_invocation() {
    let cmd = "cargo test -p ratelimit --test bucket_props -- --test-threads 1 --nocapture";
    let args = serde_json::json!({ "command": cmd });
    let short = call_label("run_command", &args);
    assert!(short.contains('…') && short.len() < cmd.len(), "{short}");
    assert_eq!(
        call_label_long("run_command", &args),
        format!("run_command({cmd})")
    );
    // Both ends are cut at a word, an `=` or a `/`: the file a command writes stays whole.
    let plan = serde_json::json!({"dir": "stacks/network", "command": "plan -target=module.edge_vpc -out=edge-vpc.tfplan"});
    let l = call_label("terraform", &plan);
    assert!(l.contains("plan…edge-vpc.tfplan"), "{l}");
    // Still bounded.
    let huge = serde_json::json!({ "command": "x ".repeat(2000) });
    assert!(call_label_long("run_command", &huge).chars().count() <= 320);
}

#[test]
fn directives_are_settings_and_a_server_error_row_outranks_the_200s() {
    let conf = "server {\n    listen 443 ssl http2;\n    client_max_body_size 20m;\n    \
                proxy_pass http://app;\n    proxy_read_timeout 17s;\n}\nPort 2222\n";
    let k = key_lines(conf);
    for line in [
        "listen 443 ssl http2;",
        "proxy_read_timeout 17s;",
        "Port 2222",
    ] {
        assert!(k.iter().any(|l| l.text == line), "{line}: {k:?}");
    }
    assert_eq!(
        setting("proxy_read_timeout 17s;"),
        Some(("proxy_read_timeout".into(), "17s".into()))
    );
    // Code and prose are not directives.
    for line in ["return 0;", "x += 1;", "Found the cause."] {
        assert_eq!(directive(line), None, "{line}");
    }
    assert_eq!(
        directive("maxmemory-policy volatile-ttl"),
        Some(("maxmemory-policy", "volatile-ttl"))
    );
    assert_eq!(directive("Listening carefully"), None);
    assert_eq!(directive("belongs_to :price_list"), None);
    let tiers = "tiers:\n  free: {requests_per_minute: 60, burst: 15}\n  pro: {requests_per_minute: 600, burst: 90}\n";
    assert_eq!(key_lines(tiers).len(), 2, "{:?}", key_lines(tiers));
    assert!(setting("  pro: {requests_per_minute: 600, burst: 90}").is_some());
    let log = "10.0.0.1 - - [14/May/2024:13:02:30 +0000] \"GET /a HTTP/1.1\" 200 18 rt=0.2\n\
               10.0.0.2 - - [14/May/2024:13:02:41 +0000] \"GET /export/1.pdf HTTP/1.1\" 504 562 rt=17.0\n\
               10.0.0.1 - - [14/May/2024:13:02:44 +0000] \"GET /b HTTP/1.1\" 200 20 rt=0.1\n";
    let k = key_lines(log);
    assert!(k[0].text.contains(" 504 "), "{k:?}");
}

#[test]
fn the_cause_of_a_failure_outranks_the_generic_error_around_it() {
    let out = "   Compiling libsqlite3-sys v0.28.0\n\
               error: linking with `cc` failed: exit status: 1\n\
               \x20 = note: /usr/bin/ld: cannot find -lsqlite3: No such file or directory\n\
               error: could not compile `vault-sync` (lib test) due to 1 previous error\n";
    let lines = key_lines(out);
    assert!(lines[0].text.contains("cannot find -lsqlite3"), "{lines:?}");
    assert!(lines[0].verification);
}

#[test]
fn a_test_count_is_no_setting() {
    assert_eq!(setting("running 32 tests"), None);
    assert_eq!(setting("tests: 214 passed"), None);
    assert_eq!(
        setting("maxmemory 2gb"),
        Some(("maxmemory".into(), "2gb".into()))
    );
}

#[test]
fn an_ordinary_row_of_a_log_ranks_below_the_same_row_read_alone() {
    let row = |i: usize| {
        format!("2024-05-14T10:{i:02}:31.994Z WARN api::cache: hit ratio=0.{i}7 window=60s")
    };
    let log: String = (10..22).map(|i| row(i) + "\n").collect();
    let alone: String = (10..12).map(|i| row(i) + "\n").collect();
    let in_log = key_lines(&log)[0].score;
    let read_alone = key_lines(&alone)[0].score;
    assert!(in_log < read_alone, "{in_log} vs {read_alone}");
    // An error in a log is what it was read for: no penalty.
    let with_error = format!("{log}2024-05-14T10:30:00.000Z ERROR api::db: pool exhausted\n");
    let top = &key_lines(&with_error)[0];
    assert!(top.text.contains("pool exhausted"), "{top:?}");
}

#[test]
fn a_run_summary_with_its_duration_outranks_the_stage_timings() {
    let view = "Pipeline #98211 (agent/ci-speed) passed in 14m 52s\n  deps   1m 40s\n  lint   5m 12s\n  test   7m 58s";
    assert_eq!(
        key_lines(view)[0].text,
        "Pipeline #98211 (agent/ci-speed) passed in 14m 52s"
    );
    let build = "#1 [internal] load build definition\n#10 DONE 0.4s\n#11 DONE 12.0s\n#12 DONE 3.1s\n[+] Building 408.7s (19/19) FINISHED   docker:default";
    assert!(
        key_lines(build)[0].text.starts_with("[+] Building 408.7s"),
        "{:?}",
        key_lines(build)
    );
}

#[test]
fn a_setting_keeps_its_rank_behind_a_comment_and_a_pinning_comment_raises_it() {
    let versions = "terraform {\n  required_providers {\n    aws = {\n      source  = \"hashicorp/aws\"\n      version = \"~> 5.31.0\"   # do not loosen, see INC-2291\n    }\n    random = {\n      source  = \"hashicorp/random\"\n      version = \"~> 3.6\"\n    }\n  }\n}";
    let top = &key_lines(versions)[0];
    assert!(top.text.contains("5.31.0"), "{:?}", key_lines(versions));
    // A comment that pins nothing changes nothing.
    let (with, _) = shapes::score_line("timeout = 30  # seconds").unwrap();
    let (without, _) = shapes::score_line("timeout = 30").unwrap();
    assert_eq!(with, without);
}

#[test]
fn an_event_near_a_duration_is_no_run_summary() {
    assert!(!shapes::run_summary().is_match(
        "Warning BackOff 2m (x2891 over 10h) kubelet Back-off restarting failed container"
    ));
    assert!(shapes::run_summary()
        .is_match("Finished `release` profile [optimized] target(s) in 32.53s"));
}

#[test]
fn a_manifest_header_ranks_below_its_settings() {
    let manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: orders-worker-config\ndata:\n  DB_POOL_MAX: \"35\"";
    let top = key_lines(manifest);
    assert!(top[0].text.contains("DB_POOL_MAX"), "{top:?}");
    assert!(
        top.iter()
            .rev()
            .take(2)
            .all(|k| k.text.starts_with("apiVersion") || k.text.starts_with("kind")),
        "{top:?}"
    );
}

#[test]
fn a_threshold_is_a_key_line_and_a_block_header_is_not() {
    let template = "spec:\n  metrics:\n  - name: error-ratio\n    interval: 1m\n    successCondition: result[0] < 0.015\n    provider:\n      prometheus:\n        query: |\n          sum(rate(x[5m]))";
    let lines = key_lines(template);
    assert!(lines[0].text.contains("0.015"), "{lines:?}");
    assert!(!lines.iter().any(|k| k.text.ends_with(": |")), "{lines:?}");
}

#[test]
fn an_assignment_of_a_mapping_of_literals_is_a_setting() {
    let settings = "CELERY_TASK_ACKS_LATE = True\nCELERY_BROKER_TRANSPORT_OPTIONS = {\"visibility_timeout\": 3600, \"max_retries\": 3}\nlogger = get_logger(name)";
    let lines = texts(settings);
    assert!(lines.iter().any(|l| l.contains("3600")), "{lines:?}");
    assert!(!lines.iter().any(|l| l.starts_with("logger")), "{lines:?}");
}

#[test]
fn a_row_count_footer_is_no_key_line() {
    let table = " relname       | n_live\n---------------+----------\n invoices      |  18442907\n invoice_lines |  61203118\n(2 rows)";
    let lines = texts(table);
    assert!(!lines.iter().any(|l| l.contains("rows)")), "{lines:?}");
    assert!(lines.iter().any(|l| l.contains("18442907")), "{lines:?}");
}

#[test]
fn an_xml_element_holding_a_literal_is_a_setting() {
    let pom = "<project>\n  <parent>\n    <artifactId>spring-boot-starter-parent</artifactId>\n    <version>3.2.5</version>\n  </parent>\n  <description>The settlement service, with a long prose description here</description>\n</project>";
    let lines = texts(pom);
    assert!(
        lines.iter().any(|l| l.contains("<version>3.2.5</version>")),
        "{lines:?}"
    );
    assert!(
        !lines.iter().any(|l| l.contains("<description>")),
        "{lines:?}"
    );
    assert!(key_lines(
        "<string>com.fieldnotes.sync.refresh</string>\n<key>UIBackgroundModes</key>\n<array>"
    )
    .iter()
    .any(|k| k.text.contains("com.fieldnotes.sync.refresh")));
}

#[test]
fn the_rows_of_a_small_csv_are_key_lines() {
    let csv = "service,p99_ms,team\napi-gateway,450,platform\nauth-service,300,identity\nsearch,800,discovery";
    let lines = texts(csv);
    assert!(
        lines.iter().any(|l| l == "auth-service,300,identity"),
        "{lines:?}"
    );
    // Prose with commas is no CSV.
    assert!(texts("We looked at it, twice, and it was fine.\nThen we left, early.").is_empty());
}

#[test]
fn the_pending_row_of_a_status_listing_ranks_first() {
    let status = "Applied At                  Migration\n=======================================\nMon May 27 16:02:44 2024 -- 20240527155800_create_invoices.sql\nMon May 27 16:02:44 2024 -- 20240527160211_invoice_lines.sql\nTue Jun  4 10:21:07 2024 -- 20240604101955_invoice_currency.sql\nPending                  -- 20240611093012_add_invoice_status.sql";
    let top = &key_lines(status)[0];
    assert!(top.text.starts_with("Pending"), "{:?}", key_lines(status));
}

#[test]
fn a_mapping_header_is_no_key_line() {
    let config = "processors:\n  batch/logs:\n    send_batch_size: 2048\n    timeout: 2s";
    let lines = texts(config);
    assert!(!lines.iter().any(|l| l.ends_with(':')), "{lines:?}");
    assert!(lines.iter().any(|l| l.contains("2048")), "{lines:?}");
}

#[test]
fn a_json_record_of_literals_is_a_key_line() {
    let findings = "[\n  {\"filename\": \"app/reports/export.py\", \"line_number\": 88, \"test_id\": \"B608\"},\n  {\"filename\": \"config/production.py\", \"line_number\": 14, \"test_id\": \"B105\"}\n]";
    let lines = key_lines(findings);
    assert!(
        lines
            .iter()
            .any(|k| k.text.contains("B105") && k.score >= 6),
        "{lines:?}"
    );
}

#[test]
fn a_size_report_row_and_a_region_overflow_are_key_lines() {
    let size = "[38/38] Linking CXX executable firmware.elf\n   text\t   data\t    bss\t    dec\t    hex\tfilename\n 258940\t   1840\t  38912\t 299692\t  492ac\tbuild/stm32-release/firmware.elf";
    let lines = texts(size);
    assert!(lines.iter().any(|l| l.contains("258940")), "{lines:?}");
    let ld = "[234/236] Linking CXX executable firmware.elf\nFAILED: firmware.elf\narm-none-eabi/bin/ld: build/firmware.elf section `.text' will not fit in region `FLASH'\narm-none-eabi/bin/ld: region `FLASH' overflowed by 2316 bytes\ncollect2: error: ld returned 1 exit status";
    let top = &key_lines(ld)[0];
    assert!(
        top.text.contains("overflowed by 2316") || top.text.contains("will not fit"),
        "{:?}",
        key_lines(ld)
    );
}
