//! The `console:` section of `config.yaml`, and console addresses as it and
//! `carapaced --console` take them:
//!
//! ```yaml
//! console:
//!   listen: 127.0.0.1:8790   # loopback only, a fixed port
//! ```
use std::net::SocketAddr;

use carapace_policy::rules::diag::Sink;
use carapace_policy::rules::yaml::Node;

const KEYS: &[&str] = &["listen"];

/// Why a console address is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum AddrError {
    #[error(
        "the console must listen on a loopback address (127.0.0.1 or ::1), not {0}: it shows \
         what agents do and answers their approvals"
    )]
    NotLoopback(SocketAddr),
    #[error("`{0}` is not an address with a port; write e.g. 127.0.0.1:8790")]
    Malformed(String),
    #[error(
        "the console needs a fixed port (not 0): the kernel keeps agent sessions away from it \
         by its port; write e.g. 127.0.0.1:8790"
    )]
    NoPort,
}

/// Parses a console address: `IP:PORT` on loopback.
pub fn parse_addr(text: &str) -> Result<SocketAddr, AddrError> {
    let addr: SocketAddr = text
        .trim()
        .parse()
        .map_err(|_| AddrError::Malformed(text.trim().to_owned()))?;
    if !addr.ip().is_loopback() {
        return Err(AddrError::NotLoopback(addr));
    }
    if addr.port() == 0 {
        return Err(AddrError::NoPort);
    }
    Ok(addr)
}

/// Reads the `console:` mapping; problems go to `sink` at their position.
pub(crate) fn parse(node: &Node, sink: &mut Sink) -> Option<SocketAddr> {
    if !super::section(node, "console", KEYS, "listen: 127.0.0.1:8790", sink) {
        return None;
    }
    let value = node.get("listen")?;
    match parse_addr(value.as_str().unwrap_or("")) {
        Ok(addr) => Some(addr),
        Err(e) => {
            sink.error(
                value.span,
                None,
                e.to_string(),
                "e.g. `listen: 127.0.0.1:8790`",
            );
            None
        }
    }
}
