//! Counters and latency histograms of the daemon, rendered in the Prometheus text format
//! (served by [`http`] when `carapaced --metrics ADDR` is given; also read by `Status`).
//!
//! Counting is on every decision's path, so it takes no lock and allocates nothing there:
//! decisions and latency live in fixed tables of atomics indexed by layer and mode. Only rule
//! ids are open-ended: their counters sit in a map that a decision with matches reads under
//! a shared lock and that grows (allocating) the first time a rule is seen.
//!
//! Why not the `prometheus-client` crate: it writes `OpenMetrics` 1.0 only, whose `# TYPE`
//! lines name a counter family without its `_total` and which ends in `# EOF` — a change of
//! the exposition scrapers read today (text format 0.0.4) — and its histogram takes a write
//! lock per observation and its label families an owned label set per lookup.
pub mod http;

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{PoisonError, RwLock};
use std::time::Duration;

use carapace_policy::rules::Mode;

/// Upper bounds (seconds) of the evaluation latency buckets.
const BUCKETS: &[f64] = &[
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5,
];

/// Where a decision was made, as the `layer` label names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layer {
    /// A tool call in a model's answer, checked by the gateway.
    Gateway,
    /// The past calls of a conversation through the gateway (Layer 0).
    GatewayHistory,
    /// A transcript scan (Layer 0).
    History,
    /// A tool call checked through the API (Layer 1).
    ToolCall,
}

impl Layer {
    /// Every layer, in the order the page lists them (by name).
    const ALL: [Self; 4] = [
        Self::Gateway,
        Self::GatewayHistory,
        Self::History,
        Self::ToolCall,
    ];

    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Gateway => "gateway",
            Self::GatewayHistory => "gateway-history",
            Self::History => "history",
            Self::ToolCall => "tool-call",
        }
    }
}

/// Every mode, in the order the page lists them (by name).
const MODES: [Mode; 5] = [
    Mode::Allow,
    Mode::Approve,
    Mode::Block,
    Mode::Log,
    Mode::Warn,
];

fn mode_index(mode: Mode) -> usize {
    match mode {
        Mode::Allow => 0,
        Mode::Approve => 1,
        Mode::Block => 2,
        Mode::Log => 3,
        Mode::Warn => 4,
    }
}

/// What the gateway did with a request: the `decision` label of its counter and the field
/// of its log line. Variants in name order (the page's order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GatewayDecision {
    /// The conversation holds calls Carapace blocks: the request is refused.
    BadAgent,
    /// The whole answer was read and its tool calls checked.
    Checked,
    /// A streamed answer, checked as it streams.
    CheckedStream,
    /// The upstream could not be reached or read.
    Error,
    /// Passed on as it came: a route Carapace does not check, or an answer that is not a
    /// success.
    Forwarded,
    /// The request itself was refused (unreadable, too large, compressed answer).
    Refused,
    /// The answer held a tool call the rules refuse: it was replaced.
    RefusedToolCall,
}

impl GatewayDecision {
    /// Every decision, in the order of the counter's lines.
    pub const ALL: [Self; 7] = [
        Self::BadAgent,
        Self::Checked,
        Self::CheckedStream,
        Self::Error,
        Self::Forwarded,
        Self::Refused,
        Self::RefusedToolCall,
    ];

    /// The label value and log field.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::BadAgent => "bad-agent",
            Self::Checked => "checked",
            Self::CheckedStream => "checked-stream",
            Self::Error => "error",
            Self::Forwarded => "forwarded",
            Self::Refused => "refused",
            Self::RefusedToolCall => "refused-tool-call",
        }
    }
}

/// A counter per (layer, mode).
type Grid = [[AtomicU64; MODES.len()]; Layer::ALL.len()];

/// One layer's evaluation latency.
#[derive(Debug, Default)]
struct Histogram {
    /// Cumulative counts per bucket of [`BUCKETS`].
    buckets: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    /// In nanoseconds: an integer sum is one atomic add.
    sum_ns: AtomicU64,
}

impl Histogram {
    fn observe(&self, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        for (bound, n) in BUCKETS.iter().zip(&self.buckets) {
            if seconds <= *bound {
                n.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        let ns = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }
}

/// Counters keyed by rule id: read under a shared lock, extended on a rule's first count.
#[derive(Debug, Default)]
struct ByRule<T>(RwLock<HashMap<Box<str>, T>>);

impl<T: Default> ByRule<T> {
    fn with(&self, rule: &str, f: impl FnOnce(&T)) {
        let map = self.0.read().unwrap_or_else(PoisonError::into_inner);
        if let Some(counters) = map.get(rule) {
            f(counters);
            return;
        }
        drop(map);
        let mut map = self.0.write().unwrap_or_else(PoisonError::into_inner);
        f(map.entry(rule.into()).or_default());
    }

    /// The counters sorted by rule id, read through `f`.
    fn sorted<V>(&self, f: impl Fn(&T) -> V) -> BTreeMap<String, V> {
        let map = self.0.read().unwrap_or_else(PoisonError::into_inner);
        map.iter().map(|(id, t)| (id.to_string(), f(t))).collect()
    }
}

/// Everything the daemon counts since it started.
#[derive(Debug, Default)]
pub struct Metrics {
    decisions: Grid,
    /// rule → (layer, mode) → matches.
    matches: ByRule<Grid>,
    /// rule → kernel denials.
    kernel_denials: ByRule<AtomicU64>,
    /// Per layer, in [`Layer::ALL`] order.
    latency: [Histogram; Layer::ALL.len()],
    /// Requests refused because they were not valid (bad JSON, unknown tool shape).
    rejected: AtomicU64,
    /// Lookups the sessions' resolvers refused (`crate::dns`).
    lookups_refused: AtomicU64,
    /// Past calls of the gateway's conversations judged, and found clean before (skipped).
    history_judged: AtomicU64,
    history_remembered: AtomicU64,
    /// Requests through the gateway, per [`GatewayDecision`].
    gateway_requests: [AtomicU64; GatewayDecision::ALL.len()],
}

/// Escapes a label value for the text format.
fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn load(n: &AtomicU64) -> u64 {
    n.load(Ordering::Relaxed)
}

impl Metrics {
    /// One decision of `layer` in `mode`, with its matched rules (id, mode) and how long it
    /// took.
    pub fn decision<'a>(
        &self,
        layer: Layer,
        mode: Mode,
        rules: impl IntoIterator<Item = (&'a str, Mode)>,
        elapsed: Duration,
    ) {
        let l = layer as usize;
        self.decisions[l][mode_index(mode)].fetch_add(1, Ordering::Relaxed);
        for (id, rule_mode) in rules {
            self.matches.with(id, |grid| {
                grid[l][mode_index(rule_mode)].fetch_add(1, Ordering::Relaxed);
            });
        }
        self.latency[l].observe(elapsed);
    }

    /// A request that could not be evaluated.
    pub fn rejected(&self) {
        self.rejected.fetch_add(1, Ordering::Relaxed);
    }

    /// One kernel denial by `rule`.
    pub fn kernel_denial(&self, rule: &str) {
        self.kernel_denials.with(rule, |n| {
            n.fetch_add(1, Ordering::Relaxed);
        });
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

    /// One request through the gateway and what was done with it.
    pub fn gateway_request(&self, decision: GatewayDecision) {
        self.gateway_requests[decision as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Blocked decisions per layer since start (`tool-call`, `history`, `kernel`).
    #[must_use]
    pub fn denials_per_layer(&self) -> BTreeMap<String, u64> {
        let mut out: BTreeMap<String, u64> = ["history", "tool-call"]
            .into_iter()
            .map(|l| (l.to_owned(), 0))
            .collect();
        let block = mode_index(Mode::Block);
        for layer in Layer::ALL {
            let n = load(&self.decisions[layer as usize][block]);
            if n > 0 {
                *out.entry(layer.name().to_owned()).or_default() += n;
            }
        }
        let kernel: u64 = self.kernel_denials.sorted(load).values().sum();
        out.insert("kernel".to_owned(), kernel);
        // Listed once a resolver refused something: most daemons run none.
        let lookups = load(&self.lookups_refused);
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
        for (layer, mode, n) in nonzero(&self.decisions) {
            let _ = writeln!(
                out,
                "carapace_decisions_total{{layer=\"{layer}\",mode=\"{mode}\"}} {n}"
            );
        }
        out.push_str("# HELP carapace_rule_matches_total Rule matches by layer, mode and rule.\n");
        out.push_str("# TYPE carapace_rule_matches_total counter\n");
        // Sorted by (layer, mode, rule), as the page always listed them.
        let mut matches: Vec<(&str, &str, String, u64)> = Vec::new();
        for (rule, counts) in self
            .matches
            .sorted(|grid| nonzero(grid).collect::<Vec<_>>())
        {
            for (layer, mode, n) in counts {
                matches.push((layer, mode, label(&rule), n));
            }
        }
        matches.sort();
        for (layer, mode, rule, n) in matches {
            let _ = writeln!(
                out,
                "carapace_rule_matches_total{{layer=\"{layer}\",mode=\"{mode}\",rule=\"{rule}\"}} {n}"
            );
        }
        out.push_str(
            "# HELP carapace_kernel_denials_total Operations the kernel layer refused, by rule.\n",
        );
        out.push_str("# TYPE carapace_kernel_denials_total counter\n");
        for (rule, n) in self.kernel_denials.sorted(load) {
            let _ = writeln!(
                out,
                "carapace_kernel_denials_total{{rule=\"{}\"}} {n}",
                label(&rule)
            );
        }
        out.push_str("# HELP carapace_rejected_requests_total Evaluation requests that were not valid input.\n");
        out.push_str("# TYPE carapace_rejected_requests_total counter\n");
        let _ = writeln!(
            out,
            "carapace_rejected_requests_total {}",
            load(&self.rejected)
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
                load(n)
            );
        }
        out.push_str("# HELP carapace_gateway_requests_total Requests through the gateway by what it did: forwarded unchecked, checked (whole or streamed), a tool call refused, the conversation refused (bad-agent), the request refused, or the upstream failed (error).\n");
        out.push_str("# TYPE carapace_gateway_requests_total counter\n");
        for (decision, n) in GatewayDecision::ALL.iter().zip(&self.gateway_requests) {
            let _ = writeln!(
                out,
                "carapace_gateway_requests_total{{decision=\"{}\"}} {}",
                decision.name(),
                load(n)
            );
        }
        self.render_latency(&mut out);
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

    /// The evaluation-time histograms, one per layer that decided something.
    #[expect(
        clippy::cast_precision_loss,
        reason = "a latency sum in nanoseconds stays far below 2^52 for centuries of decisions"
    )]
    fn render_latency(&self, out: &mut String) {
        out.push_str("# HELP carapace_evaluation_seconds Time to evaluate a tool call or transcript and record it.\n");
        out.push_str("# TYPE carapace_evaluation_seconds histogram\n");
        for layer in Layer::ALL {
            let h = &self.latency[layer as usize];
            // A layer is listed once it decided something, as before.
            let count = load(&h.count);
            if count == 0 {
                continue;
            }
            let layer = layer.name();
            for (bound, n) in BUCKETS.iter().zip(&h.buckets) {
                let _ = writeln!(
                    out,
                    "carapace_evaluation_seconds_bucket{{layer=\"{layer}\",le=\"{bound}\"}} {}",
                    load(n)
                );
            }
            let _ = writeln!(
                out,
                "carapace_evaluation_seconds_bucket{{layer=\"{layer}\",le=\"+Inf\"}} {count}"
            );
            let _ = writeln!(
                out,
                "carapace_evaluation_seconds_sum{{layer=\"{layer}\"}} {}",
                load(&h.sum_ns) as f64 / 1e9
            );
            let _ = writeln!(
                out,
                "carapace_evaluation_seconds_count{{layer=\"{layer}\"}} {count}"
            );
        }
    }
}

/// The (layer, mode, count) cells of `grid` that counted something, by layer then mode name.
fn nonzero(grid: &Grid) -> impl Iterator<Item = (&'static str, &'static str, u64)> + '_ {
    Layer::ALL.into_iter().flat_map(move |layer| {
        MODES.into_iter().filter_map(move |mode| {
            let n = load(&grid[layer as usize][mode_index(mode)]);
            (n > 0).then(|| {
                (
                    layer.name(),
                    carapace_policy::rules::validate::mode_name(mode),
                    n,
                )
            })
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_cumulative_buckets() {
        let m = Metrics::default();
        m.decision(
            Layer::ToolCall,
            Mode::Block,
            [("ssh-private-keys", Mode::Block), ("x\"y", Mode::Warn)],
            Duration::from_micros(300),
        );
        m.decision(Layer::ToolCall, Mode::Allow, [], Duration::from_secs(10));
        m.kernel_denial("protect");
        m.gateway_request(GatewayDecision::CheckedStream);
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
            "carapace_evaluation_seconds_sum{layer=\"tool-call\"} 10.0003",
            "carapace_ledger_records 7",
            "carapace_gateway_requests_total{decision=\"checked-stream\"} 1",
            "carapace_gateway_requests_total{decision=\"bad-agent\"} 0",
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

    #[test]
    fn lines_are_ordered_by_layer_mode_and_rule_and_counts_survive_threads() {
        let m = std::sync::Arc::new(Metrics::default());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let m = std::sync::Arc::clone(&m);
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        m.decision(
                            Layer::History,
                            Mode::Warn,
                            [("b", Mode::Warn), ("a", Mode::Warn)],
                            Duration::from_micros(1),
                        );
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        m.decision(Layer::Gateway, Mode::Allow, [], Duration::ZERO);
        let text = m.render(&[]);
        let at = |needle: &str| {
            text.find(needle)
                .unwrap_or_else(|| panic!("missing {needle} in:\n{text}"))
        };
        assert!(
            at("layer=\"gateway\",mode=\"allow\"} 1") < at("layer=\"history\",mode=\"warn\"} 4000")
        );
        assert!(at("rule=\"a\"} 4000") < at("rule=\"b\"} 4000"));
        assert!(!text.contains("layer=\"tool-call\""), "{text}");
    }
}
