//! The library API, in the shape a Rust user knows from `std::fs`: a
//! file-system handle with path-based operations, `OpenOptions`, and a
//! `File` with `Read`/`Write`/`Seek`. `Fs` is `Send + Sync` and cheap to
//! clone; clones share one mounted pool.

mod durability;
mod file;
mod map;
mod metadata;
mod path;

pub use file::{File, OpenOptions};
pub use map::{MapOptions, Mapping};
pub use metadata::{FileType, Metadata, Permissions};

use crate::error::{FsError, Result};
use crate::fs::{self as core_fs, Core, MountOptions, RecoveryReport};
use crate::types::{Owner, RenameMode, SetAttr, StatFs, TimeSet};
use amber_format::{FileKind, FormatParams, Timespec, ROOT_INO};
use amber_pmem::{DramOverlay, PmDevice};
use std::sync::Arc;

/// Why `Fs::into_device` kept the device.
#[derive(Debug)]
pub enum IntoDeviceError {
    /// The clean unmount failed.
    Unmount(FsError),
    /// Something else (a clone of the handle, an open `File`, a mapping,
    /// a thread) still held the pool this long after the mount ended.
    InUse(std::time::Duration),
}

impl std::fmt::Display for IntoDeviceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IntoDeviceError::Unmount(e) => write!(f, "unmount: {e}"),
            IntoDeviceError::InUse(t) => write!(
                f,
                "pool still in use (an open file?) {} ms after its mount ended",
                t.as_millis()
            ),
        }
    }
}

impl std::error::Error for IntoDeviceError {}

/// A mounted Amber file system.
pub struct Fs<D: PmDevice> {
    core: Arc<Core<D>>,
    owner: Owner,
}

impl<D: PmDevice> Clone for Fs<D> {
    fn clone(&self) -> Self {
        Fs {
            core: self.core.clone(),
            owner: self.owner,
        }
    }
}

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// The entry's name (a listing with a name that is not UTF-8 fails).
    pub name: String,
    /// The inode it names.
    pub ino: u64,
    /// Its type, from the entry (symlinks are not followed).
    pub file_type: FileType,
}

impl<D: PmDevice> Fs<D> {
    /// Creates an empty file system on `dev` (mkfs).
    pub fn format(dev: &D, params: &FormatParams) -> Result<()> {
        core_fs::format(dev, params)
    }

    /// Mounts `dev`, recovering it after a crash. New files are owned by
    /// the calling process's user and group.
    pub fn mount(dev: D, opts: MountOptions) -> Result<(Fs<D>, RecoveryReport)> {
        let (core, report) = core_fs::mount(Arc::new(dev), opts)?;
        let core = Arc::new(core);
        core.start_background();
        Ok((
            Fs {
                core,
                owner: Owner::current_process(),
            },
            report,
        ))
    }

    /// Opens a damaged or crashed pool read-only for copying out what
    /// still reads, never writing it: recovery, if any, goes into the
    /// overlay (docs/design.md §6.2). Returns what was found wrong and
    /// worked around, one line each.
    pub fn salvage(dev: DramOverlay<D>) -> Result<(Fs<DramOverlay<D>>, Vec<String>)> {
        let (core, notes) = core_fs::salvage(Arc::new(dev))?;
        let fs = Fs {
            core: Arc::new(core),
            owner: Owner::current_process(),
        };
        Ok((fs, notes))
    }

    /// Unmounts cleanly (the pool is marked clean; the next mount needs no
    /// recovery). Open `File`s should be closed first: an unlinked file
    /// still open stays for the next mount to free.
    pub fn unmount(self) -> Result<()> {
        self.core.unmount()
    }

    /// Ends this mount and takes the device back: unmounted cleanly
    /// (`unmount`), or dropped as a crash leaves it (what only DRAM held
    /// is gone). A policy's background thread in the middle of a pass
    /// holds the core until the pass ends, so this waits for the last
    /// other holder, at most `wait`.
    pub fn into_device(
        self,
        unmount: bool,
        wait: std::time::Duration,
    ) -> std::result::Result<D, IntoDeviceError> {
        let mut dev = Arc::clone(self.core.device());
        if unmount {
            self.unmount().map_err(IntoDeviceError::Unmount)?;
        } else {
            drop(self);
        }
        let deadline = std::time::Instant::now() + wait;
        // Bounded by the deadline.
        loop {
            match Arc::try_unwrap(dev) {
                Ok(d) => return Ok(d),
                Err(held) if std::time::Instant::now() < deadline => {
                    dev = held;
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                Err(_) => return Err(IntoDeviceError::InUse(wait)),
            }
        }
    }

    /// The inode-level interface (used by the FUSE adapter).
    pub fn core(&self) -> &Arc<Core<D>> {
        &self.core
    }

    /// Sets who owns files this handle creates.
    pub fn with_owner(mut self, owner: Owner) -> Self {
        self.owner = owner;
        self
    }

    fn resolve(&self, p: &str) -> Result<u64> {
        path::resolve(&self.core, p, true)
    }

    fn parent_of<'a>(&self, p: &'a str) -> Result<(u64, &'a [u8])> {
        path::resolve_parent(&self.core, p)
    }

    /// Metadata of `p`, following a final symlink.
    pub fn metadata(&self, p: &str) -> Result<Metadata> {
        Ok(Metadata::from(self.core.getattr(self.resolve(p)?)?))
    }

    /// Metadata of `p` itself, even if it is a symlink.
    pub fn symlink_metadata(&self, p: &str) -> Result<Metadata> {
        let ino = path::resolve(&self.core, p, false)?;
        Ok(Metadata::from(self.core.getattr(ino)?))
    }

    /// Whether `p` exists (following symlinks).
    pub fn exists(&self, p: &str) -> bool {
        self.resolve(p).is_ok()
    }

    /// Creates directory `p` (mode 0o755); its parent must exist.
    pub fn create_dir(&self, p: &str) -> Result<()> {
        let (parent, name) = self.parent_of(p)?;
        self.core.mkdir(parent, name, 0o755, self.owner).map(|_| ())
    }

    /// Creates `p` and any missing parents; existing directories are fine.
    pub fn create_dir_all(&self, p: &str) -> Result<()> {
        let mut at = ROOT_INO;
        for comp in path::components(p)? {
            at = match self.core.lookup(at, comp) {
                Ok(a) if a.kind == FileKind::Directory => a.ino,
                Ok(_) => return Err(FsError::NotADirectory),
                Err(FsError::NotFound) => match self.core.mkdir(at, comp, 0o755, self.owner) {
                    Ok(a) => a.ino,
                    Err(FsError::AlreadyExists) => self.core.lookup(at, comp)?.ino,
                    Err(e) => return Err(e),
                },
                Err(e) => return Err(e),
            };
        }
        Ok(())
    }

    /// Removes the name `p` of a file that is not a directory; the file
    /// is freed with its last name and last open handle.
    pub fn remove_file(&self, p: &str) -> Result<()> {
        let (parent, name) = self.parent_of(p)?;
        self.core.unlink(parent, name)
    }

    /// Removes the empty directory `p`.
    pub fn remove_dir(&self, p: &str) -> Result<()> {
        let (parent, name) = self.parent_of(p)?;
        self.core.rmdir(parent, name)
    }

    /// Renames, replacing an existing target as POSIX rename does.
    pub fn rename(&self, from: &str, to: &str) -> Result<()> {
        self.rename_with(from, to, RenameMode::Replace)
    }

    /// Renames with RENAME_NOREPLACE or RENAME_EXCHANGE semantics.
    pub fn rename_with(&self, from: &str, to: &str, mode: RenameMode) -> Result<()> {
        let (op, on) = self.parent_of(from)?;
        let (np, nn) = self.parent_of(to)?;
        self.core.rename(op, on, np, nn, mode)
    }

    /// Creates symlink `link` pointing at `target`.
    pub fn symlink(&self, target: &str, link: &str) -> Result<()> {
        let (parent, name) = self.parent_of(link)?;
        self.core
            .symlink(parent, name, target.as_bytes(), self.owner)
            .map(|_| ())
    }

    /// The target of symlink `p` (InvalidArgument if it is not UTF-8).
    pub fn read_link(&self, p: &str) -> Result<String> {
        let ino = path::resolve(&self.core, p, false)?;
        let t = self.core.readlink(ino)?;
        String::from_utf8(t).map_err(|_| FsError::InvalidArgument("symlink target is not UTF-8"))
    }

    /// Creates `link` as another name of `original`.
    pub fn hard_link(&self, original: &str, link: &str) -> Result<()> {
        let ino = path::resolve(&self.core, original, false)?;
        let (parent, name) = self.parent_of(link)?;
        self.core.link(ino, parent, name).map(|_| ())
    }

    /// Sets the permission bits of `p` (chmod), following symlinks.
    pub fn set_permissions(&self, p: &str, perm: Permissions) -> Result<()> {
        let set = SetAttr {
            perm: Some(perm.mode()),
            ..Default::default()
        };
        self.core.setattr(self.resolve(p)?, &set).map(|_| ())
    }

    /// Sets the owner and/or group of `p` (chown); `None` keeps one.
    pub fn set_owner(&self, p: &str, uid: Option<u32>, gid: Option<u32>) -> Result<()> {
        let set = SetAttr {
            uid,
            gid,
            ..Default::default()
        };
        self.core.setattr(self.resolve(p)?, &set).map(|_| ())
    }

    /// Sets access and modification times.
    pub fn set_times(&self, p: &str, atime: Timespec, mtime: Timespec) -> Result<()> {
        let set = SetAttr {
            atime: Some(TimeSet::At(atime)),
            mtime: Some(TimeSet::At(mtime)),
            ..Default::default()
        };
        self.core.setattr(self.resolve(p)?, &set).map(|_| ())
    }

    /// Entries of directory `p`, without "." and "..".
    pub fn read_dir(&self, p: &str) -> Result<Vec<DirEntry>> {
        let ino = self.resolve(p)?;
        let mut out = Vec::new();
        let mut bad_name = false;
        self.core.readdir(ino, 0, |e| {
            match String::from_utf8(e.name) {
                Ok(name) => out.push(DirEntry {
                    name,
                    ino: e.ino,
                    file_type: FileType(e.kind),
                }),
                Err(_) => bad_name = true,
            }
            true
        })?;
        if bad_name {
            return Err(FsError::InvalidArgument(
                "directory holds a name that is not UTF-8",
            ));
        }
        Ok(out)
    }

    /// Space and inode usage of the whole file system.
    pub fn statfs(&self) -> StatFs {
        self.core.statfs()
    }

    /// Opens `p` for reading.
    pub fn open(&self, p: &str) -> Result<File<D>> {
        OpenOptions::new().read(true).open(self, p)
    }

    /// Creates or truncates `p` and opens it for writing.
    pub fn create(&self, p: &str) -> Result<File<D>> {
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(self, p)
    }

    /// The whole contents of file `p`; `OutOfMemory` for a file larger
    /// than the memory the process can have (a sparse file can be far
    /// larger than the pool), as `std::fs::read` refuses it.
    pub fn read(&self, p: &str) -> Result<Vec<u8>> {
        let ino = self.resolve(p)?;
        let size = self.core.getattr(ino)?.size;
        let len = usize::try_from(size).map_err(|_| FsError::OutOfMemory)?;
        let mut buf = Vec::new();
        buf.try_reserve_exact(len)
            .map_err(|_| FsError::OutOfMemory)?;
        buf.resize(len, 0);
        let n = self.core.read(ino, 0, &mut buf)?;
        buf.truncate(n);
        Ok(buf)
    }

    /// Replaces the contents of file `p`, creating it if needed.
    pub fn write(&self, p: &str, data: &[u8]) -> Result<()> {
        let f = self.create(p)?;
        f.write_at(data, 0)?;
        Ok(())
    }
}
