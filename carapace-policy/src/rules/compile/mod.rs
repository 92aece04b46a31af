//! Second stage: the validated model → enforcement artefacts. `kernel` builds the BPF map
//! image (with `dfa`, the path automaton for patterns no map form holds); the userspace
//! matchers are compiled into the model itself (`pattern`, `model`).
pub mod dfa;
pub mod kernel;
pub(crate) mod resolution;
