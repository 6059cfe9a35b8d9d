//! [`Workspaces`]: workspaces, peers, sessions and their members.

use crate::db::db_error;
use crate::db::fetch_all;
use crate::db::flag;
use crate::db::{SqlStore, direction, execute, to_json};
use crate::rows;
use crate::sql::Sql;
use crate::tx::entities::{
    check_observer_limit, ensure_peer, ensure_session, ensure_workspace, list_workspaces_of, load_message, load_peer,
    load_session, load_workspace, upsert_member,
};
use crate::tx::erasing::{self, push_not_erasing};
use crate::tx::writes::MESSAGES_PER_STATEMENT;
use crate::tx::writes::insert_messages;
use async_trait::async_trait;
use roncho_core::Error;
use roncho_core::Result;
use roncho_core::filter::Filter;
use roncho_core::model::SessionPeerConfig;
use roncho_core::model::now_micros;
use roncho_core::model::{
    JsonObject, Page, PageRequest, Peer, PeerKind, Session, Workspace, new_public_id, shallow_merge,
};
use roncho_core::store::{SessionPeers, Workspaces};
use sqlx::AnyConnection;

/// Most messages one CloneSession copies.
pub const MAX_CLONE_MESSAGES: i64 = 100_000;

#[async_trait]
impl Workspaces for SqlStore {
    async fn get_or_create_workspace(
        &self,
        id: &str,
        metadata: JsonObject,
        configuration: JsonObject,
    ) -> Result<(Workspace, bool)> {
        let mut tx = self.begin_write().await?;
        let created = ensure_workspace(tx.conn(), id, &metadata, &configuration).await?;
        let workspace = load_workspace(tx.conn(), id).await?;
        tx.commit().await?;
        Ok((workspace, created))
    }

    async fn update_workspace(
        &self,
        id: &str,
        metadata: Option<JsonObject>,
        configuration: Option<JsonObject>,
    ) -> Result<Workspace> {
        let mut tx = self.begin_write().await?;
        ensure_workspace(tx.conn(), id, &JsonObject::new(), &JsonObject::new()).await?;
        let mut workspace = load_workspace(tx.conn(), id).await?;
        if let Some(metadata) = metadata {
            workspace.metadata = metadata;
        }
        if let Some(configuration) = configuration {
            workspace.configuration = shallow_merge(workspace.configuration, configuration);
        }
        let mut sql = Sql::new("UPDATE workspaces SET metadata = ");
        sql.bind(to_json(&workspace.metadata))
            .push(", configuration = ")
            .bind(to_json(&workspace.configuration));
        sql.push(" WHERE name = ").bind(id);
        execute(tx.conn(), &sql).await?;
        tx.commit().await?;
        Ok(workspace)
    }

    async fn list_workspaces(&self, filter: &Filter, page: PageRequest) -> Result<Page<Workspace>> {
        list_workspaces_of(self, None, filter, page).await
    }

    async fn get_or_create_peer(
        &self,
        workspace_id: &str,
        id: &str,
        metadata: Option<JsonObject>,
        configuration: Option<JsonObject>,
    ) -> Result<(Peer, bool)> {
        let mut tx = self.begin_write().await?;
        ensure_workspace(tx.conn(), workspace_id, &JsonObject::new(), &JsonObject::new()).await?;
        let created = ensure_peer(
            tx.conn(),
            workspace_id,
            id,
            metadata.as_ref().unwrap_or(&JsonObject::new()),
            configuration.as_ref().unwrap_or(&JsonObject::new()),
        )
        .await?;
        if !created && (metadata.is_some() || configuration.is_some()) {
            let mut sql = Sql::new("UPDATE peers SET name = name");
            if let Some(metadata) = &metadata {
                sql.push(", metadata = ").bind(to_json(metadata));
            }
            if let Some(configuration) = &configuration {
                sql.push(", configuration = ").bind(to_json(configuration));
            }
            sql.push(" WHERE workspace_name = ")
                .bind(workspace_id)
                .push(" AND name = ")
                .bind(id);
            execute(tx.conn(), &sql).await?;
        }
        let peer = load_peer(tx.conn(), workspace_id, id).await?;
        tx.commit().await?;
        Ok((peer, created))
    }

    async fn list_peers(
        &self,
        workspace_id: &str,
        kind: PeerKind,
        filter: &Filter,
        page: PageRequest,
    ) -> Result<Page<Peer>> {
        let mut from_where = Sql::new("peers p WHERE p.workspace_name = ");
        from_where.bind(workspace_id);
        match kind {
            PeerKind::Peer => {
                from_where
                    .push(" AND p.name NOT LIKE ")
                    .bind(crate::tx::entities::scope_pattern());
            }
            PeerKind::Scope => {
                from_where
                    .push(" AND p.name LIKE ")
                    .bind(crate::tx::entities::scope_pattern());
            }
            PeerKind::All => {}
        }
        push_not_erasing(&mut from_where, erasing::PEER);
        self.push_filter(&mut from_where, filter, "p")?;
        let dir = direction(page);
        self.paged(
            rows::PEER_COLUMNS,
            from_where,
            &format!("p.created_at {dir}, p.name {dir}"),
            page,
            rows::peer,
        )
        .await
    }

    async fn get_or_create_session(
        &self,
        workspace_id: &str,
        id: &str,
        metadata: Option<JsonObject>,
        configuration: Option<JsonObject>,
        peers: SessionPeers,
    ) -> Result<(Session, bool)> {
        let mut tx = self.begin_write().await?;
        ensure_workspace(tx.conn(), workspace_id, &JsonObject::new(), &JsonObject::new()).await?;
        let created = ensure_session(
            tx.conn(),
            workspace_id,
            id,
            metadata.as_ref().unwrap_or(&JsonObject::new()),
            configuration.as_ref().unwrap_or(&JsonObject::new()),
        )
        .await?;
        let mut session = load_session(tx.conn(), workspace_id, id).await?;
        if !created && (metadata.is_some() || configuration.is_some()) {
            if let Some(metadata) = metadata {
                session.metadata = metadata;
            }
            if let Some(configuration) = configuration {
                session.configuration = shallow_merge(session.configuration, configuration);
            }
            let mut sql = Sql::new("UPDATE sessions SET metadata = ");
            sql.bind(to_json(&session.metadata))
                .push(", configuration = ")
                .bind(to_json(&session.configuration));
            sql.push(" WHERE workspace_name = ")
                .bind(workspace_id)
                .push(" AND name = ")
                .bind(id);
            execute(tx.conn(), &sql).await?;
        }
        add_members(tx.conn(), workspace_id, id, &peers).await?;
        tx.commit().await?;
        Ok((session, created))
    }

    async fn clone_session(&self, workspace_id: &str, id: &str, cutoff_message_id: Option<&str>) -> Result<Session> {
        let mut tx = self.begin_write().await?;
        let original = load_session(tx.conn(), workspace_id, id).await?;
        let cutoff_seq = match cutoff_message_id {
            Some(message_id) => Some(
                load_message(tx.conn(), workspace_id, id, message_id)
                    .await?
                    .seq_in_session,
            ),
            None => None,
        };
        let clone_id = new_public_id();
        ensure_session(
            tx.conn(),
            workspace_id,
            &clone_id,
            &original.metadata,
            &original.configuration,
        )
        .await?;

        let mut members = Sql::new(
            "INSERT INTO session_peers (workspace_name, session_name, peer_name, observe_me, observe_others, joined_at, left_at) \
             SELECT workspace_name, ",
        );
        members.bind(clone_id.as_str()).push(
            ", peer_name, observe_me, observe_others, joined_at, left_at FROM session_peers WHERE workspace_name = ",
        );
        members.bind(workspace_id).push(" AND session_name = ").bind(id);
        // A clone is in no scope until added to one.
        members
            .push(" AND peer_name NOT LIKE ")
            .bind(crate::tx::entities::scope_pattern());
        execute(tx.conn(), &members).await?;

        // Copied a page at a time: memory stays bounded whatever the session's size.
        let mut count = Sql::new("SELECT COUNT(*) AS n FROM messages m WHERE m.workspace_name = ");
        count.bind(workspace_id).push(" AND m.session_name = ").bind(id);
        if let Some(cutoff) = cutoff_seq {
            count.push(" AND m.seq_in_session <= ").bind(cutoff);
        }
        push_not_erasing(&mut count, erasing::MESSAGE);
        let total: i64 = fetch_all(tx.conn(), &count)
            .await?
            .first()
            .map_or(Ok(0), |row| sqlx::Row::try_get(row, "n"))
            .map_err(db_error)?;
        if total > MAX_CLONE_MESSAGES {
            return Err(Error::invalid(
                "session_id",
                format!("holds {total} messages, at most {MAX_CLONE_MESSAGES} are cloned at once"),
            ));
        }
        let mut copied: i64 = 0;
        let mut after_seq: i64 = 0;
        loop {
            let mut select = Sql::new(&format!(
                "SELECT {}, m.configuration FROM messages m WHERE m.workspace_name = ",
                rows::MESSAGE_COLUMNS
            ));
            select
                .bind(workspace_id)
                .push(" AND m.session_name = ")
                .bind(id)
                .push(" AND m.seq_in_session > ")
                .bind(after_seq);
            if let Some(cutoff) = cutoff_seq {
                select.push(" AND m.seq_in_session <= ").bind(cutoff);
            }
            push_not_erasing(&mut select, erasing::MESSAGE);
            select
                .push(" ORDER BY m.seq_in_session LIMIT ")
                .bind(i64::try_from(MESSAGES_PER_STATEMENT).unwrap_or(1_000));
            let source_rows = fetch_all(tx.conn(), &select).await?;
            if source_rows.is_empty() {
                break;
            }
            let mut copies = Vec::with_capacity(source_rows.len());
            let mut configurations = Vec::with_capacity(source_rows.len());
            for row in &source_rows {
                let mut message = rows::message(row)?;
                after_seq = message.seq_in_session;
                copied += 1;
                message.id = new_public_id();
                message.session_id = clone_id.clone();
                message.seq_in_session = copied;
                copies.push(message);
                configurations.push(sqlx::Row::try_get::<String, _>(row, "configuration").map_err(db_error)?);
            }
            insert_messages(tx.conn(), &copies, &configurations).await?;
        }
        let mut last_seq = Sql::new("UPDATE sessions SET last_seq = ");
        last_seq.bind(copied).push(", message_count = ").bind(copied);
        last_seq
            .push(" WHERE workspace_name = ")
            .bind(workspace_id)
            .push(" AND name = ")
            .bind(clone_id.as_str());
        execute(tx.conn(), &last_seq).await?;
        let clone = load_session(tx.conn(), workspace_id, &clone_id).await?;
        tx.commit().await?;
        Ok(clone)
    }

    async fn add_session_peers(&self, workspace_id: &str, session_id: &str, peers: SessionPeers) -> Result<Session> {
        let mut tx = self.begin_write().await?;
        let session = load_session(tx.conn(), workspace_id, session_id).await?;
        add_members(tx.conn(), workspace_id, session_id, &peers).await?;
        tx.commit().await?;
        Ok(session)
    }

    async fn set_session_peers(&self, workspace_id: &str, session_id: &str, peers: SessionPeers) -> Result<Session> {
        let mut tx = self.begin_write().await?;
        let session = load_session(tx.conn(), workspace_id, session_id).await?;
        let mut leave = Sql::new("UPDATE session_peers SET left_at = ");
        leave
            .bind(now_micros())
            .push(" WHERE workspace_name = ")
            .bind(workspace_id);
        leave
            .push(" AND session_name = ")
            .bind(session_id)
            .push(" AND left_at IS NULL AND peer_name NOT LIKE ")
            .bind(crate::tx::entities::scope_pattern());
        if !peers.is_empty() {
            leave.push(" AND peer_name NOT IN (");
            for (index, (peer_id, _)) in peers.iter().enumerate() {
                if index > 0 {
                    leave.push(", ");
                }
                leave.bind(peer_id.as_str());
            }
            leave.push(")");
        }
        execute(tx.conn(), &leave).await?;
        add_members(tx.conn(), workspace_id, session_id, &peers).await?;
        tx.commit().await?;
        Ok(session)
    }

    async fn remove_session_peers(&self, workspace_id: &str, session_id: &str, peer_ids: &[String]) -> Result<Session> {
        let mut tx = self.begin_write().await?;
        let session = load_session(tx.conn(), workspace_id, session_id).await?;
        if !peer_ids.is_empty() {
            let mut leave = Sql::new("UPDATE session_peers SET left_at = ");
            leave
                .bind(now_micros())
                .push(" WHERE workspace_name = ")
                .bind(workspace_id);
            leave
                .push(" AND session_name = ")
                .bind(session_id)
                .push(" AND left_at IS NULL AND peer_name IN (");
            for (index, peer_id) in peer_ids.iter().enumerate() {
                if index > 0 {
                    leave.push(", ");
                }
                leave.bind(peer_id.as_str());
            }
            leave.push(")");
            execute(tx.conn(), &leave).await?;
        }
        tx.commit().await?;
        Ok(session)
    }

    async fn set_session_peer_config(
        &self,
        workspace_id: &str,
        session_id: &str,
        peer_id: &str,
        config: SessionPeerConfig,
    ) -> Result<()> {
        let mut tx = self.begin_write().await?;
        load_session(tx.conn(), workspace_id, session_id).await?;
        crate::tx::erasing::refuse_erasing(tx.conn(), workspace_id, &[peer_id]).await?;
        let mut sql = Sql::new("UPDATE session_peers SET observe_me = COALESCE(");
        sql.bind(flag(config.observe_me))
            .push(", observe_me), observe_others = COALESCE(");
        sql.bind(flag(config.observe_others))
            .push(", observe_others) WHERE workspace_name = ")
            .bind(workspace_id);
        sql.push(" AND session_name = ")
            .bind(session_id)
            .push(" AND peer_name = ")
            .bind(peer_id)
            .push(" AND left_at IS NULL");
        if execute(tx.conn(), &sql).await? == 0 {
            return Err(Error::not_found("session peer", peer_id));
        }
        check_observer_limit(tx.conn(), workspace_id, session_id).await?;
        tx.commit().await
    }

    async fn get_session_peer_config(
        &self,
        workspace_id: &str,
        session_id: &str,
        peer_id: &str,
    ) -> Result<SessionPeerConfig> {
        let mut sql = Sql::new("SELECT observe_me, observe_others FROM session_peers WHERE workspace_name = ");
        sql.bind(workspace_id)
            .push(" AND session_name = ")
            .bind(session_id)
            .push(" AND peer_name = ")
            .bind(peer_id);
        sql.push(" AND left_at IS NULL");
        let row = self
            .read_optional(&sql)
            .await?
            .ok_or_else(|| Error::not_found("session peer", peer_id))?;
        rows::session_peer_config(&row)
    }

    async fn list_sessions(&self, workspace_id: &str, filter: &Filter, page: PageRequest) -> Result<Page<Session>> {
        let mut from_where = Sql::new("sessions s WHERE s.is_active = 1 AND s.workspace_name = ");
        from_where.bind(workspace_id);
        push_not_erasing(&mut from_where, erasing::SESSION);
        self.push_filter(&mut from_where, filter, "s")?;
        let dir = direction(page);
        self.paged(
            rows::SESSION_COLUMNS,
            from_where,
            &format!("s.created_at {dir}, s.name {dir}"),
            page,
            rows::session,
        )
        .await
    }

    async fn list_peer_sessions(
        &self,
        workspace_id: &str,
        peer_id: &str,
        filter: &Filter,
        page: PageRequest,
    ) -> Result<Page<Session>> {
        {
            let mut conn = self.reads().acquire().await.map_err(db_error)?;
            load_peer(&mut conn, workspace_id, peer_id).await?;
        }
        let mut from_where = Sql::new("sessions s WHERE s.is_active = 1 AND s.workspace_name = ");
        from_where.bind(workspace_id);
        from_where.push(" AND EXISTS (SELECT 1 FROM session_peers sp WHERE sp.workspace_name = s.workspace_name AND sp.session_name = s.name AND sp.peer_name = ");
        from_where.bind(peer_id).push(")");
        push_not_erasing(&mut from_where, erasing::SESSION);
        self.push_filter(&mut from_where, filter, "s")?;
        let dir = direction(page);
        self.paged(
            rows::SESSION_COLUMNS,
            from_where,
            &format!("s.created_at {dir}, s.name {dir}"),
            page,
            rows::session,
        )
        .await
    }

    async fn list_session_peers(&self, workspace_id: &str, session_id: &str, page: PageRequest) -> Result<Page<Peer>> {
        {
            let mut conn = self.reads().acquire().await.map_err(db_error)?;
            load_session(&mut conn, workspace_id, session_id).await?;
        }
        let mut from_where = Sql::new(
            "peers p JOIN session_peers sp ON sp.workspace_name = p.workspace_name AND sp.peer_name = p.name \
             WHERE sp.left_at IS NULL AND p.workspace_name = ",
        );
        from_where
            .bind(workspace_id)
            .push(" AND sp.session_name = ")
            .bind(session_id)
            .push(" AND p.name NOT LIKE ")
            .bind(crate::tx::entities::scope_pattern());
        push_not_erasing(&mut from_where, erasing::PEER);
        let dir = direction(page);
        self.paged(
            rows::PEER_COLUMNS,
            from_where,
            &format!("sp.joined_at {dir}, p.name {dir}"),
            page,
            rows::peer,
        )
        .await
    }
}

async fn add_members(
    conn: &mut AnyConnection,
    workspace_id: &str,
    session_id: &str,
    peers: &SessionPeers,
) -> Result<()> {
    for (peer_id, config) in peers {
        ensure_peer(conn, workspace_id, peer_id, &JsonObject::new(), &JsonObject::new()).await?;
        upsert_member(conn, workspace_id, session_id, peer_id, Some(*config)).await?;
    }
    check_observer_limit(conn, workspace_id, session_id).await
}
