//! Carapace: a guardrail for AI agents. See DESIGN.md at the repository's shared root for the
//! architecture; each module's doc says which part it is. The `carapace` client's code
//! (`src/cli/`) is not part of it: it is that binary's top level (see ARCHITECTURE.md).
pub mod api;
pub mod audit;
pub mod config;
pub mod console;
pub mod daemon;
pub mod dns;
pub mod fingerprint;
pub mod gateway;
pub mod hold;
pub mod host;
pub mod io_error;
pub mod kernel;
pub mod llm;
pub mod metrics;
pub mod own_files;
pub mod paths;
pub mod policy_host;
pub mod profiles;
pub mod record;
pub mod sandbox;
pub mod session;
pub mod sni;
