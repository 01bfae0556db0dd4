//! What the lease table needs of the pool's owner — the daemon's core —
//! kept to one interface so the table and its tests do not depend on a
//! mounted pool.

use amber_core::data::{LeaseEnd, LeasedWrites};
use amber_core::{Core, LeaseView, MapId, WriteLease};
use amber_pmem::PmDevice;

/// The core's side of the leases.
pub trait Owner: Send + Sync {
    /// Settles window `[first, first + count)` of `ino` and lists its
    /// blocks for a read lease (`Core::lease_view`); `None`: not leasable.
    fn view(&self, ino: u64, first: u64, count: u64) -> Option<LeaseView>;
    /// Pins `ino` whole and grants `n` blocks for a write lease on the
    /// window (`Core::write_lease`); `None`: not leasable for writes.
    fn write(&self, ino: u64, window: (u64, u64), n: usize) -> Option<WriteLease>;
    /// Takes a write lease back, ended as `end` says: its holder's valid
    /// commits become the file's, the rest of the grant is freed
    /// (`Core::adopt`).
    fn adopt(&self, ino: u64, writes: &LeasedWrites, end: LeaseEnd);
    /// Pins blocks `[first, first + count)` of `ino` for a map lease and
    /// lists those below the end of file (`Core::map_lease`); `None`:
    /// not mappable.
    fn map(&self, ino: u64, range: (u64, u64), writable: bool) -> Option<(MapId, LeaseView)>;
    /// Ends a map lease: its blocks unpinned (`Core::end_map_lease`).
    fn unmap(&self, ino: u64, id: MapId);
}

impl<D: PmDevice> Owner for Core<D> {
    fn view(&self, ino: u64, first: u64, count: u64) -> Option<LeaseView> {
        self.lease_view(ino, first, count).ok()
    }

    fn write(&self, ino: u64, window: (u64, u64), n: usize) -> Option<WriteLease> {
        self.write_lease(ino, window, n).ok().flatten()
    }

    fn map(&self, ino: u64, range: (u64, u64), writable: bool) -> Option<(MapId, LeaseView)> {
        self.map_lease(ino, range, writable).ok()
    }

    fn unmap(&self, ino: u64, id: MapId) {
        if let Err(e) = self.end_map_lease(id) {
            crate::log(format_args!(
                "a map lease on inode {ino} came back and could not be unpinned: {e}"
            ));
        }
    }

    fn adopt(&self, ino: u64, writes: &LeasedWrites, end: LeaseEnd) {
        if let Err(e) = Core::adopt(self, ino, writes, end) {
            crate::log(format_args!(
                "a write lease on inode {ino} came back and could not be adopted: {e}"
            ));
        }
    }
}
