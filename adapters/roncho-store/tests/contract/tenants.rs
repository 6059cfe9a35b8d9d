//! [`Tenants`]: which tenant holds each workspace id.

use roncho_core::store::{Creator, Holder, OPERATOR, Tenants, creating_as};

use super::*;

store_contract_suite!(
    a_tenant_takes_a_new_id_first_and_the_operator_assigns_the_rest,
    a_call_creates_a_workspace_only_under_an_id_its_caller_holds,
    the_servers_own_work_makes_no_workspace_and_no_peer,
    ;
    two_tenants_naming_ids_at_once_find_one_holder,
    batches_written_together_are_each_checked_for_their_own_caller,
);

fn listed(page: roncho_core::model::Page<roncho_core::model::Workspace>) -> Vec<String> {
    page.items.into_iter().map(|workspace| workspace.id).collect()
}

async fn a_tenant_takes_a_new_id_first_and_the_operator_assigns_the_rest(store: &dyn Store) {
    assert_eq!(store.workspace_holder("w").await.unwrap(), Holder::Free);
    assert_eq!(store.claim_workspace("w", "a").await.unwrap().as_deref(), Some("a"));
    assert_eq!(store.claim_workspace("w", "a").await.unwrap().as_deref(), Some("a"));
    assert_eq!(
        store.claim_workspace("w", "b").await.unwrap().as_deref(),
        Some("a"),
        "the first tenant keeps it"
    );
    // Ids are compared exactly: another spelling is another id.
    assert_eq!(store.claim_workspace("W", "b").await.unwrap().as_deref(), Some("b"));

    // A workspace that exists with no tenant is the operator's to assign.
    store
        .get_or_create_workspace("old", JsonObject::new(), JsonObject::new())
        .await
        .unwrap();
    assert_eq!(store.claim_workspace("old", "a").await.unwrap(), None);
    assert_eq!(store.claim_workspace("old", "a").await.unwrap(), None, "still no one's");
    assert_eq!(store.workspace_holder("old").await.unwrap(), Holder::Operator);
    assert_eq!(store.assign_workspace("old", "b").await.unwrap(), None);
    assert_eq!(store.claim_workspace("old", "a").await.unwrap().as_deref(), Some("b"));
    assert_eq!(
        store.assign_workspace("old", "a").await.unwrap().as_deref(),
        Some("b"),
        "moved"
    );

    // A tenant lists the live workspaces it holds, and no others.
    assert_eq!(
        listed(store.list_tenant_workspaces("a", &all(), page(1, 10)).await.unwrap()),
        ["old"]
    );
    store
        .get_or_create_workspace("w", JsonObject::new(), JsonObject::new())
        .await
        .unwrap();
    store
        .get_or_create_workspace("unheld", JsonObject::new(), JsonObject::new())
        .await
        .unwrap();
    assert_eq!(
        listed(store.list_tenant_workspaces("a", &all(), page(1, 10)).await.unwrap()),
        ["old", "w"]
    );
    assert!(listed(store.list_tenant_workspaces("b", &all(), page(1, 10)).await.unwrap()).is_empty());
    assert_eq!(store.list_workspaces(&all(), page(1, 10)).await.unwrap().total, 3);

    // An erased workspace's id stays its tenant's: nothing still in
    // flight for it can reach another tenant's workspace of that id.
    store.delete_workspace("w").await.unwrap();
    assert_eq!(store.claim_workspace("w", "b").await.unwrap().as_deref(), Some("a"));
    assert_eq!(
        listed(store.list_tenant_workspaces("a", &all(), page(1, 10)).await.unwrap()),
        ["old"]
    );
    assert_eq!(store.workspace_holder("w").await.unwrap(), Holder::Tenant("a".into()));
    // Asking who holds an id takes nothing.
    assert_eq!(store.workspace_holder("never").await.unwrap(), Holder::Free);
    assert_eq!(store.workspace_holder("never").await.unwrap(), Holder::Free);
    assert!(!store.workspace_exists("never").await.unwrap());
    assert!(store.workspace_exists("old").await.unwrap());
    assert!(!store.workspace_exists("w").await.unwrap(), "erased");
}

async fn two_tenants_naming_ids_at_once_find_one_holder(store: Arc<SqlStore>) {
    let mut races = Vec::new();
    for index in 0..24 {
        let id = format!("race-{index}");
        let claim = |tenant: &'static str| {
            let (store, id) = (store.clone(), id.clone());
            tokio::spawn(async move { store.claim_workspace(&id, tenant).await.unwrap() })
        };
        races.push((claim("a"), claim("b")));
    }
    for (first, second) in races {
        let (first, second) = (first.await.unwrap(), second.await.unwrap());
        assert_eq!(first, second, "both see the one holder");
        assert!(matches!(first.as_deref(), Some("a" | "b")), "{first:?}");
    }
}

/// Every store call that creates its workspace when absent, on `workspace`.
async fn each_creating_call(store: &dyn Store, workspace: &str) -> Vec<(&'static str, roncho_core::Result<()>)> {
    vec![
        (
            "workspace",
            store
                .get_or_create_workspace(workspace, JsonObject::new(), JsonObject::new())
                .await
                .map(drop),
        ),
        (
            "peer",
            store.get_or_create_peer(workspace, "p", None, None).await.map(drop),
        ),
        (
            "session",
            store
                .get_or_create_session(workspace, "s", None, None, vec![])
                .await
                .map(drop),
        ),
        (
            "messages",
            store
                .create_messages(workspace, "s", vec![new_message("p", "hello")])
                .await
                .map(drop),
        ),
        (
            "peer card",
            store
                .set_peer_card(workspace, "p", "q", vec!["likes tea".into()])
                .await
                .map(drop),
        ),
        (
            "webhook",
            store
                .create_webhook(workspace, "https://example.com/hook")
                .await
                .map(drop),
        ),
        (
            "scope",
            store.get_or_create_scope(workspace, "scope", None).await.map(drop),
        ),
    ]
}

/// What a call of `creator` (a tenant, the operator, or `None`: no one
/// checked) makes on `workspace`, by each creating call.
async fn as_creator(
    store: &dyn Store,
    creator: Option<&str>,
    workspace: &str,
) -> Vec<(&'static str, roncho_core::Result<()>)> {
    let creator = creator.map(|creator| Creator::Caller(creator.to_owned()));
    creating_as(creator, each_creating_call(store, workspace)).await
}

/// The authorization saw the workspace its caller's (or free); by the time
/// the call writes, its tenant may have erased it, or the operator given
/// the id to another tenant. A workspace is then made only for the id's
/// holder, in the transaction that makes it.
async fn a_call_creates_a_workspace_only_under_an_id_its_caller_holds(store: &dyn Store) {
    assert_eq!(store.claim_workspace("w", "a").await.unwrap().as_deref(), Some("a"));
    for creator in ["b", OPERATOR] {
        for (call, result) in as_creator(store, Some(creator), "w").await {
            match (creator, result) {
                (OPERATOR, Err(Error::FailedPrecondition(reason))) => {
                    assert!(reason.contains("tenant `a`"), "{call}: {reason}")
                }
                ("b", Err(Error::PermissionDenied(reason))) => {
                    assert!(!reason.contains("`a`"), "{call}: names the holder: {reason}")
                }
                (_, result) => panic!("{call} of {creator:?} under a's id: {result:?}"),
            }
            assert!(
                !store.workspace_exists("w").await.unwrap(),
                "{call} of {creator:?} made it"
            );
        }
    }
    assert_eq!(store.workspace_holder("w").await.unwrap(), Holder::Tenant("a".into()));

    // Its holder makes it; the operator writes into it, another tenant
    // never (the gate refuses it first; the write checks again).
    for creator in ["a", OPERATOR] {
        for (call, result) in as_creator(store, Some(creator), "w").await {
            result.unwrap_or_else(|error| panic!("{call} of {creator:?}: {error:?}"));
        }
    }
    for (call, result) in as_creator(store, Some("b"), "w").await {
        assert!(matches!(result, Err(Error::PermissionDenied(_))), "{call}: {result:?}");
    }
    assert_eq!(store.workspace_holder("w").await.unwrap(), Holder::Tenant("a".into()));

    // Erased, its id stays a's: the operator's write racing the erasure
    // cannot make it again.
    store.delete_session("w", "s").await.unwrap();
    store.delete_workspace("w").await.unwrap();
    for (call, result) in as_creator(store, Some(OPERATOR), "w").await {
        assert!(
            matches!(result, Err(Error::FailedPrecondition(_))),
            "{call}: {result:?}"
        );
    }
    assert!(!store.workspace_exists("w").await.unwrap());

    // A free id is taken by the call that makes it, the operator's under its own name.
    as_creator(store, Some("c"), "free")
        .await
        .into_iter()
        .for_each(|(_, r)| r.unwrap());
    assert_eq!(
        store.workspace_holder("free").await.unwrap(),
        Holder::Tenant("c".into())
    );
    as_creator(store, Some(OPERATOR), "mine")
        .await
        .into_iter()
        .for_each(|(_, r)| r.unwrap());
    assert_eq!(store.workspace_holder("mine").await.unwrap(), Holder::Operator);
    for (call, result) in as_creator(store, Some("c"), "mine").await {
        assert!(matches!(result, Err(Error::PermissionDenied(_))), "{call}: {result:?}");
    }

    // Given to another tenant after a's call was let through: refused.
    assert_eq!(store.claim_workspace("moved", "a").await.unwrap().as_deref(), Some("a"));
    store.assign_workspace("moved", "b").await.unwrap();
    for (call, result) in as_creator(store, Some("a"), "moved").await {
        assert!(matches!(result, Err(Error::PermissionDenied(_))), "{call}: {result:?}");
    }
    // Nor, once b made it, do a's writes land in b's workspace.
    for (call, result) in as_creator(store, Some("b"), "moved").await {
        result.unwrap_or_else(|error| panic!("{call} of its new holder: {error:?}"));
    }
    for (call, result) in as_creator(store, Some("a"), "moved").await {
        assert!(
            matches!(result, Err(Error::PermissionDenied(_))),
            "{call} into b's: {result:?}"
        );
    }
    let a = || Some(Creator::Caller("a".into()));
    let conclusions = creating_as(
        a(),
        store.create_conclusions("moved", vec![new_conclusion("p", "q", "a's words")]),
    )
    .await;
    assert!(
        matches!(conclusions, Err(Error::PermissionDenied(_))),
        "{conclusions:?}"
    );
    let erased = creating_as(a(), store.delete_peer("moved", "p")).await;
    assert!(matches!(erased, Err(Error::PermissionDenied(_))), "{erased:?}");
    let peers = store
        .list_peers("moved", PeerKind::Peer, &all(), page(1, 10))
        .await
        .unwrap();
    assert!(peers.items.iter().any(|peer| peer.id == "p"), "a erased b's peer");
    let messages = store.list_messages("moved", "s", &all(), page(1, 10)).await.unwrap();
    assert_eq!(messages.total, 1, "only b's message");

    // Outside any call of a multi-tenant server nothing is checked.
    for (call, result) in as_creator(store, None, "moved").await {
        result.unwrap_or_else(|error| panic!("{call} outside a call: {error:?}"));
    }
}

/// SQLite writes waiting batches of many calls in one transaction, on one
/// of those calls' task: each batch is checked for its own caller. Tenants
/// write to ids they hold and to `h`, an id `a` holds that nobody makes:
/// every write to their own id lands, none to `h` does, whichever batch's
/// task writes the group.
async fn batches_written_together_are_each_checked_for_their_own_caller(store: Arc<SqlStore>) {
    for (id, tenant) in [("ga", "a"), ("gb", "b"), ("h", "a")] {
        assert_eq!(
            store.claim_workspace(id, tenant).await.unwrap().as_deref(),
            Some(tenant)
        );
    }
    let mut writes = Vec::new();
    for index in 0..64 {
        let (creator, workspace) = [("a", "ga"), ("b", "gb"), ("b", "h"), (OPERATOR, "h")][index % 4];
        let store = store.clone();
        let write = async move {
            let content = format!("{index}");
            store
                .create_messages(workspace, "s", vec![new_message("p", &content)])
                .await
        };
        writes.push((
            creator,
            workspace,
            tokio::spawn(creating_as(Some(Creator::Caller(creator.to_owned())), write)),
        ));
    }
    for (creator, workspace, write) in writes {
        match (creator, workspace, write.await.unwrap()) {
            ("a", "ga", Ok(_)) | ("b", "gb", Ok(_)) => {}
            ("b", "h", Err(Error::PermissionDenied(_))) | (OPERATOR, "h", Err(Error::FailedPrecondition(_))) => {}
            (creator, workspace, result) => panic!("{creator:?} on {workspace}: {result:?}"),
        }
    }
    for workspace in ["ga", "gb"] {
        let stored = store.list_messages(workspace, "s", &all(), page(1, 100)).await.unwrap();
        assert_eq!(stored.total, 16, "{workspace}");
    }
    assert!(!store.workspace_exists("h").await.unwrap());
    assert_eq!(store.workspace_holder("ga").await.unwrap(), Holder::Tenant("a".into()));
    assert_eq!(store.workspace_holder("gb").await.unwrap(), Holder::Tenant("b".into()));
}

/// Derivation and dreams write into workspaces and peers that exist: work
/// begun before an erasure (a dream updating a peer card, say) must not
/// bring back the workspace or the peer it finishes after.
async fn the_servers_own_work_makes_no_workspace_and_no_peer(store: &dyn Store) {
    let work = |workspace: &'static str| creating_as(Some(Creator::Work), each_creating_call(store, workspace));
    for (call, result) in work("gone").await {
        assert!(matches!(result, Err(Error::NotFound { .. })), "{call}: {result:?}");
        assert!(!store.workspace_exists("gone").await.unwrap(), "{call} made it");
    }

    store
        .create_messages("w", "s", vec![new_message("alice", "I live in Lisbon")])
        .await
        .unwrap();
    store.get_or_create_peer("w", "bob", None, None).await.unwrap();
    store.delete_peer("w", "alice").await.unwrap();
    let card = creating_as(
        Some(Creator::Work),
        store.set_peer_card("w", "bob", "alice", vec!["lives in Lisbon".into()]),
    )
    .await;
    assert!(matches!(card, Err(Error::NotFound { .. })), "{card:?}");
    let peers = store
        .list_peers("w", PeerKind::Peer, &all(), page(1, 10))
        .await
        .unwrap();
    assert!(
        !peers.items.iter().any(|peer| peer.id == "alice"),
        "the erased peer came back"
    );
    assert!(store.get_peer_card("w", "bob", "alice").await.unwrap().is_none());

    // Into peers that exist it writes as before.
    store.get_or_create_peer("w", "carol", None, None).await.unwrap();
    creating_as(
        Some(Creator::Work),
        store.set_peer_card("w", "bob", "carol", vec!["likes tea".into()]),
    )
    .await
    .unwrap();
}
