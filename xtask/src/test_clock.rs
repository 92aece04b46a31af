//! Durations of the tests a VM runs, read off libtest's console lines. With one test thread
//! libtest prints `test NAME ... ` when a test starts and its result when it ends; the
//! console is read by lines, so a clean `test NAME ... ok` line arrives when the test ends,
//! and the test took the time since the line before it. When a program the test started
//! writes to the console meanwhile, the line is cut after `... ` and the result comes on a
//! line of its own. The VM step is most of CI's time; this is what tells which tests to make
//! cheaper.
use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// Tests taking longer than this are listed when the run ends; the rest only counted.
const SLOW: Duration = Duration::from_secs(15);

#[derive(Default)]
pub struct TestClock {
    /// When the last test ended (or the run started).
    mark: Option<Instant>,
    /// A test whose start line came without its result.
    open: Option<String>,
    done: Vec<(String, Duration)>,
}

impl TestClock {
    /// Reads one console line; at the end of a libtest run, returns the summary to print.
    pub fn line(&mut self, line: &str, now: Instant) -> Option<String> {
        if line.starts_with("running ") && line.ends_with(" tests") {
            self.mark = Some(now);
        } else if let Some((name, rest)) = test_line(line) {
            // A test still open has ended by the time the next one starts.
            self.close(now);
            if is_result(rest) {
                self.end(name.to_owned(), now);
            } else {
                self.open = Some(name.to_owned());
            }
        } else if is_result(line.trim()) {
            self.close(now);
        } else if line.starts_with("test result:") {
            self.close(now);
            return Some(self.summary());
        }
        None
    }

    fn close(&mut self, now: Instant) {
        if let Some(name) = self.open.take() {
            self.end(name, now);
        }
    }

    fn end(&mut self, name: String, now: Instant) {
        let since = self.mark.unwrap_or(now);
        self.done.push((name, now.saturating_duration_since(since)));
        self.mark = Some(now);
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

/// The test a `test NAME ... REST` line names, and what follows the dots.
fn test_line(line: &str) -> Option<(&str, &str)> {
    let rest = line.strip_prefix("test ")?;
    let (name, rest) = rest.split_once(" ...")?;
    (!name.is_empty() && !name.contains(' ')).then_some((name, rest.trim()))
}

fn is_result(text: &str) -> bool {
    ["ok", "FAILED", "ignored"]
        .iter()
        .any(|r| text == *r || text.starts_with(&format!("{r},")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_test_took_the_time_since_the_one_before_it_ended() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut clock = TestClock::default();
        assert!(clock.line("running 3 tests", at(0)).is_none());
        assert!(clock.line("test fast ... ok", at(1)).is_none());
        // A daemon's log cuts the next line: the result comes on its own.
        assert!(clock
            .line("test slow ... daemon: listening", at(2))
            .is_none());
        assert!(clock.line("ok", at(40)).is_none());
        assert!(clock.line("test last ... FAILED", at(60)).is_none());
        let summary = clock.line("test result: FAILED. 2 passed; 1 failed", at(60));
        assert!(
            summary
                .as_deref()
                .is_some_and(|s| s.contains("3 tests took 60 s")
                    && s.contains("39.0 s  slow")
                    && s.contains("20.0 s  last")
                    && !s.contains("fast")),
            "{summary:?}"
        );
        // A line that only looks alike names no test.
        assert_eq!(test_line("test of the resolver ... done"), None);
        assert_eq!(test_line("test a::b ... FAILED"), Some(("a::b", "FAILED")));
    }
}
