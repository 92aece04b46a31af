//! Builds the eBPF programs (with nightly, through aya-build, because the bpfel target needs
//! `-Z build-std`) and the gRPC code from `proto/carapace.proto`.

fn main() -> anyhow::Result<()> {
    let ebpf = aya_build::Package {
        name: "carapace-ebpf",
        root_dir: concat!(env!("CARGO_MANIFEST_DIR"), "/../carapace-ebpf"),
        ..Default::default()
    };
    aya_build::build_ebpf([ebpf], aya_build::Toolchain::default())?;

    println!("cargo:rerun-if-changed=proto/carapace.proto");
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_protos(&["proto/carapace.proto"], &["proto"])?;
    Ok(())
}
