//! [`DramOverlay`]: a device whose stores stay in DRAM, over one that is
//! only read.
//!
//! Salvaging a pool must never write it, yet the core's recovery (journal
//! replay, the split layout's chain rewrite, clearing stale zone
//! descriptors) works by storing to the device. Over an overlay it runs
//! unchanged: each page it stores to is copied into DRAM first, and reads
//! see those pages over the pool, so the recovered view exists in this
//! process alone and the pool stays byte for byte as it was. Nothing here
//! can be lost, so flush and drain only count, except that the overlay's
//! DRAM is bounded: a store that would pass the bound is refused like a
//! store to a read-only mapping.

use std::collections::HashMap;

use parking_lot::Mutex;

use crate::{check_range, lines_covered, PersistError, PmDevice, StatsCounter, WriteStats};

/// Bytes per overlay page.
const PAGE: u64 = 4096;

/// `inner` with a DRAM copy of every page stored to.
pub struct DramOverlay<D> {
    inner: D,
    state: Mutex<State>,
    limit_bytes: u64,
    stats: StatsCounter,
}

#[derive(Default)]
struct State {
    pages: HashMap<u64, Box<[u8]>>,
    /// The first store refused for want of room; every later drain fails
    /// with it until [`DramOverlay::discard`].
    refused: Option<PersistError>,
}

impl<D: PmDevice> DramOverlay<D> {
    /// An overlay over `inner` holding at most `limit_bytes` of copied
    /// pages.
    pub fn new(inner: D, limit_bytes: u64) -> DramOverlay<D> {
        DramOverlay {
            inner,
            state: Mutex::new(State::default()),
            limit_bytes,
            stats: StatsCounter::default(),
        }
    }

    /// The device underneath, which nothing here writes.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// Bytes of DRAM the copied pages take.
    pub fn overlay_bytes(&self) -> u64 {
        self.state.lock().pages.len() as u64 * PAGE
    }

    /// Drops every stored page (and a refusal): reads see the device
    /// underneath again.
    pub fn discard(&self) {
        *self.state.lock() = State::default();
    }

    /// Copies `data` into the overlay's pages at `off`, copying each page
    /// from the device first; refuses the whole store if a page would
    /// pass the limit.
    fn store(&self, off: u64, data: &[u8]) {
        check_range(self.size(), off, data.len() as u64);
        if data.is_empty() {
            return;
        }
        let mut st = self.state.lock();
        let end = off + data.len() as u64;
        let first = off / PAGE;
        let last = (end - 1) / PAGE;
        let fresh = (first..=last).filter(|p| !st.pages.contains_key(p)).count() as u64;
        if (st.pages.len() as u64 + fresh) * PAGE > self.limit_bytes {
            st.refused.get_or_insert_with(|| {
                PersistError::refused(format!(
                    "the DRAM overlay holds its limit of {} bytes; a store of {} bytes at \
                     offset {off} was refused",
                    self.limit_bytes,
                    data.len()
                ))
            });
            return;
        }
        for page in first..=last {
            let base = page * PAGE;
            let bytes = st.pages.entry(page).or_insert_with(|| {
                let len = PAGE.min(self.size() - base) as usize;
                let mut copy = vec![0u8; len].into_boxed_slice();
                self.inner.read(base, &mut copy);
                copy
            });
            let from = off.max(base);
            let to = end.min(base + bytes.len() as u64);
            bytes[(from - base) as usize..(to - base) as usize]
                .copy_from_slice(&data[(from - off) as usize..(to - off) as usize]);
        }
    }
}

impl<D: PmDevice> PmDevice for DramOverlay<D> {
    fn size(&self) -> u64 {
        self.inner.size()
    }

    fn read(&self, off: u64, buf: &mut [u8]) {
        check_range(self.size(), off, buf.len() as u64);
        self.inner.read(off, buf);
        if buf.is_empty() {
            return;
        }
        let st = self.state.lock();
        if st.pages.is_empty() {
            return;
        }
        let end = off + buf.len() as u64;
        for page in off / PAGE..=(end - 1) / PAGE {
            let Some(bytes) = st.pages.get(&page) else {
                continue;
            };
            let base = page * PAGE;
            let from = off.max(base);
            let to = end.min(base + bytes.len() as u64);
            buf[(from - off) as usize..(to - off) as usize]
                .copy_from_slice(&bytes[(from - base) as usize..(to - base) as usize]);
        }
    }

    fn write(&self, off: u64, data: &[u8]) {
        self.stats.stored(data.len() as u64);
        self.store(off, data);
    }

    fn write_nt(&self, off: u64, data: &[u8]) {
        self.stats.stored_nt(data.len() as u64);
        self.store(off, data);
    }

    fn zero_nt(&self, off: u64, len: u64) {
        check_range(self.size(), off, len);
        self.stats.stored_nt(len);
        let zeros = [0u8; PAGE as usize];
        let mut at = off;
        while at < off + len {
            let n = (off + len - at).min(PAGE);
            self.store(at, &zeros[..n as usize]);
            at += n;
        }
    }

    fn load_u64(&self, off: u64) -> u64 {
        assert_eq!(off % 8, 0, "unaligned atomic load at {off}");
        let mut bytes = [0u8; 8];
        self.read(off, &mut bytes);
        u64::from_le_bytes(bytes)
    }

    fn store_u64(&self, off: u64, value: u64) {
        assert_eq!(off % 8, 0, "unaligned atomic store at {off}");
        self.write(off, &value.to_le_bytes());
    }

    fn store_u128(&self, off: u64, value: u128) {
        assert_eq!(off % 16, 0, "unaligned atomic store at {off}");
        self.write(off, &value.to_le_bytes());
    }

    fn flush(&self, off: u64, len: u64) {
        check_range(self.size(), off, len);
        self.stats.flushed(lines_covered(off, len));
    }

    fn drain(&self) -> Result<(), PersistError> {
        self.stats.fenced();
        match &self.state.lock().refused {
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
    use crate::{MapOptions, MmapDevice, PersistErrorKind};

    fn base() -> MmapDevice {
        let dev = MmapDevice::anonymous(1 << 16, &MapOptions::default()).unwrap();
        dev.write(0, &[7u8; 1 << 16]);
        dev
    }

    #[test]
    fn stores_land_in_dram_and_reads_see_them() {
        let o = DramOverlay::new(base(), 1 << 20);
        o.write(4090, &[1u8; 12]);
        o.store_u64(8192, 0xabcd);
        o.zero_nt(10_000, 5000);
        o.drain().unwrap();
        let mut buf = vec![0u8; 16];
        o.read(4086, &mut buf);
        assert_eq!(&buf[..4], &[7; 4]);
        assert_eq!(&buf[4..], &[1; 12]);
        assert_eq!(o.load_u64(8192), 0xabcd);
        let mut z = vec![9u8; 5000];
        o.read(10_000, &mut z);
        assert!(z.iter().all(|&b| b == 0));
        let mut under = [0u8; 12];
        o.inner().read(4090, &mut under);
        assert_eq!(under, [7; 12], "the device underneath was written");
        assert_eq!(o.overlay_bytes(), 4 * PAGE);
        o.discard();
        assert_eq!(o.load_u64(8192), u64::from_le_bytes([7; 8]));
    }

    #[test]
    fn a_store_past_the_limit_is_refused_and_reported_by_drain() {
        let o = DramOverlay::new(base(), 2 * PAGE);
        o.write(0, &[1u8; 8192]);
        o.drain().unwrap();
        o.write(8192, &[2u8; 1]);
        let err = o.drain().unwrap_err();
        assert_eq!(err.kind, PersistErrorKind::Refused);
        assert!(err.reason.contains("limit"), "{err}");
        let mut b = [0u8; 1];
        o.read(8192, &mut b);
        assert_eq!(b, [7], "a refused store was applied");
    }
}
