//! Filter keys to SQL columns.

pub(crate) fn workspace_column(key: &str) -> &'static str {
    match key {
        "id" => "name",
        "created_at" => "created_at",
        _ => "metadata",
    }
}

pub(crate) fn peer_column(key: &str) -> &'static str {
    match key {
        "id" => "p.name",
        "workspace_id" => "p.workspace_name",
        "created_at" => "p.created_at",
        _ => "p.metadata",
    }
}

pub(crate) fn session_column(key: &str) -> &'static str {
    match key {
        "id" => "s.name",
        "workspace_id" => "s.workspace_name",
        "is_active" => "s.is_active",
        "created_at" => "s.created_at",
        _ => "s.metadata",
    }
}

pub(crate) fn message_column(key: &str) -> &'static str {
    match key {
        "id" => "m.public_id",
        "workspace_id" => "m.workspace_name",
        "session_id" => "m.session_name",
        "peer_id" => "m.peer_name",
        "token_count" => "m.token_count",
        "created_at" => "m.created_at",
        _ => "m.metadata",
    }
}

pub(crate) fn conclusion_column(key: &str) -> &'static str {
    match key {
        "id" => "d.public_id",
        "workspace_id" => "d.workspace_name",
        "observer_id" | "observer" => "d.observer",
        "observed_id" | "observed" => "d.observed",
        "session_id" | "session_name" => "d.session_name",
        "level" => "d.level",
        "times_derived" => "d.times_derived",
        "created_at" => "d.created_at",
        _ => "d.metadata",
    }
}
