//! Crash-atomic 8- and 16-byte stores.
//!
//! The journal and inode code commit by flipping one 8- or 16-byte word;
//! these must reach PM whole, never half old and half new. An 8-byte aligned
//! store is single-copy atomic everywhere; 16 bytes need either an AVX
//! aligned vector store (atomic on AVX CPUs per Intel SDM vol. 3A §9.1.1 and
//! AMD APM vol. 2 §7.3.2) or a `lock cmpxchg16b` loop.

use std::sync::atomic::{AtomicU64, Ordering};

/// How 16-byte stores are made atomic on this CPU, chosen at map time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wide {
    /// One aligned VEX `vmovdqa` store.
    #[cfg(target_arch = "x86_64")]
    Avx,
    /// `lock cmpxchg16b` until it succeeds.
    #[cfg(target_arch = "x86_64")]
    Cmpxchg16b,
    /// `ldxp`/`stlxp` until the exclusive store succeeds.
    #[cfg(target_arch = "aarch64")]
    LlSc,
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("amber-pmem needs a 16-byte atomic store: only x86_64 and aarch64 are supported");

impl Wide {
    /// The fastest 16-byte atomic store available, if any.
    #[cfg(target_arch = "x86_64")]
    pub(crate) fn detect() -> Option<Wide> {
        let f = crate::cpu::features();
        if f.avx {
            Some(Wide::Avx)
        } else if f.cmpxchg16b {
            Some(Wide::Cmpxchg16b)
        } else {
            None
        }
    }

    /// The fastest 16-byte atomic store available, if any.
    #[cfg(target_arch = "aarch64")]
    pub(crate) fn detect() -> Option<Wide> {
        Some(Wide::LlSc)
    }
}

/// # Safety
/// `p` must be 8-byte aligned, inside a live mapping, and only accessed
/// atomically by other threads while this runs.
#[inline]
pub(crate) unsafe fn load_u64(p: *mut u8) -> u64 {
    // SAFETY: aligned, mapped and atomically accessed (caller contract).
    unsafe { AtomicU64::from_ptr(p.cast()) }.load(Ordering::Acquire)
}

/// # Safety
/// As for [`load_u64`].
#[inline]
pub(crate) unsafe fn store_u64(p: *mut u8, value: u64) {
    // SAFETY: aligned, mapped and atomically accessed (caller contract).
    unsafe { AtomicU64::from_ptr(p.cast()) }.store(value, Ordering::Release);
}

/// # Safety
/// `p` must be 16-byte aligned, writable for 16 bytes inside a live mapping,
/// not concurrently accessed non-atomically, and `wide` as given by
/// [`Wide::detect`] on this CPU.
#[inline]
pub(crate) unsafe fn store_u128(wide: Wide, p: *mut u8, value: u128) {
    debug_assert_eq!(p as usize % 16, 0);
    match wide {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: forwarded caller contract; AVX was detected.
        Wide::Avx => unsafe { x86::store_avx(p, value) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: forwarded caller contract; CMPXCHG16B was detected.
        Wide::Cmpxchg16b => unsafe { x86::store_cmpxchg16b(p, value) },
        #[cfg(target_arch = "aarch64")]
        // SAFETY: forwarded caller contract.
        Wide::LlSc => unsafe { arm::store_llsc(p, value) },
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::asm;
    use std::arch::x86_64::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// # Safety
    /// `p` 16-byte aligned and writable; the CPU has AVX.
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn store_avx(p: *mut u8, value: u128) {
        let v = _mm_set_epi64x((value >> 64) as i64, value as i64);
        // SAFETY: `p` is 16-aligned and writable (caller). The store is
        // written as asm because LLVM splits a `_mm_store_si128` of a
        // constructed value into two 8-byte stores, which could tear; a VEX
        // `vmovdqa` is one access, atomic on AVX CPUs. No `nomem`: earlier
        // stores stay before it, as a release store needs.
        unsafe {
            asm!(
                "vmovdqa xmmword ptr [{p}], {v}",
                p = in(reg) p,
                v = in(xmm_reg) v,
                options(nostack, preserves_flags),
            );
        }
    }

    /// # Safety
    /// `p` 16-byte aligned and writable; the CPU has CMPXCHG16B.
    pub(super) unsafe fn store_cmpxchg16b(p: *mut u8, value: u128) {
        let (new_lo, new_hi) = (value as u64, (value >> 64) as u64);
        // SAFETY: `p` is 8-aligned and mapped; a relaxed guess of the
        // current value only saves a retry, its tearing does not matter.
        let (mut lo, mut hi) = unsafe {
            (
                AtomicU64::from_ptr(p.cast()).load(Ordering::Relaxed),
                AtomicU64::from_ptr(p.add(8).cast()).load(Ordering::Relaxed),
            )
        };
        loop {
            let ok: u8;
            // SAFETY: `p` is 16-aligned and writable (caller). CMPXCHG16B
            // takes the new low half in RBX, which cannot be named as an
            // operand, so it is swapped in and the old RBX restored (flags
            // survive the `mov`). `p` is pinned to RDI because LLVM may
            // otherwise pick RBX for it. No `nomem`: the block is a full
            // compiler barrier, and `lock` a CPU one.
            unsafe {
                asm!(
                    "xchg {tmp}, rbx",
                    "lock cmpxchg16b xmmword ptr [rdi]",
                    "mov rbx, {tmp}",
                    "sete {ok}",
                    tmp = inout(reg) new_lo => _,
                    ok = out(reg_byte) ok,
                    in("rdi") p,
                    inout("rax") lo,
                    inout("rdx") hi,
                    in("rcx") new_hi,
                    options(nostack),
                );
            }
            if ok != 0 {
                return;
            }
        }
    }
}

#[cfg(target_arch = "aarch64")]
mod arm {
    use std::arch::asm;

    /// # Safety
    /// `p` 16-byte aligned and writable.
    pub(super) unsafe fn store_llsc(p: *mut u8, value: u128) {
        let (lo, hi) = (value as u64, (value >> 64) as u64);
        // SAFETY: `p` is 16-aligned and writable (caller); a successful
        // STLXP of a pair is single-copy atomic, and the loop retries until
        // the exclusive monitor lets it succeed.
        unsafe {
            asm!(
                "2:",
                "ldxp {t0}, {t1}, [{p}]",
                "stlxp {s:w}, {lo}, {hi}, [{p}]",
                "cbnz {s:w}, 2b",
                p = in(reg) p,
                lo = in(reg) lo,
                hi = in(reg) hi,
                t0 = out(reg) _,
                t1 = out(reg) _,
                s = out(reg) _,
                options(nostack),
            );
        }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    #[repr(align(16))]
    struct Slot([u8; 16]);

    /// Two writers storing values whose halves always match; a torn store
    /// would leave halves from different values.
    fn hammer(wide: Wide) {
        let mut slot = Slot([0; 16]);
        let p = slot.0.as_mut_ptr() as usize;
        std::thread::scope(|s| {
            for t in 1..=2u64 {
                s.spawn(move || {
                    for i in 0..20_000u64 {
                        let half = t << 32 | i;
                        // SAFETY: the slot is 16-aligned, outlives the scope,
                        // and is only accessed atomically while it runs.
                        unsafe {
                            store_u128(
                                wide,
                                p as *mut u8,
                                u128::from(half) << 64 | u128::from(half),
                            )
                        };
                    }
                });
            }
        });
        let lo = u64::from_le_bytes(slot.0[..8].try_into().unwrap());
        let hi = u64::from_le_bytes(slot.0[8..].try_into().unwrap());
        assert_eq!(lo, hi);
        assert_eq!(lo & 0xffff_ffff, 19_999);
    }

    #[test]
    fn cmpxchg16b_store_is_whole() {
        if crate::cpu::features().cmpxchg16b {
            hammer(Wide::Cmpxchg16b);
        }
    }

    #[test]
    fn avx_store_is_whole() {
        if crate::cpu::features().avx {
            hammer(Wide::Avx);
        }
    }
}
