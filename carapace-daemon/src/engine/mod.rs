//! Layers 0 and 1: what a tool call does (`call`, `shell`, `normalize` → `operation`), and
//! which rules it meets (`evaluate` → `decision`). Deterministic and order-independent:
//! every rule is checked, the strictest mode wins.
pub mod normalize;
pub mod operation;
pub mod shell;

pub use operation::{Context, Extracted, Operation};
