//! The console: a local web page served by the daemon (`carapaced --console 127.0.0.1:PORT`,
//! or `console: { listen: … }` in config.yaml) showing sessions, pending approvals (with
//! buttons to answer them), the audit timeline, the rules and a few charts, live through
//! server-sent events. `carapace console` prints (and opens) a login URL.
//!
//! # Who gets in
//! - It listens on loopback only (anything else is refused at start).
//! - A login URL holds a one-time token (256 bits from the OS RNG, two minutes); the API
//!   gives one to a caller outside every session, for that caller's uid. The browser
//!   exchanges it for an `HttpOnly`, `SameSite=Strict` cookie; the uid decides what the page
//!   shows and may answer, exactly as for the gRPC API.
//! - Answering needs the visit's CSRF token in a header and the console's own Origin;
//!   every request needs the console's own Host (DNS rebinding).
//! - Each connection is traced to the processes holding its client socket; one inside an
//!   agent session (or one that cannot be traced) is refused whatever it sends.
//!
//! The page reads the ledger's records as the writer publishes them (after their callers
//! were answered): the decisions' path gains no lock and no allocation while nobody looks.
pub mod auth;
pub mod peer;
pub mod server;
pub mod views;

use std::net::SocketAddr;
use std::sync::Arc;

use crate::api::Daemon;

pub use crate::config::console::{parse_addr, AddrError};

/// The id of the locked rule that keeps sessions away from the console.
pub const RULE_ID: &str = "carapace-console";

/// The locked rule (source, text) that refuses the console's address to every process in
/// an agent session, in the kernel (`socket_connect`) and in Layer 1 (a `curl` or
/// `WebFetch` of it): with the peer check of every connection, a second wall.
#[must_use]
pub fn locked_rule(addr: SocketAddr) -> (String, String) {
    let text = format!(
        "version: 1\nrules:\n  - id: {RULE_ID}\n    block: {{ host: \"{ip}\", port: {port} }}\n    \
         category: self-protection\n    locked: true\n    message: \"The Carapace console is \
         the user's; agents may not connect to it.\"\n",
        ip = addr.ip(),
        port = addr.port()
    );
    ("daemon:console".to_owned(), text)
}

/// Why the console could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The address is not one the console may serve on.
    #[error(transparent)]
    Addr(#[from] AddrError),
    /// Binding the address failed (in use, or not an address of this machine).
    #[error("cannot listen on {addr} for the console: {source}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// The bound socket's address could not be read back.
    #[error("cannot read the console's address: {0}")]
    Address(#[source] std::io::Error),
}

/// Binds `addr` (loopback only), starts serving and lets the API hand out login URLs.
pub async fn start(
    daemon: &Arc<Daemon>,
    addr: SocketAddr,
) -> Result<tokio::task::JoinHandle<()>, StartError> {
    if !addr.ip().is_loopback() {
        return Err(AddrError::NotLoopback(addr).into());
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| StartError::Listen { addr, source })?;
    let bound = listener.local_addr().map_err(StartError::Address)?;
    let access = Arc::new(auth::Access::new(bound));
    daemon.set_console(Arc::clone(&access));
    tracing::info!(
        address = %bound,
        "console listening on {} (open it with `carapace console`)",
        server::url(bound)
    );
    Ok(server::spawn(listener, Arc::clone(daemon), access))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_addresses_are_accepted() {
        assert_eq!(
            parse_addr("127.0.0.1:8790").unwrap(),
            "127.0.0.1:8790".parse().unwrap()
        );
        assert!(parse_addr("[::1]:8790").is_ok());
        assert!(matches!(
            parse_addr("0.0.0.0:8790"),
            Err(AddrError::NotLoopback(_))
        ));
        assert!(matches!(
            parse_addr("192.168.1.2:80"),
            Err(AddrError::NotLoopback(_))
        ));
        assert!(matches!(
            parse_addr("localhost:80"),
            Err(AddrError::Malformed(_))
        ));
        assert!(matches!(
            parse_addr("127.0.0.1"),
            Err(AddrError::Malformed(_))
        ));
        assert_eq!(parse_addr("127.0.0.1:0"), Err(AddrError::NoPort));
    }

    #[test]
    fn the_consoles_port_is_a_locked_rule_no_file_turns_off() {
        use carapace_policy::engine::{self, Activation, Context, Layer, ToolCall};
        use carapace_policy::rules::{Mode, RuleSet};
        let addr: SocketAddr = "127.0.0.1:8790".parse().unwrap();
        let (source, text) = locked_rule(addr);
        let extra = [(source.as_str(), text.as_str())];
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("rules.yaml");
        // A file that selects no pack and says nothing of the console; then none at all.
        std::fs::write(&file, "version: 1\nbuiltin: none\nrules: []\n").unwrap();
        let opts = crate::policy_host::options();
        for path in [Some(file.as_path()), None] {
            let rules =
                RuleSet::load_with_locked(path, &opts, &extra).unwrap_or_else(|d| panic!("{d}"));
            let rule = rules.by_id(RULE_ID).expect("the console rule");
            assert!(rule.locked);
            assert_eq!(rule.source, "daemon:console");
            assert!(
                rule.kernel_index.is_some(),
                "the kernel enforces it: {:?}",
                rule.enforcement
            );
            // Layer 1 refuses a fetch of it too; another loopback port is not the console.
            let fetch = |url: &str| {
                let call =
                    serde_json::json!({"tool": "WebFetch", "input": {"url": url, "prompt": "p"}});
                let ext = ToolCall::from_json(&call)
                    .unwrap()
                    .extract(&Context::default());
                engine::evaluate(&rules, &ext, &Activation::default(), Layer::ToolCall)
            };
            let d = fetch("http://127.0.0.1:8790/login?token=x");
            assert_eq!(d.decision, Mode::Block, "{d:?}");
            assert!(d.matches.iter().any(|m| m.id == RULE_ID), "{d:?}");
            let d = fetch("http://127.0.0.1:8791/");
            assert!(d.matches.iter().all(|m| m.id != RULE_ID), "{d:?}");
        }
    }
}
