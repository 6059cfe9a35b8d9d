//! Keeps the tools' names, descriptions and input schemas from drifting:
//! they are compared with `fixtures/tool_schemas.json`, which holds Honcho's
//! (`src/utils/agent_tools.py`, 3.0.6). Changing a tool on purpose means
//! regenerating the fixture (`RONCHO_UPDATE_FIXTURES=1 cargo test -p
//! roncho-agent --test schemas`) and reviewing its diff.

use roncho_agent::tools;
use serde_json::{Value, json};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/tool_schemas.json");

fn rendered() -> Value {
    let all: serde_json::Map<String, Value> = tools::definitions(tools::ALL_TOOLS)
        .into_iter()
        .map(|tool| {
            (
                tool.name,
                json!({"description": tool.description, "input_schema": tool.parameters}),
            )
        })
        .collect();
    json!({
        "tools": all,
        "tool_sets": {
            "DIALECTIC_TOOLS": tools::DIALECTIC_TOOLS,
            "DIALECTIC_TOOLS_MINIMAL": tools::DIALECTIC_TOOLS_MINIMAL,
            "DREAMER_TOOLS": tools::DREAMER_TOOLS,
            "DEDUCTION_SPECIALIST_TOOLS": tools::DEDUCTION_SPECIALIST_TOOLS,
            "INDUCTION_SPECIALIST_TOOLS": tools::INDUCTION_SPECIALIST_TOOLS,
        }
    })
}

#[test]
fn tools_match_the_fixture() {
    let rendered = rendered();
    if std::env::var_os("RONCHO_UPDATE_FIXTURES").is_some() {
        std::fs::write(FIXTURE, serde_json::to_string_pretty(&rendered).unwrap() + "\n").unwrap();
    }
    let fixture: Value = serde_json::from_str(&std::fs::read_to_string(FIXTURE).unwrap()).unwrap();
    for (name, expected) in fixture["tools"].as_object().unwrap() {
        assert_eq!(
            &rendered["tools"][name], expected,
            "tool {name} drifted from the fixture"
        );
    }
    assert_eq!(rendered, fixture, "a tool was added or a tool set changed");
}

#[test]
fn every_tool_set_names_defined_tools_and_every_tool_is_used_or_known() {
    assert_eq!(tools::ALL_TOOLS.len(), 19);
    for set in [
        tools::DIALECTIC_TOOLS,
        tools::DIALECTIC_TOOLS_MINIMAL,
        tools::DREAMER_TOOLS,
        tools::DEDUCTION_SPECIALIST_TOOLS,
        tools::INDUCTION_SPECIALIST_TOOLS,
        tools::CARD_REFRESH_TOOLS,
    ] {
        assert_eq!(tools::definitions(set).len(), set.len(), "{set:?}");
    }
    for tool in tools::definitions(tools::ALL_TOOLS) {
        assert_eq!(
            tool.parameters["type"], "object",
            "{}: the root of every schema is an object",
            tool.name
        );
        assert!(tool.parameters["properties"].is_object(), "{}", tool.name);
    }
    assert!(tools::definition("no_such_tool").is_none());
}
