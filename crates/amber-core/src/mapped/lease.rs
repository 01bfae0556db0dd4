//! A read lease's view of a file (design.md §17.3): where each of its
//! blocks lies on PM, so another process can read the file from its own
//! mapping of the pool while the daemon that owns the pool promises not
//! to change the file without first recalling the lease.

use crate::error::{FsError, Result};
use crate::fs::{regular, Core};
use amber_format::BLOCK_SIZE;
use amber_pmem::PmDevice;

/// One run of a file's blocks that lie one after another on PM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    /// The run's first file block.
    pub file_block: u64,
    /// The pool byte offset of that block.
    pub pool_off: u64,
    /// Blocks in the run.
    pub blocks: u64,
}

/// A file as a lessee reads it: its size and generation, and its data
/// blocks in file order; a block no run names is a hole (zeros).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseView {
    /// The file's generation, so a lease never outlives the inode number.
    pub generation: u32,
    /// The file's size in bytes.
    pub size: u64,
    /// Its blocks, in file order.
    pub runs: Vec<Run>,
}

impl<D: PmDevice> Core<D> {
    /// Settles regular file `ino` to PM, as mapping it does (`DataPolicy::
    /// pin` over the whole file: the policy's DRAM buffer, zone slices and
    /// queued records go to PM), and returns where its blocks are. A file
    /// whose blocks form more than `max_runs` runs fails with
    /// `FsError::FileTooLarge`: a lessee's map is bounded.
    ///
    /// The view stays true only while nothing changes the file: the
    /// caller (the daemon's lease table) recalls it before any change.
    pub fn lease_view(&self, ino: u64, max_runs: usize) -> Result<LeaseView> {
        let r = self.inode(ino)?;
        let mut st = r.write();
        regular(&st)?;
        let size = st.size();
        let blocks = size.div_ceil(BLOCK_SIZE);
        if blocks > 0 && !self.is_read_only() {
            self.check_writable()?;
            self.guard(self.policy().pin(self.context(), &mut st, 0, blocks))?;
        }
        let mut runs: Vec<Run> = Vec::new();
        let mut fb = 0;
        // Each round passes at least one block: bounded by the file's.
        while fb < blocks {
            let Some(start) = self.policy().block_of(&st, fb) else {
                fb += 1;
                continue;
            };
            let mut n = 1;
            while fb + n < blocks && self.policy().block_of(&st, fb + n) == Some(start + n) {
                n += 1;
            }
            if runs.len() == max_runs {
                return Err(FsError::FileTooLarge);
            }
            runs.push(Run {
                file_block: fb,
                pool_off: self.layout().block_offset(start),
                blocks: n,
            });
            fb += n;
        }
        Ok(LeaseView {
            generation: st.disk.generation,
            size,
            runs,
        })
    }
}
