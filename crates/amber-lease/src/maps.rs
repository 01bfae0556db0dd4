//! A client's map leases (design.md §17.14): a program's `MAP_SHARED`
//! mapping of a file on the mount, made by the kernel, whose pages for
//! the file's blocks below the end of file are then the pool's own (the
//! pool file mapped again at each run's offset, `Window::map_pool`), so
//! every client mapping the file shares one set of pages and its stores
//! reach PM with no copy. The daemon pins those blocks while the lease
//! holds. When it ends before the program unmaps — recalled, returned
//! before a munmap, mremap, mprotect or fork, or the daemon gone — the
//! window's pages become the kernel's mapping of the file again, the
//! same bytes through the page cache, before the daemon may move a block:
//! the kernel's mapping is kept aside in a shadow range from the start
//! (`Window::duplicate_into`) and moved back over the window
//! (`Window::move_into`), which needs no descriptor — the lease thread,
//! which answers recalls, has none of the program's.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use amber_core::Run;
use amber_pmem::{PoolPages, Window};
use parking_lot::Mutex;

const BLOCK: u64 = amber_format::BLOCK_SIZE;

/// Most mappings shown from the pool at once; more are the kernel's.
pub const MAX_MAPPED: usize = 4096;

/// One mapping under (or asking for) a map lease.
pub struct MapWin {
    ino: u64,
    /// The program's mapping.
    window: Window,
    /// The kernel's mapping of the same range of the file, kept aside.
    shadow: Window,
    /// The file offset the mapping starts at (a multiple of a block).
    off: u64,
    prot: i32,
}

impl MapWin {
    /// The program's new mapping `window` of inode `ino` from byte `off`,
    /// with protection `prot`, its kernel pages duplicated into a shadow
    /// range; the window back if that cannot be made.
    pub fn new(ino: u64, window: Window, off: u64, prot: i32) -> Result<MapWin, Window> {
        let Ok(shadow) = Window::reserve(window.len(), 0) else {
            return Err(window);
        };
        if window.duplicate_into(&shadow).is_err() {
            drop(shadow);
            return Err(window);
        }
        Ok(MapWin {
            ino,
            window,
            shadow,
            off,
            prot,
        })
    }

    /// The file's blocks the mapping spans: (first, count).
    pub(crate) fn blocks(&self) -> (u64, u64) {
        (self.off / BLOCK, self.window.len() as u64 / BLOCK)
    }

    pub(crate) fn ino(&self) -> u64 {
        self.ino
    }

    /// Shows the pool's blocks `runs` (the grant's, each inside the
    /// mapping's blocks) in the mapping; false if a run is not the
    /// mapping's or could not be shown (then `give_back`).
    pub(crate) fn show(&self, pages: &PoolPages, runs: &[Run], pool_size: u64) -> bool {
        let (first, count) = self.blocks();
        let show_run = |r: &Run| {
            let inside = r.file_block >= first
                && r.blocks > 0
                && r.file_block
                    .checked_add(r.blocks)
                    .is_some_and(|e| e <= first + count)
                && r.pool_off.is_multiple_of(BLOCK)
                && r.blocks
                    .checked_mul(BLOCK)
                    .and_then(|len| r.pool_off.checked_add(len))
                    .is_some_and(|e| e <= pool_size);
            if !inside {
                return false;
            }
            // Inside the window (checked above), so these fit a usize.
            let at = usize::try_from((r.file_block - first) * BLOCK).unwrap_or(usize::MAX);
            let len = usize::try_from(r.blocks * BLOCK).unwrap_or(usize::MAX);
            let place = (at, r.pool_off, len);
            self.window.map_pool(pages, place, self.prot, false).is_ok()
        };
        runs.iter().all(show_run)
    }

    /// The program keeps its mapping, the kernel's again — moved back
    /// from the shadow; where even that fails, a SIGBUS past the end of
    /// any file rather than pool pages nobody pins — and this value lets
    /// go of it.
    pub(crate) fn give_back(self) {
        let len = self.window.len();
        if let Err((shadow, _)) = self.shadow.move_into(&self.window) {
            let _ = self.window.map_past_end(0, len, self.prot);
            drop(shadow);
        }
        self.window.leave_mapped();
    }

    /// The program keeps its mapping, still the kernel's (no pool page
    /// shown yet); the shadow goes.
    pub(crate) fn release(self) {
        drop(self.shadow);
        self.window.leave_mapped();
    }

    /// Whether the mapping meets `[addr, addr + len)`.
    fn meets(&self, addr: usize, len: usize) -> bool {
        let (a, n) = (self.window.addr(), self.window.len());
        addr < a.saturating_add(n) && a < addr.saturating_add(len)
    }
}

/// A client's map leases, by lease, and the mappings whose asks are in
/// flight, by request.
#[derive(Default)]
pub(crate) struct Maps {
    held: Mutex<HashMap<u64, MapWin>>,
    pending: Mutex<HashMap<u64, MapWin>>,
    /// Mappings held: the hooks' test before they look.
    count: AtomicUsize,
}

impl Maps {
    /// Whether any mapping shows the pool.
    pub(crate) fn any(&self) -> bool {
        self.count.load(Ordering::Acquire) > 0
    }

    /// Parks `win` while request `seq` asks for its lease; false when as
    /// many mappings as may be are held or asked for.
    pub(crate) fn ask(&self, seq: u64, win: MapWin) -> Result<(), MapWin> {
        let mut p = self.pending.lock();
        if p.len() + self.count.load(Ordering::Acquire) >= MAX_MAPPED {
            return Err(win);
        }
        p.insert(seq, win);
        Ok(())
    }

    /// The mapping request `seq` asked for.
    pub(crate) fn answered(&self, seq: u64) -> Option<MapWin> {
        self.pending.lock().remove(&seq)
    }

    /// `win` now shows the pool under `lease`.
    pub(crate) fn hold(&self, lease: u64, win: MapWin) {
        self.held.lock().insert(lease, win);
        self.count.fetch_add(1, Ordering::AcqRel);
    }

    /// The mapping under `lease`, taken out (its pages still the pool's).
    pub(crate) fn take(&self, lease: u64) -> Option<MapWin> {
        let w = self.held.lock().remove(&lease)?;
        self.count.fetch_sub(1, Ordering::AcqRel);
        Some(w)
    }

    /// Every mapping meeting `[addr, addr + len)` (all of them for
    /// `None`), taken out with its lease.
    pub(crate) fn take_range(&self, range: Option<(usize, usize)>) -> Vec<(u64, MapWin)> {
        let mut held = self.held.lock();
        let leases: Vec<u64> = held
            .iter()
            .filter(|(_, w)| range.is_none_or(|(a, n)| w.meets(a, n)))
            .map(|(&l, _)| l)
            .collect();
        let out: Vec<(u64, MapWin)> = leases
            .into_iter()
            .filter_map(|l| held.remove(&l).map(|w| (l, w)))
            .collect();
        self.count.fetch_sub(out.len(), Ordering::AcqRel);
        out
    }
}
