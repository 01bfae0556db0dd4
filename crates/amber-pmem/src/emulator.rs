//! A device wrapper that makes DRAM (or tmpfs) write like slower media.
//!
//! Real PM is rarely available to developers or CI, and its cost profile is
//! what Amber's design trades against, so benchmarks wrap a DRAM-backed
//! device in [`Emulated`] with the costs of the media they study, as HiNFS
//! and others did. Reads are passed through unchanged: the file system's
//! write path is what the emulated costs are meant to stress.
//!
//! A store or a flush only notes what it owes; the thread pays at its next
//! fence, in one wait, as a CPU's flushes and non-temporal stores run on
//! while it works and its fence waits for them. Waiting at every store
//! and flush read the clock two or three times each (35 ns a read on this
//! VM) and took the shared bandwidth with a compare-and-swap each time: a
//! cost of the emulator's, not of the media, that fell hardest on designs
//! that persist a few lines at a time (`cargo run --release -p amber-pmem
//! --example emulator_cost`: 337-353 ns beyond the modelled cost per
//! small persist before, 148-171 ns now).

mod bucket;
mod spec;
mod spin;

pub use spec::{EmulatorSpec, Per, SpecError};

use crate::{lines_covered, PersistError, PmDevice, PoolPages, WriteStats};
use bucket::TokenBucket;
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// Most latency a thread may owe before it pays without a fence (1 ms): a
/// long run of stores waits along the way, as it would on the media.
const MAX_OWED_NS: u64 = 1_000_000;

/// Most bytes a thread may owe before it pays without a fence: one
/// block. The bandwidth is reserved when a thread pays, so a long burst
/// (a write-back) reserves it a block at a time and other threads' writes
/// interleave, as on the media; owing 1 MiB held the shared bucket for a
/// millisecond ahead of everyone (lawn/nova 7.4x in a seeds run, against
/// 8.0-8.3x in three rounds with this bound).
const MAX_OWED_BYTES: u64 = 4096;

/// Most of a wait's lateness taken off the next one: a few clock reads'
/// worth, never a stretch the thread spent descheduled.
const MAX_LATE_NS: u64 = 200;

/// What a thread owes one device since its last fence there.
#[derive(Clone, Copy)]
struct Owed {
    /// The device (`Emulated::id`); 0 for none.
    device: u64,
    /// Bytes for the bandwidth limit.
    bytes: u64,
    /// Latency of the lines written back.
    ns: u64,
    /// How far past its deadline the thread's last wait ended (at most
    /// `MAX_LATE_NS`): the next wait is that much shorter, so the waits
    /// add up to the modelled cost rather than to it plus the clock's.
    late_ns: u64,
}

const NOTHING_OWED: Owed = Owed {
    device: 0,
    bytes: 0,
    ns: 0,
    late_ns: 0,
};

thread_local! {
    static OWED: Cell<Owed> = const { Cell::new(NOTHING_OWED) };
}

/// Numbers the emulated devices, so a thread's debt is paid to its own.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// `D` with the write latency and bandwidth of `spec` added.
pub struct Emulated<D> {
    inner: D,
    spec: EmulatorSpec,
    bucket: Option<TokenBucket>,
    id: u64,
}

impl<D: PmDevice> Emulated<D> {
    /// Wraps `inner`; its statistics stay the statistics of the wrapper.
    pub fn new(inner: D, spec: EmulatorSpec) -> Emulated<D> {
        Emulated {
            inner,
            spec,
            bucket: spec.bandwidth_bytes_per_sec.map(TokenBucket::new),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
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

    /// Notes that this thread's last store or flush costs `bytes` of
    /// bandwidth and `lines` written back; paid at its next fence (or at
    /// once past `MAX_OWED_*`). A debt left on another device by a
    /// thread that never fenced there is dropped: nothing it wrote was
    /// made durable.
    fn owe(&self, bytes: u64, lines: u64) {
        let bytes = if self.bucket.is_some() { bytes } else { 0 };
        let ns = match self.spec.per {
            Per::Line => lines.saturating_mul(self.spec.latency_ns),
            Per::Fence => 0,
        };
        if bytes == 0 && ns == 0 {
            return;
        }
        let mut o = OWED.with(Cell::get);
        if o.device != self.id {
            o = Owed {
                device: self.id,
                late_ns: o.late_ns,
                ..NOTHING_OWED
            };
        }
        o.bytes = o.bytes.saturating_add(bytes);
        o.ns = o.ns.saturating_add(ns);
        OWED.with(|c| c.set(o));
        if o.ns > MAX_OWED_NS || o.bytes > MAX_OWED_BYTES {
            self.pay(0);
        }
    }

    /// Waits for what this thread owes this device, plus `extra_ns`: the
    /// bandwidth reserved first, then the latency after it, less how late
    /// the thread's last wait ended.
    fn pay(&self, extra_ns: u64) {
        let o = OWED.with(Cell::get);
        let (bytes, ns) = if o.device == self.id {
            (o.bytes, o.ns.saturating_add(extra_ns))
        } else {
            (0, extra_ns)
        };
        if bytes == 0 && ns == 0 {
            return;
        }
        let now = spin::now_ns();
        let start = match &self.bucket {
            Some(b) if bytes > 0 => b.reserve(bytes, now).max(now),
            _ => now,
        };
        let deadline = start.saturating_add(ns.saturating_sub(o.late_ns));
        let late = spin::until(deadline) - deadline;
        OWED.with(|c| {
            c.set(Owed {
                late_ns: late.min(MAX_LATE_NS),
                ..NOTHING_OWED
            });
        });
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
        self.owe(data.len() as u64, 0);
    }

    /// Non-temporal stores are write-backs too, so each line they touch pays
    /// the per-line latency a flushed line would.
    fn write_nt(&self, off: u64, data: &[u8]) {
        self.inner.write_nt(off, data);
        let n = data.len() as u64;
        self.owe(n, lines_covered(off, n));
    }

    fn zero_nt(&self, off: u64, len: u64) {
        self.inner.zero_nt(off, len);
        self.owe(len, lines_covered(off, len));
    }

    fn load_u64(&self, off: u64) -> u64 {
        self.inner.load_u64(off)
    }

    fn store_u64(&self, off: u64, value: u64) {
        self.inner.store_u64(off, value);
        self.owe(8, 0);
    }

    fn store_u128(&self, off: u64, value: u128) {
        self.inner.store_u128(off, value);
        self.owe(16, 0);
    }

    fn flush(&self, off: u64, len: u64) {
        self.inner.flush(off, len);
        self.owe(0, lines_covered(off, len));
    }

    fn drain(&self) -> Result<(), PersistError> {
        let result = self.inner.drain();
        self.pay(match self.spec.per {
            Per::Fence => self.spec.latency_ns,
            Per::Line => 0,
        });
        result
    }

    fn stats(&self) -> WriteStats {
        self.inner.stats()
    }

    fn populate(&self, off: u64, len: u64) {
        self.inner.populate(off, len)
    }

    fn prefetch(&self, off: u64, len: u64) {
        self.inner.prefetch(off, len)
    }

    /// Stores through a window bypass the emulator: they cost what the
    /// DRAM under it costs (README, "Mapped files").
    fn pages(&self) -> Option<&PoolPages> {
        self.inner.pages()
    }
}
