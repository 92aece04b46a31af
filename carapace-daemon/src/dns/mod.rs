//! Network by name: a DNS resolver inside carapaced for each session whose rules speak of
//! host names. The kernel redirects every DNS query of the session's processes to it (cgroup
//! `sock_addr` programs, see `kernel`); it answers names the rules allow from the upstream
//! resolver, refuses the others, and records the addresses it handed out so that the kernel
//! allows connects to exactly those (and names them in denial messages).
//!
//! - `wire`: DNS messages in and out (hickory-proto), never trusting their bytes.
//! - `upstream`: the machine's nameservers (`/etc/resolv.conf`), UDP with a retry, TCP when
//!   an answer is truncated.
//! - `learned`: the addresses handed out per session, with their expiry, and the
//!   [`Learner`] the kernel's map implements.
//! - `handler`: one query: decide by name (`carapace_policy::engine::names`), forward,
//!   screen the answer (rebinding), learn, or refuse with a denial.
//! - `server`: one resolver's UDP and TCP sockets on loopback, bounded.
//! - `sessions`: which sessions have a resolver, started and stopped with them, and the
//!   hook ([`ResolverRegistry`]) that tells the kernel where each listens.
//! - the `dns:` section of `config.yaml` ([`DnsSettings`]) is read with the rest of the file
//!   (`crate::config::dns`).
//!
//! The kernel plugs in with [`SessionResolvers::attach_kernel`] (`Daemon::resolvers`), giving
//! a [`ResolverRegistry`] (where each session's resolver listens) and a [`Learner`] (the
//! addresses each handed out, with their expiry and the rules that except them). Until it
//! does, resolvers run for sessions whose rules need one and learn only into [`Learned`].
//!
//! Rebinding: an answer that gives a name allowed through an allow-list's exception an
//! address in a private range (loopback, RFC 1918, link-local and the metadata service,
//! CGNAT, `fc00::/7`, unspecified) is refused, unless the same rule excepts that address
//! (`except: [10.20.0.0/16]`) or the name is `localhost` (or below it), excepted, and the
//! address loopback. Names no allow-list speaks of are passed as they are: learning their
//! addresses opens nothing the kernel would otherwise refuse.
pub(crate) mod handler;
pub(crate) mod learned;
mod server;
mod sessions;
mod upstream;
pub mod wire;

pub use self::handler::{DenialSink, Handler, RecentDenials, RulesInForce, RulesUnavailable, Step};
pub use self::learned::{boot_time_ns, Learned, LearnedAddress, Learner, Refusal};
pub use self::server::{Resolver, ResolverError, ResolverHandle};
pub use self::sessions::{ResolverRegistry, SessionResolvers};
pub use self::upstream::{Upstream, UpstreamError};
pub use crate::config::dns::{DnsSettings, RefuseWith};

#[cfg(test)]
pub(crate) mod tests;
