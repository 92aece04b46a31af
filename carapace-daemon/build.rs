//! Builds the eBPF programs (with nightly, through aya-build, because the bpfel target needs
//! `-Z build-std`) and the gRPC code from `proto/carapace.proto` (parsed by protox: no `protoc`).

fn main() -> anyhow::Result<()> {
    // AYA_BUILD_SKIP=1 builds the daemon without its programs (for work on userspace parts
    // where nightly or bpf-linker is missing); Kernel::start then reports the layer as
    // unavailable instead of loading an empty object.
    if std::env::var_os("AYA_BUILD_SKIP").is_some_and(|v| v == "1" || v == "true") {
        let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default());
        std::fs::write(out.join("carapace"), b"")?;
    }
    let ebpf = aya_build::Package {
        name: "carapace-ebpf",
        root_dir: concat!(env!("CARGO_MANIFEST_DIR"), "/../carapace-ebpf"),
        ..Default::default()
    };
    // The eBPF crate's own rust-toolchain.toml names the nightly; the daemon builds with
    // the workspace's stable toolchain.
    let toolchain_file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../carapace-ebpf/rust-toolchain.toml"
    );
    println!("cargo:rerun-if-changed={toolchain_file}");
    let channel = ebpf_channel(&std::fs::read_to_string(toolchain_file)?)
        .ok_or_else(|| anyhow::anyhow!("{toolchain_file} names no channel"))?;
    aya_build::build_ebpf([ebpf], aya_build::Toolchain::Custom(&channel))?;

    // `carapace` starts once per tool call (the agent's hook): linked at a fixed address it
    // has no 28,000 relocations to apply before main. The daemon, which reads untrusted
    // input for as long as it runs, stays position-independent (ASLR).
    println!("cargo:rustc-link-arg-bin=carapace=-no-pie");
    println!("cargo:rerun-if-changed=proto/carapace.proto");
    // Parsed by protox (Rust) rather than `protoc`, so that no system package is needed.
    let descriptors = protox::compile(["proto/carapace.proto"], ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        // What `compile_protos` adds by itself and `compile_fds` does not.
        .type_attribute(".", "#[allow(clippy::all)]")
        .compile_fds(descriptors)?;
    Ok(())
}

/// The `channel = "…"` of a rust-toolchain.toml (the only key read; no TOML parser needed
/// for one line the project writes itself).
fn ebpf_channel(toml: &str) -> Option<String> {
    toml.lines().find_map(|line| {
        let value = line
            .trim()
            .strip_prefix("channel")?
            .trim()
            .strip_prefix('=')?;
        Some(value.trim().trim_matches('"').to_owned())
    })
}
