//! The CLI's real entry point, built here for the host tests (see `carapaced.rs`).
fn main() -> std::process::ExitCode {
    carapace::cli::client::main()
}
