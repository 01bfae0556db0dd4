//! Placing a mapping's blocks, and following the file's size under its
//! mappings: blocks become pinned (holes filled, the policy's own copies
//! settled) before a window shows them, and a shrink hides the pages it
//! cuts off (SIGBUS) before the policy frees their blocks.

use super::file::{shown_for, FileMap};
use crate::data::FallocStep;
use crate::error::{FsError, Result};
use crate::fs::Core;
use crate::inode::InodeState;
use amber_format::BLOCK_SIZE;
use amber_pmem::PmDevice;

/// A window call's errno as the core's error.
pub(super) fn window_error(errno: i32) -> FsError {
    match errno {
        libc::ENOMEM => FsError::OutOfMemory,
        libc::EOPNOTSUPP => FsError::Unsupported("MAP_SYNC needs a pool on DAX"),
        libc::EACCES => FsError::AccessDenied("the pool is open read-only"),
        _ => FsError::NotMappable("the kernel refused to map the pool's pages there"),
    }
}

impl<D: PmDevice> Core<D> {
    /// Makes file blocks `[first, first + count)` (below the end of file)
    /// ready to be pinned: the policy holds no newer copy of them and no
    /// record of theirs depends on their bytes (`DataPolicy::pin`), each
    /// has a block (zeroed if it was a hole, as fallocate makes one), the
    /// file's last block shows zeros past the end of file, and with
    /// `sync` the file's metadata is durable.
    pub(super) fn prepare_pins(
        &self,
        st: &mut InodeState,
        (first, count): (u64, u64),
        sync: bool,
    ) -> Result<()> {
        debug_assert!(count > 0 && first + count <= st.size().div_ceil(BLOCK_SIZE));
        let ctx = self.context();
        let end = first + count;
        self.guard(self.policy().pin(ctx, st, first, count))?;
        if (first..end).any(|fb| self.policy().block_of(st, fb).is_none()) {
            let (off, len) = (first * BLOCK_SIZE, count * BLOCK_SIZE);
            let fill = FallocStep::Allocate { keep_size: true };
            self.guard(self.policy().fallocate(ctx, st, off, len, fill))?;
        }
        if (first..end).any(|fb| self.policy().block_of(st, fb).is_none()) {
            return Err(FsError::Corrupted(format!(
                "inode {}: a hole under a mapping stayed a hole after fallocate",
                st.ino
            )));
        }
        let size = st.size();
        let last = (size - 1) / BLOCK_SIZE;
        if !size.is_multiple_of(BLOCK_SIZE) && (first..end).contains(&last) {
            self.zero_tail(st, size)?;
        }
        if sync {
            self.guard(self.policy().fsync(ctx, st))?;
        }
        Ok(())
    }

    /// Zeroes the bytes of the block holding `size` from `size` to the
    /// block's end, in place, and fences: a mapping's last page shows
    /// them, and Linux shows zeros there. They lie past the end of file,
    /// past the durable size too, so no crash can show the zeroing.
    pub(crate) fn zero_tail(&self, st: &InodeState, size: u64) -> Result<()> {
        let fb = size / BLOCK_SIZE;
        let at = size % BLOCK_SIZE;
        let Some(b) = self.policy().block_of(st, fb) else {
            return Ok(());
        };
        if at == 0 {
            return Ok(());
        }
        let dev = self.device();
        dev.zero_nt(self.layout().block_offset(b) + at, BLOCK_SIZE - at);
        self.drain()
    }

    /// Shows blocks `[from, to)` of `map` (counted from its first) in its
    /// window: one mapping of the pool per run of consecutive blocks.
    pub(super) fn show(&self, st: &InodeState, map: &FileMap, from: u64, to: u64) -> Result<()> {
        let Some(w) = &map.window else {
            return Ok(());
        };
        let pages = self
            .device()
            .pages()
            .ok_or(FsError::NotMappable("this device cannot map its pages"))?;
        let block = |i: u64| {
            self.policy()
                .block_of(st, map.first + i)
                .ok_or_else(|| FsError::Corrupted(format!("inode {}: a pinned hole", st.ino)))
        };
        let mut i = from;
        // Each round maps at least one block: bounded by the range.
        while i < to {
            let start = block(i)?;
            let mut n = 1;
            while i + n < to && block(i + n)? == start + n {
                n += 1;
            }
            let bytes = (
                i * BLOCK_SIZE,
                self.layout().block_offset(start),
                n * BLOCK_SIZE,
            );
            let at = (usize::try_from(bytes.0), usize::try_from(bytes.2));
            let (Ok(at), Ok(len)) = at else {
                return Err(FsError::FileTooLarge);
            };
            w.map_pool(pages, (at, bytes.1, len), map.prot, map.sync)
                .map_err(window_error)?;
            i += n;
        }
        Ok(())
    }

    /// Makes blocks `[from, to)` of `map` lie past the end of file in its
    /// window: any access there is a SIGBUS.
    pub(super) fn hide(map: &FileMap, from: u64, to: u64) -> Result<()> {
        let Some(w) = &map.window else {
            return Ok(());
        };
        let (at, len) = (from * BLOCK_SIZE, (to - from) * BLOCK_SIZE);
        let (Ok(at), Ok(len)) = (usize::try_from(at), usize::try_from(len)) else {
            return Err(FsError::FileTooLarge);
        };
        w.map_past_end(at, len, map.prot).map_err(window_error)
    }

    /// After the file grew from `old` bytes: every mapping shows the
    /// blocks the new size brought under it, pinned first.
    pub(crate) fn follow_growth(&self, st: &mut InodeState, old: u64) -> Result<()> {
        let size = st.size();
        if size <= old {
            return Ok(());
        }
        let Some(mut maps) = st.maps.take() else {
            return Ok(());
        };
        let res = (|| {
            for m in &mut maps.maps {
                let now = shown_for(m.first, m.blocks, size);
                if now > m.shown {
                    self.prepare_pins(st, (m.first + m.shown, now - m.shown), m.sync)?;
                    self.show(st, m, m.shown, now)?;
                    m.shown = now;
                }
            }
            Ok(())
        })();
        st.maps = Some(maps);
        res
    }

    /// Before the file shrinks to `size` bytes: every mapping hides the
    /// pages it loses, and blocks a forked child may still map are held
    /// back from reuse when the policy frees them (`BlockAllocator::hold`).
    pub(crate) fn before_shrink(&self, st: &mut InodeState, size: u64) -> Result<()> {
        let Some(mut maps) = st.maps.take() else {
            return Ok(());
        };
        let end = size.div_ceil(BLOCK_SIZE);
        for (first, count) in maps.shared_with_child() {
            let gone =
                (first.max(end)..first + count).filter_map(|fb| self.policy().block_of(st, fb));
            self.blocks().hold(gone);
        }
        let kept = !maps.kept.is_empty();
        maps.clip_kept(end);
        if kept && maps.kept.is_empty() {
            // The file was held open once for all it kept.
            st.open_count -= 1;
        }
        let mut res = Ok(());
        for m in &mut maps.maps {
            let now = shown_for(m.first, m.blocks, size);
            if now < m.shown {
                res = res.and(Self::hide(m, now, m.shown));
                m.shown = now;
            }
        }
        st.maps = (!maps.is_empty()).then_some(maps);
        res
    }
}
