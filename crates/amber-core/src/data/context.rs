//! What a data policy may use of the mounted file system: the device and
//! the pool's geometry, fences and journal commits that poison the mount
//! when they fail, the block allocator, the clock, the loaded inodes (for
//! background work), the zone and the split layout. The core hands every
//! policy call a `Context`; nothing else of `Core` is reachable from a
//! policy, so the core's fields and the rest of its calls can change
//! without touching one.

use crate::alloc::{BlockAllocator, Homes};
use crate::error::Result;
use crate::fs::{Core, MountOptions};
use crate::inode::InodeRef;
use crate::journal::Tx;
use crate::split::SplitMedia;
use crate::time::Clock;
use crate::zone::Zone;
use amber_format::{Layout, Timespec};
use amber_pmem::PmDevice;
use std::sync::Arc;

/// A data policy's view of the mounted file system (module docs).
pub struct Context<'a, D: PmDevice> {
    core: &'a Core<D>,
}

impl<D: PmDevice> Clone for Context<'_, D> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<D: PmDevice> Copy for Context<'_, D> {}

impl<'a, D: PmDevice> Context<'a, D> {
    /// The view of `core` its policy is given.
    pub(crate) fn new(core: &'a Core<D>) -> Self {
        Context { core }
    }

    /// The device under the pool: every store to PM goes through it.
    pub fn device(self) -> &'a Arc<D> {
        self.core.device()
    }

    /// The pool's geometry.
    pub fn layout(self) -> &'a Layout {
        self.core.layout()
    }

    /// The options the pool was mounted with (the policy's own included).
    pub fn options(self) -> &'a MountOptions {
        self.core.options()
    }

    /// The current time for file timestamps.
    pub fn now(self) -> Timespec {
        self.core.now()
    }

    /// The small-write zone, when the policy uses one.
    pub fn zone(self) -> Option<&'a Zone> {
        self.core.zone()
    }

    /// Fences the device's outstanding stores; a failure poisons the
    /// mount (every later write is refused).
    pub fn drain(self) -> Result<()> {
        self.core.drain()
    }

    /// Commits a metadata transaction, poisoning the mount on failure.
    pub fn commit(self, tx: Tx) -> Result<()> {
        self.core.commit(tx)
    }

    /// Passes a result through, poisoning the mount on a persist failure
    /// (for a failure met outside `drain` and `commit`).
    pub fn guard<T>(self, r: Result<T>) -> Result<T> {
        self.core.guard(r)
    }

    /// Fails if nothing more may be written (read-only, or poisoned):
    /// background work checks it before each pass.
    pub fn check_writable(self) -> Result<()> {
        self.core.check_writable()
    }

    /// The mount's clock (monotonic time for the policies' models).
    pub(crate) fn clock(self) -> &'a Clock {
        self.core.clock()
    }

    /// The block allocator.
    pub(crate) fn blocks(self) -> &'a BlockAllocator {
        self.core.blocks()
    }

    /// Each thread's home among the per-CPU structures.
    pub(crate) fn homes(self) -> &'a Homes {
        self.core.homes()
    }

    /// The loaded inode `ino`, for background work that locks files
    /// other than the one a call was made for.
    pub(crate) fn inode(self, ino: u64) -> Result<InodeRef> {
        self.core.inode(ino)
    }

    /// HUNTER's split layout, when the pool has one.
    pub(crate) fn split(self) -> Option<&'a SplitMedia> {
        self.core.split()
    }
}
