//! The daemon's real entry point, built inside this package so that the host tests can find
//! it through `CARGO_BIN_EXE_carapaced-under-test` (cargo builds a package's binaries before
//! its integration tests, and only its own).
fn main() -> std::process::ExitCode {
    carapace::daemon::main()
}
