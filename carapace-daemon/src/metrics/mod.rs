//! Counters and latency histograms of the daemon, rendered in the Prometheus text format
//! (served by [`http`] when `carapaced --metrics ADDR` is given; also read by `Status`).
pub mod http;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// Upper bounds (seconds) of the evaluation latency buckets.
const BUCKETS: &[f64] = &[
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5,
];

#[derive(Debug, Default)]
struct Histogram {
    /// Cumulative counts per bucket of [`BUCKETS`].
    buckets: Vec<u64>,
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        if self.buckets.is_empty() {
            self.buckets = vec![0; BUCKETS.len()];
        }
        for (bound, n) in BUCKETS.iter().zip(self.buckets.iter_mut()) {
            if seconds <= *bound {
                *n += 1;
            }
        }
        self.count += 1;
        self.sum += seconds;
    }
}

/// Everything the daemon counts since it started.
#[derive(Debug, Default)]
pub struct Metrics {
    /// (layer, mode) → decisions.
    decisions: Mutex<BTreeMap<(String, String), u64>>,
    /// (layer, mode, rule) → matches.
    matches: Mutex<BTreeMap<(String, String, String), u64>>,
    /// rule → kernel denials.
    kernel_denials: Mutex<BTreeMap<String, u64>>,
    /// layer → evaluation latency.
    latency: Mutex<BTreeMap<String, Histogram>>,
    /// Requests refused because they were not valid (bad JSON, unknown tool shape).
    rejected: AtomicU64,
    /// Lookups the sessions' resolvers refused (`crate::dns`).
    lookups_refused: AtomicU64,
    /// Past calls of the gateway's conversations judged, and found clean before (skipped).
    history_judged: AtomicU64,
    history_remembered: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Escapes a label value for the text format.
fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

impl Metrics {
    /// One decision of `layer` (`tool-call`, `history`) in `mode`, with its matched rules
    /// (id, mode) and how long it took.
    pub fn decision<'a>(
        &self,
        layer: &str,
        mode: &str,
        rules: impl IntoIterator<Item = (&'a str, &'a str)>,
        elapsed: Duration,
    ) {
        *lock(&self.decisions)
            .entry((layer.to_owned(), mode.to_owned()))
            .or_default() += 1;
        let mut matches = lock(&self.matches);
        for (id, rule_mode) in rules {
            *matches
                .entry((layer.to_owned(), rule_mode.to_owned(), id.to_owned()))
                .or_default() += 1;
        }
        drop(matches);
        lock(&self.latency)
            .entry(layer.to_owned())
            .or_default()
            .observe(elapsed.as_secs_f64());
    }

    /// A request that could not be evaluated.
    pub fn rejected(&self) {
        self.rejected.fetch_add(1, Ordering::Relaxed);
    }

    /// One kernel denial by `rule`.
    pub fn kernel_denial(&self, rule: &str) {
        *lock(&self.kernel_denials)
            .entry(rule.to_owned())
            .or_default() += 1;
    }

    /// One lookup refused by a session's resolver.
    pub fn lookup_refused(&self) {
        self.lookups_refused.fetch_add(1, Ordering::Relaxed);
    }

    /// Past calls of one conversation the gateway judged, and those it had found clean
    /// before.
    pub fn history_calls(&self, judged: usize, remembered: usize) {
        self.history_judged
            .fetch_add(judged as u64, Ordering::Relaxed);
        self.history_remembered
            .fetch_add(remembered as u64, Ordering::Relaxed);
    }

    /// Blocked decisions per layer since start (`tool-call`, `history`, `kernel`).
    #[must_use]
    pub fn denials_per_layer(&self) -> BTreeMap<String, u64> {
        let mut out: BTreeMap<String, u64> = ["history", "tool-call"]
            .into_iter()
            .map(|l| (l.to_owned(), 0))
            .collect();
        for ((layer, mode), n) in lock(&self.decisions).iter() {
            if mode == "block" {
                *out.entry(layer.clone()).or_default() += n;
            }
        }
        let kernel: u64 = lock(&self.kernel_denials).values().sum();
        out.insert("kernel".to_owned(), kernel);
        // Listed once a resolver refused something: most daemons run none.
        let lookups = self.lookups_refused.load(Ordering::Relaxed);
        if lookups > 0 {
            out.insert("dns".to_owned(), lookups);
        }
        out
    }

    /// The Prometheus text exposition; `extra` adds values known elsewhere (name, help, value):
    /// counters when the name ends in `_total`, gauges otherwise.
    #[must_use]
    pub fn render(&self, extra: &[(&str, &str, f64)]) -> String {
        let mut out = String::new();
        out.push_str("# HELP carapace_decisions_total Decisions by layer and mode.\n");
        out.push_str("# TYPE carapace_decisions_total counter\n");
        for ((layer, mode), n) in lock(&self.decisions).iter() {
            let _ = writeln!(
                out,
                "carapace_decisions_total{{layer=\"{}\",mode=\"{}\"}} {n}",
                label(layer),
                label(mode)
            );
        }
        out.push_str("# HELP carapace_rule_matches_total Rule matches by layer, mode and rule.\n");
        out.push_str("# TYPE carapace_rule_matches_total counter\n");
        for ((layer, mode, rule), n) in lock(&self.matches).iter() {
            let _ = writeln!(
                out,
                "carapace_rule_matches_total{{layer=\"{}\",mode=\"{}\",rule=\"{}\"}} {n}",
                label(layer),
                label(mode),
                label(rule)
            );
        }
        out.push_str(
            "# HELP carapace_kernel_denials_total Operations the kernel layer refused, by rule.\n",
        );
        out.push_str("# TYPE carapace_kernel_denials_total counter\n");
        for (rule, n) in lock(&self.kernel_denials).iter() {
            let _ = writeln!(
                out,
                "carapace_kernel_denials_total{{rule=\"{}\"}} {n}",
                label(rule)
            );
        }
        out.push_str("# HELP carapace_rejected_requests_total Evaluation requests that were not valid input.\n");
        out.push_str("# TYPE carapace_rejected_requests_total counter\n");
        let _ = writeln!(
            out,
            "carapace_rejected_requests_total {}",
            self.rejected.load(Ordering::Relaxed)
        );
        out.push_str("# HELP carapace_gateway_history_calls_total Past calls of conversations through the gateway: judged, or found clean before and not judged again.\n");
        out.push_str("# TYPE carapace_gateway_history_calls_total counter\n");
        for (how, n) in [
            ("judged", &self.history_judged),
            ("remembered", &self.history_remembered),
        ] {
            let _ = writeln!(
                out,
                "carapace_gateway_history_calls_total{{how=\"{how}\"}} {}",
                n.load(Ordering::Relaxed)
            );
        }
        out.push_str("# HELP carapace_evaluation_seconds Time to evaluate a tool call or transcript and record it.\n");
        out.push_str("# TYPE carapace_evaluation_seconds histogram\n");
        for (layer, h) in lock(&self.latency).iter() {
            let layer = label(layer);
            for (bound, n) in BUCKETS.iter().zip(&h.buckets) {
                let _ = writeln!(
                    out,
                    "carapace_evaluation_seconds_bucket{{layer=\"{layer}\",le=\"{bound}\"}} {n}"
                );
            }
            let _ = writeln!(
                out,
                "carapace_evaluation_seconds_bucket{{layer=\"{layer}\",le=\"+Inf\"}} {}",
                h.count
            );
            let _ = writeln!(
                out,
                "carapace_evaluation_seconds_sum{{layer=\"{layer}\"}} {}",
                h.sum
            );
            let _ = writeln!(
                out,
                "carapace_evaluation_seconds_count{{layer=\"{layer}\"}} {}",
                h.count
            );
        }
        for (name, help, value) in extra {
            // Totals kept elsewhere (the LLM client's) are counters; the rest are gauges.
            let kind = if name.ends_with("_total") {
                "counter"
            } else {
                "gauge"
            };
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_cumulative_buckets() {
        let m = Metrics::default();
        m.decision(
            "tool-call",
            "block",
            [("ssh-private-keys", "block"), ("x\"y", "warn")],
            Duration::from_micros(300),
        );
        m.decision("tool-call", "allow", [], Duration::from_secs(10));
        m.kernel_denial("protect");
        let text = m.render(&[("carapace_ledger_records", "Records.", 7.0)]);
        for want in [
            "carapace_decisions_total{layer=\"tool-call\",mode=\"block\"} 1",
            "carapace_decisions_total{layer=\"tool-call\",mode=\"allow\"} 1",
            "carapace_rule_matches_total{layer=\"tool-call\",mode=\"block\",rule=\"ssh-private-keys\"} 1",
            "rule=\"x\\\"y\"",
            "carapace_kernel_denials_total{rule=\"protect\"} 1",
            "carapace_evaluation_seconds_bucket{layer=\"tool-call\",le=\"0.00025\"} 0",
            "carapace_evaluation_seconds_bucket{layer=\"tool-call\",le=\"0.0005\"} 1",
            "carapace_evaluation_seconds_bucket{layer=\"tool-call\",le=\"+Inf\"} 2",
            "carapace_evaluation_seconds_count{layer=\"tool-call\"} 2",
            "carapace_ledger_records 7",
        ] {
            assert!(text.contains(want), "missing {want} in:\n{text}");
        }
        let denials = m.denials_per_layer();
        assert_eq!(denials.get("tool-call"), Some(&1));
        assert_eq!(denials.get("kernel"), Some(&1));
        assert_eq!(denials.get("dns"), None, "listed once a lookup was refused");
        m.lookup_refused();
        assert_eq!(m.denials_per_layer().get("dns"), Some(&1));
    }
}
