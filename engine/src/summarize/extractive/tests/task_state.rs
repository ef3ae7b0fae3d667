//! Task state through compaction: the newest request with all its parts, the last command
//! and its result, and what a later turn in the retained tail makes history.

use super::*;

#[test]
fn the_newest_request_survives_with_all_its_parts_and_the_task_state() {
    let mut msgs = Vec::new();
    let mut turns = Vec::new();
    work(1, 20, &mut msgs, &mut turns);
    msgs.push(Message::user(
        "Three things: rename the config loader to load_settings; then bump the crate to 0.9.1. \
         Finally, add a changelog entry that mentions the rename.",
    ));
    msgs.push(calls(vec![call(
        "k1",
        "run",
        serde_json::json!({"cmd": "cargo test -p loader"}),
    )]));
    msgs.push(Message::tool_result(
        "k1",
        "running 14 tests\ntest result: FAILED. 13 passed; 1 failed; 0 ignored\nerror: test failed, to rerun pass `-p loader --lib`",
    ));
    msgs.push(calls(vec![call(
        "k2",
        "edit_file",
        serde_json::json!({"path": "crates/loader/src/lib.rs"}),
    )]));
    msgs.push(Message::tool_result("k2", "ok"));
    msgs.push(Message::assistant(
        "The rename is in; one test still fails.",
    ));
    turns.extend([21; 6]);
    let s = run(msgs.clone(), turns.clone(), 350, &[]);
    assert!(s.contains("[21 request] Three things: rename the config loader to load_settings; then bump the crate to 0.9.1. Finally, add a changelog entry that mentions the rename."), "{s}");
    assert!(
        s.contains("[21 command] edit_file(crates/loader/src/lib.rs): ok"),
        "{s}"
    );
    // The edit is the last call; the test run, the last command (what "what did you run
    // last?" asks about).
    assert!(
        s.contains("[21 command] run(cargo test -p loader): "),
        "{s}"
    );
    assert!(
        s.contains("(historical) test result: FAILED. 13 passed; 1 failed"),
        "{s}"
    );
    assert!(tokens(&s) <= 350);
    let m = run_with(
        msgs,
        turns,
        350,
        &[],
        broken(Mutation::ForgetLaterRequestParts),
    );
    assert!(
        m.contains("[21 request] Three things: rename the config loader to load_settings;"),
        "{m}"
    );
    assert!(
        !m.contains("0.9.1") && !m.contains("changelog entry"),
        "{m}"
    );
}

#[test]
fn a_later_turn_in_the_tail_makes_the_covered_task_state_history() {
    let mut msgs = Vec::new();
    let mut turns = Vec::new();
    work(1, 20, &mut msgs, &mut turns);
    msgs.push(Message::user(
        "Bump the crate to 0.9.1 and add a changelog entry that mentions the rename.",
    ));
    let edit = call(
        "k1",
        "edit_file",
        serde_json::json!({"path": "crates/loader/Cargo.toml"}),
    );
    msgs.extend([
        calls(vec![edit]),
        Message::tool_result("k1", "ok"),
        Message::assistant("Bumped to 0.9.1."),
    ]);
    turns.extend([21; 4]);
    let current = run(msgs.clone(), turns.clone(), 350, &[]);
    assert!(current.contains("[21 request] Bump the crate"), "{current}");
    assert!(current.contains("[21 command] edit_file("), "{current}");
    let later = Later {
        request: true,
        calls: true,
        commands: false,
    };
    let s = run_later(msgs, turns, 350, &[], Breakage::default(), later);
    // The request is what the user said now, the command one more tool result.
    assert!(!s.contains("request]") && !s.contains("command]"), "{s}");
    assert!(!s.contains("in-flight]"), "{s}");
    assert!(s.contains("0.9.1"), "{s}");
}

#[test]
fn the_last_command_stays_the_last_command_when_file_reads_follow_it() {
    let mut msgs = vec![Message::user(
        "Hammer the deadline test, 50 runs with race on.",
    )];
    let cmd = "go test ./internal/quote/... -run TestQuoteDeadline -count=50 -race";
    msgs.extend([
        calls(vec![call(
            "c1",
            "bash",
            serde_json::json!({ "command": cmd }),
        )]),
        Message::tool_result(
            "c1",
            "--- FAIL: TestQuoteDeadline: 3/50 iterations returned DeadlineExceeded\nFAIL",
        ),
        Message::assistant("Still failing a few iterations."),
    ]);
    let mut turns = vec![1; 4];
    work(2, 12, &mut msgs, &mut turns);
    // Reads in the retained tail leave it the last command; a later command does not.
    let reads = Later {
        request: true,
        calls: true,
        commands: false,
    };
    let s = run_later(
        msgs.clone(),
        turns.clone(),
        450,
        &[],
        Breakage::default(),
        reads,
    );
    assert!(s.contains(&format!("[1 command] bash({cmd})")), "{s}");
    let ran = Later {
        commands: true,
        ..reads
    };
    let s = run_later(msgs, turns, 450, &[], Breakage::default(), ran);
    assert!(!s.contains("command]"), "{s}");
}

#[test]
fn a_huge_newest_request_keeps_its_informative_parts_within_budget() {
    let mut msgs = Vec::new();
    let mut turns = Vec::new();
    work(1, 5, &mut msgs, &mut turns);
    msgs.push(Message::user(format!(
        "Here is the report. {} The on-call owner for INC-2209 is Priya Raman. {}",
        prose(3, 120),
        prose(4, 60)
    )));
    msgs.push(Message::assistant("Read it."));
    turns.extend([6, 6]);
    let s = run(msgs, turns, 300, &[]);
    assert!(
        s.contains("The on-call owner for INC-2209 is Priya Raman."),
        "{s}"
    );
    assert!(tokens(&s) <= 300, "{}", tokens(&s));
}
