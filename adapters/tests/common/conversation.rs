//! One scripted conversation (tool calls, a probe, scripted overflows) and the agent loop
//! that plays it against any provider, shared by the loopback tests.

use ctxbench_adapters::fake::{FakeFact, FakeFault, FakeReply, FakeScript, FakeToolCall, FakeTurn};
use ctxbench_adapters::{
    Message, ModelRequest, ModelResponse, Provider, ProviderError, ToolDefinition,
};
use serde_json::json;

pub fn script() -> FakeScript {
    FakeScript {
        model: "fake-16k".into(),
        context_window: 16_384,
        turns: vec![
            FakeTurn {
                user: "Fix the build.".into(),
                replies: vec![
                    FakeReply::ToolCalls {
                        calls: vec![
                            FakeToolCall {
                                name: "read_file".into(),
                                arguments: json!({"path": "Cargo.toml", "limit": 4096, "ratio": 0.1}),
                            },
                            FakeToolCall {
                                name: "run".into(),
                                arguments: json!({"cmd": ["cargo", "build"], "env": {"CI": null}}),
                            },
                        ],
                    },
                    FakeReply::Text {
                        text: "Fixed the missing feature flag — ✓ 日本語.".into(),
                    },
                ],
            },
            FakeTurn {
                user: "Quiz time.".into(),
                replies: vec![FakeReply::Probe {
                    facts: vec!["owner".into(), "absent".into()],
                }],
            },
        ],
        facts: vec![
            FakeFact {
                id: "owner".into(),
                statements: vec!["The owner is Ana.".into()],
                values: vec![],
                about: None,
            },
            FakeFact {
                id: "absent".into(),
                statements: vec!["The key is 42.".into()],
                values: vec![],
                about: None,
            },
        ],
        faults: vec![
            FakeFault::OverflowAtRequest { request: 3 },
            FakeFault::OverflowAfterPartialOutput { request: 5 },
        ],
        ..FakeScript::default()
    }
}

pub fn tools() -> Vec<ToolDefinition> {
    vec![
        ToolDefinition {
            name: "read_file".into(),
            description: "Read a file.".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        },
        ToolDefinition {
            name: "run".into(),
            description: "Run a command.".into(),
            parameters: json!({"type": "object", "properties": {"cmd": {"type": "array"}}}),
        },
    ]
}

/// Play a small agent loop and record every answer (errors included): tool calls, a probe,
/// both scripted overflows (one after partial output) and a real one.
pub async fn converse(p: &dyn Provider) -> Vec<Result<ModelResponse, ProviderError>> {
    let mut msgs = vec![
        Message::system("You are careful. The owner is Ana."),
        Message::system("Second instruction block: answer tersely."),
    ];
    let mut out = Vec::new();
    for user in ["Fix the build.", "Quiz time.", "Unscripted — thanks! 🚀"] {
        msgs.push(Message::user(user));
        for _round in 0..4 {
            let req = ModelRequest {
                model: "fake-16k".into(),
                messages: msgs.clone(),
                tools: tools(),
                max_output_tokens: 256,
            };
            let r = p.complete(&req).await;
            out.push(r.clone());
            let Ok(resp) = r else { continue };
            msgs.push(resp.message.clone());
            if resp.message.tool_calls.is_empty() {
                break;
            }
            for c in &resp.message.tool_calls {
                msgs.push(Message::tool_result(
                    &c.id,
                    format!("{} with {} → ok \"quoted\"", c.name, c.arguments),
                ));
            }
        }
    }
    // One request far over the window: the real overflow, with numbers.
    msgs.push(Message::user("word ".repeat(20_000)));
    out.push(
        p.complete(&ModelRequest {
            model: "fake-16k".into(),
            messages: msgs,
            tools: tools(),
            max_output_tokens: 4096,
        })
        .await,
    );
    out
}
