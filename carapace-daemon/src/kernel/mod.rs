//! Layer 2: the eBPF LSM programs, their maps, and the denial events they emit.
pub mod image;
