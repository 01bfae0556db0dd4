//! `OpenOptions` and `File`, as in std::fs.

use super::{path, Fs, Metadata};
use crate::error::{FsError, Result};
use crate::inode::InodeRef;
use crate::types::SetAttr;
use amber_format::FileKind;
use amber_pmem::PmDevice;
use std::io::{self, Read, Seek, SeekFrom, Write};

/// How to open a file; mirrors std::fs::OpenOptions plus `sync` (O_SYNC)
/// and `mode` (permissions of a created file).
#[derive(Debug, Clone)]
pub struct OpenOptions {
    read: bool,
    write: bool,
    append: bool,
    truncate: bool,
    create: bool,
    create_new: bool,
    sync: bool,
    mode: u32,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions::new()
    }
}

impl OpenOptions {
    /// Options that open nothing until asked: no access, no create, mode
    /// 0o644 for a file created later.
    pub fn new() -> OpenOptions {
        OpenOptions {
            read: false,
            write: false,
            append: false,
            truncate: false,
            create: false,
            create_new: false,
            sync: false,
            mode: 0o644,
        }
    }

    /// Whether the handle may read (O_RDONLY / O_RDWR).
    pub fn read(&mut self, v: bool) -> &mut Self {
        self.read = v;
        self
    }

    /// Whether the handle may write (O_WRONLY / O_RDWR).
    pub fn write(&mut self, v: bool) -> &mut Self {
        self.write = v;
        self
    }

    /// Every write goes to the end of the file (O_APPEND).
    pub fn append(&mut self, v: bool) -> &mut Self {
        self.append = v;
        self
    }

    /// Cut an existing file to length 0 on open (O_TRUNC); needs write.
    pub fn truncate(&mut self, v: bool) -> &mut Self {
        self.truncate = v;
        self
    }

    /// Create the file if it does not exist (O_CREAT); needs write.
    pub fn create(&mut self, v: bool) -> &mut Self {
        self.create = v;
        self
    }

    /// Create, failing if the file exists (O_CREAT | O_EXCL).
    pub fn create_new(&mut self, v: bool) -> &mut Self {
        self.create_new = v;
        self
    }

    /// Every write durable on return (O_SYNC).
    pub fn sync(&mut self, v: bool) -> &mut Self {
        self.sync = v;
        self
    }

    /// Permission bits of a file this call creates.
    pub fn mode(&mut self, mode: u32) -> &mut Self {
        self.mode = mode;
        self
    }

    /// Opens `p` in `fs`.
    pub fn open<D: PmDevice>(&self, fs: &Fs<D>, p: &str) -> Result<File<D>> {
        let writable = self.write || self.append;
        if (self.truncate || self.create || self.create_new) && !writable {
            return Err(FsError::InvalidArgument(
                "create and truncate need write access",
            ));
        }
        let core = &fs.core;
        let ino = if self.create_new {
            let (parent, name) = path::resolve_parent(core, p)?;
            core.mknod(parent, name, FileKind::Regular, self.mode, 0, fs.owner)?
                .ino
        } else {
            match path::resolve(core, p, true) {
                Ok(ino) => ino,
                Err(FsError::NotFound) if self.create => {
                    let (parent, name) = path::resolve_parent(core, p)?;
                    match core.mknod(parent, name, FileKind::Regular, self.mode, 0, fs.owner) {
                        Ok(a) => a.ino,
                        Err(FsError::AlreadyExists) => path::resolve(core, p, true)?,
                        Err(e) => return Err(e),
                    }
                }
                Err(e) => return Err(e),
            }
        };
        self.open_inode(fs, ino)
    }

    /// Opens the file or directory `ino` found by the caller's own path
    /// resolution (the C ABI resolves paths as the kernel does): counts
    /// the handle, refuses write access to a directory, truncates if
    /// asked. `create` and `create_new` play no part here.
    pub fn open_inode<D: PmDevice>(&self, fs: &Fs<D>, ino: u64) -> Result<File<D>> {
        let core = &fs.core;
        let writable = self.write || self.append;
        core.may_open(ino, writable, self.append)?;
        let attr = core.open(ino)?;
        let file = File {
            fs: fs.clone(),
            ino,
            inode: core.inode(ino)?,
            pos: 0,
            readable: self.read,
            writable,
            append: self.append,
            sync: self.sync,
        };
        if attr.kind == FileKind::Directory && writable {
            return Err(FsError::IsADirectory);
        }
        if self.truncate && attr.size > 0 {
            core.setattr(
                ino,
                &SetAttr {
                    size: Some(0),
                    ..Default::default()
                },
            )?;
        }
        Ok(file)
    }
}

/// An open file. Closing it (dropping) frees an unlinked file's space
/// once no handle is left.
pub struct File<D: PmDevice> {
    pub(super) fs: Fs<D>,
    pub(super) ino: u64,
    /// The loaded inode: it stays loaded while a handle is open (an
    /// unlinked one is freed only at the last release).
    inode: InodeRef,
    pos: u64,
    pub(super) readable: bool,
    pub(super) writable: bool,
    append: bool,
    sync: bool,
}

impl<D: PmDevice> File<D> {
    /// The inode number.
    pub fn ino(&self) -> u64 {
        self.ino
    }

    /// Reads at `off` without moving the cursor.
    pub fn read_at(&self, buf: &mut [u8], off: u64) -> Result<usize> {
        if !self.readable {
            return Err(FsError::BadHandle);
        }
        self.fs.core.read_ref(&self.inode, off, buf)
    }

    /// Writes at `off` (at the end for an append handle) without moving
    /// the cursor.
    pub fn write_at(&self, data: &[u8], off: u64) -> Result<usize> {
        if !self.writable {
            return Err(FsError::BadHandle);
        }
        let at = (!self.append).then_some(off);
        Ok(self.fs.core.write_ref(&self.inode, at, data, self.sync)?.0)
    }

    /// Writes at `at`, or at the end of the file when `at` is None (found
    /// under the inode lock, as O_APPEND), durable on return when `sync`
    /// or the handle was opened `sync`; the cursor does not move. Returns
    /// the bytes written and the offset they went to. For callers that
    /// keep their own cursor and per-call flags (O_APPEND changed by
    /// fcntl, RWF_SYNC).
    pub fn write_to(&self, data: &[u8], at: Option<u64>, sync: bool) -> Result<(usize, u64)> {
        if !self.writable {
            return Err(FsError::BadHandle);
        }
        self.fs
            .core
            .write_ref(&self.inode, at, data, sync || self.sync)
    }

    /// Makes data and metadata durable.
    pub fn sync_all(&self) -> Result<()> {
        self.fs.core.fsync(self.ino)
    }

    /// Makes data durable (and the metadata needed to read it back).
    pub fn sync_data(&self) -> Result<()> {
        self.fs.core.fsync(self.ino)
    }

    /// Truncates or extends the file.
    pub fn set_len(&self, size: u64) -> Result<()> {
        if !self.writable {
            return Err(FsError::BadHandle);
        }
        self.fs.core.setattr(
            self.ino,
            &SetAttr {
                size: Some(size),
                ..Default::default()
            },
        )?;
        Ok(())
    }

    /// The open file's attributes, even after it was unlinked.
    pub fn metadata(&self) -> Result<Metadata> {
        Ok(Metadata::from(self.fs.core.getattr(self.ino)?))
    }
}

impl<D: PmDevice> Read for File<D> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.read_at(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl<D: PmDevice> Write for File<D> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if !self.writable {
            return Err(FsError::BadHandle.into());
        }
        let at = (!self.append).then_some(self.pos);
        let (n, off) = self.fs.core.write_ref(&self.inode, at, data, self.sync)?;
        self.pos = off + n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<D: PmDevice> Seek for File<D> {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let base = match to {
            SeekFrom::Start(o) => {
                self.pos = o;
                return Ok(o);
            }
            SeekFrom::End(d) => (self.fs.core.getattr(self.ino)?.size, d),
            SeekFrom::Current(d) => (self.pos, d),
        };
        match base.0.checked_add_signed(base.1) {
            Some(p) => {
                self.pos = p;
                Ok(p)
            }
            None => Err(FsError::InvalidArgument("seek before the start of the file").into()),
        }
    }
}

impl<D: PmDevice> Drop for File<D> {
    fn drop(&mut self) {
        // A failure here means the pool is poisoned; the error was already
        // reported to whoever caused it, and the inode stays an orphan for
        // the next mount to free.
        let _ = self.fs.core.release(self.ino);
    }
}
