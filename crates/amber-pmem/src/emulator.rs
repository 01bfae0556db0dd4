//! A device wrapper that makes DRAM (or tmpfs) write like slower media.
//!
//! Real PM is rarely available to developers or CI, and its cost profile is
//! what Amber's design trades against, so benchmarks wrap a DRAM-backed
//! device in [`Emulated`] with the costs of the media they study, as HiNFS
//! and others did. Reads are passed through unchanged: the file system's
//! write path is what the emulated costs are meant to stress.

mod bucket;
mod spec;
mod spin;

pub use spec::{EmulatorSpec, Per, SpecError};

use crate::{lines_covered, PersistError, PmDevice, WriteStats};
use bucket::TokenBucket;

/// `D` with the write latency and bandwidth of `spec` added.
pub struct Emulated<D> {
    inner: D,
    spec: EmulatorSpec,
    bucket: Option<TokenBucket>,
}

impl<D: PmDevice> Emulated<D> {
    /// Wraps `inner`; its statistics stay the statistics of the wrapper.
    pub fn new(inner: D, spec: EmulatorSpec) -> Emulated<D> {
        Emulated {
            inner,
            spec,
            bucket: spec.bandwidth_bytes_per_sec.map(TokenBucket::new),
        }
    }

    /// The costs being applied.
    pub fn spec(&self) -> &EmulatorSpec {
        &self.spec
    }

    /// The wrapped device.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// Unwraps the device, dropping the emulated costs.
    pub fn into_inner(self) -> D {
        self.inner
    }

    fn charge_bytes(&self, bytes: u64) {
        if let Some(bucket) = &self.bucket {
            bucket.take(bytes);
        }
    }

    fn charge_lines(&self, lines: u64) {
        if self.spec.per == Per::Line {
            spin::for_ns(lines.saturating_mul(self.spec.latency_ns));
        }
    }
}

impl<D: PmDevice> PmDevice for Emulated<D> {
    fn size(&self) -> u64 {
        self.inner.size()
    }

    fn read_only(&self) -> bool {
        self.inner.read_only()
    }

    fn read(&self, off: u64, buf: &mut [u8]) {
        self.inner.read(off, buf)
    }

    fn write(&self, off: u64, data: &[u8]) {
        self.inner.write(off, data);
        self.charge_bytes(data.len() as u64);
    }

    /// Non-temporal stores are write-backs too, so each line they touch pays
    /// the per-line latency a flushed line would.
    fn write_nt(&self, off: u64, data: &[u8]) {
        self.inner.write_nt(off, data);
        self.charge_bytes(data.len() as u64);
        self.charge_lines(lines_covered(off, data.len() as u64));
    }

    fn zero_nt(&self, off: u64, len: u64) {
        self.inner.zero_nt(off, len);
        self.charge_bytes(len);
        self.charge_lines(lines_covered(off, len));
    }

    fn load_u64(&self, off: u64) -> u64 {
        self.inner.load_u64(off)
    }

    fn store_u64(&self, off: u64, value: u64) {
        self.inner.store_u64(off, value);
        self.charge_bytes(8);
    }

    fn store_u128(&self, off: u64, value: u128) {
        self.inner.store_u128(off, value);
        self.charge_bytes(16);
    }

    fn flush(&self, off: u64, len: u64) {
        self.inner.flush(off, len);
        self.charge_lines(lines_covered(off, len));
    }

    fn drain(&self) -> Result<(), PersistError> {
        let result = self.inner.drain();
        if self.spec.per == Per::Fence {
            spin::for_ns(self.spec.latency_ns);
        }
        result
    }

    fn stats(&self) -> WriteStats {
        self.inner.stats()
    }
}
