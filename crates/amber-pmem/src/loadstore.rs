//! Direct load/store access to a mapping, for benchmarks that must not route
//! data through a DRAM buffer (NVMFS-IOzone's DAX-mmap-store/load): a copy
//! from DRAM adds a read stream and cache misses the file system under test
//! never caused, and hides how fast PM itself is reached.
//!
//! Stores write a pattern computed in registers from a seed and the word's
//! position, so any range can be checked later without having kept the data;
//! loads fold every word into a checksum the caller must use, so the
//! compiler cannot drop them. Word-granular (offsets and lengths multiples of
//! 8): the benchmark's records are, and it keeps every store whole.

use crate::MmapDevice;

/// Word `index` of the pattern for `seed`: the `index`-th output of a
/// SplitMix64 stream seeded with `seed` (the project's generator), computed
/// from the position alone so random and backward accesses store the same
/// bytes as sequential ones. The word at byte offset `o` holds
/// `pattern_word(seed, o / 8)`, little-endian.
#[inline(always)]
pub fn pattern_word(seed: u64, index: u64) -> u64 {
    let mut z = seed.wrapping_add(index.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl MmapDevice {
    /// Stores the pattern of `seed` over `[off, off + len)` through the CPU
    /// cache, one 8-byte store per word. Not durable until flushed and
    /// drained, like [`PmDevice::write`](crate::PmDevice::write).
    ///
    /// # Panics
    /// If the range leaves the pool or is not word-aligned.
    pub fn store_generated(&self, off: u64, len: u64, seed: u64) {
        let region = self.region();
        let words = region.words(off, len);
        if !region.may_store(off, len) {
            return;
        }
        let first = off / 8;
        for i in 0..len / 8 {
            let value = pattern_word(seed, first + i).to_le();
            // SAFETY: `words` covers `len / 8` aligned words inside the
            // mapping (checked by `words`) and writable (`may_store`); no other
            // thread touches these bytes (device contract).
            unsafe { words.add(i as usize).write(value) }
        }
        region.counter().stored(len);
    }

    /// As [`MmapDevice::store_generated`], with non-temporal stores that
    /// bypass the cache: durable after the next drain, no flush needed.
    ///
    /// # Panics
    /// If the range leaves the pool or is not word-aligned.
    pub fn store_generated_nt(&self, off: u64, len: u64, seed: u64) {
        let region = self.region();
        let words = region.words(off, len);
        if !region.may_store(off, len) {
            return;
        }
        let first = off / 8;
        for i in 0..len / 8 {
            let value = pattern_word(seed, first + i).to_le();
            // SAFETY: in bounds and aligned as in `store_generated`.
            unsafe { stream_word(words.add(i as usize), value) }
        }
        if region.flush_kind() == crate::FlushKind::Msync || !cfg!(target_arch = "x86_64") {
            // A page-cache file (or a CPU without streaming stores) makes
            // the data durable by writing the pages back, not by the fence.
            region.write_back(off, len);
        }
        region.counter().stored_nt(len);
    }

    /// Loads every word of `[off, off + len)` and returns their wrapping sum,
    /// which the caller must use (compare or pass on) so the loads stay.
    ///
    /// # Panics
    /// If the range leaves the pool or is not word-aligned.
    #[must_use]
    pub fn load_sum(&self, off: u64, len: u64) -> u64 {
        let words = self.region().words(off, len);
        let mut sum = 0u64;
        for i in 0..len / 8 {
            // SAFETY: in bounds and aligned as in `store_generated`; no
            // thread stores to these bytes meanwhile (device contract).
            let value = unsafe { words.add(i as usize).read() };
            sum = sum.wrapping_add(u64::from_le(value));
        }
        sum
    }
}

/// One 8-byte non-temporal store (`movnti`, baseline x86-64).
///
/// # Safety
/// `dst` must be 8-byte aligned and valid for an 8-byte write.
#[inline(always)]
unsafe fn stream_word(dst: *mut u64, value: u64) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: forwarded caller contract; MOVNTI is part of SSE2, which
    // x86-64 mandates.
    unsafe {
        std::arch::x86_64::_mm_stream_si64(dst.cast(), value as i64)
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: forwarded caller contract.
    unsafe {
        dst.write(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{MapOptions, PmDevice};

    fn device() -> MmapDevice {
        MmapDevice::anonymous(1 << 16, &MapOptions::default()).unwrap()
    }

    fn expected(seed: u64, off: u64, len: u64) -> Vec<u8> {
        (off / 8..(off + len) / 8)
            .flat_map(|i| pattern_word(seed, i).to_le_bytes())
            .collect()
    }

    #[test]
    fn stored_pattern_reads_back_and_sums() {
        let dev = device();
        dev.store_generated(4096, 8192, 7);
        dev.persist(4096, 8192).unwrap();
        let mut buf = vec![0u8; 8192];
        dev.read(4096, &mut buf);
        assert_eq!(buf, expected(7, 4096, 8192));
        let sum = (512..1536).fold(0u64, |s, i| s.wrapping_add(pattern_word(7, i)));
        assert_eq!(dev.load_sum(4096, 8192), sum);
        assert_eq!(dev.stats().bytes_stored, 8192);
    }

    #[test]
    fn streaming_stores_write_the_same_pattern() {
        let dev = device();
        // An offset inside a cache line: streaming stores are per word.
        dev.store_generated_nt(24, 1000, 3);
        dev.drain().unwrap();
        let mut buf = vec![0u8; 1000];
        dev.read(24, &mut buf);
        assert_eq!(buf, expected(3, 24, 1000));
        assert_eq!(dev.stats().bytes_nt, 1000);
        assert_eq!(dev.stats().bytes_stored, 0);
    }

    #[test]
    fn the_pattern_depends_on_position_and_seed() {
        assert_ne!(pattern_word(1, 0), pattern_word(1, 1));
        assert_ne!(pattern_word(1, 0), pattern_word(2, 0));
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn a_store_past_the_end_panics() {
        device().store_generated((1 << 16) - 8, 16, 1);
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn a_load_past_the_end_panics() {
        let _ = device().load_sum(1 << 16, 8);
    }

    #[test]
    #[should_panic(expected = "misaligned")]
    fn a_partial_word_panics() {
        device().store_generated_nt(0, 12, 1);
    }
}
