//! The `WorkQueue` contract suite against the NATS JetStream queue (the
//! nats-server at `RONCHO_TEST_NATS_URL`, the ledger on Postgres), and what
//! only a distributed queue has to show: several processes sharing the
//! partitions, and a process that dies handing its work on.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use roncho_core::queue::contract::Check;
use roncho_core::queue::{NewTask, StatusFilter, WorkQueue};
use roncho_nats::{NatsOptions, NatsWorkQueue};
use roncho_store::testing::{FreshDatabase, NATS_URL_VAR, integration_env, open_migrated, unique_name};
use roncho_store::{SqlStore, SqlWorkQueue};

/// A test's NATS names, database and options.
struct Setup {
    database: FreshDatabase,
    store: Arc<SqlStore>,
    options: NatsOptions,
}

async fn setup(partitions: u32) -> Option<Setup> {
    let url = integration_env(NATS_URL_VAR)?;
    let database = FreshDatabase::create().await?;
    let store = open_migrated(&database.url).await;
    let mut options = NatsOptions::new(url);
    options.prefix = unique_name();
    options.partitions = partitions;
    options.consume = roncho_core::queue::TASK_TYPES
        .iter()
        .map(|kind| (*kind).to_owned())
        .collect();
    options.ack_wait = Duration::from_secs(2);
    options.lease_ttl = Duration::from_secs(3);
    options.arrival_wait = Duration::from_millis(300);
    Some(Setup {
        database,
        store,
        options,
    })
}

impl Setup {
    async fn queue(&self, instance: &str) -> NatsWorkQueue {
        let mut options = self.options.clone();
        options.instance = instance.to_owned();
        NatsWorkQueue::connect(options, Arc::new(SqlWorkQueue::new(self.store.clone())))
            .await
            .expect("connecting the NATS queue")
    }

    async fn teardown(self, queue: &NatsWorkQueue) {
        queue.delete_streams().await.expect("deleting the test streams");
        self.store.close().await;
        self.database.drop_database().await;
    }
}

async fn on_nats(check: Check) {
    let Some(setup) = setup(2).await else {
        return;
    };
    let queue = setup.queue("only").await;
    check(&queue).await;
    setup.teardown(&queue).await;
}

roncho_core::work_queue_contract!(nats, super::on_nats);

fn task(unit: usize, turn: usize) -> NewTask {
    NewTask {
        work_unit_key: format!("representation:w:s{unit}:bob"),
        dedup_id: format!("u{unit}-t{turn}"),
        workspace_id: "w".into(),
        session_id: Some(format!("s{unit}")),
        observer_id: Some("bob".into()),
        sender_id: Some("alice".into()),
        payload: serde_json::json!({ "turn": turn }),
        items: 1,
    }
}

/// Claims and completes until `queue` has nothing for `patience`, returning
/// each unit's tasks in the order they were processed.
async fn drain(queue: &NatsWorkQueue, name: &str, patience: Duration) -> BTreeMap<String, Vec<String>> {
    let mut done: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut idle_since = tokio::time::Instant::now();
    while idle_since.elapsed() < patience {
        let Some(claim) = queue
            .claim(name, &["representation"], 2, Duration::from_secs(30))
            .await
            .unwrap()
        else {
            continue;
        };
        idle_since = tokio::time::Instant::now();
        let ids: Vec<i64> = claim.tasks.iter().map(|task| task.id).collect();
        done.entry(claim.work_unit_key.clone())
            .or_default()
            .extend(claim.tasks.iter().map(|task| task.dedup_id.clone()));
        queue.complete(&claim, &ids).await.unwrap();
        queue.release(&claim).await.unwrap();
    }
    done
}

/// Two processes split the partitions between them, each task type's
/// evenly (the second joins later: the first hands it a share), and
/// together they process every task once, each unit in order.
#[tokio::test]
async fn processes_share_partitions_and_every_task_runs_once_in_order() {
    let Some(setup) = setup(4).await else {
        return;
    };
    let first = setup.queue("first").await;
    let all_types = 4 * roncho_core::queue::TASK_TYPES.len();
    assert_eq!(
        first.owned_partitions().await.len(),
        all_types,
        "alone, it holds every partition"
    );
    let second = setup.queue("second").await;
    // Within a lease period the first sees the second and hands over half.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (a, b) = (first.owned_partitions().await, second.owned_partitions().await);
        if a.len() == all_types / 2 && b.len() == all_types / 2 {
            assert!(a.iter().all(|key| !b.contains(key)), "disjoint: {a:?} {b:?}");
            // Each kind of work is split too: both take part in derivation.
            for kind in roncho_core::queue::TASK_TYPES {
                let of = |held: &[String]| held.iter().filter(|key| key.starts_with(&format!("{kind}."))).count();
                assert_eq!((of(&a), of(&b)), (2, 2), "{kind}: {a:?} {b:?}");
            }
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "no fair split: {a:?} {b:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let tasks: Vec<NewTask> = (0..3)
        .flat_map(|turn| (0..16).map(move |unit| task(unit, turn)))
        .collect();
    first.enqueue(tasks).await.unwrap();
    let patience = Duration::from_secs(2);
    let (a, b) = tokio::join!(drain(&first, "a", patience), drain(&second, "b", patience));
    assert!(!a.is_empty() && !b.is_empty(), "both worked: {a:?} {b:?}");
    let units: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    assert_eq!(units.len(), 16);
    for (unit, processed) in a.iter().chain(&b) {
        let n = unit.trim_start_matches("representation:w:s").trim_end_matches(":bob");
        let expected: Vec<String> = (0..3).map(|turn| format!("u{n}-t{turn}")).collect();
        assert_eq!(processed, &expected, "{unit}: once each, in order, by one process");
    }
    assert_eq!(first.stream_messages().await.unwrap(), 0, "every delivery acked");
    second.close().await;
    setup.teardown(&first).await;
}

/// A process that stops renewing (as if killed) loses its partitions; the
/// survivor takes them, receives the unacked deliveries again, and runs
/// what was not finished — skipping what the dead one completed but did
/// not get to ack.
#[tokio::test]
async fn a_dead_process_hands_on_its_work_without_repeats() {
    let Some(setup) = setup(1).await else {
        return;
    };
    let doomed = setup.queue("doomed").await;
    doomed
        .enqueue((0..4).map(|turn| task(0, turn)).collect())
        .await
        .unwrap();
    let claim = doomed
        .claim("doomed", &["representation"], 2, Duration::from_millis(500))
        .await
        .unwrap()
        .expect("a claim");
    assert_eq!(claim.tasks.len(), 2);
    // It finishes the first task in the ledger, then dies before acking it or anything else.
    setup.ledger().complete(&claim, &[claim.tasks[0].id]).await.unwrap();
    doomed.abandon();
    let survivor = setup.queue("survivor").await;
    let processed = drain(&survivor, "survivor", Duration::from_secs(8)).await;
    assert_eq!(
        processed.get("representation:w:s0:bob").cloned().unwrap_or_default(),
        ["u0-t1", "u0-t2", "u0-t3"],
        "the rest, once, in order"
    );
    let status = survivor
        .status(&StatusFilter {
            workspace_id: "w".into(),
            ..StatusFilter::default()
        })
        .await
        .unwrap();
    assert_eq!((status.counts.completed, status.counts.pending), (4, 0));
    assert_eq!(
        survivor.stream_messages().await.unwrap(),
        0,
        "the stale delivery acked too"
    );
    setup.teardown(&survivor).await;
}

impl Setup {
    fn ledger(&self) -> Arc<SqlWorkQueue> {
        Arc::new(SqlWorkQueue::new(self.store.clone()))
    }
}

/// A database created on a stream prefix another database just used (a
/// reset, a restore, a second install) gets its work delivered: its message
/// ids carry its own installation id, so the stream's duplicate window does
/// not swallow them, and the other database's messages are dropped, not run.
#[tokio::test]
async fn a_new_database_on_a_used_prefix_gets_its_work_delivered() {
    let (Some(before), Some(mut after)) = (setup(2).await, setup(2).await) else {
        return;
    };
    after.options.prefix = before.options.prefix.clone();
    let mut publishing_only = before.options.clone();
    publishing_only.consume = Vec::new();
    let old = NatsWorkQueue::connect(publishing_only, before.ledger()).await.unwrap();
    old.enqueue(
        (0..3)
            .flat_map(|turn| (0..4).map(move |unit| task(unit, turn)))
            .collect(),
    )
    .await
    .unwrap();
    old.close().await;
    assert_eq!(
        old.stream_messages().await.unwrap(),
        12,
        "the old database's work waits in the stream"
    );

    let queue = after.queue("new").await;
    queue
        .enqueue(
            (0..3)
                .flat_map(|turn| (0..4).map(move |unit| task(unit, turn)))
                .collect(),
        )
        .await
        .unwrap();
    let processed = drain(&queue, "new", Duration::from_secs(3)).await;
    assert_eq!(processed.len(), 4, "{processed:?}");
    for (unit, tasks) in &processed {
        let n = unit.trim_start_matches("representation:w:s").trim_end_matches(":bob");
        let expected: Vec<String> = (0..3).map(|turn| format!("u{n}-t{turn}")).collect();
        assert_eq!(tasks, &expected, "{unit}: each once, in order");
    }
    let status = queue
        .status(&StatusFilter {
            workspace_id: "w".into(),
            ..StatusFilter::default()
        })
        .await
        .unwrap();
    assert_eq!((status.counts.completed, status.counts.pending), (12, 0));
    assert_eq!(
        queue.stream_messages().await.unwrap(),
        0,
        "the other database's messages were dropped"
    );
    before.store.close().await;
    before.database.drop_database().await;
    after.teardown(&queue).await;
}

/// The ledger heals the stream: a task whose message is gone from the
/// stream (deleted by hand here) is republished by the sweeper once no
/// consumer has held it for a while, and runs in its place in the order.
#[tokio::test]
async fn the_sweeper_redelivers_a_task_the_stream_lost() {
    let Some(mut setup) = setup(1).await else {
        return;
    };
    setup.options.redeliver_after = Duration::from_secs(1);
    let mut publishing_only = setup.options.clone();
    publishing_only.consume = Vec::new();
    let publisher = NatsWorkQueue::connect(publishing_only, setup.ledger()).await.unwrap();
    publisher
        .enqueue((0..3).map(|turn| task(0, turn)).collect())
        .await
        .unwrap();
    // Lose the second task's message.
    let state = publisher.stream_state().await.unwrap();
    assert_eq!(state.messages, 3);
    let client = async_nats::connect(setup.options.url.as_str()).await.unwrap();
    let stream = async_nats::jetstream::new(client)
        .get_stream(format!("{}_work", setup.options.prefix))
        .await
        .unwrap();
    assert!(stream.delete_message(state.first_sequence + 1).await.unwrap());
    publisher.close().await;

    let queue = setup.queue("healer").await;
    let processed = drain(&queue, "healer", Duration::from_secs(6)).await;
    assert_eq!(
        processed.get("representation:w:s0:bob").cloned().unwrap_or_default(),
        ["u0-t0", "u0-t1", "u0-t2"],
        "the lost task ran, in its place"
    );
    let status = queue
        .status(&StatusFilter {
            workspace_id: "w".into(),
            ..StatusFilter::default()
        })
        .await
        .unwrap();
    assert_eq!((status.counts.completed, status.counts.pending), (3, 0));
    setup.teardown(&queue).await;
}
