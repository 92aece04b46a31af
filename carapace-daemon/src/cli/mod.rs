//! The two binaries' logic, kept in the library so that tests can run the real entry points:
//! [`daemon`] is `carapaced`, [`client`] is `carapace`. Binaries report errors with `anyhow`.
pub mod audit;
pub mod check;
pub mod client;
pub mod console;
pub mod daemon;
pub mod doctor;
pub mod evaluator;
pub mod hook;
pub mod learn;
pub mod mcp;
mod pty;
pub mod rules;
pub mod session;
pub mod slash;
