//! [`DerivationHealth`]: a workspace's streak of derivations that gave nothing.

use super::*;
use roncho_core::store::{DEGRADED_AFTER, Outcome};

store_contract_suite!(
    empty_derivations_degrade_a_workspace_until_one_derives,
;
);

async fn empty_derivations_degrade_a_workspace_until_one_derives(store: &dyn Store) {
    for workspace in ["w", "x"] {
        store.get_or_create_peer(workspace, "alice", None, None).await.unwrap();
    }
    assert_eq!(store.derivation_health("w").await.unwrap(), None);
    store.record_derivation("w", "m", &Outcome::Derived).await.unwrap();
    assert_eq!(
        store.derivation_health("w").await.unwrap(),
        None,
        "healthy: nothing written"
    );
    let empty = Outcome::Empty { messages: 2 };
    for _ in 0..DEGRADED_AFTER - 1 {
        store.record_derivation("w", "m", &empty).await.unwrap();
    }
    let record = store.derivation_health("w").await.unwrap().unwrap();
    assert_eq!((record.empty_streak, record.degraded()), (DEGRADED_AFTER - 1, None));
    store.record_derivation("w", "m", &empty).await.unwrap();
    let record = store.derivation_health("w").await.unwrap().unwrap();
    let reason = record.degraded().expect("degraded at the threshold");
    assert!(
        reason.contains("`m`") && reason.contains("2 non-empty message(s)"),
        "{reason}"
    );
    let degraded: Vec<String> = store
        .degraded_derivations()
        .await
        .unwrap()
        .into_iter()
        .map(|record| record.workspace_id)
        .collect();
    assert_eq!(degraded, ["w"], "the neighbour is not");

    store.record_derivation("w", "m", &Outcome::Derived).await.unwrap();
    assert_eq!(store.derivation_health("w").await.unwrap().unwrap().empty_streak, 0);
    assert!(store.degraded_derivations().await.unwrap().is_empty());

    let unreadable = Outcome::Unreadable { reason: "prose".into() };
    store.record_derivation("x", "m", &unreadable).await.unwrap();
    assert!(
        store
            .derivation_health("x")
            .await
            .unwrap()
            .unwrap()
            .degraded()
            .is_some(),
        "at once"
    );
    // An unknown workspace records nothing (and fails nothing).
    store.record_derivation("nowhere", "m", &empty).await.unwrap();
    assert_eq!(store.derivation_health("nowhere").await.unwrap(), None);
}
