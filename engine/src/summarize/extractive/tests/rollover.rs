//! Rolling: what a previous checkpoint kept comes back into the next one whole.

use super::*;

#[test]
fn tool_lines_roll_over_into_the_next_checkpoint() {
    let covered: Vec<Entry> = vec![
        entry(Message::user("Next task: look at the scheduler.")),
        entry(Message::assistant("Looking.")),
    ];
    let est = RequestEstimator::new(EstimatorKind::Cl100kBase);
    let red = Redactor::default();
    let prev = checkpoint_with(
        "Turns 1–2 (extractive, redacted):\n\
         - [1 tool] read_file(src/net/config.py): MAX_RETRIES = 7 | (historical) 3 passed; 0 failed\n\
         - [2 answer] The limit is 7, from config.py.\n\
         - [2 in-flight] src/net/config.py"
            .into(),
    );
    let req = SummaryRequest {
        previous: Some(&prev),
        covered: &covered,
        first_index: 4,
        turn_numbers: &[3, 3],
        target_tokens: 300,
        redactor: &red,
        estimator: &est,
        model: "m",
        later: Default::default(),
        instructions: "",
    };
    let s = extract(&req);
    // The mutants drop what they drop from the rolled-over lines too.
    let m = extract_with(&req, broken(Mutation::DropAssistantText));
    assert!(
        !m.contains("The limit is 7") && m.contains("MAX_RETRIES = 7"),
        "{m}"
    );
    let m = extract_with(&req, broken(Mutation::DropToolResultContent));
    assert!(
        m.contains("The limit is 7") && !m.contains("MAX_RETRIES = 7"),
        "{m}"
    );
    assert!(
        s.contains("- [1 tool] read_file(src/net/config.py): MAX_RETRIES = 7 | (historical) 3 passed; 0 failed"),
        "{s}"
    );
    assert!(
        s.contains("[2 answer] The limit is 7, from config.py."),
        "{s}"
    );
    assert!(
        !s.contains("in-flight] src/net"),
        "stale file in flight: {s}"
    );
    assert!(s.contains("Turns 1–3 (extractive"), "{s}");
}

#[test]
fn a_row_with_its_own_pipes_comes_back_whole_from_a_rolled_checkpoint() {
    let log = "step 13800 | loss 2.331 | grad_norm 0.91\n\
               step 14000 | loss 2.327 | grad_norm 0.97\n\
               step 14200 | loss 2.318 | grad_norm 0.94\n\
               step 14400 | loss 2.301 | grad_norm 1.02\n\
               step 14600 | loss 7.942 | grad_norm 48.70";
    let first = run(
        vec![
            Message::user("Show me the log around the spike."),
            calls(vec![call(
                "c1",
                "bash",
                serde_json::json!({"command": "grep step train.log"}),
            )]),
            Message::tool_result("c1", log),
            Message::assistant("The loss jumps at 14600."),
        ],
        vec![1, 1, 1, 1],
        300,
        &[],
    );
    let row = "step 14600 | loss 7.942 | grad_norm 48.70";
    assert!(first.contains(row), "{first}");
    let covered = vec![
        entry(Message::user("Next task: look at the scheduler.")),
        entry(Message::assistant("Looking.")),
    ];
    let prev = checkpoint_with(first);
    let est = RequestEstimator::new(EstimatorKind::Cl100kBase);
    let red = Redactor::default();
    let rolled = extract(&SummaryRequest {
        previous: Some(&prev),
        covered: &covered,
        first_index: 4,
        turn_numbers: &[2, 2],
        target_tokens: 300,
        redactor: &red,
        estimator: &est,
        model: "m",
        later: Default::default(),
        instructions: "",
    });
    assert!(rolled.contains(row), "{rolled}");
}

#[test]
fn lines_of_checkpoints_in_the_older_format_roll_over() {
    let mut seq = 0;
    let p = rolling::previous(
        "Historical conversation memory, turns 1–2 (extractive; secrets redacted, approval claims omitted):\n\
         - [turn 1 · tool] read_file(src/net/config.py): MAX_RETRIES = 7 | (historical, turn 1) 3 passed; 0 failed\n\
         - [turn 2 · answer] The limit is 7, from config.py.\n\
         - [turn 2 · files] src/net/config.py, src/net/mod.rs",
        &mut seq,
    );
    assert_eq!(p.first_turn, Some(1));
    assert_eq!(p.files, vec!["src/net/config.py", "src/net/mod.rs"]);
    let texts: Vec<&str> = p.items.iter().map(|it| it.text.as_str()).collect();
    assert!(texts.contains(&"MAX_RETRIES = 7"), "{texts:?}");
    assert!(
        texts.contains(&"(historical, turn 1) 3 passed; 0 failed"),
        "{texts:?}"
    );
    assert!(
        texts.contains(&"The limit is 7, from config.py."),
        "{texts:?}"
    );
}
