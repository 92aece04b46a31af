//! Rebuild when bpf-linker changes: a new linker can change the emitted object.
fn main() {
    if let Ok(linker) = which::which("bpf-linker") {
        println!("cargo:rerun-if-changed={}", linker.display());
    }
}
