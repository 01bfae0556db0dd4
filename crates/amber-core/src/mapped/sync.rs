//! Making stores through mappings durable (msync, fsync, syncfs,
//! unmount), the library's own store path (which the crash simulator
//! sees), fork, and the pool closing under live mappings.

use super::file::FileMap;
use super::ops::{idx_of, maps_mut, maps_of};
use super::MapId;
use crate::data::in_blocks;
use crate::error::{FsError, Result};
use crate::fs::Core;
use crate::inode::InodeState;
use amber_format::BLOCK_SIZE;
use amber_pmem::PmDevice;

impl<D: PmDevice> Core<D> {
    /// Starts writing back the lines of `m`'s blocks if stores may wait
    /// in the CPU cache (it was writable); the caller fences. A store
    /// through a window reaches the same physical page as the pool's
    /// mapping, so flushing the pool's address flushes it.
    pub(super) fn flush_map(&self, st: &InodeState, m: &FileMap) -> Result<()> {
        if m.dirty {
            self.flush_blocks(st, m.first, m.shown)?;
        }
        Ok(())
    }

    /// Flushes file blocks `[first, first + count)`, one flush per run of
    /// consecutive blocks.
    pub(super) fn flush_blocks(&self, st: &InodeState, first: u64, count: u64) -> Result<()> {
        let dev = self.device();
        let l = self.layout();
        let mut i = 0;
        // Each round passes at least one block: bounded by `count`.
        while i < count {
            let Some(b) = self.policy().block_of(st, first + i) else {
                return Err(FsError::Corrupted(format!(
                    "inode {}: a pinned hole",
                    st.ino
                )));
            };
            let mut n = 1;
            while i + n < count && self.policy().block_of(st, first + i + n) == Some(b + n) {
                n += 1;
            }
            dev.flush(l.block_offset(b), n * BLOCK_SIZE);
            i += n;
        }
        Ok(())
    }

    /// Before a file's fsync: writes back what stores through its
    /// mappings left in the CPU cache, fences, and moves its mtime and
    /// ctime, which such stores change on Linux too (at the fault). A
    /// mapping still writable stays dirty; one no longer is clean.
    pub(crate) fn sync_maps(&self, st: &mut InodeState) -> Result<()> {
        let Some(maps) = st.maps.as_deref() else {
            return Ok(());
        };
        if !maps.maps.iter().any(|m| m.dirty) {
            return Ok(());
        }
        for m in &maps.maps {
            self.flush_map(st, m)?;
        }
        self.drain()?;
        let res = self.policy().touch(self.context(), st, self.now());
        self.guard(res)?;
        for m in &mut maps_mut(st)?.maps {
            m.dirty = m.prot & libc::PROT_WRITE != 0;
        }
        Ok(())
    }

    /// msync(MS_SYNC) of `[addr, addr + len)`: every store through the
    /// mappings under it is durable (their lines in the range flushed, as
    /// Linux's msync writes back the range only), and what the policy
    /// owes of their files (as `Core::fsync`, the other mappings' lines
    /// aside). Returns the parts that were Amber's.
    pub fn sync_range(&self, addr: usize, len: usize) -> Result<Vec<(usize, usize)>> {
        self.each_window_part(addr, len, |core, st, idx, (from, to)| {
            let m = &maps_of(st)?.maps[idx];
            let to = to.min(m.shown);
            if m.dirty && to > from {
                core.flush_blocks(st, m.first + from, to - from)?;
                core.drain()?;
                let res = core.policy().touch(core.context(), st, core.now());
                core.guard(res)?;
            }
            core.fsync_policy(st)
        })
    }

    /// msync of library mapping `id`: as `sync_range` over all of it.
    pub fn sync_map(&self, id: MapId) -> Result<()> {
        let (r, _) = self.locate(id)?;
        let mut st = r.write();
        self.fsync_locked(&mut st)
    }

    /// Stores `data` at byte `off` of library mapping `id` as a program's
    /// stores through a window would land: into the pinned blocks, through
    /// the CPU cache, durable only once flushed (msync, fsync) — but
    /// through the device, so the crash simulator sees each one.
    pub fn map_store(&self, id: MapId, off: u64, data: &[u8]) -> Result<()> {
        let (r, _) = self.locate(id)?;
        let st = r.write();
        let m = Self::map_in(&st, id, off, data.len())?;
        if m.prot & libc::PROT_WRITE == 0 {
            return Err(FsError::AccessDenied(
                "a store through a mapping without PROT_WRITE",
            ));
        }
        self.pieces(&st, m, off, data.len(), |pool, from, to| {
            self.device().write(pool, &data[from..to]);
        })
    }

    /// Loads bytes at `off` of library mapping `id` into `buf`, as a
    /// program's loads through a window would read them.
    pub fn map_load(&self, id: MapId, off: u64, buf: &mut [u8]) -> Result<()> {
        let (r, _) = self.locate(id)?;
        let st = r.read();
        let m = Self::map_in(&st, id, off, buf.len())?;
        self.pieces(&st, m, off, buf.len(), |pool, from, to| {
            self.device().read(pool, &mut buf[from..to]);
        })
    }

    /// Mapping `id` of `st`, checked to show `[off, off + len)` (past the
    /// end of file a window would raise SIGBUS).
    fn map_in(st: &InodeState, id: MapId, off: u64, len: usize) -> Result<&FileMap> {
        let idx = idx_of(st, id).ok_or(FsError::InvalidArgument("no such mapping"))?;
        let m = &maps_of(st)?.maps[idx];
        let end = off.checked_add(len as u64);
        if end.is_none_or(|e| e > m.shown * BLOCK_SIZE) {
            return Err(FsError::InvalidArgument(
                "an access past the end of the file through a mapping (SIGBUS)",
            ));
        }
        Ok(m)
    }

    /// Calls `f(pool offset, from, to)` for each block piece of bytes
    /// `[off, off + len)` of mapping `m`, `from..to` the piece's place
    /// in the caller's buffer.
    fn pieces(
        &self,
        st: &InodeState,
        m: &FileMap,
        off: u64,
        len: usize,
        f: impl FnMut(u64, usize, usize),
    ) -> Result<()> {
        let policy = self.policy();
        let block_of = |fb| policy.block_of(st, fb);
        in_blocks(self.layout(), st.ino, (m.off() + off, len), block_of, f)
    }

    /// Before a fork: every mapping may now be shared with a child, which
    /// keeps it when this process unmaps it, so its blocks stay pinned
    /// (and are never reused) until the pool closes.
    pub fn note_fork(&self) {
        for (id, ino) in self.map_table().all() {
            let Ok(r) = self.inode(ino) else {
                continue;
            };
            let mut st = r.write();
            if let Some(idx) = idx_of(&st, id) {
                if let Ok(maps) = maps_mut(&mut st) {
                    maps.maps[idx].inherited = true;
                }
            }
        }
    }

    /// The pool is closing: every store through a mapping is written back
    /// and fenced, every window is left to the program (its pages stay
    /// valid until it unmaps them or exits), and what forked children
    /// kept is let go. The files' open counts drop with their mappings.
    pub(crate) fn close_maps(&self) -> Result<()> {
        let mut res = Ok(());
        // Every loaded inode, not the table: blocks kept for a forked
        // child outlive their mapping's entry there.
        for r in self.loaded() {
            let mut st = r.write();
            let Some(maps) = st.maps.take() else {
                continue;
            };
            for m in &maps.maps {
                res = res.and(self.flush_map(&st, m));
            }
            st.open_count -= (maps.maps.len() + usize::from(!maps.kept.is_empty())) as u32;
            for m in maps.maps {
                self.map_table().remove(m.id);
                if let Some(w) = m.window {
                    w.leave_mapped();
                }
            }
        }
        self.blocks().release_held();
        res.and(self.drain())
    }

    /// `user.amberfs.policy`'s lines for the file's mappings: each one's
    /// file range, protection and address, and the ranges kept for a
    /// forked child.
    pub(crate) fn describe_maps(st: &InodeState) -> Vec<(String, String)> {
        let Some(maps) = st.maps.as_deref() else {
            return Vec::new();
        };
        let mut out: Vec<(String, String)> = maps
            .maps
            .iter()
            .map(|m| {
                let prot = |bit: i32, c: char| if m.prot & bit != 0 { c } else { '-' };
                let at = m.addr().map_or(String::new(), |a| format!(" at {a:#x}"));
                let value = format!(
                    "{}-{} {}{}{}{}{}",
                    m.off(),
                    m.off() + m.blocks * BLOCK_SIZE,
                    prot(libc::PROT_READ, 'r'),
                    prot(libc::PROT_WRITE, 'w'),
                    prot(libc::PROT_EXEC, 'x'),
                    if m.sync { " sync" } else { "" },
                    at
                );
                ("mapped".to_string(), value)
            })
            .collect();
        for &(first, n) in &maps.kept {
            let r = format!("{}-{}", first * BLOCK_SIZE, (first + n) * BLOCK_SIZE);
            out.push(("kept_for_child".to_string(), r));
        }
        out
    }
}
