//! How a scripted tool name is found among the tools a request advertises.
//!
//! Runtimes often namespace tools they did not define themselves: a tool served over MCP
//! reaches the model as `mcp__<server>__<tool>` (Claude Code, Codex) or `<server>.<tool>`.
//! A model calls what the request advertises, so the fake does too: the scripted name when
//! it is advertised as is, otherwise the one advertised name that ends in it after a
//! namespace separator. The harness uses the same rule to match the calls back to the
//! script.

use crate::ToolDefinition;

/// Separators a runtime puts between a namespace and a tool's own name.
const SEPARATORS: [&str; 4] = ["__", ".", "/", ":"];

/// Whether `advertised` is the tool `scripted`, as is or under a namespace.
pub fn names_tool(advertised: &str, scripted: &str) -> bool {
    advertised == scripted
        || advertised.strip_suffix(scripted).is_some_and(|ns| {
            SEPARATORS
                .iter()
                .any(|s| ns.len() > s.len() && ns.ends_with(s))
        })
}

/// The name to call the scripted tool by in a request advertising `tools`: the scripted
/// name itself when advertised (or when the request advertises no tools), otherwise the one
/// namespaced name that [`names_tool`] matches; with none or several, the scripted name.
pub fn advertised_name<'a>(tools: &'a [ToolDefinition], scripted: &'a str) -> &'a str {
    if tools.is_empty() || tools.iter().any(|t| t.name == scripted) {
        return scripted;
    }
    let mut found = tools.iter().filter(|t| names_tool(&t.name, scripted));
    match (found.next(), found.next()) {
        (Some(t), None) => &t.name,
        _ => scripted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str) -> ToolDefinition {
        ToolDefinition {
            name: name.into(),
            description: String::new(),
            parameters: serde_json::json!({}),
        }
    }

    #[test]
    fn namespaced_names_match_only_after_a_separator() {
        assert!(names_tool("read_file", "read_file"));
        assert!(names_tool("mcp__ctxbench__read_file", "read_file"));
        assert!(names_tool("files.read_file", "read_file"));
        assert!(!names_tool("myread_file", "read_file"));
        assert!(!names_tool("read_file", "file"));
        assert!(!names_tool("__read_file", "read_file"));
        assert!(!names_tool("mcp__x__read_file", "grep"));
    }

    #[test]
    fn the_advertised_name_is_used_when_it_is_unambiguous() {
        let tools = [
            tool("mcp__ctxbench__read_file"),
            tool("mcp__ctxbench__grep"),
        ];
        assert_eq!(
            advertised_name(&tools, "read_file"),
            "mcp__ctxbench__read_file"
        );
        assert_eq!(advertised_name(&tools, "run_tests"), "run_tests");
        assert_eq!(advertised_name(&[], "read_file"), "read_file");
        let exact = [tool("read_file"), tool("mcp__x__read_file")];
        assert_eq!(advertised_name(&exact, "read_file"), "read_file");
        let two = [tool("a__read_file"), tool("b__read_file")];
        assert_eq!(advertised_name(&two, "read_file"), "read_file");
    }
}
