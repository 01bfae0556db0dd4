//! An open file description: what open(2) makes and dup(2) shares — the
//! file, its access mode and status flags, and its offset — and the I/O
//! calls on it.

use std::sync::atomic::{AtomicI32, Ordering};

use amber_core::data::FallocMode;
use std::sync::Arc;

use amber_core::{Attr, Core, File, SetAttr};
use amber_format::FileKind;
use parking_lot::Mutex;

use super::errno::{Errno, PResult};
use super::pool::Dev;

/// Status flags F_SETFL may change (Linux: O_APPEND, O_ASYNC, O_DIRECT,
/// O_NOATIME, O_NONBLOCK); the access mode and O_SYNC stay as opened.
const SETFL_MASK: i32 =
    libc::O_APPEND | libc::O_ASYNC | libc::O_DIRECT | libc::O_NOATIME | libc::O_NONBLOCK;

pub struct OpenFile {
    core: Arc<Core<Dev>>,
    file: File<Dev>,
    kind: FileKind,
    flags: AtomicI32,
    /// The offset; held across a read or write, as Linux holds f_pos_lock,
    /// so concurrent read(2)s on one description never read the same bytes.
    pos: Mutex<u64>,
}

impl OpenFile {
    pub fn new(core: Arc<Core<Dev>>, file: File<Dev>, kind: FileKind, flags: i32) -> OpenFile {
        OpenFile {
            core,
            file,
            kind,
            flags: AtomicI32::new(
                flags & !(libc::O_CREAT | libc::O_EXCL | libc::O_TRUNC | libc::O_CLOEXEC),
            ),
            pos: Mutex::new(0),
        }
    }

    pub fn core(&self) -> &Arc<Core<Dev>> {
        &self.core
    }

    pub fn ino(&self) -> u64 {
        self.file.ino()
    }

    pub fn kind(&self) -> FileKind {
        self.kind
    }

    /// The access mode and status flags (F_GETFL).
    pub fn flags(&self) -> i32 {
        self.flags.load(Ordering::Relaxed)
    }

    /// F_SETFL: changes the flags Linux lets it change.
    pub fn set_flags(&self, flags: i32) {
        let old = self.flags();
        self.flags.store(
            (old & !SETFL_MASK) | (flags & SETFL_MASK),
            Ordering::Relaxed,
        );
    }

    fn is_path_only(&self) -> bool {
        self.flags() & libc::O_PATH != 0
    }

    /// Fails with EBADF on an O_PATH descriptor, which only names a file.
    fn usable(&self) -> PResult<()> {
        if self.is_path_only() {
            Err(Errno(libc::EBADF))
        } else {
            Ok(())
        }
    }

    fn regular(&self) -> PResult<()> {
        self.usable()?;
        match self.kind {
            FileKind::Regular => Ok(()),
            FileKind::Directory => Err(Errno(libc::EISDIR)),
            _ => Err(Errno(libc::EINVAL)),
        }
    }

    /// Whether each write must be durable on return (O_SYNC, O_DSYNC).
    fn sync(&self) -> bool {
        self.flags() & libc::O_DSYNC != 0
    }

    pub fn pread(&self, buf: &mut [u8], off: u64) -> PResult<usize> {
        self.regular()?;
        Ok(self.file.read_at(buf, off)?)
    }

    /// pwrite(2); `sync` adds RWF_SYNC/RWF_DSYNC. On Linux, pwrite on an
    /// O_APPEND description appends too.
    pub fn pwrite(&self, data: &[u8], off: u64, sync: bool) -> PResult<usize> {
        self.regular()?;
        let at = (self.flags() & libc::O_APPEND == 0).then_some(off);
        Ok(self.file.write_to(data, at, sync || self.sync())?.0)
    }

    pub fn read(&self, buf: &mut [u8]) -> PResult<usize> {
        self.regular()?;
        let mut pos = self.pos.lock();
        let n = self.file.read_at(buf, *pos)?;
        *pos += n as u64;
        Ok(n)
    }

    pub fn write(&self, data: &[u8]) -> PResult<usize> {
        self.write_at_pos(data, false)
    }

    /// write(2) with RWF_SYNC (pwritev2 at the current offset).
    pub fn write_sync(&self, data: &[u8]) -> PResult<usize> {
        self.write_at_pos(data, true)
    }

    fn write_at_pos(&self, data: &[u8], sync: bool) -> PResult<usize> {
        self.regular()?;
        let mut pos = self.pos.lock();
        let at = (self.flags() & libc::O_APPEND == 0).then_some(*pos);
        let (n, off) = self.file.write_to(data, at, sync || self.sync())?;
        *pos = off + n as u64;
        Ok(n)
    }

    /// lseek(2), SEEK_DATA and SEEK_HOLE included.
    pub fn lseek(&self, off: i64, whence: i32) -> PResult<u64> {
        self.usable()?;
        let mut pos = self.pos.lock();
        let new = match whence {
            libc::SEEK_SET => u64::try_from(off).ok(),
            libc::SEEK_CUR => pos.checked_add_signed(off),
            libc::SEEK_END => self.attr()?.size.checked_add_signed(off),
            libc::SEEK_DATA | libc::SEEK_HOLE => {
                let from = u64::try_from(off).map_err(|_| Errno(libc::ENXIO))?;
                let core = &self.core;
                Some(core.seek_data(self.ino(), from, whence == libc::SEEK_DATA)?)
            }
            _ => return Err(Errno(libc::EINVAL)),
        };
        let new = new
            .filter(|&p| i64::try_from(p).is_ok())
            .ok_or(Errno(libc::EINVAL))?;
        *pos = new;
        Ok(new)
    }

    pub fn attr(&self) -> PResult<Attr> {
        Ok(self.core.getattr(self.ino())?)
    }

    pub fn fsync(&self) -> PResult<()> {
        Ok(self.file.sync_all()?)
    }

    pub fn ftruncate(&self, size: u64) -> PResult<()> {
        self.regular()?;
        if self.flags() & libc::O_ACCMODE == libc::O_RDONLY {
            return Err(Errno(libc::EINVAL));
        }
        Ok(self.file.set_len(size)?)
    }

    /// fallocate(2) with the modes the core has: 0, KEEP_SIZE, and
    /// PUNCH_HOLE|KEEP_SIZE.
    pub fn fallocate(&self, mode: i32, off: u64, len: u64) -> PResult<()> {
        self.regular()?;
        if self.flags() & libc::O_ACCMODE == libc::O_RDONLY {
            return Err(Errno(libc::EBADF));
        }
        const KEEP: i32 = libc::FALLOC_FL_KEEP_SIZE;
        let how = match mode {
            0 => FallocMode::Allocate { keep_size: false },
            KEEP => FallocMode::Allocate { keep_size: true },
            m if m == libc::FALLOC_FL_PUNCH_HOLE | KEEP => FallocMode::PunchHole,
            _ => return Err(Errno(libc::EOPNOTSUPP)),
        };
        if len == 0 {
            return Err(Errno(libc::EINVAL));
        }
        let core = &self.core;
        Ok(core.fallocate(self.ino(), off, len, how)?)
    }

    /// fchmod, fchown, futimens: attribute changes through the descriptor.
    pub fn setattr(&self, set: &SetAttr) -> PResult<Attr> {
        Ok(self.core.setattr(self.ino(), set)?)
    }
}
