//! Long jobs side by side on a machine of few cores, with more work started on the core the
//! first finished job frees. `cargo xtask test` boots one VM per kernel (TCG runs a one-CPU
//! guest on one host thread, about a core each) and fuzzes the parsers on the core the
//! quicker kernel's suite leaves idle, instead of before the VMs boot.

use std::{
    num::NonZeroUsize,
    thread,
    time::{Duration, Instant},
};

use anyhow::Result;

/// A job run on a thread of its own.
pub type Job<'a, T> = Box<dyn FnOnce() -> Result<T> + Send + 'a>;

/// What [`run`] returns: each job's outcome in the order given, and the outcome of `beside`.
pub struct Outcomes<T> {
    pub jobs: Vec<Result<T>>,
    pub beside: Result<()>,
}

/// Runs every job on a thread of its own and `beside` on this thread as soon as fewer jobs
/// than `cores` are still running (at once when there are fewer jobs than cores), so that
/// `beside` never takes a core from a job. Calls `tick` about every `every` while jobs run
/// (progress lines). Waits for every job, whatever `beside` returned: a failed `beside`
/// leaves no VM behind.
pub fn run<'a, T: Send + 'a>(
    jobs: Vec<Job<'a, T>>,
    cores: NonZeroUsize,
    beside: impl FnOnce() -> Result<()>,
    every: Duration,
    mut tick: impl FnMut(),
) -> Outcomes<T> {
    thread::scope(|scope| {
        let handles: Vec<_> = jobs.into_iter().map(|job| scope.spawn(job)).collect();
        let running = || handles.iter().filter(|h| !h.is_finished()).count();
        let mut last = Instant::now();
        let mut wait = |until: &dyn Fn() -> bool| {
            while !until() {
                thread::sleep(Duration::from_millis(20).min(every));
                if last.elapsed() >= every {
                    last = Instant::now();
                    tick();
                }
            }
        };
        wait(&|| running() < cores.get());
        let beside = beside();
        wait(&|| running() == 0);
        let jobs = handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("the job's thread panicked")))
            })
            .collect();
        Outcomes { jobs, beside }
    })
}

#[cfg(test)]
mod tests {
    use std::sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    };

    use anyhow::bail;

    use super::*;

    fn cores(n: usize) -> NonZeroUsize {
        NonZeroUsize::new(n).expect("non-zero")
    }

    /// A job that sleeps `ms` and then counts itself done.
    fn sleeper(ms: u64, done: &AtomicUsize) -> Job<'_, u64> {
        Box::new(move || {
            thread::sleep(Duration::from_millis(ms));
            done.fetch_add(1, Ordering::SeqCst);
            Ok(ms)
        })
    }

    #[test]
    fn beside_starts_when_the_first_job_frees_a_core_and_all_jobs_are_awaited() {
        let done = AtomicUsize::new(0);
        let mut seen_done = None;
        let out = run(
            vec![sleeper(600, &done), sleeper(50, &done)],
            cores(2),
            || {
                seen_done = Some(done.load(Ordering::SeqCst));
                Ok(())
            },
            Duration::from_mins(1),
            || {},
        );
        assert_eq!(seen_done, Some(1), "beside ran after exactly one job ended");
        assert_eq!(
            done.load(Ordering::SeqCst),
            2,
            "run returned before a job ended"
        );
        let jobs: Vec<u64> = out.jobs.into_iter().map(|r| r.expect("ok")).collect();
        assert_eq!(jobs, [600, 50], "outcomes in the order the jobs were given");
        assert!(out.beside.is_ok());
    }

    #[test]
    fn beside_starts_at_once_when_a_core_is_free() {
        let done = AtomicUsize::new(0);
        let mut seen_done = None;
        let out = run(
            vec![sleeper(300, &done)],
            cores(2),
            || {
                seen_done = Some(done.load(Ordering::SeqCst));
                Ok(())
            },
            Duration::from_mins(1),
            || {},
        );
        assert_eq!(seen_done, Some(0));
        assert_eq!(out.jobs.len(), 1);
    }

    #[test]
    fn failures_of_jobs_and_of_beside_are_all_reported() {
        let done = AtomicUsize::new(0);
        let failing: Job<'_, u64> = Box::new(|| bail!("suite failed"));
        let out = run(
            vec![failing, sleeper(200, &done)],
            cores(2),
            || bail!("fuzzing failed"),
            Duration::from_mins(1),
            || {},
        );
        assert_eq!(
            done.load(Ordering::SeqCst),
            1,
            "a failed beside still waits for the jobs"
        );
        assert_eq!(
            out.jobs[0].as_ref().map_err(ToString::to_string),
            Err("suite failed".to_owned())
        );
        assert!(out.jobs[1].is_ok());
        assert_eq!(
            out.beside.map_err(|e| e.to_string()),
            Err("fuzzing failed".to_owned())
        );
    }

    #[test]
    fn a_panicking_job_is_a_failure_not_a_panic() {
        let panics: Job<'_, ()> = Box::new(|| panic!("boom"));
        let out = run(
            vec![panics],
            cores(1),
            || Ok(()),
            Duration::from_mins(1),
            || {},
        );
        assert!(out.jobs[0].is_err());
    }

    #[test]
    fn tick_is_called_while_jobs_run() {
        let done = AtomicUsize::new(0);
        let ticks = Arc::new(AtomicUsize::new(0));
        let t = Arc::clone(&ticks);
        run(
            vec![sleeper(300, &done)],
            cores(1),
            || Ok(()),
            Duration::from_millis(50),
            move || {
                t.fetch_add(1, Ordering::SeqCst);
            },
        );
        assert!(
            ticks.load(Ordering::SeqCst) >= 2,
            "no progress while waiting"
        );
    }
}
