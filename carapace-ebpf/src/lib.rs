//! The eBPF programs live in the `carapace` binary target (src/main.rs). This library target
//! exists so that carapace-daemon can name this crate as a build dependency, which makes
//! cargo rebuild the daemon when the programs change.
#![no_std]
