//! Durations of the tests a VM runs, read off libtest's console lines: with one test thread
//! libtest prints `test NAME ... ` when a test starts, so the time from one such line to the
//! next (or to `test result:`) is that test's. The VM step is most of CI's time; this is what
//! tells which tests to make cheaper.
use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// Tests taking longer than this are listed when the run ends; the rest only counted.
const SLOW: Duration = Duration::from_secs(15);

#[derive(Default)]
pub struct TestClock {
    current: Option<(String, Instant)>,
    done: Vec<(String, Duration)>,
}

impl TestClock {
    /// Reads one console line; at the end of a libtest run, returns the summary to print.
    pub fn line(&mut self, line: &str, now: Instant) -> Option<String> {
        if let Some(name) = test_start(line) {
            self.finish(now);
            self.current = Some((name.to_owned(), now));
            return None;
        }
        if line.starts_with("test result:") {
            self.finish(now);
            return Some(self.summary());
        }
        None
    }

    fn finish(&mut self, now: Instant) {
        if let Some((name, start)) = self.current.take() {
            self.done.push((name, now.saturating_duration_since(start)));
        }
    }

    fn summary(&mut self) -> String {
        let mut done = std::mem::take(&mut self.done);
        done.sort_by_key(|(_, d)| std::cmp::Reverse(*d));
        let total: Duration = done.iter().map(|(_, d)| *d).sum();
        let mut out = format!(
            "vm: {} tests took {:.0} s; those over {} s, slowest first:\n",
            done.len(),
            total.as_secs_f64(),
            SLOW.as_secs()
        );
        for (name, d) in done.iter().take_while(|(_, d)| *d >= SLOW) {
            let _ = writeln!(out, "vm: {:>6.1} s  {name}", d.as_secs_f64());
        }
        out
    }
}

/// The test a `test NAME ... ` line starts (libtest's pretty format).
fn test_start(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("test ")?;
    let (name, _) = rest.split_once(" ... ")?;
    (!name.is_empty() && !name.contains(' ')).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_test_runs_until_the_next_starts() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut clock = TestClock::default();
        assert!(clock.line("running 3 tests", at(0)).is_none());
        assert!(clock.line("test fast ... ok", at(1)).is_none());
        assert!(clock.line("a daemon's log line", at(2)).is_none());
        assert!(clock.line("test slow ... ", at(3)).is_none());
        assert!(clock
            .line("test result: ok. 2 passed", at(40))
            .is_some_and(|s| {
                s.contains("2 tests took 39 s") && s.contains("37.0 s  slow") && !s.contains("fast")
            }));
        // A line that only looks alike starts nothing.
        assert_eq!(test_start("test of the resolver ... done"), None);
        assert_eq!(test_start("test a::b ... FAILED"), Some("a::b"));
    }
}
