//! Repair writes, collected while checking and applied together, so a
//! check without `--repair` shares every decision with the repair and
//! simply never applies it.

use crate::error::FsError;
use amber_format::{Inode, Layout, Superblock, BLOCK_SIZE, INODE_SIZE};
use amber_pmem::PmDevice;

/// One step of a repair.
enum Step {
    Write(u64, Vec<u8>),
    /// Everything before is durable before anything after is stored.
    Fence,
}

/// Byte ranges to store, in the order they were decided.
#[derive(Default)]
pub(super) struct Fixes {
    steps: Vec<Step>,
}

/// Byte offset of inode `ino`; the caller has checked `ino` against the
/// table (Layout::inode_offset would panic instead).
pub(super) fn inode_off(l: &Layout, ino: u64) -> u64 {
    l.itable_start * BLOCK_SIZE + ino * INODE_SIZE as u64
}

impl Fixes {
    pub fn write(&mut self, off: u64, data: &[u8]) {
        self.steps.push(Step::Write(off, data.to_vec()));
    }

    pub fn zero(&mut self, off: u64, len: usize) {
        self.steps.push(Step::Write(off, vec![0; len]));
    }

    /// Rewrites the superblock by its update protocol (docs/design.md
    /// §2.1): copy A durable, then copy B, so a crash leaves one whole.
    pub fn superblock(&mut self, sb: &Superblock) {
        let bytes = sb.encode();
        for off in Superblock::copy_offsets() {
            self.steps.push(Step::Fence);
            self.write(off, &bytes);
        }
        self.steps.push(Step::Fence);
    }

    /// Frees inode `ino` the way the core does: mode 0, generation kept so
    /// a reused number gets a new generation.
    pub fn free_inode(&mut self, l: &Layout, ino: u64, generation: u32) {
        let mut free = Inode::free();
        free.generation = generation;
        self.write(inode_off(l, ino), &free.encode());
    }

    /// Stores every write in order and makes it durable. The pool is
    /// unmounted, so no journal is needed; a crash part-way leaves some
    /// fixes undone, and the next check finds them again.
    pub fn apply<D: PmDevice>(&mut self, dev: &D) -> Result<(), FsError> {
        for step in self.steps.drain(..) {
            match step {
                Step::Write(off, data) => {
                    dev.write(off, &data);
                    dev.flush(off, data.len() as u64);
                }
                Step::Fence => dev.drain()?,
            }
        }
        dev.drain()?;
        Ok(())
    }
}
