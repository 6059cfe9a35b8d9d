//! The `WorkQueue` contract suite (feature `testing`): every queue runs these
//! checks through [`work_queue_contract!`](crate::work_queue_contract), each
//! on an empty queue.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::Error;
use crate::queue::{Claim, NewTask, RetryFilter, StatusFilter, WorkQueue};

/// One contract check over a queue the caller provides.
pub type Check = for<'a> fn(&'a dyn WorkQueue) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// Generates one `#[tokio::test]` per contract check in module `$module`,
/// each calling `$run(check).await`, where `$run` builds an empty queue,
/// runs the [`Check`] on it and cleans up.
#[macro_export]
macro_rules! work_queue_contract {
    ($module:ident, $run:path) => {
        mod $module {
            $crate::work_queue_contract!(@tests $run;
                enqueue_is_idempotent_and_tasks_come_in_order,
                one_worker_holds_a_unit_and_others_take_the_rest,
                an_expired_lease_is_claimed_again_and_the_stale_holder_refused,
                a_stopped_workers_units_are_claimed_again_at_once,
                failures_retry_in_order_then_die_with_their_error,
                status_counts_by_state_session_observer_and_sender,
                concurrent_workers_never_share_a_unit_and_lose_nothing,
                purging_removes_old_finished_tasks_only,
                delayed_tasks_wait_and_postponing_moves_them,
                postponing_never_passes_the_latest_time,
                outages_postpone_without_spending_attempts_and_dead_work_runs_again,
                tasks_of_many_items_are_counted_and_claimed_by_their_items,
                erasures_go_first_and_workspaces_take_turns,
                history_shows_what_waited_and_what_was_done_by_step,
            );
        }
    };
    (@tests $run:path; $($check:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $check() {
                $run(|queue| Box::pin($crate::queue::contract::$check(queue))).await;
            }
        )*
    };
}

const LEASE: Duration = Duration::from_secs(30);
const DERIVER: &[&str] = &["representation", "summary"];

fn task(key: &str, dedup_id: &str) -> NewTask {
    let parts: Vec<&str> = key.split(':').collect();
    NewTask {
        work_unit_key: key.to_owned(),
        dedup_id: dedup_id.to_owned(),
        workspace_id: parts.get(1).copied().unwrap_or("w").to_owned(),
        session_id: parts.get(2).map(|s| (*s).to_owned()),
        observer_id: parts.get(3).map(|s| (*s).to_owned()),
        sender_id: Some("alice".into()),
        payload: serde_json::json!({ "message": dedup_id }),
        items: 1,
    }
}

fn dedup_ids(claim: &Claim) -> Vec<&str> {
    claim.tasks.iter().map(|task| task.dedup_id.as_str()).collect()
}

fn ids(claim: &Claim) -> Vec<i64> {
    claim.tasks.iter().map(|task| task.id).collect()
}

const A: &str = "representation:w:s1:bob";
const B: &str = "representation:w:s2:bob";

pub async fn enqueue_is_idempotent_and_tasks_come_in_order(queue: &dyn WorkQueue) {
    let new = queue
        .enqueue(vec![task(A, "m1"), task(A, "m2"), task(A, "m3")])
        .await
        .unwrap();
    assert_eq!(new, 3);
    assert_eq!(
        queue.enqueue(vec![task(A, "m2"), task(A, "m4")]).await.unwrap(),
        1,
        "m2 again is ignored"
    );
    let claim = queue.claim("w1", DERIVER, 3, LEASE).await.unwrap().expect("a claim");
    assert_eq!(claim.work_unit_key, A);
    assert_eq!(dedup_ids(&claim), ["m1", "m2", "m3"], "FIFO, at most `max`");
    assert_eq!(claim.tasks[1].payload["message"], "m2");
    queue.complete(&claim, &ids(&claim)).await.unwrap();
    queue.release(&claim).await.unwrap();
    let rest = queue.claim("w1", DERIVER, 10, LEASE).await.unwrap().expect("the rest");
    assert_eq!(dedup_ids(&rest), ["m4"]);
    assert!(
        queue.claim("w2", &["dream"], 10, LEASE).await.unwrap().is_none(),
        "other task types are not handed out"
    );
}

/// A task standing for several items (a batch's messages of one peer)
/// counts them in status, and claims take tasks up to `max` items (at least
/// one task, whatever its items).
pub async fn tasks_of_many_items_are_counted_and_claimed_by_their_items(queue: &dyn WorkQueue) {
    let weighed = |dedup_id: &str, items: i64| NewTask {
        items,
        ..task(A, dedup_id)
    };
    queue
        .enqueue(vec![weighed("b1", 3), weighed("b2", 3), weighed("b3", 1)])
        .await
        .unwrap();
    let status = queue
        .status(&StatusFilter {
            workspace_id: "w".into(),
            ..StatusFilter::default()
        })
        .await
        .unwrap();
    assert_eq!((status.counts.total, status.counts.pending), (7, 7), "{status:?}");
    let claim = queue.claim("w1", DERIVER, 4, LEASE).await.unwrap().expect("a claim");
    assert_eq!(dedup_ids(&claim), ["b1"], "a second task of 3 would pass 4 items");
    queue.complete(&claim, &ids(&claim)).await.unwrap();
    queue.release(&claim).await.unwrap();
    let claim = queue.claim("w1", DERIVER, 2, LEASE).await.unwrap().expect("a claim");
    assert_eq!(dedup_ids(&claim), ["b2"], "one task at least, past `max`");
    queue.complete(&claim, &ids(&claim)).await.unwrap();
    queue.release(&claim).await.unwrap();
    let done = queue
        .status(&StatusFilter {
            workspace_id: "w".into(),
            ..StatusFilter::default()
        })
        .await
        .unwrap();
    assert_eq!((done.counts.completed, done.counts.pending), (6, 1), "{done:?}");
}

pub async fn erasures_go_first_and_workspaces_take_turns(queue: &dyn WorkQueue) {
    // One workspace's backlog, enqueued first; then one unit each of two
    // others; then an erasure, newest of all.
    let backlog: Vec<NewTask> = (0..6)
        .map(|index| task(&format!("representation:big:s{index}:bob"), &format!("big{index}")))
        .collect();
    queue.enqueue(backlog).await.unwrap();
    queue
        .enqueue(vec![
            task("representation:small:s:bob", "small"),
            task("summary:tiny:s:bob", "tiny"),
        ])
        .await
        .unwrap();
    queue
        .enqueue(vec![task("deletion:zzz:session:s", "erase")])
        .await
        .unwrap();
    let types = ["representation", "summary", "deletion"];
    let mut claimed = Vec::new();
    for worker in 0..5 {
        let claim = queue
            .claim(&format!("w{worker}"), &types, 10, LEASE)
            .await
            .unwrap()
            .expect("ready work");
        claimed.push(crate::queue::workspace_of(&claim.work_unit_key).to_owned());
    }
    assert_eq!(claimed[0], "zzz", "the erasure goes first: {claimed:?}");
    let mut turn: Vec<&str> = claimed[1..4].iter().map(String::as_str).collect();
    turn.sort_unstable();
    assert_eq!(
        turn,
        ["big", "small", "tiny"],
        "each workspace has a turn before any has two: {claimed:?}"
    );
    assert_eq!(claimed[4], "big");
}

pub async fn one_worker_holds_a_unit_and_others_take_the_rest(queue: &dyn WorkQueue) {
    queue.enqueue(vec![task(A, "a1"), task(B, "b1")]).await.unwrap();
    let first = queue.claim("w1", DERIVER, 10, LEASE).await.unwrap().expect("A");
    assert_eq!(first.work_unit_key, A);
    // More work for A arrives while w1 holds it: nobody else may take it.
    queue.enqueue(vec![task(A, "a2")]).await.unwrap();
    let second = queue.claim("w2", DERIVER, 10, LEASE).await.unwrap().expect("B");
    assert_eq!(second.work_unit_key, B);
    assert!(
        queue.claim("w3", DERIVER, 10, LEASE).await.unwrap().is_none(),
        "A and B are held"
    );
    queue.complete(&first, &ids(&first)).await.unwrap();
    queue.release(&first).await.unwrap();
    let again = queue
        .claim("w3", DERIVER, 10, LEASE)
        .await
        .unwrap()
        .expect("A's new task");
    assert_eq!((again.work_unit_key.as_str(), dedup_ids(&again)), (A, vec!["a2"]));
    assert_ne!(again.token, first.token);
}

pub async fn an_expired_lease_is_claimed_again_and_the_stale_holder_refused(queue: &dyn WorkQueue) {
    queue.enqueue(vec![task(A, "a1"), task(A, "a2")]).await.unwrap();
    let stale = queue
        .claim("w1", DERIVER, 10, Duration::from_millis(50))
        .await
        .unwrap()
        .expect("A");
    // w1 dies without completing. Once the lease runs out, w2 gets every task.
    tokio::time::sleep(Duration::from_millis(120)).await;
    let retaken = queue.claim("w2", DERIVER, 10, LEASE).await.unwrap().expect("A again");
    assert_eq!(dedup_ids(&retaken), ["a1", "a2"], "nothing lost");
    for refused in [
        queue.complete(&stale, &ids(&stale)).await,
        queue.renew(&stale, LEASE).await,
    ] {
        assert!(matches!(refused, Err(Error::FailedPrecondition(_))), "{refused:?}");
    }
    queue.renew(&retaken, LEASE).await.unwrap();
    queue.complete(&retaken, &ids(&retaken)).await.unwrap();
    queue.release(&retaken).await.unwrap();
    assert_eq!(
        queue
            .status(&StatusFilter {
                workspace_id: "w".into(),
                ..StatusFilter::default()
            })
            .await
            .unwrap()
            .counts
            .completed,
        2,
        "each task completed once"
    );
}

pub async fn a_stopped_workers_units_are_claimed_again_at_once(queue: &dyn WorkQueue) {
    queue.enqueue(vec![task(A, "a1"), task(B, "b1")]).await.unwrap();
    // Which unit each worker gets first is the queue's choice (a
    // partitioned stream delivers partitions in any order).
    let stopped = queue.claim("w1", DERIVER, 10, LEASE).await.unwrap().expect("a unit");
    let other = queue
        .claim("w2", DERIVER, 10, LEASE)
        .await
        .unwrap()
        .expect("the other unit");
    assert_ne!(stopped.work_unit_key, other.work_unit_key);
    assert_eq!(queue.release_worker("w1").await.unwrap(), 1);
    // Long before the lease would run out, the unit is free, its task not done.
    let retaken = queue
        .claim("w3", DERIVER, 10, LEASE)
        .await
        .unwrap()
        .expect("w1's unit again");
    assert_eq!(
        (&retaken.work_unit_key, dedup_ids(&retaken)),
        (&stopped.work_unit_key, dedup_ids(&stopped))
    );
    let refused = queue.complete(&stopped, &ids(&stopped)).await;
    assert!(matches!(refused, Err(Error::FailedPrecondition(_))), "{refused:?}");
    // Another worker's unit is left alone.
    queue.complete(&other, &ids(&other)).await.unwrap();
    queue.complete(&retaken, &ids(&retaken)).await.unwrap();
    for claim in [&retaken, &other] {
        queue.release(claim).await.unwrap();
    }
}

pub async fn failures_retry_in_order_then_die_with_their_error(queue: &dyn WorkQueue) {
    queue.enqueue(vec![task(A, "t1"), task(A, "t2")]).await.unwrap();
    let claim = queue.claim("w1", DERIVER, 1, LEASE).await.unwrap().expect("t1");
    assert_eq!(dedup_ids(&claim), ["t1"]);
    queue
        .fail(&claim, &ids(&claim), "llm: 503", Duration::from_millis(150), 2)
        .await
        .unwrap();
    queue.release(&claim).await.unwrap();
    assert!(
        queue.claim("w1", DERIVER, 10, LEASE).await.unwrap().is_none(),
        "t1 waits for its retry and t2 waits behind it"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    let retry = queue.claim("w1", DERIVER, 10, LEASE).await.unwrap().expect("retry");
    assert_eq!(dedup_ids(&retry), ["t1", "t2"]);
    assert_eq!(retry.tasks[0].attempts, 1);
    queue
        .fail(&retry, &ids(&retry)[..1], "llm: malformed JSON", Duration::ZERO, 2)
        .await
        .unwrap();
    queue.release(&retry).await.unwrap();
    let after = queue.claim("w1", DERIVER, 10, LEASE).await.unwrap().expect("t2");
    assert_eq!(dedup_ids(&after), ["t2"], "a dead task no longer holds the unit back");
    let status = queue
        .status(&StatusFilter {
            workspace_id: "w".into(),
            ..StatusFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(status.counts.failed, 1);
    assert_eq!(status.failures.len(), 1);
    assert_eq!(
        (
            status.failures[0].dedup_id.as_str(),
            status.failures[0].attempts,
            status.failures[0].last_error.as_str()
        ),
        ("t1", 2, "llm: malformed JSON")
    );
}

pub async fn outages_postpone_without_spending_attempts_and_dead_work_runs_again(queue: &dyn WorkQueue) {
    queue.enqueue(vec![task(A, "t1"), task(A, "t2")]).await.unwrap();
    let filter = StatusFilter {
        workspace_id: "w".into(),
        ..StatusFilter::default()
    };
    // Postponed again and again, it never dies: no attempt is spent.
    for deferral in 0..3 {
        let claim = queue.claim("w1", DERIVER, 10, LEASE).await.unwrap().expect("t1 and t2");
        assert_eq!(dedup_ids(&claim), ["t1", "t2"]);
        assert_eq!((claim.tasks[0].attempts, claim.tasks[0].deferrals), (0, deferral));
        queue
            .defer(
                &claim,
                &ids(&claim),
                "llm unavailable: HTTP 503",
                Duration::from_millis(900),
            )
            .await
            .unwrap();
        queue.release(&claim).await.unwrap();
        assert!(
            queue.claim("w1", DERIVER, 10, LEASE).await.unwrap().is_none(),
            "waits out the outage"
        );
        let status = queue.status(&filter).await.unwrap();
        assert_eq!(
            (status.counts.pending, status.counts.postponed, status.counts.failed),
            (2, 2, 0)
        );
        assert_eq!(status.postponed.len(), 2);
        assert_eq!(status.postponed[0].reason, "llm unavailable: HTTP 503");
        assert_eq!(status.postponed[0].deferrals, deferral + 1);
        tokio::time::sleep(Duration::from_millis(1_000)).await;
    }
    // A real failure kills t1 at its one attempt; t2 completes.
    let claim = queue.claim("w1", DERIVER, 1, LEASE).await.unwrap().expect("t1");
    queue
        .fail(&claim, &ids(&claim), "malformed", Duration::ZERO, 1)
        .await
        .unwrap();
    queue.release(&claim).await.unwrap();
    let claim = queue.claim("w1", DERIVER, 10, LEASE).await.unwrap().expect("t2");
    queue.complete(&claim, &ids(&claim)).await.unwrap();
    queue.release(&claim).await.unwrap();
    let status = queue.status(&filter).await.unwrap();
    assert_eq!(
        (status.counts.failed, status.counts.completed, status.counts.postponed),
        (1, 1, 0)
    );
    // Retrying another workspace or task type leaves it dead; its own revives it.
    let other = RetryFilter {
        workspace_id: "elsewhere".into(),
        ..RetryFilter::default()
    };
    assert_eq!(queue.retry_dead(&other).await.unwrap(), 0);
    let summaries = RetryFilter {
        workspace_id: "w".into(),
        task_type: Some("summary".into()),
        ..RetryFilter::default()
    };
    assert_eq!(queue.retry_dead(&summaries).await.unwrap(), 0);
    let ours = RetryFilter {
        workspace_id: "w".into(),
        session_id: Some("s1".into()),
        task_type: Some("representation".into()),
    };
    assert_eq!(queue.retry_dead(&ours).await.unwrap(), 1);
    let again = queue.claim("w1", DERIVER, 10, LEASE).await.unwrap().expect("t1 again");
    assert_eq!(dedup_ids(&again), ["t1"]);
    assert_eq!(again.tasks[0].attempts, 0, "a fresh start");
    queue.complete(&again, &ids(&again)).await.unwrap();
    queue.release(&again).await.unwrap();
    let status = queue.status(&filter).await.unwrap();
    assert_eq!((status.counts.failed, status.counts.completed), (0, 2));
}

pub async fn status_counts_by_state_session_observer_and_sender(queue: &dyn WorkQueue) {
    let mut from_carol = task("summary:w:s2:None", "s2-summary");
    from_carol.sender_id = Some("carol".into());
    from_carol.observer_id = None;
    queue
        .enqueue(vec![
            task(A, "a1"),
            task(A, "a2"),
            task(B, "b1"),
            from_carol,
            task("representation:other:s1:bob", "elsewhere"),
        ])
        .await
        .unwrap();
    let held = queue.claim("w1", DERIVER, 1, LEASE).await.unwrap().expect("A");
    queue.complete(&held, &ids(&held)).await.unwrap();
    // A is still held with a2 pending: in progress.
    let all = queue
        .status(&StatusFilter {
            workspace_id: "w".into(),
            ..StatusFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(
        (
            all.counts.total,
            all.counts.completed,
            all.counts.in_progress,
            all.counts.pending,
            all.counts.failed
        ),
        (4, 1, 1, 2, 0)
    );
    let sessions: Vec<(&str, i64)> = all
        .sessions
        .iter()
        .map(|(session, counts)| (session.as_str(), counts.total))
        .collect();
    assert_eq!(sessions, [("s1", 2), ("s2", 2)]);
    let by = |session: Option<&str>, observer: Option<&str>, sender: Option<&str>| StatusFilter {
        workspace_id: "w".into(),
        session_id: session.map(str::to_owned),
        observer_id: observer.map(str::to_owned),
        sender_id: sender.map(str::to_owned),
    };
    assert_eq!(queue.status(&by(Some("s2"), None, None)).await.unwrap().counts.total, 2);
    assert_eq!(
        queue.status(&by(None, Some("bob"), None)).await.unwrap().counts.total,
        3
    );
    assert_eq!(
        queue
            .status(&by(None, None, Some("carol")))
            .await
            .unwrap()
            .counts
            .pending,
        1
    );
    queue.release(&held).await.unwrap();
    assert_eq!(
        queue.status(&by(None, None, None)).await.unwrap().counts.in_progress,
        0,
        "released: pending again"
    );
}

pub async fn concurrent_workers_never_share_a_unit_and_lose_nothing(queue: &dyn WorkQueue) {
    use std::collections::{HashMap, HashSet};
    use std::sync::Mutex;

    let mut tasks = Vec::new();
    for unit in 0..12 {
        for turn in 0..3 {
            tasks.push(task(
                &format!("representation:w:s{unit}:bob"),
                &format!("u{unit}-t{turn}"),
            ));
        }
    }
    queue.enqueue(tasks).await.unwrap();
    let held: Mutex<HashSet<String>> = Mutex::new(HashSet::new());
    let done: Mutex<HashMap<String, Vec<String>>> = Mutex::new(HashMap::new());
    let worker = |name: &'static str| {
        let (held, done) = (&held, &done);
        async move {
            while let Some(claim) = queue.claim(name, DERIVER, 2, LEASE).await.unwrap() {
                assert!(
                    held.lock().unwrap().insert(claim.work_unit_key.clone()),
                    "{} held twice",
                    claim.work_unit_key
                );
                tokio::time::sleep(Duration::from_millis(2)).await;
                held.lock().unwrap().remove(&claim.work_unit_key);
                done.lock()
                    .unwrap()
                    .entry(claim.work_unit_key.clone())
                    .or_default()
                    .extend(claim.tasks.iter().map(|task| task.dedup_id.clone()));
                queue.complete(&claim, &ids(&claim)).await.unwrap();
                queue.release(&claim).await.unwrap();
            }
        }
    };
    tokio::join!(worker("w1"), worker("w2"), worker("w3"), worker("w4"));
    let done = done.into_inner().unwrap();
    assert_eq!(done.len(), 12);
    for (unit, processed) in done {
        let suffix = unit
            .rsplit(':')
            .nth(1)
            .unwrap_or_default()
            .trim_start_matches('s')
            .to_owned();
        let expected: Vec<String> = (0..3).map(|turn| format!("u{suffix}-t{turn}")).collect();
        assert_eq!(processed, expected, "each task of {unit} once, in order");
    }
}

pub async fn purging_removes_old_finished_tasks_only(queue: &dyn WorkQueue) {
    queue
        .enqueue(vec![
            task(A, "done1"),
            task(A, "done2"),
            task(B, "dead"),
            task("summary:w:s3:None:None", "waiting"),
        ])
        .await
        .unwrap();
    let a = queue
        .claim("w1", &["representation"], 10, LEASE)
        .await
        .unwrap()
        .unwrap();
    queue.complete(&a, &ids(&a)).await.unwrap();
    queue.release(&a).await.unwrap();
    let b = queue
        .claim("w1", &["representation"], 10, LEASE)
        .await
        .unwrap()
        .unwrap();
    queue.fail(&b, &ids(&b), "boom", Duration::ZERO, 1).await.unwrap();
    queue.release(&b).await.unwrap();
    let all = StatusFilter {
        workspace_id: "w".into(),
        ..StatusFilter::default()
    };
    assert_eq!(
        queue
            .purge(Duration::from_secs(3600), Duration::from_secs(3600))
            .await
            .unwrap(),
        0,
        "all recent"
    );
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(
        queue
            .purge(Duration::from_millis(10), Duration::from_secs(3600))
            .await
            .unwrap(),
        2
    );
    let counts = queue.status(&all).await.unwrap().counts;
    assert_eq!(
        (counts.total, counts.completed, counts.failed, counts.pending),
        (2, 0, 1, 1)
    );
    assert_eq!(
        queue.purge(Duration::ZERO, Duration::ZERO).await.unwrap(),
        1,
        "the dead one, never the pending"
    );
    assert_eq!(queue.status(&all).await.unwrap().counts.pending, 1);
}

pub async fn delayed_tasks_wait_and_postponing_moves_them(queue: &dyn WorkQueue) {
    let started = std::time::Instant::now();
    let added = queue
        .enqueue_delayed(vec![task(A, "later")], Duration::from_millis(1500))
        .await
        .unwrap();
    assert_eq!(added, 1);
    assert!(
        queue.claim("w1", DERIVER, 10, LEASE).await.unwrap().is_none(),
        "not ready before its delay"
    );
    assert_eq!(
        pending_in_w(queue).await,
        0,
        "scheduled for later is not pending work yet"
    );
    // Postponed to 3 s from now: still waiting after the first delay.
    assert_eq!(
        queue
            .postpone(A, Duration::from_secs(3), Duration::from_secs(3600))
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        queue
            .postpone(B, Duration::from_secs(3), Duration::from_secs(3600))
            .await
            .unwrap(),
        0,
        "no pending task of B"
    );
    tokio::time::sleep(Duration::from_millis(1700)).await;
    assert!(
        queue.claim("w1", DERIVER, 10, LEASE).await.unwrap().is_none(),
        "postponed past the first delay"
    );
    tokio::time::sleep(Duration::from_millis(3500).saturating_sub(started.elapsed())).await;
    assert_eq!(pending_in_w(queue).await, 1, "due now");
    let mut claimed = None;
    for _ in 0..20 {
        claimed = queue.claim("w1", DERIVER, 10, LEASE).await.unwrap();
        if claimed.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let claim = claimed.expect("ready after the postponed time");
    assert_eq!(dedup_ids(&claim), ["later"]);
    queue.complete(&claim, &ids(&claim)).await.unwrap();
    queue.release(&claim).await.unwrap();
}

pub async fn postponing_never_passes_the_latest_time(queue: &dyn WorkQueue) {
    let started = std::time::Instant::now();
    queue
        .enqueue_delayed(vec![task(A, "starved")], Duration::from_millis(500))
        .await
        .unwrap();
    // Put off again and again, as a peer who never goes quiet puts off its
    // dream: each time by 10 s, but never past 1.5 s after it was enqueued.
    let latest = Duration::from_millis(1500);
    let mut claimed = None;
    while started.elapsed() < Duration::from_secs(5) && claimed.is_none() {
        queue.postpone(A, Duration::from_secs(10), latest).await.unwrap();
        claimed = queue.claim("w1", DERIVER, 10, LEASE).await.unwrap();
        if claimed.is_none() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let claim = claimed.expect("ready at the latest time, however often it was put off");
    assert!(
        started.elapsed() >= Duration::from_millis(1400),
        "not before the latest time: {:?}",
        started.elapsed()
    );
    assert_eq!(dedup_ids(&claim), ["starved"]);
    queue.complete(&claim, &ids(&claim)).await.unwrap();
    queue.release(&claim).await.unwrap();
}

async fn pending_in_w(queue: &dyn WorkQueue) -> i64 {
    let filter = StatusFilter {
        workspace_id: "w".into(),
        ..StatusFilter::default()
    };
    queue.status(&filter).await.unwrap().counts.pending
}

pub async fn history_shows_what_waited_and_what_was_done_by_step(queue: &dyn WorkQueue) {
    let filter = StatusFilter {
        workspace_id: "w".into(),
        ..StatusFilter::default()
    };
    let window = Duration::from_secs(60);
    let empty = queue.history(&filter, window, 6).await.unwrap();
    assert_eq!(empty.len(), 6);
    assert!(empty.iter().all(|sample| sample.waiting == 0 && sample.done == 0));
    queue
        .enqueue(vec![
            task(A, "t1"),
            task(A, "t2"),
            task(B, "t3"),
            task("representation:other:s:bob", "t4"),
        ])
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(30)).await;
    let claim = queue.claim("w1", DERIVER, 10, LEASE).await.unwrap().expect("a unit");
    queue.complete(&claim, &ids(&claim)).await.unwrap();
    queue.release(&claim).await.unwrap();
    let done = claim.tasks.len() as i64;
    let history = queue.history(&filter, window, 6).await.unwrap();
    assert_eq!(history.len(), 6);
    assert!(history.windows(2).all(|pair| pair[0].at < pair[1].at), "oldest first");
    let last = history.last().unwrap();
    assert_eq!(
        last.waiting,
        3 - done,
        "what is left waits now; another workspace's is not counted"
    );
    assert_eq!(history.iter().map(|sample| sample.done).sum::<i64>(), done);
    let finished = history.iter().find(|sample| sample.done > 0).unwrap();
    assert!(finished.latency_p50_ms.unwrap() >= 30, "{finished:?}");
    assert!(finished.latency_max_ms >= finished.latency_p50_ms);
}
