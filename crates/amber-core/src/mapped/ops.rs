//! Making, cutting and reprotecting mappings: the calls behind a front
//! end's mmap, munmap and mprotect, and the library's own mappings.

use super::file::{shown_for, FileMap, FileMaps};
use super::place::window_error;
use super::{MapId, MapInfo, MapRequest};
use crate::error::{FsError, Result};
use crate::fs::{flags, regular, Core};
use crate::inode::InodeState;
use amber_format::blockmap::MAX_FILE_SIZE;
use amber_format::BLOCK_SIZE;
use amber_pmem::{page_size, PmDevice, Window};

/// The protection bits a mapping may have.
const PROT_MASK: i32 = libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC;

impl<D: PmDevice> Core<D> {
    /// Maps `req` of file `ino` (`MAP_SHARED`), shown in `window` if the
    /// front end gives one (its length must be the request's, in whole
    /// blocks); without one it is a library mapping, reached through
    /// `map_store`/`map_load`. The blocks below the end of file are
    /// pinned and shown, the rest raise SIGBUS until the file grows.
    /// The mapping holds the file open until it is unmapped.
    pub fn map(&self, ino: u64, req: MapRequest, window: Option<Window>) -> Result<MapInfo> {
        let blocks = self.check_request(&req, window.as_ref())?;
        let r = self.inode(ino)?;
        let mut st = r.write();
        regular(&st)?;
        flags::may_map_shared(&st, req.may_write)?;
        let writable = req.prot & libc::PROT_WRITE != 0;
        if writable {
            self.check_writable()?;
        }
        let first = req.off / BLOCK_SIZE;
        let mut m = FileMap {
            id: MapId(0),
            first,
            blocks,
            shown: 0,
            prot: req.prot,
            may_write: req.may_write,
            sync: req.sync,
            dirty: writable,
            inherited: false,
            window,
        };
        let shown = shown_for(first, blocks, st.size());
        self.place_new(&mut st, &m, shown)?;
        m.shown = shown;
        m.id = self
            .map_table()
            .add(ino, m.window.as_ref().map(|w| (w.addr(), w.len())))?;
        let info = info_of(ino, &m);
        st.open_count += 1;
        st.maps.get_or_insert_with(Box::default).maps.push(m);
        Ok(info)
    }

    /// Checks a request and its window; returns the blocks it spans.
    fn check_request(&self, req: &MapRequest, window: Option<&Window>) -> Result<u64> {
        if page_size() as u64 != BLOCK_SIZE {
            return Err(FsError::NotMappable(
                "this machine's pages are not the pool's 4 KiB blocks",
            ));
        }
        let end = req.off.checked_add(req.len);
        if req.len == 0 || !req.off.is_multiple_of(BLOCK_SIZE) || req.prot & !PROT_MASK != 0 {
            return Err(FsError::InvalidArgument(
                "a mapping needs a length, a block-aligned offset and mmap's protection bits",
            ));
        }
        if end.is_none_or(|e| e > MAX_FILE_SIZE) {
            return Err(FsError::FileTooLarge);
        }
        let blocks = req.len.div_ceil(BLOCK_SIZE);
        let Some(w) = window else {
            return Ok(blocks);
        };
        let pages = self.device().pages().ok_or(FsError::NotMappable(
            "the pool is not a file the kernel can map again",
        ))?;
        if pages.granule() as u64 != BLOCK_SIZE {
            return Err(FsError::NotMappable(
                "device-DAX maps only in its alignment (2 MiB or more): make the namespace \
                 with `ndctl create-namespace -m devdax --align 4K` to map files",
            ));
        }
        if req.sync && !pages.sync_capable() {
            return Err(FsError::Unsupported("MAP_SYNC needs a pool on DAX"));
        }
        if w.len() as u64 != blocks * BLOCK_SIZE {
            return Err(FsError::InvalidArgument(
                "the window is not the mapping's length",
            ));
        }
        Ok(blocks)
    }

    /// Pins and shows the first `shown` blocks of a new mapping `m` and
    /// hides the rest. On a read-only mount nothing can be written, so
    /// nothing is pinned (nothing moves either) and holes show zeros.
    fn place_new(&self, st: &mut InodeState, m: &FileMap, shown: u64) -> Result<()> {
        if shown > 0 && self.is_read_only() {
            self.show_read_only(st, m, shown)?;
        } else if shown > 0 {
            self.prepare_pins(st, (m.first, shown), m.sync)?;
            self.show(st, m, 0, shown)?;
        }
        if shown < m.blocks {
            Self::hide(m, shown, m.blocks)?;
        }
        Ok(())
    }

    /// A read-only mount's mapping: runs of blocks shown, holes as zeros.
    fn show_read_only(&self, st: &InodeState, m: &FileMap, shown: u64) -> Result<()> {
        let mut i = 0;
        // Each round passes at least one block: bounded by `shown`.
        while i < shown {
            let hole = self.policy().block_of(st, m.first + i).is_none();
            let mut j = i + 1;
            while j < shown && self.policy().block_of(st, m.first + j).is_none() == hole {
                j += 1;
            }
            match (&m.window, hole) {
                (Some(w), true) => {
                    let (at, len) = window_range(i, j)?;
                    w.map_zeros(at, len, m.prot).map_err(window_error)?;
                }
                _ => self.show(st, m, i, j)?,
            }
            i = j;
        }
        Ok(())
    }

    /// Unmaps library mapping `id` whole.
    pub fn unmap(&self, id: MapId) -> Result<()> {
        let (r, idx) = self.locate(id)?;
        let mut st = r.write();
        let idx = idx_of(&st, id).unwrap_or(idx);
        let blocks = maps_of(&st)?.maps[idx].blocks;
        self.cut(&mut st, idx, 0, blocks)
    }

    /// munmap of `[addr, addr + len)`: unmaps the parts of mappings under
    /// it. Returns the parts that were Amber's, as (address, length); the
    /// front end hands the rest to the kernel.
    pub fn unmap_range(&self, addr: usize, len: usize) -> Result<Vec<(usize, usize)>> {
        self.each_window_part(addr, len, |core, st, idx, (from, to)| {
            core.cut(st, idx, from, to)
        })
    }

    /// mprotect of `[addr, addr + len)` to `prot` for the mappings under
    /// it (adding `PROT_WRITE` needs a mapping made through a handle that
    /// writes: EACCES otherwise). Returns the parts that were Amber's.
    pub fn protect_range(&self, addr: usize, len: usize, prot: i32) -> Result<Vec<(usize, usize)>> {
        if prot & !PROT_MASK != 0 {
            return Err(FsError::InvalidArgument(
                "mprotect takes only protection bits",
            ));
        }
        self.each_window_part(addr, len, |core, st, idx, (from, to)| {
            let m = &maps_of(st)?.maps[idx];
            if prot & libc::PROT_WRITE != 0 && !m.may_write {
                return Err(FsError::AccessDenied(
                    "the mapping was made through a handle that does not write",
                ));
            }
            if prot & libc::PROT_WRITE != 0 {
                core.check_writable()?;
            }
            let idx = core.isolate(st, idx, from, to)?;
            let m = &mut maps_mut(st)?.maps[idx];
            if let Some(w) = &m.window {
                w.protect(0, w.len(), prot).map_err(window_error)?;
            }
            m.prot = prot;
            m.dirty |= prot & libc::PROT_WRITE != 0;
            Ok(())
        })
    }

    /// Runs `f` on every windowed mapping under `[addr, addr + len)` with
    /// its inode locked, its index, and the blocks of it the range covers
    /// (from, to); returns those parts' addresses.
    #[allow(clippy::type_complexity)]
    pub(super) fn each_window_part(
        &self,
        addr: usize,
        len: usize,
        mut f: impl FnMut(&Self, &mut InodeState, usize, (u64, u64)) -> Result<()>,
    ) -> Result<Vec<(usize, usize)>> {
        let page = page_size();
        let end = addr
            .checked_add(len.next_multiple_of(page))
            .ok_or(FsError::InvalidArgument(
                "an address range past the end of memory",
            ))?;
        if !addr.is_multiple_of(page) {
            return Err(FsError::InvalidArgument(
                "an address not on a page boundary",
            ));
        }
        let mut parts = Vec::new();
        for found in self.map_table().overlapping(addr, end - addr) {
            let r = self.inode(found.ino)?;
            let mut st = r.write();
            let Some(idx) = idx_of(&st, found.id) else {
                continue;
            };
            let m = &maps_of(&st)?.maps[idx];
            let Some(start) = m.addr() else {
                continue;
            };
            let stop = start + (m.blocks * BLOCK_SIZE) as usize;
            let (a, b) = (addr.max(start), end.min(stop));
            if a >= b {
                continue;
            }
            let bs = BLOCK_SIZE as usize;
            f(
                self,
                &mut st,
                idx,
                (((a - start) / bs) as u64, ((b - start) / bs) as u64),
            )?;
            parts.push((a, b - a));
        }
        parts.sort_unstable();
        Ok(parts)
    }

    /// Removes blocks `[from, to)` of mapping `idx` from it: their lines
    /// are written back if it was writable (nothing would flush them
    /// later), their window part unmapped; what remains on each side
    /// stays mapped. A mapping a forked child shares leaves its pins
    /// behind (`FileMaps::kept`).
    pub(super) fn cut(&self, st: &mut InodeState, idx: usize, from: u64, to: u64) -> Result<()> {
        let idx = self.isolate(st, idx, from, to)?;
        let m = maps_mut(st)?.maps.remove(idx);
        let res = self.flush_map(st, &m).and_then(|()| self.drain());
        self.map_table().remove(m.id);
        let maps = maps_mut(st)?;
        if m.inherited && m.shown > 0 {
            let keeping = !maps.kept.is_empty();
            maps.kept.push(m.pinned());
            if keeping {
                // The file is held open once for all it keeps.
                st.open_count -= 1;
            }
        } else {
            st.open_count -= 1;
        }
        drop(m.window);
        if st.maps.as_ref().is_some_and(|m| m.is_empty()) {
            st.maps = None;
        }
        self.free_if_unused(st)?;
        res
    }

    /// Splits mapping `idx` so that one mapping covers exactly its
    /// blocks `[from, to)`; returns that one's index.
    pub(super) fn isolate(
        &self,
        st: &mut InodeState,
        idx: usize,
        from: u64,
        to: u64,
    ) -> Result<usize> {
        let blocks = maps_of(st)?.maps[idx].blocks;
        debug_assert!(from < to && to <= blocks);
        if to < blocks {
            self.split_map(st, idx, to)?;
        }
        if from > 0 {
            self.split_map(st, idx, from)?;
            return Ok(idx + 1);
        }
        Ok(idx)
    }

    /// Splits mapping `idx` at block `at` (inside it): it keeps `[0,
    /// at)`, a new mapping (the next index) takes the rest.
    fn split_map(&self, st: &mut InodeState, idx: usize, at: u64) -> Result<()> {
        let ino = st.ino;
        let m = &mut maps_mut(st)?.maps[idx];
        let window = match &mut m.window {
            Some(w) => {
                let bytes = usize::try_from(at * BLOCK_SIZE).map_err(|_| FsError::FileTooLarge)?;
                Some(w.split_off(bytes).map_err(window_error)?)
            }
            None => None,
        };
        let mut rest = FileMap {
            id: MapId(0),
            first: m.first + at,
            blocks: m.blocks - at,
            shown: m.shown.saturating_sub(at),
            window,
            ..*m
        };
        rest.id = self
            .map_table()
            .add(ino, rest.window.as_ref().map(|w| (w.addr(), w.len())))?;
        m.blocks = at;
        m.shown = m.shown.min(at);
        let (id, left) = (m.id, m.window.as_ref().map(|w| (w.addr(), w.len())));
        self.map_table().moved(id, left);
        maps_mut(st)?.maps.insert(idx + 1, rest);
        st.open_count += 1;
        Ok(())
    }

    /// Whether any file is mapped: a front end's munmap of anything else
    /// (malloc's, say) goes straight to the kernel when none is.
    pub fn has_mappings(&self) -> bool {
        !self.map_table().is_empty()
    }

    /// The parts of `[addr, addr + len)` that are Amber mappings, as
    /// (address, length), changing nothing (msync with `MS_ASYNC`).
    pub fn parts_of(&self, addr: usize, len: usize) -> Result<Vec<(usize, usize)>> {
        self.each_window_part(addr, len, |_, _, _, _| Ok(()))
    }

    /// madvise(MADV_REMOVE) of `[addr, addr + len)`: the file ranges of
    /// the writable mappings under it are punched (zeroed in place, as
    /// pinned blocks are, §16.2), never the pool file under them.
    pub fn remove_range(&self, addr: usize, len: usize) -> Result<Vec<(usize, usize)>> {
        self.each_window_part(addr, len, |core, st, idx, (from, to)| {
            let m = &maps_of(st)?.maps[idx];
            if m.prot & libc::PROT_WRITE == 0 {
                return Err(FsError::AccessDenied(
                    "MADV_REMOVE of a mapping without PROT_WRITE",
                ));
            }
            core.check_writable()?;
            flags::unchangeable(st)?;
            let off = m.off() + from * BLOCK_SIZE;
            core.punch_over_pins(st, off, (to - from) * BLOCK_SIZE)
        })
    }

    /// The mapping under `addr`, if it is Amber's.
    pub fn mapping_at(&self, addr: usize) -> Option<MapInfo> {
        let found = self.map_table().overlapping(addr, 1).into_iter().next()?;
        let r = self.inode(found.ino).ok()?;
        let st = r.read();
        let m = st.maps.as_ref()?.maps.iter().find(|m| m.id == found.id)?;
        Some(info_of(st.ino, m))
    }

    /// Every mapping of the mount: which file each maps, what of it,
    /// where and how.
    pub fn mappings(&self) -> Vec<MapInfo> {
        let mut out = Vec::new();
        for (id, ino) in self.map_table().all() {
            let Ok(r) = self.inode(ino) else {
                continue;
            };
            let st = r.read();
            if let Some(m) = st
                .maps
                .as_ref()
                .and_then(|ms| ms.maps.iter().find(|m| m.id == id))
            {
                out.push(info_of(ino, m));
            }
        }
        out
    }

    /// The loaded inode mapping `id` maps, and the mapping's index in its
    /// list when looked up.
    pub(super) fn locate(&self, id: MapId) -> Result<(crate::inode::InodeRef, usize)> {
        let ino = self
            .map_table()
            .ino_of(id)
            .ok_or(FsError::InvalidArgument("no such mapping"))?;
        let r = self.inode(ino)?;
        let idx = idx_of(&r.read(), id).ok_or(FsError::InvalidArgument("no such mapping"))?;
        Ok((r, idx))
    }
}

/// The index of mapping `id` among the file's.
pub(super) fn idx_of(st: &InodeState, id: MapId) -> Option<usize> {
    st.maps.as_ref()?.position(id)
}

/// The file's mappings (it has some: the caller found one in the table).
pub(super) fn maps_of(st: &InodeState) -> Result<&FileMaps> {
    st.maps
        .as_deref()
        .ok_or(FsError::InvalidArgument("the file has no mappings"))
}

/// The file's mappings, to change.
pub(super) fn maps_mut(st: &mut InodeState) -> Result<&mut FileMaps> {
    st.maps
        .as_deref_mut()
        .ok_or(FsError::InvalidArgument("the file has no mappings"))
}

/// What the table shows of mapping `m` of file `ino`.
pub(super) fn info_of(ino: u64, m: &FileMap) -> MapInfo {
    MapInfo {
        id: m.id,
        ino,
        off: m.off(),
        len: m.blocks * BLOCK_SIZE,
        addr: m.addr(),
        prot: m.prot,
        may_write: m.may_write,
        sync: m.sync,
    }
}

/// Blocks `[from, to)` of a window as a byte range.
pub(super) fn window_range(from: u64, to: u64) -> Result<(usize, usize)> {
    let at = usize::try_from(from * BLOCK_SIZE).map_err(|_| FsError::FileTooLarge)?;
    let len = usize::try_from((to - from) * BLOCK_SIZE).map_err(|_| FsError::FileTooLarge)?;
    Ok((at, len))
}
