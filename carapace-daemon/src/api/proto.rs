//! Code generated from `proto/carapace.proto` (package `carapace.v1`) by tonic-prost-build.
#![allow(
    clippy::pedantic,
    clippy::all,
    missing_docs,
    reason = "generated code, not written by hand"
)]

tonic::include_proto!("carapace.v1");
