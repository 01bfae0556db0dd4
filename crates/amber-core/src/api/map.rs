//! Mapped files in the library API: `File::map` is mmap with
//! `MAP_SHARED` (design.md §16). Where the device can map its pages (a
//! pool file or DAX device), the mapping is shown in this process's
//! address space (`Mapping::addr`), the file's own PM pages; everywhere
//! it also takes stores and loads through the device (`write_at`,
//! `read_at`), which is how the crash simulator sees stores through a
//! mapping.

use super::{File, Fs};
use crate::error::{FsError, Result};
use crate::mapped::{MapInfo, MapRequest};
use amber_format::BLOCK_SIZE;
use amber_pmem::{PmDevice, Window};

/// How to map a file; mirrors mmap's protection and `MAP_SYNC`.
#[derive(Debug, Clone, Copy, Default)]
pub struct MapOptions {
    write: bool,
    exec: bool,
    sync: bool,
}

impl MapOptions {
    /// A readable mapping, not shown with `MAP_SYNC`.
    pub fn new() -> MapOptions {
        MapOptions::default()
    }

    /// Writable too (`PROT_WRITE`): the handle must write.
    pub fn write(&mut self, v: bool) -> &mut Self {
        self.write = v;
        self
    }

    /// Executable too (`PROT_EXEC`).
    pub fn exec(&mut self, v: bool) -> &mut Self {
        self.exec = v;
        self
    }

    /// `MAP_SYNC`: the file's metadata is durable before a page shows its
    /// block, so a store and a cache-line flush are durable (DAX pools
    /// only, when shown in the address space).
    pub fn sync(&mut self, v: bool) -> &mut Self {
        self.sync = v;
        self
    }

    fn prot(&self) -> i32 {
        let mut p = libc::PROT_READ;
        if self.write {
            p |= libc::PROT_WRITE;
        }
        if self.exec {
            p |= libc::PROT_EXEC;
        }
        p
    }
}

/// A shared mapping of a file; unmapped when dropped.
pub struct Mapping<D: PmDevice> {
    fs: Fs<D>,
    info: MapInfo,
    /// Still mapped: `unmap` has not run.
    live: bool,
}

impl<D: PmDevice> File<D> {
    /// Maps `len` bytes of the file from `off` (a multiple of 4 KiB),
    /// shared: stores through it and `write` meet on the same PM. Shown
    /// in the address space where the device can map its pages.
    pub fn map(&self, off: u64, len: u64, opts: &MapOptions) -> Result<Mapping<D>> {
        if !self.readable {
            return Err(FsError::AccessDenied("a mapping needs a handle that reads"));
        }
        if opts.write && !self.writable {
            return Err(FsError::AccessDenied(
                "a writable shared mapping needs a handle that writes",
            ));
        }
        let core = &self.fs.core;
        let window = match core.device().pages() {
            Some(_) => {
                let bytes = len.div_ceil(BLOCK_SIZE) * BLOCK_SIZE;
                let bytes = usize::try_from(bytes).map_err(|_| FsError::FileTooLarge)?;
                Some(Window::reserve(bytes.max(1), 0).map_err(|_| FsError::OutOfMemory)?)
            }
            None => None,
        };
        let req = MapRequest {
            off,
            len,
            prot: opts.prot(),
            may_write: self.writable,
            sync: opts.sync,
        };
        let info = core.map(self.ino, req, window)?;
        Ok(Mapping {
            fs: self.fs.clone(),
            info,
            live: true,
        })
    }
}

impl<D: PmDevice> Mapping<D> {
    /// What the mapping is.
    pub fn info(&self) -> MapInfo {
        self.info
    }

    /// Where it is shown in this process, if it is.
    pub fn addr(&self) -> Option<usize> {
        self.info.addr
    }

    /// Its length in bytes (whole blocks).
    pub fn len(&self) -> u64 {
        self.info.len
    }

    /// Whether it is empty (never: a mapping has at least a block).
    pub fn is_empty(&self) -> bool {
        self.info.len == 0
    }

    /// Stores `data` at `off` of the mapping, as a store through it lands
    /// (not durable until `sync`).
    pub fn write_at(&self, off: u64, data: &[u8]) -> Result<()> {
        self.fs.core.map_store(self.info.id, off, data)
    }

    /// Loads bytes at `off` of the mapping.
    pub fn read_at(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        self.fs.core.map_load(self.info.id, off, buf)
    }

    /// msync(MS_SYNC): every store through the file's mappings durable,
    /// and what the policy owes of the file.
    pub fn sync(&self) -> Result<()> {
        self.fs.core.sync_map(self.info.id)
    }

    /// Unmaps it now, saying if that failed (dropping it ignores that).
    pub fn unmap(mut self) -> Result<()> {
        self.live = false;
        self.fs.core.unmap(self.info.id)
    }
}

impl<D: PmDevice> Drop for Mapping<D> {
    fn drop(&mut self) {
        // A failure means the pool is poisoned (its lines could not be
        // fenced) or closed; the mapping is gone from the table either
        // way, and the error was the caller's to see from `unmap`.
        if self.live {
            let _ = self.fs.core.unmap(self.info.id);
        }
    }
}
