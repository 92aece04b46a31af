//! `carapace`: the Carapace command-line client. Its code is `src/cli/` (see `cli::client`),
//! declared here so that it is this binary's and not the library's: it reports errors with
//! `anyhow`, which library code does not (ARCHITECTURE.md, "Errors").
//!
//! The system allocator, not carapaced's mimalloc: most runs are one call (`hook`, `check`),
//! and mimalloc's start-up (reserving and mapping its arena) cost a fifth of such a process's
//! CPU, more than it saves on one decision (see BENCHMARKS.md, session 19).

#[path = "../cli/mod.rs"]
mod cli;

fn main() -> std::process::ExitCode {
    cli::client::main()
}
