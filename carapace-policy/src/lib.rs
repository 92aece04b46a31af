//! Carapace's policy core, as plain computation: the rule language and Layers 0/1.
//!
//! - [`rules`]: rule files (YAML) parsed into a spanned model, validated with a diagnostic
//!   for every problem, and compiled into userspace matchers and the kernel's image.
//! - [`image`]: that [`image::KernelImage`], every BPF map's intended contents as plain data
//!   (the daemon writes it into the maps).
//! - [`engine`]: Layers 0/1, what a tool call does (operations on paths and endpoints, shell
//!   and inline code analysed) and the rules' decision on it.
//! - [`host`]: what the two ask of the machine. The crate performs no file system access of
//!   its own (the daemon passes the real file system as a [`host::Host`]) and depends on no
//!   kernel, async or database crate.
// Every public item is documented, so that the API the daemon, the fuzz targets and the
// benchmarks use says what each part is for; the rest is `pub(crate)`.
#![deny(missing_docs)]
#![deny(rustdoc::broken_intra_doc_links)]
pub mod engine;
pub mod host;
pub mod image;
pub mod rules;
