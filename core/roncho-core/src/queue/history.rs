//! The queue over a past window, from the tasks it keeps: what waited at
//! the end of each step, what was done in it, and how long that took.

use super::QueueSample;

/// A task as the history reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskSpan {
    /// When it was enqueued, in microseconds since the epoch.
    pub created_at: i64,
    /// When it was done or died; `None` while it waits.
    pub finished_at: Option<i64>,
    /// Done (not dead).
    pub done: bool,
    /// The work units it counts as.
    pub items: i64,
}

/// The samples of `tasks` over the `steps` equal steps from `since` to
/// `now`, oldest first.
pub fn samples(tasks: &[TaskSpan], since: i64, now: i64, steps: usize) -> Vec<QueueSample> {
    let steps = steps.max(1);
    let width = ((now - since).max(1) as f64 / steps as f64).max(1.0);
    let end = |step: usize| since + (width * (step + 1) as f64).round() as i64;
    // The first step whose end is at or after `at` (steps past the window: `steps`).
    let step_of = |at: i64| -> usize {
        if at <= since {
            return 0;
        }
        (((at - since) as f64 / width).ceil() as usize)
            .saturating_sub(1)
            .min(steps)
    };
    let mut waiting = vec![0i64; steps + 1];
    let mut latencies: Vec<Vec<i64>> = vec![Vec::new(); steps];
    let mut done = vec![0i64; steps];
    for task in tasks {
        // Waiting at the end of every step from the one it was enqueued in
        // to the one before it finished.
        let from = step_of(task.created_at);
        let until = task.finished_at.map_or(steps, |finished| {
            let step = step_of(finished);
            // Finished exactly at a step's end: no longer waiting then.
            if step < steps && finished <= end(step) {
                step
            } else {
                steps
            }
        });
        if from < until {
            waiting[from] += task.items;
            waiting[until] -= task.items;
        }
        if let (true, Some(finished)) = (task.done, task.finished_at)
            && finished > since
            && finished <= now
        {
            let step = step_of(finished).min(steps - 1);
            done[step] += task.items;
            latencies[step].push((finished - task.created_at).max(0) / 1000);
        }
    }
    let mut running = 0;
    (0..steps)
        .map(|step| {
            running += waiting[step];
            let taken = &mut latencies[step];
            taken.sort_unstable();
            QueueSample {
                at: end(step),
                waiting: running,
                done: done[step],
                latency_p50_ms: (!taken.is_empty()).then(|| taken[(taken.len() - 1) / 2]),
                latency_max_ms: taken.last().copied(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: i64 = 60_000_000;

    fn span(created: i64, finished: Option<i64>, done: bool) -> TaskSpan {
        TaskSpan {
            created_at: created * MINUTE,
            finished_at: finished.map(|at| at * MINUTE),
            done,
            items: 1,
        }
    }

    #[test]
    fn each_step_counts_what_waited_at_its_end_and_what_was_done_in_it() {
        // Steps of one minute from 0 to 5: ends at 1, 2, 3, 4, 5.
        let tasks = [
            span(-10, Some(-5), true), // before the window: nothing
            span(-1, Some(2), true),   // waits at 1, done in step 2 after 3 minutes
            span(0, None, false),      // waits to the end
            span(3, Some(4), false),   // dead in step 4: waits at 3 only... and not done
            span(4, Some(4), true),    // done at once in step 4
        ];
        let samples = samples(&tasks, 0, 5 * MINUTE, 5);
        let waiting: Vec<i64> = samples.iter().map(|sample| sample.waiting).collect();
        assert_eq!(waiting, [2, 1, 2, 1, 1]);
        let done: Vec<i64> = samples.iter().map(|sample| sample.done).collect();
        assert_eq!(done, [0, 1, 0, 1, 0]);
        assert_eq!(samples[1].latency_p50_ms, Some(3 * 60_000));
        assert_eq!(samples[3].latency_max_ms, Some(0));
        assert_eq!(samples[0].latency_p50_ms, None);
        assert_eq!(samples[4].at, 5 * MINUTE);
    }

    #[test]
    fn the_median_of_a_step_is_its_middle_latency() {
        let tasks: Vec<TaskSpan> = [1, 5, 3, 9]
            .iter()
            .map(|minutes| TaskSpan {
                created_at: 10 * MINUTE - minutes * MINUTE,
                finished_at: Some(10 * MINUTE),
                done: true,
                items: 1,
            })
            .collect();
        let samples = samples(&tasks, 9 * MINUTE, 10 * MINUTE, 1);
        assert_eq!(samples[0].done, 4);
        assert_eq!(samples[0].latency_p50_ms, Some(3 * 60_000));
        assert_eq!(samples[0].latency_max_ms, Some(9 * 60_000));
    }
}
