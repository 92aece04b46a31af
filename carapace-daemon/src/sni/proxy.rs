//! One redirected connection: read the name the client asks for (bounded in bytes and
//! time), judge it by the session's `tls: sni` rules, then either refuse it (close, and a
//! denial naming the address's learned name and the name asked for) or connect to the
//! address first meant and copy bytes both ways until both sides are done.
//!
//! The proxy's own connection leaves from carapaced, outside every session cgroup, so the
//! kernel neither redirects nor judges it again.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use carapace_policy::engine::names::{self, SniVerdict};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use super::{read_client_hello, read_request_host, Reading, MAX_HEAD, MAX_HELLO};
use crate::api::proto::Denial;
// From the defining module, not `crate::dns`: the resolvers (`dns::sessions`) start the
// proxies, so naming their parent would make the two modules need each other.
use crate::dns::handler::{DenialSink, RulesInForce};

/// The operation a refused connection reports (`Denial::operation`), the kernel's word for a connect.
pub const OPERATION: &str = "network";
/// The layer a refused connection reports (`Denial::layer`).
pub const LAYER: &str = "sni";

/// How the client names the server on a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// A TLS `ClientHello`'s server name.
    Tls,
    /// A plain HTTP/1 request's `Host`.
    Http,
}

impl Protocol {
    /// Plain HTTP on port 80; TLS on every other port redirected (443).
    #[must_use]
    pub fn for_port(port: u16) -> Self {
        if port == 80 {
            Self::Http
        } else {
            Self::Tls
        }
    }

    fn bound(self) -> usize {
        match self {
            Self::Tls => MAX_HELLO,
            Self::Http => MAX_HEAD,
        }
    }
}

/// Where a redirected connection meant to go, and whose it is.
#[derive(Clone, Debug)]
pub struct Redirected {
    pub session_id: String,
    /// The address and port the process connected to.
    pub destination: SocketAddr,
    /// The name the session's resolver learned the address for, if it knows one.
    pub learned_name: Option<String>,
    /// How the client names the server (`Protocol::for_port` of the destination's port).
    pub protocol: Protocol,
}

/// Bounds of one connection.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Time for the client to send its `ClientHello` or request head; clients send it at
    /// once, so a client that dawdles holds a proxy slot for nothing.
    pub first_bytes: Duration,
    /// Time to connect to the destination.
    pub connect: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            first_bytes: Duration::from_secs(10),
            connect: Duration::from_secs(15),
        }
    }
}

/// How a connection ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Passed: bytes copied from the client and back.
    Spliced { sent: u64, received: u64 },
    /// Refused by a rule (a denial was reported).
    Refused {
        rule_id: String,
        requested: Option<String>,
    },
    /// Closed without a judgement a rule made: the first bytes were malformed, too long
    /// or too slow, the rules could not be read, or the destination could not be reached.
    Closed(String),
}

/// The proxy of one session's redirected connections.
pub struct SniProxy {
    pub rules: Arc<dyn RulesInForce>,
    pub denials: Arc<dyn DenialSink>,
    pub limits: Limits,
    /// Refusals reported lately: a client retrying in a loop is refused every time, and
    /// reported once in a while (as the resolver's refusals are).
    pub recent: crate::dns::handler::RecentDenials,
}

impl SniProxy {
    /// Serves one connection redirected to the proxy, to its end.
    pub async fn serve(&self, mut client: TcpStream, to: &Redirected) -> Outcome {
        let protocol = to.protocol;
        // The connection to the server opens while the client's first bytes arrive and are
        // judged, so the proxy adds its own work to the client's wait, not a second
        // handshake. The kernel already allowed the address; a refused name closes this
        // connection before a byte of the client's is sent on it.
        let destination = to.destination;
        let connect = self.limits.connect;
        let mut connecting = Abortable(tokio::spawn(async move {
            tokio::time::timeout(connect, TcpStream::connect(destination)).await
        }));
        let first =
            match tokio::time::timeout(self.limits.first_bytes, first_bytes(&mut client, protocol))
                .await
            {
                Ok(Ok(first)) => first,
                Ok(Err(why)) => return self.malformed(to, &why.to_string()).await,
                Err(_) => {
                    return self
                        .malformed(to, "no ClientHello or request head in time")
                        .await
                }
            };
        let (bytes, requested, forced) = match first {
            First::Tls(bytes, hello) => {
                let forced = hello.encrypted.then_some(ENCRYPTED);
                (bytes, hello.server_name, forced)
            }
            First::Http(bytes, host) => (bytes, host, None),
        };
        if let Some(refused) = self
            .judged(to, requested.as_deref(), forced)
            .await
            .refusal()
        {
            return refused;
        }
        let mut server = match (&mut connecting.0).await {
            Ok(Ok(Ok(s))) => s,
            Ok(Ok(Err(e))) => return Outcome::Closed(format!("connect to {destination}: {e}")),
            Ok(Err(_)) => return Outcome::Closed(format!("connect to {destination}: timed out")),
            Err(e) => return Outcome::Closed(format!("connect to {destination}: {e}")),
        };
        let _ = server.set_nodelay(true);
        let _ = client.set_nodelay(true);
        if let Err(e) = server.write_all(&bytes).await {
            return Outcome::Closed(format!("write to {}: {e}", to.destination));
        }
        match tokio::io::copy_bidirectional_with_sizes(
            &mut client,
            &mut server,
            COPY_BUFFER,
            COPY_BUFFER,
        )
        .await
        {
            Ok((sent, received)) => Outcome::Spliced {
                sent: sent + bytes.len() as u64,
                received,
            },
            Err(e) => Outcome::Closed(format!("copying: {e}")),
        }
    }

    /// Judges the name asked for (`forced`: a reason to refuse whatever the name); a
    /// refusal is reported.
    async fn judged(
        &self,
        to: &Redirected,
        requested: Option<&str>,
        forced: Option<&str>,
    ) -> Judged {
        // The session's rule state is read from storage: off the runtime's workers.
        let rules = Arc::clone(&self.rules);
        let (rules, activation) = match tokio::task::spawn_blocking(move || rules.current()).await {
            Ok(Ok(current)) => current,
            Ok(Err(e)) => return Judged::Closed(format!("cannot read the rules: {e}")),
            Err(e) => return Judged::Closed(format!("cannot read the rules: {e}")),
        };
        let verdict = names::sni_verdict(&rules, &activation, requested, to.destination.port());
        let (rule_id, message) = match (verdict, forced) {
            (SniVerdict::Refused { rule_id, message }, None) => (rule_id, message),
            (SniVerdict::Refused { rule_id, message }, Some(why)) => {
                (rule_id, format!("{why}: {message}"))
            }
            (SniVerdict::Pass, None) => return Judged::Pass,
            // Refused whatever the name: under the first `tls: sni` rule in force (none in
            // force, no check applies now).
            (SniVerdict::Pass, Some(why)) => match first_sni_rule(&rules, &activation) {
                Some((rule_id, message)) => (rule_id, format!("{why}: {message}")),
                None => return Judged::Pass,
            },
        };
        let subject = subject(to, requested);
        if self
            .recent
            .first(&format!("{subject}\n{message}"), &rule_id)
        {
            self.denials.refused(Denial {
                session_id: to.session_id.clone(),
                pid: 0,
                comm: String::new(),
                operation: OPERATION.to_owned(),
                subject,
                rule_id: rule_id.clone(),
                message,
                would_deny: false,
                layer: LAYER.to_owned(),
            });
        }
        Judged::Refused(Outcome::Refused {
            rule_id,
            requested: requested.map(str::to_owned),
        })
    }

    async fn malformed(&self, to: &Redirected, why: &str) -> Outcome {
        tracing::info!(session = %to.session_id, destination = %to.destination, "server-name check: {why}");
        match self.judged(to, None, Some(why)).await {
            Judged::Refused(refused) => refused,
            Judged::Closed(e) => Outcome::Closed(e),
            // No check in force, but bytes that could not be read are not passed on.
            Judged::Pass => Outcome::Closed(why.to_owned()),
        }
    }
}

/// A task aborted when dropped: the connection to the server of a refused client.
struct Abortable<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for Abortable<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Why a `ClientHello` with an `encrypted_client_hello` extension is refused.
const ENCRYPTED: &str = "an encrypted ClientHello hides the server name";

/// Bytes per copy between client and server, each way.
const COPY_BUFFER: usize = 64 * 1024;

enum Judged {
    Pass,
    Refused(Outcome),
    Closed(String),
}

impl Judged {
    fn refusal(self) -> Option<Outcome> {
        match self {
            Self::Pass => None,
            Self::Refused(o) => Some(o),
            Self::Closed(e) => Some(Outcome::Closed(e)),
        }
    }
}

/// The first `tls: sni` rule in force, which a connection refused for its malformed first
/// bytes is reported under.
fn first_sni_rule(
    rules: &carapace_policy::rules::RuleSet,
    activation: &carapace_policy::engine::Activation,
) -> Option<(String, String)> {
    rules
        .rules()
        .iter()
        .find(|r| r.tls.is_some() && activation.applies(r))
        .map(|r| (r.id.clone(), r.message.clone()))
}

/// `104.16.1.1:443 (github.com, server name pastebin.com)`: the address, the name it was
/// learned for, and the name asked for.
fn subject(to: &Redirected, requested: Option<&str>) -> String {
    let learned = to.learned_name.as_deref().unwrap_or("no name learned");
    let requested = requested.map_or_else(
        || "no server name".to_owned(),
        |n| format!("server name {n}"),
    );
    format!("{} ({learned}, {requested})", to.destination)
}

/// The client's first bytes, read up to what its protocol names the server with.
enum First {
    Tls(Vec<u8>, super::Hello),
    Http(Vec<u8>, Option<String>),
}

/// Why the client's first bytes name no server (the connection is refused as malformed).
#[derive(Debug, thiserror::Error)]
enum NoFirst {
    /// What the `ClientHello` or request head parser found wrong.
    #[error("{0}")]
    Malformed(&'static str),
    #[error("no ClientHello or request head in {0} bytes")]
    TooLong(usize),
    #[error("reading the client: {0}")]
    Read(#[source] std::io::Error),
    #[error("the client closed before naming a server")]
    Closed,
}

async fn first_bytes(client: &mut TcpStream, protocol: Protocol) -> Result<First, NoFirst> {
    let bound = protocol.bound();
    let mut buf = Vec::with_capacity(4096);
    loop {
        let reading = match protocol {
            Protocol::Tls => match read_client_hello(&buf) {
                Reading::Done(hello) => return Ok(First::Tls(buf, hello)),
                Reading::More => None,
                Reading::Malformed(why) => Some(why),
            },
            Protocol::Http => match read_request_host(&buf) {
                Reading::Done(host) => return Ok(First::Http(buf, host)),
                Reading::More => None,
                Reading::Malformed(why) => Some(why),
            },
        };
        if let Some(why) = reading {
            return Err(NoFirst::Malformed(why));
        }
        if buf.len() >= bound {
            return Err(NoFirst::TooLong(bound));
        }
        let mut chunk = vec![0; (bound - buf.len()).min(16 * 1024)];
        let n = client.read(&mut chunk).await.map_err(NoFirst::Read)?;
        if n == 0 {
            return Err(NoFirst::Closed);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}
