//! Which background work a new message creates, by Honcho's rules
//! (honcho-v3.md §4.1–4.2, `src/deriver/enqueue.py`):
//!
//! - **Representation** (when reasoning is enabled — message over session
//!   over workspace configuration, default on): if the sender is observed
//!   (`observe_me`: session membership value, else the peer's configuration,
//!   else true), one task whose observers are the sender and every other
//!   active member with `observe_others` (default false). An unobserved
//!   sender creates no task at all.
//! - **Summary** (when `summary.enabled`, session over workspace, default
//!   on): at every `messages_per_short_summary`-th (20) and
//!   `messages_per_long_summary`-th (60) message of the session, regardless
//!   of reasoning.
//!
//! A batch of messages writes one representation task per peer and set of
//! observers ([`tasks_for_messages`]), carrying the batch's messages of that
//! peer in order: the deriver takes a unit's messages together in any case,
//! and a row per message made the task outbox a third of a write's cost.

use serde_json::{Value, json};

use crate::model::{JsonObject, Message, SessionPeerConfig};
use crate::queue::NewTask;

/// Honcho's default summary cadence.
pub const SHORT_SUMMARY_EVERY: i64 = 20;
pub const LONG_SUMMARY_EVERY: i64 = 60;

/// A session member as derivation sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    pub peer_id: String,
    /// The peer's own configuration (`observe_me`).
    pub peer_configuration: JsonObject,
    /// The membership's settings.
    pub session_config: SessionPeerConfig,
    /// Still in the session (has not left).
    pub active: bool,
}

/// A role's prompt followed by the configuration's custom instructions
/// (after Honcho's own, as Honcho places them).
pub fn with_instructions(prompt: String, instructions: Option<&str>) -> String {
    match instructions.map(str::trim).filter(|text| !text.is_empty()) {
        Some(instructions) => format!("{prompt}\n\nInstructions from this workspace's configuration:\n{instructions}"),
        None => prompt,
    }
}

/// The settings that decide a message's work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub reasoning: bool,
    pub summary: bool,
    pub short_every: i64,
    pub long_every: i64,
    /// The configuration's `custom_instructions` for the deriver and the
    /// summariser, carried in their tasks to follow Honcho's own prompts.
    pub reasoning_instructions: Option<String>,
    pub summary_instructions: Option<String>,
}

/// The key under which a configuration holds its instructions: at its top
/// level (every role) and in each role's section.
pub const CUSTOM_INSTRUCTIONS: &str = "custom_instructions";

/// Returns the custom instructions of `section` the layers give (first
/// layer wins): the configuration's top-level ones, then the section's,
/// each from the first layer that sets it; `None` when neither is set.
pub fn custom_instructions(layers: &[&JsonObject], section: &str) -> Option<String> {
    let text = |value: Option<&Value>| {
        value
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|text| !text.is_empty())
            .map(str::to_owned)
    };
    let top = layers.iter().find_map(|layer| text(layer.get(CUSTOM_INSTRUCTIONS)));
    let own = layers
        .iter()
        .find_map(|layer| text(lookup(layer, section, CUSTOM_INSTRUCTIONS)));
    match (top, own) {
        (None, None) => None,
        (top, own) => Some(top.into_iter().chain(own).collect::<Vec<_>>().join("\n\n")),
    }
}

fn lookup<'a>(configuration: &'a JsonObject, section: &str, key: &str) -> Option<&'a Value> {
    configuration.get(section)?.as_object()?.get(key)
}

/// A boolean as Honcho's Pydantic models read one from text: `true`, `1`,
/// `yes`, `on`, `t`, `y` or `false`, `0`, `no`, `off`, `f`, `n`, in any
/// case; `None` for anything else.
pub fn parse_bool(text: &str) -> Option<bool> {
    match text.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" | "t" | "y" => Some(true),
        "false" | "0" | "no" | "off" | "f" | "n" => Some(false),
        _ => None,
    }
}

/// A JSON value as a boolean of Pydantic's lax mode: a boolean, 0 or 1, or
/// text [`parse_bool`] reads; `None` for anything else.
pub fn lax_bool(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(flag) => Some(*flag),
        Value::Number(number) => match number.as_f64() {
            Some(0.0) => Some(false),
            Some(1.0) => Some(true),
            _ => None,
        },
        Value::String(text) => parse_bool(text),
        _ => None,
    }
}

/// The first layer that sets `section.key` as a boolean.
fn first_bool(layers: &[&JsonObject], section: &str, key: &str) -> Option<bool> {
    layers.iter().find_map(|layer| lax_bool(lookup(layer, section, key)?))
}

/// The first layer that sets `section.key` as a positive integer.
fn first_count(layers: &[&JsonObject], section: &str, key: &str) -> Option<i64> {
    layers
        .iter()
        .find_map(|layer| lookup(layer, section, key)?.as_i64())
        .filter(|count| *count > 0)
}

impl Settings {
    /// Resolves settings: message over session over workspace over defaults
    /// (a message configuration only carries `reasoning`).
    pub fn resolve(workspace: &JsonObject, session: &JsonObject, message: &JsonObject) -> Self {
        let session_first = [session, workspace];
        Settings {
            reasoning: first_bool(&[message, session, workspace], "reasoning", "enabled").unwrap_or(true),
            summary: first_bool(&session_first, "summary", "enabled").unwrap_or(true),
            short_every: first_count(&session_first, "summary", "messages_per_short_summary")
                .unwrap_or(SHORT_SUMMARY_EVERY),
            long_every: first_count(&session_first, "summary", "messages_per_long_summary")
                .unwrap_or(LONG_SUMMARY_EVERY),
            reasoning_instructions: custom_instructions(&[message, session, workspace], "reasoning"),
            summary_instructions: custom_instructions(&session_first, "summary"),
        }
    }
}

/// Returns who observes a message from `sender`: empty when the sender is
/// not observed, else the sender first, then the other active members with
/// `observe_others`, in the order given.
pub fn observers(sender: &str, sender_configuration: &JsonObject, members: &[Member]) -> Vec<String> {
    let membership = members.iter().find(|member| member.peer_id == sender);
    let observe_me = membership
        .and_then(|member| member.session_config.observe_me)
        .or_else(|| sender_configuration.get("observe_me").and_then(lax_bool))
        .unwrap_or(true);
    if !observe_me {
        return Vec::new();
    }
    std::iter::once(sender.to_owned())
        .chain(
            members
                .iter()
                .filter(|member| {
                    member.active && member.peer_id != sender && member.session_config.observe_others == Some(true)
                })
                .map(|member| member.peer_id.clone()),
        )
        .collect()
}

/// A task of `message`, deduplicated per message and task type.
fn task(message: &Message, work_unit_key: String, task_type: &str, payload: Value) -> NewTask {
    NewTask {
        work_unit_key,
        dedup_id: format!("{task_type}:{}", message.id),
        workspace_id: message.workspace_id.clone(),
        session_id: Some(message.session_id.clone()),
        observer_id: None,
        sender_id: Some(message.peer_id.clone()),
        payload,
        items: 1,
    }
}

/// Returns the tasks that stored `message` creates in its session.
/// `sender_configuration` is the sending peer's configuration; `settings`
/// come from [`Settings::resolve`] with the message's configuration.
pub fn tasks_for_message(
    message: &Message,
    sender_configuration: &JsonObject,
    members: &[Member],
    settings: &Settings,
) -> Vec<NewTask> {
    let (workspace, session) = (&message.workspace_id, &message.session_id);
    let mut tasks = Vec::new();
    if settings.reasoning {
        let observers = observers(&message.peer_id, sender_configuration, members);
        if !observers.is_empty() {
            let mut payload = json!({
                "message_ids": [message.id],
                "observed": message.peer_id,
                "observers": observers,
            });
            if let Some(instructions) = &settings.reasoning_instructions {
                payload[CUSTOM_INSTRUCTIONS] = json!(instructions);
            }
            tasks.push(task(
                message,
                format!("representation:{workspace}:{session}:{}", message.peer_id),
                "representation",
                payload,
            ));
        }
    }
    let seq = message.seq_in_session;
    let kinds: Vec<&str> = [("short", settings.short_every), ("long", settings.long_every)]
        .into_iter()
        .filter(|(_, every)| seq > 0 && seq % every == 0)
        .map(|(kind, _)| kind)
        .collect();
    if settings.summary && !kinds.is_empty() {
        let mut payload = json!({
            "message_id": message.id,
            "seq_in_session": seq,
            "summaries": kinds,
        });
        if let Some(instructions) = &settings.summary_instructions {
            payload[CUSTOM_INSTRUCTIONS] = json!(instructions);
        }
        tasks.push(task(
            message,
            format!("summary:{workspace}:{session}:None:None"),
            "summary",
            payload,
        ));
    }
    tasks
}

/// A stored message with what decides its work: its sender's configuration
/// and its resolved [`Settings`].
#[derive(Debug, Clone)]
pub struct Stored<'a> {
    pub message: &'a Message,
    pub sender_configuration: &'a JsonObject,
    pub settings: Settings,
}

/// Returns the tasks a batch of stored messages (of one session, in order)
/// creates: each message's ([`tasks_for_message`]), with the representation
/// tasks of one peer and set of observers merged into one, its
/// `message_ids` in order and its `items` their number.
pub fn tasks_for_messages(messages: &[Stored<'_>], members: &[Member]) -> Vec<NewTask> {
    let mut tasks: Vec<NewTask> = Vec::new();
    for stored in messages {
        for task in tasks_for_message(stored.message, stored.sender_configuration, members, &stored.settings) {
            let merged = tasks.iter_mut().find(|earlier| {
                earlier.work_unit_key == task.work_unit_key
                    && crate::queue::task_type(&task.work_unit_key) == "representation"
                    && earlier.payload["observers"] == task.payload["observers"]
                    && earlier.payload.get(CUSTOM_INSTRUCTIONS) == task.payload.get(CUSTOM_INSTRUCTIONS)
            });
            match merged {
                Some(earlier) => {
                    if let (Some(ids), Some(more)) = (
                        earlier.payload["message_ids"].as_array_mut(),
                        task.payload["message_ids"].as_array(),
                    ) {
                        ids.extend(more.iter().cloned());
                    }
                    earlier.items += task.items;
                }
                None => tasks.push(task),
            }
        }
    }
    tasks
}

/// The messages a representation task carries: `message_ids`, or the
/// single `message_id` of tasks queued before batches were merged.
pub fn task_message_ids(payload: &Value) -> Vec<&str> {
    match payload.get("message_ids").and_then(Value::as_array) {
        Some(ids) => ids.iter().filter_map(Value::as_str).collect(),
        None => payload.get("message_id").and_then(Value::as_str).into_iter().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switches_read_as_pydantic_reads_them() {
        let object = |value: Value| value.as_object().cloned().unwrap();
        let none = JsonObject::new();
        let off = object(json!({"reasoning": {"enabled": "no"}, "summary": {"enabled": 0}}));
        let settings = Settings::resolve(&none, &off, &none);
        assert!(!settings.reasoning && !settings.summary);
        let unreadable = object(json!({"reasoning": {"enabled": "maybe"}}));
        assert!(
            Settings::resolve(&none, &unreadable, &none).reasoning,
            "unreadable is unset: the default"
        );
        assert!(observers("shy", &object(json!({"observe_me": "false"})), &[]).is_empty());
        assert_eq!(observers("bold", &object(json!({"observe_me": "T"})), &[]), ["bold"]);
    }

    fn object(value: Value) -> JsonObject {
        value.as_object().cloned().unwrap_or_default()
    }

    fn member(peer_id: &str, observe_me: Option<bool>, observe_others: Option<bool>, active: bool) -> Member {
        Member {
            peer_id: peer_id.into(),
            peer_configuration: JsonObject::new(),
            session_config: SessionPeerConfig {
                observe_me,
                observe_others,
            },
            active,
        }
    }

    fn message(peer_id: &str, seq: i64) -> Message {
        Message {
            id: format!("m{seq}"),
            workspace_id: "w".into(),
            session_id: "s".into(),
            peer_id: peer_id.into(),
            content: "hi".into(),
            metadata: JsonObject::new(),
            created_at: 0,
            token_count: 1,
            seq_in_session: seq,
        }
    }

    #[test]
    fn observers_follow_observe_me_and_observe_others() {
        let members = [
            member("alice", None, None, true),
            member("bob", None, Some(true), true),
            member("carol", None, Some(false), true),
            member("dave", None, Some(true), false),
            member("erin", Some(false), Some(true), true),
        ];
        let none = JsonObject::new();
        assert_eq!(observers("alice", &none, &members), ["alice", "bob", "erin"]);
        assert_eq!(observers("bob", &none, &members), ["bob", "erin"], "not itself twice");
        assert!(
            observers("erin", &none, &members).is_empty(),
            "membership observe_me=false"
        );
        let shy = object(json!({"observe_me": false}));
        assert!(observers("alice", &shy, &members).is_empty(), "peer observe_me=false");
        let overridden = [member("alice", Some(true), None, true)];
        assert_eq!(observers("alice", &shy, &overridden), ["alice"], "the membership wins");
    }

    #[test]
    fn settings_resolve_message_over_session_over_workspace() {
        let off = object(json!({"reasoning": {"enabled": false}}));
        let on = object(json!({"reasoning": {"enabled": true}}));
        let none = JsonObject::new();
        assert!(Settings::resolve(&none, &none, &none).reasoning, "on by default");
        assert!(!Settings::resolve(&off, &none, &none).reasoning);
        assert!(Settings::resolve(&off, &on, &none).reasoning);
        assert!(!Settings::resolve(&none, &on, &off).reasoning);
        let cadence = object(json!({"summary": {"messages_per_short_summary": 10, "messages_per_long_summary": 30}}));
        let settings = Settings::resolve(&cadence, &none, &none);
        assert_eq!((settings.short_every, settings.long_every), (10, 30));
        let session_off = object(json!({"summary": {"enabled": false}}));
        assert!(!Settings::resolve(&cadence, &session_off, &on).summary);
        let bogus = object(json!({"summary": {"messages_per_short_summary": -3}}));
        assert_eq!(Settings::resolve(&none, &bogus, &none).short_every, SHORT_SUMMARY_EVERY);
    }

    #[test]
    fn custom_instructions_follow_their_layers_and_ride_in_their_tasks() {
        let workspace = object(
            json!({"custom_instructions": "Write in French.", "summary": {"custom_instructions": "Name the decisions."}}),
        );
        let session = object(json!({"reasoning": {"custom_instructions": "Only facts about food."}}));
        let per_message = object(json!({"reasoning": {"custom_instructions": "Only facts about pets."}}));
        let none = JsonObject::new();
        assert_eq!(custom_instructions(&[&none], "reasoning"), None);
        let settings = Settings::resolve(&workspace, &session, &per_message);
        assert_eq!(
            settings.reasoning_instructions.as_deref(),
            Some("Write in French.\n\nOnly facts about pets."),
            "the top level, then the section's narrowest layer"
        );
        assert_eq!(
            settings.summary_instructions.as_deref(),
            Some("Write in French.\n\nName the decisions.")
        );
        let members = [member("alice", None, None, true)];
        let tasks = tasks_for_message(&message("alice", 20), &none, &members, &settings);
        assert_eq!(
            tasks[0].payload[CUSTOM_INSTRUCTIONS],
            "Write in French.\n\nOnly facts about pets."
        );
        assert_eq!(
            tasks[1].payload[CUSTOM_INSTRUCTIONS],
            "Write in French.\n\nName the decisions."
        );
        assert_eq!(
            with_instructions("Honcho's prompt.".into(), Some("Be brief.")),
            "Honcho's prompt.\n\nInstructions from this workspace's configuration:\nBe brief."
        );
        assert_eq!(
            with_instructions("Honcho's prompt.".into(), Some("  ")),
            "Honcho's prompt."
        );

        // Two messages with different instructions stay two tasks.
        let plain = Settings::resolve(&none, &none, &none);
        let (first, second) = (message("alice", 1), message("alice", 2));
        let stored = [
            Stored {
                message: &first,
                sender_configuration: &none,
                settings: settings.clone(),
            },
            Stored {
                message: &second,
                sender_configuration: &none,
                settings: plain,
            },
        ];
        assert_eq!(tasks_for_messages(&stored, &members).len(), 2);
    }

    #[test]
    fn messages_create_representation_and_summary_tasks() {
        let members = [member("alice", None, None, true), member("bob", None, Some(true), true)];
        let none = JsonObject::new();
        let settings = Settings::resolve(&none, &none, &none);
        let tasks = tasks_for_message(&message("alice", 7), &none, &members, &settings);
        assert_eq!(tasks.len(), 1);
        assert_eq!(tasks[0].work_unit_key, "representation:w:s:alice");
        assert_eq!(tasks[0].dedup_id, "representation:m7");
        assert_eq!(tasks[0].payload["observers"], json!(["alice", "bob"]));
        assert_eq!(task_message_ids(&tasks[0].payload), ["m7"]);

        let at_20 = tasks_for_message(&message("bob", 20), &none, &members, &settings);
        assert_eq!(
            at_20.iter().map(|t| t.work_unit_key.as_str()).collect::<Vec<_>>(),
            ["representation:w:s:bob", "summary:w:s:None:None"]
        );
        assert_eq!(at_20[1].payload["summaries"], json!(["short"]));
        let at_60 = tasks_for_message(&message("bob", 60), &none, &members, &settings);
        assert_eq!(at_60[1].payload["summaries"], json!(["short", "long"]));

        let no_reasoning = Settings {
            reasoning: false,
            ..settings.clone()
        };
        let only_summary = tasks_for_message(&message("alice", 40), &none, &members, &no_reasoning);
        assert_eq!(only_summary.len(), 1, "summaries do not depend on reasoning");
        assert!(only_summary[0].work_unit_key.starts_with("summary:"));
        let shy = object(json!({"observe_me": false}));
        assert!(tasks_for_message(&message("alice", 3), &shy, &members, &settings).is_empty());
    }

    #[test]
    fn a_batch_writes_one_representation_task_per_peer() {
        let members = [member("alice", None, None, true), member("bob", None, Some(true), true)];
        let none = JsonObject::new();
        let settings = Settings::resolve(&none, &none, &none);
        let messages: Vec<Message> = (18..=22)
            .map(|seq| message(["alice", "bob"][(seq % 2) as usize], seq))
            .collect();
        let stored: Vec<Stored<'_>> = messages
            .iter()
            .map(|message| Stored {
                message,
                sender_configuration: &none,
                settings: settings.clone(),
            })
            .collect();
        let tasks = tasks_for_messages(&stored, &members);
        let shape: Vec<(&str, Vec<&str>, i64)> = tasks
            .iter()
            .map(|task| (task.work_unit_key.as_str(), task_message_ids(&task.payload), task.items))
            .collect();
        assert_eq!(
            shape,
            [
                ("representation:w:s:alice", vec!["m18", "m20", "m22"], 3),
                ("representation:w:s:bob", vec!["m19", "m21"], 2),
                ("summary:w:s:None:None", vec!["m20"], 1),
            ]
        );
        assert_eq!(
            tasks[0].dedup_id, "representation:m18",
            "the batch's first message names it"
        );
        assert_eq!(tasks[2].payload["message_id"], "m20");
        // Tasks queued before batches were merged name one message.
        assert_eq!(task_message_ids(&json!({"message_id": "old"})), ["old"]);
    }
}
