//! Second stage: the validated model → enforcement artefacts. `kernel` builds the BPF map
//! image; the userspace matchers are compiled into the model itself (`pattern`, `model`).
pub mod kernel;
