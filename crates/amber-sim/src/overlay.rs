//! Crash images as copy-on-write deltas over one shared base, so building an
//! image costs its changed lines, not the pool: copying an 8 MiB image per
//! crash state drops a checker from ~17k to ~350 images/s.

use crate::crash_point::CrashPoint;
use crate::enumerate::CrashImage;
use crate::span::{line_range, pieces};
use crate::{Line, LINE_BYTES};
use amber_pmem::{check_range, lines_covered, PersistError, PmDevice, StatsCounter, WriteStats};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A [`PmDevice`] whose contents are a shared base image plus a sparse set of
/// replaced lines. Recovery runs on it like on any device; its writes go to
/// the delta, so the base (shared by every image of a fence) never changes.
/// Nothing here can be lost, so flush and drain only count.
pub struct OverlayDevice {
    base: Arc<Vec<u8>>,
    /// Ordered so a read can copy the base wholesale and then patch only the
    /// replaced lines inside its range.
    delta: Mutex<BTreeMap<u64, Line>>,
    stats: StatsCounter,
}

impl OverlayDevice {
    /// The base image itself, with no line replaced.
    ///
    /// # Panics
    /// If the base is not whole cache lines.
    pub fn new(base: Arc<Vec<u8>>) -> Self {
        assert_eq!(
            base.len() % LINE_BYTES,
            0,
            "pool size must be whole cache lines"
        );
        OverlayDevice {
            base,
            delta: Mutex::new(BTreeMap::new()),
            stats: StatsCounter::default(),
        }
    }

    /// The base with `lines` (index, content) replaced; later entries win.
    pub fn with_lines(base: Arc<Vec<u8>>, lines: impl IntoIterator<Item = (u64, Line)>) -> Self {
        let dev = Self::new(base);
        let line_count = dev.base.len() / LINE_BYTES;
        {
            let mut delta = dev.delta.lock();
            for (line, content) in lines {
                assert!((line as usize) < line_count, "line {line} outside the pool");
                delta.insert(line, content);
            }
        }
        dev
    }

    /// The device a crash at `point` leaves when `image` is what persisted.
    pub fn from_crash(point: &CrashPoint, image: &CrashImage) -> Self {
        Self::with_lines(
            Arc::clone(point.durable()),
            image.lines(point).map(|(line, content)| (line, *content)),
        )
    }

    /// The shared base, unchanged by anything written to this device.
    pub fn base(&self) -> &Arc<Vec<u8>> {
        &self.base
    }

    /// Lines that differ from the base (replaced or written).
    pub fn delta_lines(&self) -> usize {
        self.delta.lock().len()
    }

    /// A full copy of the contents, to save a failing image for replay with
    /// `RecordingDevice::from_image`.
    pub fn to_image(&self) -> Vec<u8> {
        let mut image = self.base.as_ref().clone();
        for (line, content) in self.delta.lock().iter() {
            image[line_range(*line)].copy_from_slice(content);
        }
        image
    }

    fn store(&self, off: u64, data: &[u8]) {
        check_range(self.size(), off, data.len() as u64);
        let mut delta = self.delta.lock();
        for piece in pieces(off, data.len() as u64) {
            let line = delta.entry(piece.line).or_insert_with(|| {
                let mut fresh = [0u8; LINE_BYTES];
                fresh.copy_from_slice(&self.base[line_range(piece.line)]);
                fresh
            });
            line[piece.in_line..piece.in_line + piece.src.len()].copy_from_slice(&data[piece.src]);
        }
    }
}

impl PmDevice for OverlayDevice {
    fn size(&self) -> u64 {
        self.base.len() as u64
    }

    fn read(&self, off: u64, buf: &mut [u8]) {
        let len = buf.len() as u64;
        check_range(self.size(), off, len);
        let start = off as usize;
        buf.copy_from_slice(&self.base[start..start + buf.len()]);
        if len == 0 {
            return;
        }
        let first = off / LINE_BYTES as u64;
        let last = (off + len - 1) / LINE_BYTES as u64;
        let delta = self.delta.lock();
        for (line, content) in delta.range(first..=last) {
            let line_start = line_range(*line).start;
            let from = start.max(line_start);
            let to = (start + buf.len()).min(line_start + LINE_BYTES);
            buf[from - start..to - start]
                .copy_from_slice(&content[from - line_start..to - line_start]);
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
        let zeros = [0u8; LINE_BYTES];
        for piece in pieces(off, len) {
            self.store(off + piece.src.start as u64, &zeros[..piece.src.len()]);
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
        Ok(())
    }

    fn stats(&self) -> WriteStats {
        self.stats.snapshot()
    }
}
