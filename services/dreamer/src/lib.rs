//! The dreamer role: consolidation of what the deriver wrote. A dream is
//! work on the queue (`dream:{type}:{workspace}:{observer}:{observed}`, at
//! most one pending per key), so dreams scale and survive crashes like the
//! rest of the pipeline; [`worker`] runs them. [`DreamerApi`] asks for one.

use std::sync::Arc;
use std::time::Duration;

pub mod worker;

use roncho_core::queue::{NewTask, WorkQueue};
use roncho_core::store::{DreamLedger, Memory};
use roncho_core::{Error, Result, validate};
use serde_json::json;

roncho_core::store_view! {
    /// The store as the dream service reads it.
    pub trait DreamerStore: DreamLedger, Memory
}

/// Dream types.
pub const DREAM_TYPES: [&str; 2] = ["omni", "card_refresh"];

/// A dream to schedule.
#[derive(Debug, Clone, PartialEq)]
pub struct DreamRequest {
    pub workspace: String,
    pub observer: String,
    pub observed: String,
    pub dream_type: String,
    pub session: Option<String>,
    pub rebuild: bool,
    /// Why (logged and kept in the task): `manual`, `threshold`, ...
    pub reason: String,
}

/// Returns the work unit key of a dream.
pub fn dream_key(request: &DreamRequest) -> String {
    format!(
        "dream:{}:{}:{}:{}",
        request.dream_type, request.workspace, request.observer, request.observed
    )
}

/// Enqueues a dream, ready after `delay`; `false` when one of this key is
/// already pending.
pub async fn schedule(queue: &dyn WorkQueue, request: &DreamRequest, delay: Duration) -> Result<bool> {
    let key = dream_key(request);
    let added = queue
        .enqueue_delayed(
            vec![NewTask {
                dedup_id: format!("{key}#{}", nanoid::nanoid!()),
                work_unit_key: key,
                workspace_id: request.workspace.clone(),
                session_id: request.session.clone(),
                observer_id: Some(request.observer.clone()),
                sender_id: None,
                payload: json!({
                    "dream_type": request.dream_type,
                    "observer": request.observer,
                    "observed": request.observed,
                    "session_name": request.session,
                    "rebuild": request.rebuild,
                    "trigger_reason": request.reason,
                }),
                items: 1,
            }],
            delay,
        )
        .await?;
    Ok(added == 1)
}

/// When a collection is due a dream (Honcho's defaults: 50 new explicit
/// observations, 8 hours apart, after 60 idle minutes), and how long a due
/// dream may wait for quiet (roncho's: 4 hours).
#[derive(Debug, Clone, PartialEq)]
pub struct DreamPolicy {
    /// New explicit observations since the last dream.
    pub document_threshold: i64,
    /// Least time between two dreams of a collection.
    pub min_between: Duration,
    /// Quiet time of the observed peer before a due dream runs; activity
    /// pushes it back.
    pub idle: Duration,
    /// Longest a due dream waits for quiet: at the latest this long after
    /// it became due it runs, however active the peer (a peer who is never
    /// quiet for `idle` is consolidated all the same).
    pub max_delay: Duration,
}

impl Default for DreamPolicy {
    fn default() -> Self {
        Self {
            document_threshold: 50,
            min_between: Duration::from_secs(8 * 3600),
            idle: Duration::from_secs(60 * 60),
            max_delay: Duration::from_secs(4 * 60 * 60),
        }
    }
}

impl DreamPolicy {
    /// How long a dream that just became due waits: the idle time, within
    /// the longest delay.
    fn wait(&self) -> Duration {
        self.idle.min(self.max_delay)
    }
}

/// Schedules `omni` dreams as collections grow: told by the deriver of new
/// observations about a peer, it postpones that collection's pending dream
/// (the peer is active) and schedules one when the policy's thresholds are
/// met, ready after the idle time, and in any case within the policy's
/// longest delay.
pub struct DreamScheduler {
    store: Arc<dyn DreamLedger>,
    queue: Arc<dyn WorkQueue>,
    policy: DreamPolicy,
}

impl std::fmt::Debug for DreamScheduler {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("DreamScheduler")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl DreamScheduler {
    pub fn new(store: Arc<dyn DreamLedger>, queue: Arc<dyn WorkQueue>, policy: DreamPolicy) -> Self {
        Self { store, queue, policy }
    }

    /// Postpones a pending dream of the collection and schedules one when
    /// it is due; returns whether one was scheduled.
    pub async fn observed(&self, workspace: &str, observer: &str, observed: &str) -> Result<bool> {
        let request = DreamRequest {
            workspace: workspace.to_owned(),
            observer: observer.to_owned(),
            observed: observed.to_owned(),
            dream_type: "omni".into(),
            session: None,
            rebuild: false,
            reason: "threshold".into(),
        };
        self.queue
            .postpone(&dream_key(&request), self.policy.wait(), self.policy.max_delay)
            .await?;
        let state = self.store.dream_state(workspace, observer, observed).await?;
        if state.explicit_count - state.last_dream_document_count < self.policy.document_threshold {
            return Ok(false);
        }
        let min_between = i64::try_from(self.policy.min_between.as_micros()).unwrap_or(i64::MAX);
        if state
            .last_dream_at
            .is_some_and(|last| roncho_core::model::now_micros() - last < min_between)
        {
            return Ok(false);
        }
        let scheduled = schedule(self.queue.as_ref(), &request, self.policy.wait()).await?;
        if scheduled {
            tracing::info!(
                workspace, observer, observed,
                new_observations = state.explicit_count - state.last_dream_document_count,
                ready_in = ?self.policy.wait(),
                at_the_latest_in = ?self.policy.max_delay,
                "dream scheduled"
            );
        }
        Ok(scheduled)
    }
}

#[async_trait::async_trait]
impl roncho_worker::CollectionListener for DreamScheduler {
    async fn gained(&self, workspace: &str, observer: &str, observed: &str) {
        if let Err(error) = self.observed(workspace, observer, observed).await {
            tracing::warn!(%error, workspace, observer, observed, "dream scheduling failed; the next observation tries again");
        }
    }
}

/// Asks for a dream of `observer`'s collection about `observed` (itself when unset).
#[derive(Debug, Clone, Default)]
pub struct ScheduleDream {
    pub workspace_id: String,
    pub observer: String,
    pub observed: Option<String>,
    /// `omni` (the default) or `card_refresh`.
    pub dream_type: String,
    pub session_id: Option<String>,
    /// Rebuild the card from scratch (card_refresh only).
    pub rebuild: bool,
}

/// Dreams on request, as every edge calls it.
#[async_trait::async_trait]
pub trait DreamerApi: Send + Sync {
    /// Returns whether a dream was scheduled (`false`: one is pending already).
    async fn schedule_dream(&self, request: ScheduleDream) -> Result<bool>;
}

/// The dream scheduling service.
#[derive(Clone)]
pub struct Dreamer {
    store: Arc<dyn DreamerStore>,
    queue: Option<Arc<dyn WorkQueue>>,
    /// The dream model's id; `None`: dreams cannot run.
    model: Option<String>,
}

impl std::fmt::Debug for Dreamer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Dreamer")
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl Dreamer {
    pub fn new(store: Arc<dyn DreamerStore>, queue: Option<Arc<dyn WorkQueue>>, model: Option<String>) -> Self {
        Self { store, queue, model }
    }
}

#[async_trait::async_trait]
impl DreamerApi for Dreamer {
    async fn schedule_dream(&self, request: ScheduleDream) -> Result<bool> {
        let workspace = validate::reference_id("workspace_id", &request.workspace_id)?;
        let observer = validate::reference_id("observer", &request.observer)?;
        let observed = match request.observed.filter(|observed| !observed.is_empty()) {
            Some(observed) => validate::reference_id("observed", &observed)?,
            None => observer.clone(),
        };
        let dream_type = match request.dream_type.as_str() {
            "" | "omni" => "omni",
            "card_refresh" => "card_refresh",
            other => {
                return Err(Error::invalid(
                    "dream_type",
                    format!("`{other}` is not omni or card_refresh"),
                ));
            }
        };
        if request.rebuild && dream_type != "card_refresh" {
            return Err(Error::invalid("rebuild", "applies to card_refresh dreams only"));
        }
        let session = match request.session_id.filter(|session| !session.is_empty()) {
            Some(session) => Some(validate::reference_id("session_id", &session)?),
            None => None,
        };
        let queue = self.queue.as_ref().ok_or_else(|| {
            Error::FailedPrecondition("this process has no work queue configured (see roncho status)".into())
        })?;
        if self.model.is_none() {
            return Err(Error::FailedPrecondition(
                "dreams need an LLM and none is configured for the dreamer (dream_model or llm_model)".into(),
            ));
        }
        // Both peers must exist: NOT_FOUND names the missing one.
        self.store.dream_state(&workspace, &observer, &observed).await?;
        for peer in [&observer, &observed] {
            self.store.get_peer_card(&workspace, peer, peer).await?;
        }
        schedule(
            queue.as_ref(),
            &DreamRequest {
                workspace,
                observer,
                observed,
                dream_type: dream_type.to_owned(),
                session,
                rebuild: request.rebuild,
                reason: "manual".into(),
            },
            Duration::ZERO,
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    //! The scheduler's policy against a ledger it controls (the one port
    //! it reads) and the embedded SQL work queue.

    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use roncho_core::model::{DreamState, now_micros};
    use roncho_core::queue::WorkQueue;
    use roncho_core::store::{DreamLedger, Workspaces};

    use super::{DreamPolicy, DreamScheduler};

    /// A dream ledger that says what the test sets.
    #[derive(Default)]
    struct Ledger(Mutex<DreamState>);

    impl Ledger {
        fn set(&self, state: DreamState) {
            *self.0.lock().unwrap() = state;
        }
    }

    #[async_trait::async_trait]
    impl DreamLedger for Ledger {
        async fn dream_state(&self, _: &str, _: &str, _: &str) -> roncho_core::Result<DreamState> {
            Ok(*self.0.lock().unwrap())
        }
        async fn record_dream(&self, _: &str, _: &str, _: &str, _: i64) -> roncho_core::Result<()> {
            unreachable!("the scheduler never records a dream")
        }
    }

    const HOUR_MICROS: i64 = 3_600_000_000;

    #[tokio::test]
    async fn a_dream_is_scheduled_once_due_never_twice_and_not_before_min_between() {
        let dir = tempfile::tempdir().unwrap();
        let store = roncho_store::testing::open_embedded(dir.path()).await;
        store
            .get_or_create_workspace("w", Default::default(), Default::default())
            .await
            .unwrap();
        let queue: Arc<dyn WorkQueue> = Arc::new(roncho_store::SqlWorkQueue::new(store.clone()));
        let ledger = Arc::new(Ledger::default());
        let policy = DreamPolicy {
            document_threshold: 3,
            min_between: Duration::from_secs(3600),
            idle: Duration::ZERO,
            max_delay: Duration::from_secs(3600),
        };
        let scheduler = DreamScheduler::new(ledger.clone(), queue.clone(), policy);
        let observed = || scheduler.observed("w", "alice", "alice");

        ledger.set(DreamState {
            explicit_count: 2,
            ..DreamState::default()
        });
        assert!(!observed().await.unwrap(), "two new observations of three");
        ledger.set(DreamState {
            explicit_count: 3,
            ..DreamState::default()
        });
        assert!(observed().await.unwrap(), "three new observations, never dreamt");
        assert!(!observed().await.unwrap(), "a dream of the collection is pending");
        let claim = queue
            .claim("test", &["dream"], 10, Duration::from_secs(30))
            .await
            .unwrap()
            .expect("the dream is ready after the idle time (none)");
        assert_eq!(claim.work_unit_key, "dream:omni:w:alice:alice");
        assert_eq!(claim.tasks.len(), 1);
        assert_eq!(claim.tasks[0].payload["trigger_reason"], "threshold");
        queue.complete(&claim, &[claim.tasks[0].id]).await.unwrap();

        // Dreamt 10 minutes ago: more observations wait for min_between.
        ledger.set(DreamState {
            generation: 1,
            last_dream_at: Some(now_micros() - HOUR_MICROS / 6),
            last_dream_document_count: 3,
            explicit_count: 10,
        });
        assert!(!observed().await.unwrap(), "within min_between of the last dream");
        // Two hours ago, and three new since: due again.
        ledger.set(DreamState {
            generation: 1,
            last_dream_at: Some(now_micros() - 2 * HOUR_MICROS),
            last_dream_document_count: 3,
            explicit_count: 5,
        });
        assert!(!observed().await.unwrap(), "two new since the last dream");
        ledger.set(DreamState {
            generation: 1,
            last_dream_at: Some(now_micros() - 2 * HOUR_MICROS),
            last_dream_document_count: 3,
            explicit_count: 6,
        });
        assert!(observed().await.unwrap(), "three new since a dream two hours ago");
    }

    #[tokio::test]
    async fn activity_pushes_a_pending_dream_back_by_the_idle_time() {
        let dir = tempfile::tempdir().unwrap();
        let store = roncho_store::testing::open_embedded(dir.path()).await;
        store
            .get_or_create_workspace("w", Default::default(), Default::default())
            .await
            .unwrap();
        let queue: Arc<dyn WorkQueue> = Arc::new(roncho_store::SqlWorkQueue::new(store.clone()));
        let ledger = Arc::new(Ledger::default());
        ledger.set(DreamState {
            explicit_count: 50,
            ..DreamState::default()
        });
        let idle = Duration::from_secs(3600);
        let policy = DreamPolicy {
            document_threshold: 1,
            min_between: Duration::ZERO,
            idle,
            max_delay: 4 * idle,
        };
        let scheduler = DreamScheduler::new(ledger, queue.clone(), policy);
        assert!(scheduler.observed("w", "alice", "bob").await.unwrap());
        let claimed = queue
            .claim("test", &["dream"], 10, Duration::from_secs(30))
            .await
            .unwrap();
        assert!(claimed.is_none(), "the dream waits for an hour of quiet");
    }
}
