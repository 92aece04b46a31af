//! Carapace's policy core, as plain computation: the rule language and Layers 0/1.
//!
//! What it needs from the machine (file metadata, symlinks, small files) it asks of a
//! [`host::Host`], which the daemon implements on the real file system; it performs no file
//! system access of its own and depends on no kernel, async or database crate.
pub mod host;
