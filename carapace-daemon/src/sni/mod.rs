//! The server-name check of `tls: sni` rules: a session's connects to an address it learned
//! (port 443 and plain HTTP's 80) reach a splice proxy in carapaced, which reads the name
//! the client asks the server for, judges it as the resolver judges names
//! (`carapace_policy::engine::names::sni_verdict`), and only then connects to the address
//! first meant and copies bytes both ways. No TLS is terminated and no certificate made:
//! the proxy reads the `ClientHello`, which travels in clear, and passes it on untouched.
//!
//! One CDN address serves many names, an allowed one and a blocked one alike; the address
//! alone cannot tell them apart, the name asked for can.
//!
//! - `server_name`: host names as the two readers accept them.
//! - `client_hello`: the TLS `ClientHello`'s server name (untrusted bytes, bounded).
//! - `http_host`: the HTTP/1 request's `Host` (and an absolute target's authority).
//! - `proxy`: one redirected connection: read, judge, refuse with a denial, or splice.
//! - `sessions`: one proxy per session that needs one, on loopback, and the hook
//!   ([`ProxyRegistry`]) through which the kernel redirects to it and says where each
//!   connection was going.
mod client_hello;
mod http_host;
mod proxy;
mod server_name;
mod sessions;

pub use self::client_hello::{read_client_hello, Hello, MAX_HELLO};
pub use self::http_host::{read_request_host, MAX_HEAD};
pub use self::proxy::{Limits, Outcome, Protocol, Redirected, SniProxy, LAYER, OPERATION};
pub use self::sessions::{ProxyRegistry, SessionParts, SessionProxies};

/// What a reader makes of the bytes a client sent so far.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reading<T> {
    /// Not enough bytes yet to decide; read more (within the reader's bound).
    More,
    Done(T),
    /// Not what a client of this protocol sends, or more than the bound: refused.
    Malformed(&'static str),
}

#[cfg(test)]
mod tests;
