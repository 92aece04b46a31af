//! `carapaced`: the Carapace daemon. See `carapace::daemon`.

// Layer 1 allocates many small strings per decision; mimalloc serves them faster than glibc
// (see BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    carapace::daemon::main()
}
