//! Where the daemon and the client find each other unless told otherwise: the defaults of
//! `--data-dir` / `CARAPACE_DATA_DIR` and `--socket` / `CARAPACE_SOCKET` that `carapaced`
//! and `carapace` share. A module of its own so that the client depends on these two
//! constants and not on the daemon's composition root.

/// Default data directory (rules.yaml, config.yaml, the session database, the audit ledger).
pub const DEFAULT_DATA_DIR: &str = "/var/lib/carapace";
/// Default API socket.
pub const DEFAULT_SOCKET: &str = "/run/carapace/carapace.sock";
