//! The device the file system runs on under the crash simulator: it behaves
//! like PM for the program (reads see every store at once) while tracking
//! which stores a crash could still lose, line by line.

use crate::crash_point::{CrashPoint, PendingLine};
use crate::record::{PendingStores, StoreRecord};
use crate::span::{line_range, pieces};
use crate::LINE_BYTES;
use amber_pmem::{check_range, lines_covered, PersistError, PmDevice, StatsCounter, WriteStats};
use parking_lot::{Mutex, ReentrantMutex};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Called at the start of every drain with the state a crash there leaves.
pub type FenceHook = Box<dyn FnMut(&CrashPoint) + Send>;

/// Upper bound on store records pending across the device. Each costs about
/// 70 bytes, so this caps the model at a few hundred MiB; a workload that
/// stores this much without a fence is not one the enumerator could cover
/// anyway, so exceeding it is reported rather than silently degraded.
pub const MAX_PENDING_RECORDS: usize = 1 << 22;

/// Where a store's bytes come from; zeroing needs no buffer of zeros.
#[derive(Clone, Copy)]
enum Source<'a> {
    Data(&'a [u8]),
    Zeros,
}

struct State {
    /// What the program sees: durable plus every pending record.
    current: Vec<u8>,
    /// In an `Arc` so a crash point shares it; `Arc::make_mut` copies it
    /// only while a hook still holds an older snapshot.
    durable: Arc<Vec<u8>>,
    pending: BTreeMap<u64, PendingStores>,
    /// Lines with a flushed prefix, so a fence touches only those.
    flushed_lines: BTreeSet<u64>,
    pending_records: usize,
    /// Drains started so far; the next drain's crash point gets this number.
    fences: u64,
    /// Drains left before the injected failure (1 = the next one).
    fail_countdown: Option<u64>,
    poisoned: bool,
}

impl State {
    fn store(&mut self, off: u64, len: u64, src: Source<'_>, nt: bool) {
        let range = off as usize..(off + len) as usize;
        match src {
            Source::Data(data) => self.current[range].copy_from_slice(data),
            Source::Zeros => self.current[range].fill(0),
        }
        let zeros = [0u8; LINE_BYTES];
        for piece in pieces(off, len) {
            let bytes = match src {
                Source::Data(data) => &data[piece.src.clone()],
                Source::Zeros => &zeros[..piece.src.len()],
            };
            let record = StoreRecord::new(piece.in_line, bytes);
            self.pending.entry(piece.line).or_default().push(record, nt);
            if nt {
                self.flushed_lines.insert(piece.line);
            }
            self.pending_records += 1;
            assert!(
                self.pending_records <= MAX_PENDING_RECORDS,
                "more than {MAX_PENDING_RECORDS} stores pending without a fence"
            );
        }
    }

    fn flush(&mut self, off: u64, len: u64) {
        if len == 0 {
            return;
        }
        let first = off / LINE_BYTES as u64;
        let last = (off + len - 1) / LINE_BYTES as u64;
        for (line, stores) in self.pending.range_mut(first..=last) {
            if stores.flush() {
                self.flushed_lines.insert(*line);
            }
        }
    }

    fn apply_flushed(&mut self) {
        let lines = std::mem::take(&mut self.flushed_lines);
        if lines.is_empty() {
            return;
        }
        let durable = Arc::make_mut(&mut self.durable);
        for line in lines {
            let stores = self
                .pending
                .get_mut(&line)
                .expect("a flushed line has pending stores");
            let applied = stores.apply_flushed(&mut durable[line_range(line)]);
            assert!(applied > 0 && applied <= self.pending_records);
            self.pending_records -= applied;
            if stores.is_empty() {
                self.pending.remove(&line);
            }
        }
    }

    fn crash_point(&self, fence: u64) -> CrashPoint {
        let lines = self
            .pending
            .iter()
            .map(|(line, stores)| {
                PendingLine::new(*line, stores.prefixes(&self.durable[line_range(*line)]))
            })
            .collect();
        CrashPoint::new(fence, Arc::clone(&self.durable), lines)
    }
}

/// A [`PmDevice`] that records stores, flushes and fences in Vinter's
/// per-line model and can report, at every fence, what a crash would leave.
pub struct RecordingDevice {
    size: u64,
    state: Mutex<State>,
    /// Separate from `state` so the hook runs without the device lock and may
    /// read the device; reentrant + `RefCell` so a hook that drains this
    /// device panics with a message instead of deadlocking.
    hook: ReentrantMutex<RefCell<Option<FenceHook>>>,
    hook_present: AtomicBool,
    hook_armed: AtomicBool,
    stats: StatsCounter,
}

impl RecordingDevice {
    /// A zeroed pool of `size` bytes, all of it durable.
    ///
    /// # Panics
    /// If `size` is not a multiple of the cache line, as for
    /// [`RecordingDevice::from_image`].
    pub fn new(size: u64) -> Self {
        Self::from_image(vec![
            0u8;
            usize::try_from(size).expect("pool fits in memory")
        ])
    }

    /// A pool whose durable and visible contents are `image`, e.g. a crash
    /// image saved by a failing test.
    ///
    /// # Panics
    /// If the image is not whole cache lines (crash images are built from
    /// whole lines).
    pub fn from_image(image: Vec<u8>) -> Self {
        assert_eq!(
            image.len() % LINE_BYTES,
            0,
            "pool size must be whole cache lines"
        );
        RecordingDevice {
            size: image.len() as u64,
            state: Mutex::new(State {
                current: image.clone(),
                durable: Arc::new(image),
                pending: BTreeMap::new(),
                flushed_lines: BTreeSet::new(),
                pending_records: 0,
                fences: 0,
                fail_countdown: None,
                poisoned: false,
            }),
            hook: ReentrantMutex::new(RefCell::new(None)),
            hook_present: AtomicBool::new(false),
            hook_armed: AtomicBool::new(false),
            stats: StatsCounter::default(),
        }
    }

    /// The image if the machine crashed now and no pending store persisted.
    pub fn durable_image(&self) -> Vec<u8> {
        self.state.lock().durable.as_ref().clone()
    }

    /// The durable image without copying it (shared until the next fence
    /// that changes it), to build overlays from.
    pub fn durable_shared(&self) -> Arc<Vec<u8>> {
        Arc::clone(&self.state.lock().durable)
    }

    /// The image the program sees, which is also the image if every pending
    /// store persisted.
    pub fn current_image(&self) -> Vec<u8> {
        self.state.lock().current.clone()
    }

    /// Lines with stores a crash could still lose.
    pub fn pending_lines(&self) -> usize {
        self.state.lock().pending.len()
    }

    /// Store records not yet durable, across all lines.
    pub fn pending_records(&self) -> usize {
        self.state.lock().pending_records
    }

    /// Drains started so far.
    pub fn fences(&self) -> u64 {
        self.state.lock().fences
    }

    /// Whether a failed drain has poisoned the device.
    pub fn is_poisoned(&self) -> bool {
        self.state.lock().poisoned
    }

    /// What a crash right now would leave, numbered like the next drain. For
    /// the crash states after the last fence of an operation, which no drain
    /// hook sees.
    pub fn crash_point(&self) -> CrashPoint {
        let st = self.state.lock();
        st.crash_point(st.fences)
    }

    /// Installs (or removes) the hook run at the start of every drain while
    /// armed. Must not be called from inside the hook.
    pub fn set_fence_hook(&self, hook: Option<FenceHook>) {
        let guard = self.hook.lock();
        let mut slot = guard
            .try_borrow_mut()
            .expect("set_fence_hook called from inside the fence hook");
        self.hook_present.store(hook.is_some(), Ordering::SeqCst);
        *slot = hook;
    }

    /// Arms or disarms the hook. Disarmed drains skip the snapshot, so setup
    /// and verification run at full speed and only the operation under test
    /// pays for crash points.
    pub fn arm_fence_hook(&self, armed: bool) {
        self.hook_armed.store(armed, Ordering::SeqCst);
    }

    /// Makes the `n`-th drain from now (1 = the next) fail and poison the
    /// device, so every later drain fails too: the core uses it to check that
    /// it stops writing after a failed persist.
    ///
    /// # Panics
    /// If `n` is 0 (there is no zeroth drain from now).
    pub fn fail_drain_after(&self, n: u64) {
        assert!(n >= 1, "fail_drain_after counts from 1");
        self.state.lock().fail_countdown = Some(n);
    }

    fn run_hook(&self, point: &CrashPoint) {
        let guard = self.hook.lock();
        let mut slot = guard
            .try_borrow_mut()
            .expect("the fence hook drained the device it observes");
        if let Some(hook) = slot.as_mut() {
            hook(point);
        }
    }
}

impl PmDevice for RecordingDevice {
    fn size(&self) -> u64 {
        self.size
    }

    fn read(&self, off: u64, buf: &mut [u8]) {
        check_range(self.size, off, buf.len() as u64);
        let st = self.state.lock();
        buf.copy_from_slice(&st.current[off as usize..off as usize + buf.len()]);
    }

    fn write(&self, off: u64, data: &[u8]) {
        check_range(self.size, off, data.len() as u64);
        self.stats.stored(data.len() as u64);
        self.state
            .lock()
            .store(off, data.len() as u64, Source::Data(data), false);
    }

    fn write_nt(&self, off: u64, data: &[u8]) {
        check_range(self.size, off, data.len() as u64);
        self.stats.stored_nt(data.len() as u64);
        self.state
            .lock()
            .store(off, data.len() as u64, Source::Data(data), true);
    }

    fn zero_nt(&self, off: u64, len: u64) {
        check_range(self.size, off, len);
        self.stats.stored_nt(len);
        self.state.lock().store(off, len, Source::Zeros, true);
    }

    fn load_u64(&self, off: u64) -> u64 {
        assert_eq!(off % 8, 0, "unaligned atomic load at {off}");
        let mut bytes = [0u8; 8];
        self.read(off, &mut bytes);
        u64::from_le_bytes(bytes)
    }

    /// Little-endian, as on the x86 hosts real PM lives on; one record, so a
    /// crash never tears it.
    fn store_u64(&self, off: u64, value: u64) {
        assert_eq!(off % 8, 0, "unaligned atomic store at {off}");
        self.write(off, &value.to_le_bytes());
    }

    fn store_u128(&self, off: u64, value: u128) {
        assert_eq!(off % 16, 0, "unaligned atomic store at {off}");
        self.write(off, &value.to_le_bytes());
    }

    fn flush(&self, off: u64, len: u64) {
        check_range(self.size, off, len);
        self.stats.flushed(lines_covered(off, len));
        self.state.lock().flush(off, len);
    }

    /// The crash point is taken and the hook run before the fence takes
    /// effect, with the device unlocked in between: the hook sees the last
    /// moment at which this fence's stores could still be lost.
    fn drain(&self) -> Result<(), PersistError> {
        self.stats.fenced();
        let hooked =
            self.hook_armed.load(Ordering::SeqCst) && self.hook_present.load(Ordering::SeqCst);
        let point = {
            let mut st = self.state.lock();
            let fence = st.fences;
            st.fences += 1;
            hooked.then(|| st.crash_point(fence))
        };
        if let Some(point) = point {
            self.run_hook(&point);
        }
        let mut st = self.state.lock();
        if st.poisoned {
            return Err(PersistError::media(
                "an earlier persist failed; the device is poisoned",
            ));
        }
        if let Some(left) = st.fail_countdown {
            if left <= 1 {
                st.fail_countdown = None;
                st.poisoned = true;
                return Err(PersistError::media(
                    "injected drain failure (fail_drain_after)",
                ));
            }
            st.fail_countdown = Some(left - 1);
        }
        st.apply_flushed();
        Ok(())
    }

    fn stats(&self) -> WriteStats {
        self.stats.snapshot()
    }
}
