//! What the lease table needs of the pool's owner — the daemon's core —
//! kept to one interface so the table and its tests do not depend on a
//! mounted pool.

use amber_core::data::{LeaseEnd, LeasedWrites};
use amber_core::{Core, LeaseView, WriteLease};
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
}

impl<D: PmDevice> Owner for Core<D> {
    fn view(&self, ino: u64, first: u64, count: u64) -> Option<LeaseView> {
        self.lease_view(ino, first, count).ok()
    }

    fn write(&self, ino: u64, window: (u64, u64), n: usize) -> Option<WriteLease> {
        self.write_lease(ino, window, n).ok().flatten()
    }

    fn adopt(&self, ino: u64, writes: &LeasedWrites, end: LeaseEnd) {
        if let Err(e) = Core::adopt(self, ino, writes, end) {
            crate::log(format_args!(
                "a write lease on inode {ino} came back and could not be adopted: {e}"
            ));
        }
    }
}
