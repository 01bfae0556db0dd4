//! Lazy chains (design.md §12.5). A record's `link` is read by one thing
//! only: a clean mount's walk of a file's chain when the file is first
//! loaded. Recovery after a crash plans every link from the records
//! themselves (`split::plan_relink`), and a loaded file's index stays in
//! DRAM until unmount or its deletion. So a change that leaves links
//! stale — a write into a hole or over blocks (the link of the block
//! above it), a punch, a lessee's write adopted where its record's link
//! is not the block below — rewrites none: it marks the file, and
//! unmount rewrites each marked file's links once, in file-block order,
//! before it marks the pool clean. Rewriting a random record per write
//! was a third of the mount daemon's CPU under write leases
//! (BENCHMARKS.md, "Lazy chains").

use super::{media, HunterFile};
use crate::data::Context;
use crate::error::{FsError, Result};
use amber_format::split::{LogicalInfo, Record};
use amber_pmem::PmDevice;

impl<X> HunterFile<X> {
    /// The links of the file's records at file block `fb` and above may
    /// no longer name the block at the next lower index.
    pub(super) fn links_stale_from(&mut self, fb: u64) {
        self.stale_links = Some(self.stale_links.map_or(fb, |s| s.min(fb)));
    }

    /// The lowest file block whose record's link may be stale, if any.
    pub(super) fn stale_links(&self) -> Option<u64> {
        self.stale_links
    }
}

/// Rewrites every link of file `ino` (generation `generation`, state
/// `hf`) from its stale mark up, so its chain names its index again;
/// returns how many records changed. The stores are non-temporal: the
/// caller fences before it marks the pool clean. Every block of the
/// index has its record by then (unmount persisted every queue), so a
/// block without one is corruption, as at a clean mount.
pub(super) fn seal<D: PmDevice, X>(
    fs: Context<'_, D>,
    (ino, generation): (u64, u32),
    hf: &mut HunterFile<X>,
) -> Result<u64> {
    let Some(from) = hf.stale_links.take() else {
        return Ok(0);
    };
    let m = media(fs);
    let dev = &**fs.device();
    let mut link = hf.index.below(from);
    let mut relinked = 0;
    for (fb, b) in hf.index.from(from) {
        match m.read_li(dev, b) {
            Record::Valid(li)
                if li.ino == ino && li.generation == generation && li.file_block == fb =>
            {
                if li.link != link {
                    m.write_li(dev, b, &LogicalInfo { link, ..li });
                    relinked += 1;
                }
            }
            _ => {
                return Err(FsError::Corrupted(format!(
                    "block {b} of inode {ino} lost its logical information"
                )))
            }
        }
        link = b;
    }
    Ok(relinked)
}
