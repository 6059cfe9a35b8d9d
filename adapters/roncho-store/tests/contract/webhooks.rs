//! [`Webhooks`]: endpoints, at most ten per workspace.

use super::*;

store_contract_suite!(
    webhooks_are_get_or_create_and_limited,
;
);

async fn webhooks_are_get_or_create_and_limited(store: &dyn Store) {
    let (first, created) = store.create_webhook("w", "https://example.com/0").await.unwrap();
    assert!(created);
    let (again, created) = store.create_webhook("w", "https://example.com/0").await.unwrap();
    assert!(!created);
    assert_eq!(again, first);
    for i in 1..10 {
        store
            .create_webhook("w", &format!("https://example.com/{i}"))
            .await
            .unwrap();
    }
    let error = store.create_webhook("w", "https://example.com/10").await.unwrap_err();
    assert!(matches!(error, Error::ResourceExhausted(_)), "{error}");
    let listed = store.list_webhooks("w", page(1, 100)).await.unwrap();
    assert_eq!(listed.total, 10);
    store.delete_webhook("w", &first.id).await.unwrap();
    assert!(matches!(
        store.delete_webhook("w", &first.id).await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        store.delete_webhook("other", &listed.items[1].id).await,
        Err(Error::NotFound { .. })
    ));
}
