//! Non-temporal (streaming) copies for bulk data.
//!
//! Streaming stores go to memory through write-combining buffers instead of
//! the cache, so a large copy neither evicts the working set nor needs a
//! flush per line afterwards: one drain makes it durable.

use std::fmt;

use crate::{cpu, CACHE_LINE};

/// The store width used for the streaming middle of a non-temporal copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NtWidth {
    /// 16-byte `movntdq` (SSE2, every x86-64 CPU).
    Sse16,
    /// 32-byte `vmovntdq` (AVX), half the instructions per line.
    Avx32,
    /// No streaming stores on this architecture: plain copies, which the
    /// platform's flush path (msync or eADR) then makes durable.
    Cached,
}

impl NtWidth {
    /// The widest streaming store this CPU supports.
    pub(crate) fn detect() -> NtWidth {
        if cfg!(not(target_arch = "x86_64")) {
            NtWidth::Cached
        } else if cpu::features().avx {
            NtWidth::Avx32
        } else {
            NtWidth::Sse16
        }
    }

    /// Bytes per store instruction.
    pub fn bytes(self) -> usize {
        match self {
            NtWidth::Sse16 => 16,
            NtWidth::Avx32 => 32,
            NtWidth::Cached => 0,
        }
    }
}

impl fmt::Display for NtWidth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NtWidth::Sse16 => f.write_str("16 B (SSE2 movntdq)"),
            NtWidth::Avx32 => f.write_str("32 B (AVX vmovntdq)"),
            NtWidth::Cached => f.write_str("none (plain stores)"),
        }
    }
}

/// Fills whole cache lines at `dst` with streaming stores: a copy of `src`,
/// or zeros when `src` is `None`.
///
/// # Safety
/// `dst` must be cache-line aligned and valid for `len` bytes of writes,
/// `len` a multiple of [`CACHE_LINE`], `src` (if any) valid for `len` bytes
/// of reads and not overlapping `dst`, and `width` as given by
/// [`NtWidth::detect`] on this CPU.
pub(crate) unsafe fn stream_lines(
    width: NtWidth,
    dst: *mut u8,
    src: Option<*const u8>,
    len: usize,
) {
    debug_assert_eq!(dst as usize % CACHE_LINE as usize, 0);
    debug_assert_eq!(len % CACHE_LINE as usize, 0);
    match (width, src) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: forwarded caller contract; AVX was detected for Avx32.
        (NtWidth::Avx32, Some(s)) => unsafe { x86::copy_avx(dst, s, len) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: forwarded caller contract; AVX was detected for Avx32.
        (NtWidth::Avx32, None) => unsafe { x86::zero_avx(dst, len) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: forwarded caller contract; SSE2 is baseline x86-64.
        (NtWidth::Sse16, Some(s)) => unsafe { x86::copy_sse(dst, s, len) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: forwarded caller contract; SSE2 is baseline x86-64.
        (NtWidth::Sse16, None) => unsafe { x86::zero_sse(dst, len) },
        // SAFETY: forwarded caller contract (valid, non-overlapping ranges).
        (_, Some(s)) => unsafe { std::ptr::copy_nonoverlapping(s, dst, len) },
        // SAFETY: forwarded caller contract (`dst` valid for `len` bytes).
        (_, None) => unsafe { std::ptr::write_bytes(dst, 0, len) },
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    // Safety of all four: `dst` 64-byte aligned and writable for `len`
    // (a multiple of 64) bytes, `src` readable for `len` bytes.

    #[target_feature(enable = "avx")]
    pub(super) unsafe fn copy_avx(dst: *mut u8, src: *const u8, len: usize) {
        for off in (0..len).step_by(32) {
            // SAFETY: `off + 32 <= len`, so both 32-byte accesses are in
            // bounds; `dst + off` is 32-byte aligned as `dst` is 64-aligned.
            unsafe {
                let v = _mm256_loadu_si256(src.add(off).cast());
                _mm256_stream_si256(dst.add(off).cast(), v);
            }
        }
    }

    #[target_feature(enable = "avx")]
    pub(super) unsafe fn zero_avx(dst: *mut u8, len: usize) {
        for off in (0..len).step_by(32) {
            // SAFETY: in bounds and 32-byte aligned, as in `copy_avx`.
            unsafe { _mm256_stream_si256(dst.add(off).cast(), _mm256_setzero_si256()) }
        }
    }

    pub(super) unsafe fn copy_sse(dst: *mut u8, src: *const u8, len: usize) {
        for off in (0..len).step_by(16) {
            // SAFETY: `off + 16 <= len`; `dst + off` is 16-byte aligned.
            unsafe {
                let v = _mm_loadu_si128(src.add(off).cast());
                _mm_stream_si128(dst.add(off).cast(), v);
            }
        }
    }

    pub(super) unsafe fn zero_sse(dst: *mut u8, len: usize) {
        for off in (0..len).step_by(16) {
            // SAFETY: in bounds and 16-byte aligned, as in `copy_sse`.
            unsafe { _mm_stream_si128(dst.add(off).cast(), _mm_setzero_si128()) }
        }
    }
}
