//! `carapaced`: the Carapace daemon. See `carapace::cli::daemon`.
fn main() -> std::process::ExitCode {
    carapace::cli::daemon::main()
}
