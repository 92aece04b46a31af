//! Links the programs' one kfunc call (see `carapace_common::kfunc`): aya 0.14 relocates no
//! call to an extern function, so the object carries a placeholder instruction that is
//! rewritten here, in a copy of the object, before aya reads it.

use carapace_common::kfunc::{
    CALL, KFUNC_CALL_REGS, MOV_R0_R1, MOV_R0_R1_REGS, RDONLY_CAST_PLACEHOLDER,
};
use object::{Object as _, ObjectSection as _, SectionKind};

const INSN: usize = 8;

/// An eBPF object in memory aligned for `object`'s ELF reader (aya parses it in place).
pub struct Linked {
    words: Vec<u64>,
    len: usize,
}

impl Linked {
    fn copy_of(object: &[u8]) -> Self {
        let mut linked = Self {
            words: vec![0; object.len().div_ceil(INSN)],
            len: object.len(),
        };
        linked.bytes_mut().copy_from_slice(object);
        linked
    }

    #[must_use]
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `words` holds at least `len` initialised bytes; u8 has no alignment need.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr().cast::<u8>(), self.len) }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`, and the slice borrows `self` mutably.
        unsafe { std::slice::from_raw_parts_mut(self.words.as_mut_ptr().cast::<u8>(), self.len) }
    }
}

/// The eBPF object is not an ELF file `object` can read.
#[derive(Debug, thiserror::Error)]
#[error("cannot read the eBPF object: {0}")]
pub struct Unreadable(#[source] object::read::Error);

/// A copy of `object` with every placeholder rewritten into a call of the kfunc whose BTF
/// id is `rdonly_cast`, or (`None`) into `r0 = r1`, which only dead code holds on a kernel
/// without it. Returns the copy and the number of instructions rewritten.
pub fn link(object: &[u8], rdonly_cast: Option<u32>) -> Result<(Linked, usize), Unreadable> {
    let file = object::File::parse(object).map_err(Unreadable)?;
    let placeholder = RDONLY_CAST_PLACEHOLDER.to_le_bytes();
    let replacement = instruction(rdonly_cast).to_le_bytes();
    let mut linked = Linked::copy_of(object);
    let mut rewritten = 0;
    for section in file.sections().filter(|s| s.kind() == SectionKind::Text) {
        let Some(code) = section.file_range().and_then(|(offset, size)| {
            linked.bytes_mut().get_mut(
                usize::try_from(offset).ok()?..usize::try_from(offset.checked_add(size)?).ok()?,
            )
        }) else {
            continue;
        };
        // Instructions are the section's 8-byte words, counted from its start.
        for insn in code.chunks_exact_mut(INSN) {
            if *insn == placeholder {
                insn.copy_from_slice(&replacement);
                rewritten += 1;
            }
        }
    }
    Ok((linked, rewritten))
}

/// The instruction in place of the placeholder, as the 64-bit word it is.
fn instruction(rdonly_cast: Option<u32>) -> u64 {
    match rdonly_cast {
        Some(id) => u64::from(CALL) | u64::from(KFUNC_CALL_REGS) << 8 | u64::from(id) << 32,
        None => u64::from(MOV_R0_R1) | u64::from(MOV_R0_R1_REGS) << 8,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(bytes: &[u8]) -> impl Iterator<Item = u64> + '_ {
        bytes
            .chunks_exact(INSN)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
    }

    fn placeholders(bytes: &[u8]) -> usize {
        words(bytes)
            .filter(|&w| w == RDONLY_CAST_PLACEHOLDER)
            .count()
    }

    #[test]
    fn every_placeholder_becomes_the_kfunc_call_and_nothing_else_changes() {
        let programs = super::super::loader::PROGRAMS;
        if programs.is_empty() {
            return; // built with AYA_BUILD_SKIP=1
        }
        // Both lock sequences of the path cache.
        assert!(placeholders(programs) >= 2);
        let (linked, rewritten) = link(programs, Some(0x1234)).unwrap();
        assert_eq!(rewritten, placeholders(programs));
        assert_eq!(placeholders(linked.bytes()), 0);
        assert_eq!(linked.bytes().len(), programs.len());
        let call = 0x85 | 0x20 << 8 | 0x1234 << 32;
        for (before, after) in words(programs).zip(words(linked.bytes())) {
            if before == RDONLY_CAST_PLACEHOLDER {
                assert_eq!(after, call);
            } else {
                assert_eq!(after, before);
            }
        }
        // The object still parses (aya reads it next).
        object::File::parse(linked.bytes()).unwrap();
    }

    #[test]
    fn without_the_kfunc_the_placeholder_becomes_a_register_move() {
        let programs = super::super::loader::PROGRAMS;
        if programs.is_empty() {
            return;
        }
        let (linked, rewritten) = link(programs, None).unwrap();
        assert!(rewritten >= 2);
        assert_eq!(placeholders(linked.bytes()), 0);
        assert_eq!(
            words(linked.bytes()).filter(|&w| w == 0x10bf).count(),
            rewritten + words(programs).filter(|&w| w == 0x10bf).count()
        );
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(link(b"not an ELF file", None).is_err());
        assert!(link(&[], Some(1)).is_err());
    }
}
