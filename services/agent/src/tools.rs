//! The agent tools: Honcho's names, descriptions and input schemas, verbatim
//! (`src/utils/agent_tools.py`, Honcho 3.0.6), so models used to Honcho's tool
//! traces keep their calling patterns; and the tool set of each agent.
//! `tests/schemas.rs` pins them against `tests/fixtures/tool_schemas.json`.

use roncho_core::llm::Tool;
use serde_json::{Value, json};

/// The dialectic agent at every level but minimal.
pub const DIALECTIC_TOOLS: &[&str] = &[
    "search_memory",
    "search_messages",
    "get_observation_context",
    "grep_messages",
    "get_messages_by_date_range",
    "search_messages_temporal",
    "get_reasoning_chain",
];

/// The dialectic agent at the minimal level.
pub const DIALECTIC_TOOLS_MINIMAL: &[&str] = &["search_memory", "search_messages"];

/// The omni dreamer (legacy single-agent path).
pub const DREAMER_TOOLS: &[&str] = &[
    "extract_preferences",
    "get_recent_observations",
    "get_most_derived_observations",
    "search_memory",
    "get_peer_card",
    "create_observations",
    "delete_observations",
    "update_peer_card",
    "search_messages",
    "get_observation_context",
    "get_reasoning_chain",
    "finish_consolidation",
];

/// The dreamer's deduction specialist.
pub const DEDUCTION_SPECIALIST_TOOLS: &[&str] = &[
    "get_recent_observations",
    "search_memory",
    "search_messages",
    "create_observations_deductive",
    "delete_observations",
    "update_peer_card",
];

/// The dreamer's induction specialist. Honcho 3.x took `update_peer_card`
/// away from it (the seed's list still has it): cards are the deduction
/// specialist's and the card refresh's.
pub const INDUCTION_SPECIALIST_TOOLS: &[&str] = &[
    "get_recent_observations",
    "search_memory",
    "search_messages",
    "create_observations_inductive",
];

/// The card-refresh dream.
pub const CARD_REFRESH_TOOLS: &[&str] = &["get_recent_observations", "search_memory", "update_peer_card"];

/// Every tool name, alphabetically.
pub const ALL_TOOLS: &[&str] = &[
    "create_observations",
    "create_observations_deductive",
    "create_observations_inductive",
    "delete_observations",
    "extract_preferences",
    "finish_consolidation",
    "get_messages_by_date_range",
    "get_most_derived_observations",
    "get_observation_context",
    "get_peer_card",
    "get_recent_history",
    "get_recent_observations",
    "get_reasoning_chain",
    "get_session_summary",
    "grep_messages",
    "search_memory",
    "search_messages",
    "search_messages_temporal",
    "update_peer_card",
];

/// Returns the definitions of `names`, in that order.
pub fn definitions(names: &[&str]) -> Vec<Tool> {
    names.iter().filter_map(|name| definition(name)).collect()
}

/// Returns one tool's definition; `None` for an unknown name.
pub fn definition(name: &str) -> Option<Tool> {
    let (description, parameters) = observation_tool(name)
        .or_else(|| history_tool(name))
        .or_else(|| search_tool(name))?;
    Some(Tool {
        name: name.to_owned(),
        description: description.to_owned(),
        parameters,
    })
}

/// Tools that write, delete or consolidate observations.
fn observation_tool(name: &str) -> Option<(&'static str, Value)> {
    Some(match name {
        "create_observations" => (
            "Create observations at any level: explicit (facts), deductive (logical necessities), inductive \
             (patterns), or contradiction (conflicting statements). For deductive, inductive, and contradiction \
             observations, missing or empty source_ids are invalid and will be rejected.",
            create_observations_schema(),
        ),
        "create_observations_deductive" => (
            "Create new deductive observations discovered while answering the query. Every observation must \
             include non-empty source_ids and premise text. Use this only for novel deductions grounded in \
             existing observations.",
            json!({
                "type": "object",
                "properties": {
                    "observations": {
                        "type": "array",
                        "description": "List of new deductive observations to create",
                        "items": {
                            "type": "object",
                            "properties": {
                                "content": {"type": "string", "description": "The deductive conclusion as a self-contained statement"},
                                "source_ids": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                                    "description": "Required non-empty list of source observation IDs supporting the deduction"},
                                "premises": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                                    "description": "Required human-readable premise text matching the source observations"}
                            },
                            "required": ["content", "source_ids", "premises"],
                            "additionalProperties": false
                        }
                    }
                },
                "required": ["observations"]
            }),
        ),
        "create_observations_inductive" => (
            "Create new inductive observations discovered while answering the query. Every observation must \
             include source_ids, source text, pattern_type, and confidence. Use this only for patterns supported \
             by multiple observations.",
            create_observations_inductive_schema(),
        ),
        "delete_observations" => (
            "Delete observations by their IDs. Use the exact ID shown in [id:xxx] format from search results. \
             Example: if observation shows '[id:abc123XYZ]', pass 'abc123XYZ' to delete it.",
            json!({
                "type": "object",
                "properties": {
                    "observation_ids": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "List of observation IDs to delete (use the exact ID from [id:xxx] in search results)"
                    }
                },
                "required": ["observation_ids"]
            }),
        ),
        "extract_preferences" => (
            "Extract user preferences and standing instructions from conversation history. This tool performs \
             both semantic and text searches for preferences, instructions, and communication style preferences, \
             then returns them for adding to the peer card. Call this FIRST during consolidation.",
            json!({"type": "object", "properties": {}}),
        ),
        "finish_consolidation" => (
            "Signal that consolidation is complete. Call this when you have finished your consolidation work and \
             are ready to stop. You MUST call this tool when done - do not keep exploring indefinitely.",
            json!({
                "type": "object",
                "properties": {
                    "summary": {
                        "type": "string",
                        "description": "Brief summary of what was accomplished (peer card updates, observations consolidated, observations deleted)"
                    }
                },
                "required": ["summary"]
            }),
        ),
        _ => return None,
    })
}

/// Tools that read a peer's history: messages by date, observations, the card, summaries.
fn history_tool(name: &str) -> Option<(&'static str, Value)> {
    Some(match name {
        "get_messages_by_date_range" => (
            "Get messages from a specific date range. Use this to find what was discussed during a particular \
             time period, or to compare information before vs after a date. Essential for knowledge update \
             questions.",
            json!({
                "type": "object",
                "properties": {
                    "after_date": {"type": "string", "description": "Start date (ISO format, e.g., '2024-01-15'). Returns messages after this date."},
                    "before_date": {"type": "string", "description": "End date (ISO format). Returns messages before this date."},
                    "limit": {"type": "integer", "default": 20, "description": "Maximum messages to return (default: 20, max: 50)"},
                    "order": {"type": "string", "enum": ["asc", "desc"], "default": "desc",
                        "description": "Sort order: 'asc' for oldest first, 'desc' for newest first (default: desc)"}
                }
            }),
        ),
        "get_most_derived_observations" => (
            "Get observations that have been reinforced most frequently across conversations. These represent \
             the most established facts about the peer.",
            json!({
                "type": "object",
                "properties": {
                    "limit": {"type": "integer", "default": 10, "description": "Maximum number of observations to return (default: 10)"}
                }
            }),
        ),
        "get_observation_context" => (
            "Retrieve messages for given message IDs along with surrounding context. Takes message IDs (from an \
             observation's message_ids field) and retrieves those messages plus the messages immediately before \
             and after each one to provide conversation context.",
            json!({
                "type": "object",
                "properties": {
                    "message_ids": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "List of message IDs to retrieve (get these from observation.message_ids in search results)"
                    }
                },
                "required": ["message_ids"]
            }),
        ),
        "get_peer_card" => (
            "Get the peer card containing known biographical information about the peer (name, age, location, \
             etc.).",
            json!({"type": "object", "properties": {}}),
        ),
        "get_recent_history" => (
            "Retrieve recent conversation history to get more context about the conversation.",
            json!({"type": "object", "properties": {}}),
        ),
        "get_recent_observations" => (
            "Get the most recent observations about the peer. Useful for understanding what's been learned \
             recently.",
            json!({
                "type": "object",
                "properties": {
                    "limit": {"type": "integer", "default": 10, "description": "Maximum number of observations to return (default: 10)"},
                    "session_only": {"type": "boolean", "default": false,
                        "description": "If true, only return observations from the current session (default: false)"}
                }
            }),
        ),
        "get_reasoning_chain" => (
            "Get the reasoning chain for an observation - traverse the tree to find premises (for deductive) or \
             sources (for inductive), and/or find conclusions derived from this observation. Use this to \
             understand how an observation was derived or what conclusions depend on it.",
            json!({
                "type": "object",
                "properties": {
                    "observation_id": {"type": "string", "description": "The document ID of the observation to get the reasoning chain for"},
                    "direction": {"type": "string", "enum": ["premises", "conclusions", "both"], "default": "both",
                        "description": "'premises' to get what this observation is based on, 'conclusions' to get what depends on it, 'both' for full context"}
                },
                "required": ["observation_id"]
            }),
        ),
        "get_session_summary" => (
            "Get the session summary (short or long form). Useful for understanding the overall conversation \
             context.",
            json!({
                "type": "object",
                "properties": {
                    "summary_type": {"type": "string", "enum": ["short", "long"], "default": "short",
                        "description": "Type of summary to retrieve (default: short)"}
                }
            }),
        ),
        _ => return None,
    })
}

/// Tools that search messages and memory, and the card update.
fn search_tool(name: &str) -> Option<(&'static str, Value)> {
    Some(match name {
        "grep_messages" => (
            "Search for messages containing specific text (case-insensitive). Unlike semantic search, this finds \
             EXACT text matches. Use for finding specific names, dates, phrases, or keywords mentioned in \
             conversations. Returns messages with surrounding context.",
            json!({
                "type": "object",
                "properties": {
                    "text": {"type": "string", "description": "Text to search for (case-insensitive substring match)"},
                    "limit": {"type": "integer", "default": 10, "description": "Maximum messages to return (default: 10, max: 30)"},
                    "context_window": {"type": "integer", "default": 2, "description": "Number of messages before/after each match to include (default: 2)"}
                },
                "required": ["text"]
            }),
        ),
        "search_memory" => (
            "Search for observations in memory using semantic similarity. Use this to find relevant information \
             about the peer when you need to recall specific details.",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "Search query text"},
                    "top_k": {"type": "integer", "default": 20, "description": "(Optional) number of results to return (default: 20, max: 40)"}
                },
                "required": ["query"]
            }),
        ),
        "search_messages" => (
            "Search for messages using semantic similarity and retrieve conversation snippets. Returns matching \
             messages with surrounding context (2 messages before and after). Nearby matches within the same \
             session are merged into a single snippet to avoid repetition.",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "Search query text to find relevant messages"},
                    "limit": {"type": "integer", "default": 10, "description": "Maximum number of matching messages to return (default: 10, max: 20)"}
                },
                "required": ["query"]
            }),
        ),
        "search_messages_temporal" => (
            "Semantic search for messages with optional date filtering. Combines the power of semantic search \
             with time constraints. Use after_date to find recent mentions of a topic, or before_date to find \
             what was said about something before a certain point. Best for knowledge update questions where you \
             need to find the MOST RECENT discussion of a topic.",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "Semantic search query"},
                    "after_date": {"type": "string", "description": "Only return messages after this date (ISO format, e.g., '2024-01-15')"},
                    "before_date": {"type": "string", "description": "Only return messages before this date (ISO format)"},
                    "limit": {"type": "integer", "default": 10, "description": "Maximum messages to return (default: 10, max: 20)"},
                    "context_window": {"type": "integer", "default": 2, "description": "Messages before/after each match (default: 2)"}
                },
                "required": ["query"]
            }),
        ),
        "update_peer_card" => (
            "Update the peer card with durable profile facts about the observed peer. Only include stable \
             biographical facts, standing instructions, and long-lived preferences/traits. Do not include one-off \
             conclusions, temporary events, or duplicate entries.",
            json!({
                "type": "object",
                "properties": {
                    "content": {
                        "type": "array",
                        "description": "Complete deduplicated peer card list (max 40 entries). Each entry should be a concise standalone profile fact.",
                        "items": {"type": "string"}
                    }
                },
                "required": ["content"]
            }),
        ),
        _ => return None,
    })
}

fn create_observations_schema() -> Value {
    let at_least = |count: u32| json!({"type": "array", "items": {"type": "string"}, "minItems": count});
    json!({
        "type": "object",
        "properties": {
            "observations": {
                "type": "array",
                "description": "List of observations to create",
                "items": {
                    "type": "object",
                    "properties": {
                        "content": {"type": "string", "description": "The observation content"},
                        "level": {
                            "type": "string",
                            "enum": ["explicit", "deductive", "inductive", "contradiction"],
                            "description": "Level: 'explicit' for direct facts, 'deductive' for logical necessities, 'inductive' for patterns, 'contradiction' for conflicting statements"
                        },
                        "source_ids": {
                            "type": "array",
                            "items": {"type": "string"},
                            "description": "Document IDs of source or premise observations. Required and must be non-empty for deductive, inductive, and contradiction observations."
                        },
                        "premises": {
                            "type": "array",
                            "items": {"type": "string"},
                            "description": "(For deductive) Human-readable premise text for display"
                        },
                        "sources": {
                            "type": "array",
                            "items": {"type": "string"},
                            "description": "(For inductive/contradiction) Human-readable source text for display"
                        },
                        "pattern_type": {
                            "type": "string",
                            "enum": ["preference", "behavior", "personality", "tendency", "correlation"],
                            "description": "(For inductive only) Type of pattern being identified"
                        },
                        "confidence": {
                            "type": "string",
                            "enum": ["high", "medium", "low"],
                            "description": "(For inductive only) Confidence level: 'high' for 5+ sources, 'medium' for 3-4, 'low' for 2"
                        }
                    },
                    "required": ["content", "level"],
                    "additionalProperties": false,
                    "allOf": [
                        {"if": {"properties": {"level": {"const": "deductive"}}},
                         "then": {"required": ["source_ids", "premises"],
                                  "properties": {"source_ids": at_least(1), "premises": at_least(1)}}},
                        {"if": {"properties": {"level": {"const": "inductive"}}},
                         "then": {"required": ["source_ids", "sources", "pattern_type", "confidence"],
                                  "properties": {"source_ids": at_least(2), "sources": at_least(2)}}},
                        {"if": {"properties": {"level": {"const": "contradiction"}}},
                         "then": {"required": ["source_ids", "sources"],
                                  "properties": {"source_ids": at_least(2), "sources": at_least(2)}}}
                    ]
                }
            }
        },
        "required": ["observations"]
    })
}

/// The input of `create_observations_inductive`: observations with their
/// sources, pattern type and confidence.
fn create_observations_inductive_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "observations": {
                "type": "array",
                "description": "List of new inductive observations to create",
                "items": {
                    "type": "object",
                    "properties": {
                        "content": {"type": "string", "description": "The inductive pattern or generalization as a self-contained statement"},
                        "source_ids": {"type": "array", "items": {"type": "string"}, "minItems": 2,
                            "description": "Required list of at least two source observation IDs supporting the pattern"},
                        "sources": {"type": "array", "items": {"type": "string"}, "minItems": 2,
                            "description": "Required human-readable evidence text matching the source observations"},
                        "pattern_type": {"type": "string",
                            "enum": ["preference", "behavior", "personality", "tendency", "correlation"],
                            "description": "Required pattern category"},
                        "confidence": {"type": "string", "enum": ["high", "medium", "low"],
                            "description": "Required confidence level based on evidence count"}
                    },
                    "required": ["content", "source_ids", "sources", "pattern_type", "confidence"],
                    "additionalProperties": false
                }
            }
        },
        "required": ["observations"]
    })
}
