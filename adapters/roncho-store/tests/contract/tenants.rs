//! [`Tenants`]: which tenant holds each workspace id.

use roncho_core::store::{Holder, Tenants};

use super::*;

store_contract_suite!(
    a_tenant_takes_a_new_id_first_and_the_operator_assigns_the_rest,
    ;
    two_tenants_naming_ids_at_once_find_one_holder,
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
