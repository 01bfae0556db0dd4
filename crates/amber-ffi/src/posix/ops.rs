//! POSIX calls on paths, once resolution found where they lead in the
//! pool: open, mkdir, unlink/rmdir, rename, symlink, link, and the
//! attribute calls. Shared by the C library and the interposer.

use amber_core::{Attr, FsError, OpenOptions, RenameMode, SetAttr};
use amber_format::FileKind;

use super::errno::{Errno, PResult};
use super::file::OpenFile;
use super::pool::Pool;
use super::resolve::{Found, Walker};

fn is_dir(a: &Attr) -> bool {
    a.kind == FileKind::Directory
}

impl Pool {
    /// A resolver for this pool; `mount` is the interposer's mount
    /// directory (None for the C library).
    pub fn walker<'a>(&'a self, mount: Option<&'a [u8]>) -> Walker<'a> {
        Walker {
            core: self.core(),
            mount,
        }
    }

    pub fn attr(&self, ino: u64) -> PResult<Attr> {
        Ok(self.core().getattr(ino)?)
    }

    /// open(2) of `f` with `flags`; `mode` for a file it creates, less
    /// `umask` unless the directory's default ACL replaces it (as Linux).
    pub fn open_found(&self, f: &Found, flags: i32, mode: u32, umask: u32) -> PResult<OpenFile> {
        if flags & libc::O_TMPFILE == libc::O_TMPFILE {
            return Err(Errno(libc::EOPNOTSUPP));
        }
        let creat = flags & libc::O_CREAT != 0;
        let ino = match f.ino {
            Some(_) if creat && flags & libc::O_EXCL != 0 => return Err(Errno(libc::EEXIST)),
            Some(ino) => ino,
            None if creat && f.dir_only => return Err(Errno(libc::EISDIR)),
            None if creat => self.create(f, flags, mode, umask)?,
            None => return Err(Errno(libc::ENOENT)),
        };
        let a = self.attr(ino)?;
        let acc = flags & libc::O_ACCMODE;
        let path_only = flags & libc::O_PATH != 0;
        let writes = !path_only && acc != libc::O_RDONLY;
        if (flags & libc::O_DIRECTORY != 0 || f.dir_only) && !is_dir(&a) {
            return Err(Errno(libc::ENOTDIR));
        }
        if is_dir(&a) && writes {
            return Err(Errno(libc::EISDIR));
        }
        if a.kind == FileKind::Symlink && !path_only {
            return Err(Errno(libc::ELOOP)); // O_NOFOLLOW met a symlink
        }
        let file = OpenOptions::new()
            .read(!path_only && acc != libc::O_WRONLY)
            .write(writes)
            .truncate(writes && flags & libc::O_TRUNC != 0 && a.kind == FileKind::Regular)
            .open_inode(self.fs(), ino)?;
        Ok(OpenFile::new(self.core().clone(), file, a.kind, flags))
    }

    /// The file O_CREAT makes; one made meanwhile by another thread is
    /// opened instead unless O_EXCL.
    fn create(&self, f: &Found, flags: i32, mode: u32, umask: u32) -> PResult<u64> {
        let name = f.entry(libc::EISDIR)?;
        let perm = mode & 0o7777;
        let owner = self.owner().with_umask(umask);
        match self
            .core()
            .mknod(f.parent, name, FileKind::Regular, perm, 0, owner)
        {
            Ok(a) => Ok(a.ino),
            Err(FsError::AlreadyExists) if flags & libc::O_EXCL == 0 => {
                Ok(self.core().lookup(f.parent, name)?.ino)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// mkdir(2) of `f`: `mode` less `umask` unless a default ACL replaces it.
    pub fn mkdir_found(&self, f: &Found, mode: u32, umask: u32) -> PResult<()> {
        if f.ino.is_some() {
            return Err(Errno(libc::EEXIST));
        }
        let name = f.entry(libc::EEXIST)?;
        let owner = self.owner().with_umask(umask);
        self.core().mkdir(f.parent, name, mode & 0o7777, owner)?;
        Ok(())
    }

    /// unlink(2) (`dir` false) or rmdir(2) (`dir` true).
    pub fn remove_found(&self, f: &Found, dir: bool) -> PResult<()> {
        f.existing()?;
        if dir {
            let name = f.entry(libc::EBUSY)?;
            if name == b".." {
                return Err(Errno(libc::ENOTEMPTY));
            }
            Ok(self.core().rmdir(f.parent, name)?)
        } else {
            if f.dir_only {
                return Err(Errno(libc::ENOTDIR));
            }
            let name = f.entry(libc::EISDIR)?;
            Ok(self.core().unlink(f.parent, name)?)
        }
    }

    /// renameat2(2) with flags 0, RENAME_NOREPLACE or RENAME_EXCHANGE.
    pub fn rename_found(&self, from: &Found, to: &Found, flags: u32) -> PResult<()> {
        let mode = match flags {
            0 => RenameMode::Replace,
            libc::RENAME_NOREPLACE => RenameMode::NoReplace,
            libc::RENAME_EXCHANGE => RenameMode::Exchange,
            _ => return Err(Errno(libc::EINVAL)),
        };
        from.existing()?;
        let (old, new) = (from.entry(libc::EBUSY)?, to.entry(libc::EBUSY)?);
        Ok(self.core().rename(from.parent, old, to.parent, new, mode)?)
    }

    pub fn symlink_found(&self, target: &[u8], f: &Found) -> PResult<()> {
        if f.ino.is_some() {
            return Err(Errno(libc::EEXIST));
        }
        let name = f.entry(libc::EEXIST)?;
        self.core().symlink(f.parent, name, target, self.owner())?;
        Ok(())
    }

    pub fn link_found(&self, ino: u64, f: &Found) -> PResult<()> {
        if f.ino.is_some() {
            return Err(Errno(libc::EEXIST));
        }
        let name = f.entry(libc::EEXIST)?;
        self.core().link(ino, f.parent, name)?;
        Ok(())
    }

    pub fn readlink(&self, ino: u64) -> PResult<Vec<u8>> {
        match self.core().readlink(ino) {
            Err(FsError::InvalidArgument(_)) => Err(Errno(libc::EINVAL)),
            r => Ok(r?),
        }
    }

    pub fn setattr(&self, ino: u64, set: &SetAttr) -> PResult<Attr> {
        Ok(self.core().setattr(ino, set)?)
    }

    /// access(2) from the permission bits, for `uid`/`gid` (root may
    /// read and write anything, and execute what anyone may).
    pub fn access(&self, ino: u64, mask: i32, uid: u32, gid: u32) -> PResult<()> {
        let a = self.attr(ino)?;
        if amber_posix::may_access(&a, uid, gid, mask) {
            Ok(())
        } else {
            Err(Errno(libc::EACCES))
        }
    }
}
