//! `carapace`: the Carapace command-line client. See `carapace::cli::client`.
fn main() -> std::process::ExitCode {
    carapace::cli::client::main()
}
