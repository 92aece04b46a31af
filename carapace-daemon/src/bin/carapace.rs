//! `carapace`: the Carapace command-line client. See `carapace::cli::client`.
//!
//! The system allocator, not carapaced's mimalloc: most runs are one call (`hook`, `check`),
//! and mimalloc's start-up (reserving and mapping its arena) cost a fifth of such a process's
//! CPU, more than it saves on one decision (see BENCHMARKS.md, session 19).

fn main() -> std::process::ExitCode {
    carapace::cli::client::main()
}
