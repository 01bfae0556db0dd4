//! The persistence primitives over one mapping: the body of every
//! [`PmDevice`] method for real memory, whatever backs it.
//!
//! Statistics count what the caller asked for (bytes of `write_nt`, lines of
//! `flush`), not how the platform carried it out (cached head and tail
//! lines, no-op flushes on eADR), so write amplification reads the same on
//! every machine and on the crash simulator.

use std::sync::OnceLock;

use crate::atomic::{self, Wide};
use crate::flush::{self, FlushKind};
use crate::mapping::Mapping;
use crate::ntcopy::{self, NtWidth};
use crate::{check_range, lines_covered, PersistError, PmDevice, StatsCounter, WriteStats};
use crate::{MapError, CACHE_LINE};

/// A mapping plus the primitives chosen for it at map time.
pub(crate) struct Region {
    map: Mapping,
    size: u64,
    flush: FlushKind,
    nt: NtWidth,
    wide: Wide,
    stats: StatsCounter,
    /// Mapped without PROT_WRITE: stores are dropped and refused (a store
    /// to the mapping would be a SIGSEGV).
    read_only: bool,
    /// Why a persist failed; once set, every drain fails (a failed msync
    /// may have dropped dirty pages, so retrying could report success for
    /// data that is gone; a refused store never reached the pool).
    poison: OnceLock<PersistError>,
}

impl Region {
    /// A region over a mapping that takes stores.
    pub(crate) fn new(map: Mapping, size: u64, flush: FlushKind) -> Result<Region, MapError> {
        Region::with_access(map, size, flush, false)
    }

    /// A region over `map`; `read_only` when it was mapped without
    /// PROT_WRITE.
    pub(crate) fn with_access(
        map: Mapping,
        size: u64,
        flush: FlushKind,
        read_only: bool,
    ) -> Result<Region, MapError> {
        let wide = Wide::detect().ok_or(MapError::CpuUnsupported {
            missing: "a 16-byte atomic store (AVX or CMPXCHG16B)",
        })?;
        Ok(Region {
            map,
            size,
            flush,
            nt: NtWidth::detect(),
            wide,
            stats: StatsCounter::default(),
            read_only,
            poison: OnceLock::new(),
        })
    }

    /// Checks a store's range and says whether it may go ahead; on a
    /// read-only mapping it latches the refusal every later drain reports
    /// (the first one: it names the store to look for).
    pub(crate) fn may_store(&self, off: u64, len: u64) -> bool {
        check_range(self.size, off, len);
        if self.read_only {
            let _ = self.poison.set(PersistError::refused(format!(
                "the pool is mapped read-only: a store of {len} bytes at offset {off} was \
                 refused and the pool left as it was"
            )));
        }
        !self.read_only
    }

    pub(crate) fn flush_kind(&self) -> FlushKind {
        self.flush
    }

    pub(crate) fn nt_width(&self) -> NtWidth {
        self.nt
    }

    pub(crate) fn base_addr(&self) -> usize {
        self.map.as_ptr() as usize
    }

    /// Address of `off`; callers check the range first.
    fn at(&self, off: u64) -> *mut u8 {
        self.map.as_ptr().wrapping_add(off as usize)
    }

    /// Makes `[off, off + len)` reach the persistence domain (up to the next
    /// drain) without counting it: the shared step of `flush` and of the
    /// cached head and tail of non-temporal writes.
    pub(crate) fn write_back(&self, off: u64, len: u64) {
        match self.flush {
            FlushKind::Msync => {
                if let Err(err) = self.map.msync(off as usize, len as usize) {
                    // Only the first failure is kept: it is the one to act on.
                    let _ = self.poison.set(PersistError::media(format!(
                        "msync of pool bytes {off}..{} failed: {err}; written data may be lost, \
                         stop writing and check the underlying storage",
                        off + len
                    )));
                }
            }
            kind => {
                // SAFETY: the range was checked against the mapping, whose
                // start is page aligned; `kind` was validated at map time.
                unsafe { flush::flush_lines(kind, self.at(off), len as usize) }
            }
        }
    }

    /// Stores `src` (or zeros) over `[off, off + len)`: whole lines with
    /// streaming stores, partial head and tail lines through the cache plus
    /// a flush, so after a drain every byte is durable.
    fn fill_nt(&self, off: u64, len: u64, src: Option<&[u8]>) {
        if self.flush == FlushKind::Msync || self.nt == NtWidth::Cached {
            // Page-cache files gain nothing from bypassing the CPU cache:
            // msync writes the pages back either way.
            self.fill_cached(off, len, src);
            self.write_back(off, len);
            return;
        }
        let end = off + len;
        let line = CACHE_LINE;
        let head_end = off.next_multiple_of(line).min(end);
        let mid_end = (end / line * line).max(head_end);
        if head_end > off {
            self.fill_cached(off, head_end - off, src);
            self.write_back(off, head_end - off);
        }
        if mid_end > head_end {
            let src_mid = src.map(|s| s[(head_end - off) as usize..].as_ptr());
            // SAFETY: `[head_end, mid_end)` is inside the checked range and
            // made of whole aligned lines; `src_mid` has at least that many
            // bytes left and cannot overlap the mapping (it is borrowed
            // from the caller as a shared slice while we write the mapping
            // under the no-concurrent-access contract); `nt` was detected.
            unsafe {
                ntcopy::stream_lines(
                    self.nt,
                    self.at(head_end),
                    src_mid,
                    (mid_end - head_end) as usize,
                )
            }
        }
        if end > mid_end {
            let src_tail = src.map(|s| &s[(mid_end - off) as usize..]);
            self.fill_cached(mid_end, end - mid_end, src_tail);
            self.write_back(mid_end, end - mid_end);
        }
    }

    fn fill_cached(&self, off: u64, len: u64, src: Option<&[u8]>) {
        let dst = self.at(off);
        match src {
            // SAFETY: the destination range was checked against the mapping;
            // `s` holds at least `len` bytes and is not part of the mapping
            // region being written (device contract).
            Some(s) => unsafe { std::ptr::copy_nonoverlapping(s.as_ptr(), dst, len as usize) },
            // SAFETY: the destination range was checked against the mapping.
            None => unsafe { std::ptr::write_bytes(dst, 0, len as usize) },
        }
    }

    /// The words of `[off, off + len)` for load/store access, after the
    /// bounds check every access makes; whole aligned words only, so no
    /// access is split or unaligned.
    pub(crate) fn words(&self, off: u64, len: u64) -> *mut u64 {
        assert!(
            off.is_multiple_of(8) && len.is_multiple_of(8),
            "PM word access misaligned: off={off} len={len} need multiples of 8"
        );
        check_range(self.size, off, len);
        self.at(off).cast()
    }

    pub(crate) fn counter(&self) -> &StatsCounter {
        &self.stats
    }

    fn aligned_word(&self, off: u64, align: u64) -> *mut u8 {
        assert!(
            off.is_multiple_of(align),
            "PM atomic access misaligned: off={off} needs {align}-byte alignment"
        );
        check_range(self.size, off, align);
        self.at(off)
    }
}

impl PmDevice for Region {
    fn size(&self) -> u64 {
        self.size
    }

    fn read_only(&self) -> bool {
        self.read_only
    }

    fn read(&self, off: u64, buf: &mut [u8]) {
        check_range(self.size, off, buf.len() as u64);
        // SAFETY: the source range is inside the mapping; `buf` is a
        // distinct exclusive borrow.
        unsafe { std::ptr::copy_nonoverlapping(self.at(off), buf.as_mut_ptr(), buf.len()) }
    }

    fn write(&self, off: u64, data: &[u8]) {
        if !self.may_store(off, data.len() as u64) {
            return;
        }
        self.fill_cached(off, data.len() as u64, Some(data));
        self.stats.stored(data.len() as u64);
    }

    fn write_nt(&self, off: u64, data: &[u8]) {
        if !self.may_store(off, data.len() as u64) {
            return;
        }
        self.fill_nt(off, data.len() as u64, Some(data));
        self.stats.stored_nt(data.len() as u64);
    }

    fn zero_nt(&self, off: u64, len: u64) {
        if !self.may_store(off, len) {
            return;
        }
        self.fill_nt(off, len, None);
        self.stats.stored_nt(len);
    }

    fn populate(&self, off: u64, len: u64) {
        check_range(self.size, off, len);
        if !self.read_only {
            self.map.populate(off as usize, len as usize);
        }
    }

    fn prefetch(&self, off: u64, len: u64) {
        check_range(self.size, off, len);
        flush::prefetch_lines(self.at(off), len as usize);
    }

    fn load_u64(&self, off: u64) -> u64 {
        let p = self.aligned_word(off, 8);
        // SAFETY: aligned, inside the mapping, accessed atomically by others.
        unsafe { atomic::load_u64(p) }
    }

    fn store_u64(&self, off: u64, value: u64) {
        let p = self.aligned_word(off, 8);
        if !self.may_store(off, 8) {
            return;
        }
        // SAFETY: aligned, inside the mapping, accessed atomically by others.
        unsafe { atomic::store_u64(p, value) };
        self.stats.stored(8);
    }

    fn store_u128(&self, off: u64, value: u128) {
        let p = self.aligned_word(off, 16);
        if !self.may_store(off, 16) {
            return;
        }
        // SAFETY: 16-aligned, inside the mapping; `wide` detected on this CPU.
        unsafe { atomic::store_u128(self.wide, p, value) };
        self.stats.stored(16);
    }

    fn flush(&self, off: u64, len: u64) {
        check_range(self.size, off, len);
        if self.read_only {
            // Nothing was stored, so nothing is to be written back.
            return;
        }
        self.write_back(off, len);
        self.stats.flushed(lines_covered(off, len));
    }

    fn drain(&self) -> Result<(), PersistError> {
        flush::sfence();
        self.stats.fenced();
        match self.poison.get() {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    fn stats(&self) -> WriteStats {
        self.stats.snapshot()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mapping::HUGE_PAGE;

    #[test]
    fn a_failed_msync_fails_every_later_drain() {
        let map = Mapping::map(None, 1 << 16, HUGE_PAGE, libc::MAP_PRIVATE).unwrap();
        let region = Region::new(map, 1 << 16, FlushKind::Msync).unwrap();
        region.write_persist(0, &[1; 64]).unwrap();
        // A real msync failure (EIO from the disk) cannot be provoked here,
        // so latch the poison the way `write_back` does.
        region
            .poison
            .set(PersistError::media("msync failed: EIO"))
            .unwrap();
        for _ in 0..3 {
            let err = region.drain().unwrap_err();
            assert!(err.reason.contains("EIO"), "{err}");
        }
    }
}
