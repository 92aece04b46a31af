//! The client `carapace`: [`client`] is its entry point, each other module a subcommand (or
//! what several share). Kept in the library so that tests can run the real entry point; the
//! daemon's is `carapace::daemon`, which nothing here uses. Binaries report errors with `anyhow`.
pub mod audit;
pub mod check;
pub mod client;
pub mod connect;
pub mod console;
pub mod doctor;
pub mod evaluator;
mod exit;
pub mod hook;
pub mod learn;
pub mod mcp;
mod one_call;
mod pty;
pub mod record;
pub mod rules;
pub mod session;
#[cfg(test)]
mod tests;
