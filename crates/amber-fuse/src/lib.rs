//! Amber in the kernel's namespace: a FUSE file system that turns each
//! request into one call of the inode-level API ([`amber_core::Core`]) and
//! each [`amber_core::FsError`] into an errno (`errno.rs`, the only place
//! that mapping lives). Inode numbers are the core's own (the root is 1 in
//! both), so no table translates them, and `forget` has nothing to drop.
//!
//! How it is mounted ([`session_config`]), and why:
//!
//! * `default_permissions` and FUSE_POSIX_ACL: the kernel checks
//!   permission bits and POSIX ACLs (read through getxattr and cached),
//!   sticky directories and search permission on every path component,
//!   with all of the caller's groups, as for a local file system. The
//!   core keeps the ACLs and the mode in step and applies a directory's
//!   default ACL, or else the caller's umask, to what is created in it
//!   (FUSE_DONT_MASK: the kernel passes both unapplied). The adapter does
//!   no permission checks of its own beyond what only it can know (the
//!   namespace rules of extended attributes, and `access` for mounts
//!   without that option).
//! * `allow_other`: pjdfstest and multi-user workloads switch uids.
//! * No writeback cache: every write reaches the core before the syscall
//!   returns, so `fsync`, O_SYNC and O_DSYNC give exactly the library's
//!   guarantees (README, "Durability guarantees"); with a writeback cache
//!   the kernel would hold dirty pages and a crash of the daemon's machine
//!   could lose writes the application saw succeed. Reads still use the
//!   page cache, which stays coherent because this daemon owns the pool.
//! * Under a policy whose every write is atomic (`DataPolicy::atomic_writes`)
//!   regular files are opened with FOPEN_DIRECT_IO, so that one write(2)
//!   is one request and so one core write: the page-cache write path cuts
//!   a write at page boundaries (it sends a leading partial page that is
//!   not cached on its own), and the core would commit the pieces apart.
//!   A direct write is cut only where it exceeds one request: `max_write`
//!   is set to the most the kernel's page limit allows ([`request_bytes`]),
//!   and the kernel also stops a request at that many pages of the
//!   caller's buffer. Reads of those files then bypass the page cache too;
//!   FUSE_DIRECT_IO_ALLOW_MMAP keeps shared mappings of them working.
//! * Attribute and entry TTL of 1 s, nanosecond timestamps: nothing but
//!   this daemon changes the pool, so the kernel's cache is never stale —
//!   but for regular files with set-user-ID or set-group-ID, which the
//!   kernel may not cache at all: a write drops those bits in the core,
//!   where the kernel does not see it (`ttl_of`).
//! * POSIX record locks and flock are not implemented: FUSE then keeps
//!   them in the kernel, local to this mount, which is where the FUSE
//!   protocol allows them to be correct (a single daemon, a single host).
//! * New inodes belong to the requesting uid and gid; the core applies
//!   the set-group-id directory rule.
#![forbid(unsafe_code)]

mod attr;
mod dir;
mod errno;
mod handles;
mod ioctl;
mod leases;
mod privs;
mod xattr;

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use amber_core::data::FallocMode;
use amber_core::{Attr, Core, FsError, Owner, RenameMode, SetAttr, TimeSet};
use amber_format::FileKind;
use amber_pmem::PmDevice;
use fuser::{
    AccessFlags, Config, Errno, FileHandle, Filesystem, FopenFlags, Generation, INodeNo, InitFlags,
    IoctlFlags, KernelConfig, LockOwner, MountOption, OpenFlags, RenameFlags, ReplyAttr,
    ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyIoctl,
    ReplyLseek, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, SessionACL, TimeOrNow,
    WriteFlags,
};

use crate::attr::{file_attr, timespec};
use crate::errno::errno;
use crate::handles::Handles;
use crate::xattr::Access;
use amber_posix::may_access;

/// Writes a line to the daemon's log (its standard error). A closed or
/// broken one loses the line, never the daemon, as `eprintln!` would by
/// panicking in a worker.
pub(crate) fn log(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let _ = writeln!(io::stderr(), "amberfs: {line}");
}

/// How long the kernel may cache attributes and names.
const TTL: Duration = Duration::from_secs(1);

/// Session threads when the caller does not say: one can wait in a slow
/// (synchronous) write while the other answers lookups and reads.
pub const DEFAULT_THREADS: usize = 2;

/// Where the kernel says how many pages one FUSE request may carry (on
/// kernels recent enough to make it a setting).
const MAX_PAGES_LIMIT: &str = "/proc/sys/fs/fuse/max_pages_limit";
/// That limit on kernels without the file (FUSE_MAX_MAX_PAGES).
const DEFAULT_MAX_PAGES: u32 = 256;
/// The kernel's page size on x86-64, the unit of that limit.
const PAGE_SIZE: u32 = 4096;

/// The most bytes one FUSE write request carries on this kernel: its page
/// limit times the page size (1 MiB by default). A direct write(2) larger
/// than this, or whose buffer spans more pages than the limit, reaches the
/// daemon as several requests.
pub fn request_bytes() -> u32 {
    let pages = std::fs::read_to_string(MAX_PAGES_LIMIT)
        .ok()
        .and_then(|t| t.trim().parse::<u32>().ok())
        .filter(|&p| p > 0)
        .unwrap_or(DEFAULT_MAX_PAGES);
    pages.saturating_mul(PAGE_SIZE)
}

/// The fuser configuration Amber is mounted with (see the crate doc).
/// `fsname` shows as the mount's source, e.g. `amberfs:/dev/shm/a.pool`.
pub fn session_config(fsname: &str, threads: usize) -> Config {
    let mut c = Config::default();
    c.mount_options = vec![
        MountOption::FSName(fsname.to_string()),
        MountOption::Subtype("amberfs".into()),
        MountOption::DefaultPermissions,
    ];
    c.acl = SessionACL::All;
    c.n_threads = Some(threads.max(1));
    // Each thread reads its own /dev/fuse clone rather than all contending
    // for one descriptor.
    c.clone_fd = true;
    c
}

/// The FUSE file system over one mounted pool.
pub struct AmberFuse<D: PmDevice> {
    core: Arc<Core<D>>,
    handles: Handles,
    /// Every write goes to the core as a sync write and then nothing is
    /// left for fsync or flush: they are answered ENOSYS, which the kernel
    /// remembers and from then on completes them itself without a round
    /// trip (half the requests of a write + fsync).
    writes_complete: bool,
    /// How regular files are opened: FOPEN_DIRECT_IO when every write is
    /// atomic (see the crate doc), so the kernel does not split a write.
    file_open: FopenFlags,
    /// The read leases this mount grants to preloaded processes, if any.
    granting: Option<leases::Granting>,
}

impl<D: PmDevice> AmberFuse<D> {
    pub fn new(core: Arc<Core<D>>) -> Self {
        let writes_complete = core.sync_writes_are_complete();
        let file_open = if core.policy_atomic_writes() {
            FopenFlags::FOPEN_DIRECT_IO
        } else {
            FopenFlags::empty()
        };
        AmberFuse {
            core,
            handles: Handles::default(),
            writes_complete,
            file_open,
            granting: None,
        }
    }

    /// Grants read leases from `leases` (whose socket, `socket`, the root's
    /// `user.amberfs.control` names): every change of a file then recalls
    /// the leases on it first, and every close is counted in `closes`.
    #[must_use]
    pub fn with_leases(
        mut self,
        leases: Arc<amber_lease::Leases>,
        socket: PathBuf,
        closes: amber_lease::Closes,
    ) -> Self {
        self.granting = Some(leases::Granting {
            leases,
            socket,
            closes,
        });
        self
    }

    /// Recalls a write lease on `ino` before reading or changing its
    /// attributes (`leases::settled`).
    fn settled(&self, ino: u64) -> Result<Option<amber_lease::Exclusive<'_>>, Errno> {
        leases::settled(self.granting.as_ref(), ino, false)
    }

    /// Recalls the leases whose holders write `ino` behind the kernel
    /// (write leases and writable map leases) before reading its data.
    fn settled_data(&self, ino: u64) -> Result<Option<amber_lease::Exclusive<'_>>, Errno> {
        leases::settled(self.granting.as_ref(), ino, true)
    }

    /// Recalls the leases on `ino` for a change of it (`leases::changing`).
    fn changing(&self, ino: u64) -> Result<Option<amber_lease::Exclusive<'_>>, Errno> {
        leases::changing(self.granting.as_ref(), ino)
    }

    /// Opens `ino` and replies with its handle, opened as `how`.
    fn reply_open(&self, ino: u64, how: FopenFlags, reply: ReplyOpen) {
        match self.open_handle(ino) {
            Ok(fh) => reply.opened(fh, how),
            Err(e) => reply.error(errno(&e)),
        }
    }

    /// Counts an open of `ino` in the core and gives it a handle.
    fn open_handle(&self, ino: u64) -> Result<FileHandle, FsError> {
        self.core.open(ino)?;
        Ok(FileHandle(self.handles.insert(ino)))
    }

    /// Drops handle `fh`: the core frees an unlinked inode at its last
    /// release.
    /// An unlinked file's last release frees its blocks, so its leases
    /// are recalled first.
    fn release_handle(&self, fh: FileHandle, reply: ReplyEmpty) {
        let Some(ino) = self.handles.remove(fh.0) else {
            return reply.error(Errno::EBADF);
        };
        let unlinked =
            self.granting.is_some() && self.core.getattr(ino).is_ok_and(|a| a.nlink == 0);
        let _change = match unlinked.then(|| self.changing(ino)).transpose() {
            Ok(g) => g,
            Err(e) => return reply.error(e),
        };
        empty(reply, self.core.release(ino));
    }
}

fn owner(req: &Request) -> Owner {
    Owner::new(req.uid(), req.gid())
}

fn entry(reply: ReplyEntry, r: Result<Attr, FsError>) {
    match r {
        Ok(a) => reply.entry(
            &ttl_of(&TTL, &a),
            &file_attr(&a),
            Generation(a.generation.into()),
        ),
        Err(e) => reply.error(errno(&e)),
    }
}

fn attr_reply(reply: ReplyAttr, r: Result<Attr, FsError>) {
    match r {
        Ok(a) => reply.attr(&ttl_of(&TTL, &a), &file_attr(&a)),
        Err(e) => reply.error(errno(&e)),
    }
}

/// How long the kernel may keep `a`: `ttl`, but not at all for a regular
/// file with set-user-ID or set-group-ID, whose mode the next write drops
/// in the core (`note_write`) without the kernel's knowing — cached, a
/// `stat` showed the old mode for up to `ttl` after a write. Such files
/// are rare; each of their stats and lookups then reaches the daemon.
pub(crate) fn ttl_of(ttl: &Duration, a: &Attr) -> Duration {
    if a.kind == FileKind::Regular && a.perm & 0o6000 != 0 {
        Duration::ZERO
    } else {
        *ttl
    }
}

fn empty(reply: ReplyEmpty, r: Result<(), FsError>) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(errno(&e)),
    }
}

fn time_set(t: TimeOrNow) -> TimeSet {
    match t {
        TimeOrNow::Now => TimeSet::Now,
        TimeOrNow::SpecificTime(t) => TimeSet::At(timespec(t)),
    }
}

/// The kind of node a mknod mode asks for; directories and symlinks have
/// their own requests.
fn node_kind(mode: u32) -> Option<FileKind> {
    match mode & libc::S_IFMT {
        libc::S_IFREG | 0 => Some(FileKind::Regular),
        libc::S_IFIFO => Some(FileKind::Fifo),
        libc::S_IFSOCK => Some(FileKind::Socket),
        libc::S_IFCHR => Some(FileKind::CharDevice),
        libc::S_IFBLK => Some(FileKind::BlockDevice),
        _ => None,
    }
}

/// The caller of a create, with its umask: the core applies it unless
/// the directory's default ACL replaces it (the kernel passes the mode
/// unmasked under FUSE_DONT_MASK; without it the kernel masked already,
/// and masking twice is harmless).
fn creator(req: &Request, umask: u32) -> Owner {
    owner(req).with_umask(umask)
}

impl<D: PmDevice> AmberFuse<D> {
    /// Asks for write requests as large as the kernel allows and, for
    /// direct-I/O files, for shared mappings (Linux 6.6 and later; an older
    /// kernel refuses them with ENODEV, and the log says so).
    fn size_requests(&self, config: &mut KernelConfig) {
        let wanted = request_bytes();
        let bytes = match config.set_max_write(wanted) {
            Ok(_) => wanted,
            // fuser's own buffer is the bound then.
            Err(most) => {
                let _ = config.set_max_write(most);
                most
            }
        };
        if self.file_open.contains(FopenFlags::FOPEN_DIRECT_IO) {
            eprintln!(
                "amberfs: every write(2) of up to {bytes} bytes from one buffer that spans at \
                 most {} pages is one request, and atomic",
                bytes / PAGE_SIZE
            );
            if config
                .add_capabilities(InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP)
                .is_err()
            {
                eprintln!(
                    "amberfs: kernel lacks FUSE_DIRECT_IO_ALLOW_MMAP: shared writable \
                     mappings of files fail with ENODEV on this mount"
                );
            }
        }
    }
}

impl<D: PmDevice + 'static> Filesystem for AmberFuse<D> {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> io::Result<()> {
        // Each is an optimization a kernel may lack; without it the kernel
        // simply does not use it, so a refusal is not an error.
        // FUSE_EXPORT_SUPPORT: file handles (name_to_handle_at, NFS
        // export) name an inode and its generation, both the core's own
        // and kept on PM, and the core answers lookups of "." and ".."
        // that a handle's reconnection makes, so handles outlive remounts.
        // FUSE_POSIX_ACL with FUSE_DONT_MASK: the kernel enforces ACLs
        // (cached, read through getxattr) and passes a create's mode
        // unmasked with the umask, so a default ACL can replace the umask.
        for wanted in [
            InitFlags::FUSE_POSIX_ACL | InitFlags::FUSE_DONT_MASK,
            InitFlags::FUSE_DO_READDIRPLUS | InitFlags::FUSE_READDIRPLUS_AUTO,
            InitFlags::FUSE_PARALLEL_DIROPS,
            InitFlags::FUSE_EXPORT_SUPPORT,
        ] {
            if config.add_capabilities(wanted).is_err() {
                log(format_args!(
                    "kernel lacks {wanted:?}; continuing without it"
                ));
            }
        }
        self.size_requests(config);
        Ok(())
    }

    /// Releases what the kernel left open (a lazy unmount, a connection
    /// abort), so unlinked files are freed before the pool is marked clean.
    fn destroy(&mut self) {
        for ino in self.handles.drain() {
            if let Err(e) = self.core.release(ino) {
                log(format_args!("releasing inode {ino} at unmount: {e}"));
            }
        }
    }

    /// A file another process writes under a lease is looked up again
    /// once the lease is back: its times are the lessee's.
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let found = self.core.lookup(parent.0, name.as_bytes());
        let _settled = match found.as_ref().map(|a| self.settled(a.ino)) {
            Ok(Ok(Some(g))) => Some(g),
            Ok(Err(e)) => return reply.error(e),
            _ => None,
        };
        let found = match &_settled {
            Some(_) => self.core.lookup(parent.0, name.as_bytes()),
            None => found,
        };
        entry(reply, found);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let _settled = match self.settled(ino.0) {
            Ok(g) => g,
            Err(e) => return reply.error(e),
        };
        attr_reply(reply, self.core.getattr(ino.0));
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<std::time::SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<std::time::SystemTime>,
        _chgtime: Option<std::time::SystemTime>,
        _bkuptime: Option<std::time::SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let set = SetAttr {
            perm: mode.map(|m| m & 0o7777),
            uid,
            gid,
            size,
            atime: atime.map(time_set),
            mtime: mtime.map(time_set),
        };
        // Any change writes the file's attributes, which a write lease's
        // holder keeps; one of the size changes its blocks too.
        let change = if size.is_some() {
            self.changing(ino.0)
        } else {
            self.settled(ino.0)
        };
        let _change = match change {
            Ok(g) => g,
            Err(e) => return reply.error(e),
        };
        attr_reply(reply, self.core.setattr(ino.0, &set));
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.core.readlink(ino.0) {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let Some(kind) = node_kind(mode) else {
            return reply.error(Errno::EINVAL);
        };
        let r = self.core.mknod(
            parent.0,
            name.as_bytes(),
            kind,
            mode & 0o7777,
            rdev.into(),
            creator(req, umask),
        );
        entry(reply, r);
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let made = self.core.mkdir(
            parent.0,
            name.as_bytes(),
            mode & 0o7777,
            creator(req, umask),
        );
        entry(reply, made);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let victim = self
            .granting
            .as_ref()
            .and_then(|_| leases::victim(&self.core, parent.0, name.as_bytes()));
        let _change = match victim.map(|v| self.changing(v)).transpose() {
            Ok(g) => g,
            Err(e) => return reply.error(e),
        };
        empty(reply, self.core.unlink(parent.0, name.as_bytes()));
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        empty(reply, self.core.rmdir(parent.0, name.as_bytes()));
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let target = target.as_os_str().as_bytes();
        let r = self
            .core
            .symlink(parent.0, link_name.as_bytes(), target, owner(req));
        entry(reply, r);
    }

    /// renameat2's flags: none, NOREPLACE, EXCHANGE, and WHITEOUT (which
    /// overlayfs uses on its upper directory) alone or with NOREPLACE. The
    /// kernel has checked CAP_MKNOD for a whiteout; it is the caller's.
    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        const WHITEOUT: RenameFlags = RenameFlags::RENAME_WHITEOUT;
        const NOREPLACE: RenameFlags = RenameFlags::RENAME_NOREPLACE;
        let (old, new) = (name.as_bytes(), newname.as_bytes());
        let (p, np) = (parent.0, newparent.0);
        let victim = self
            .granting
            .as_ref()
            .and_then(|_| leases::victim(&self.core, np, new));
        let _change = match victim.map(|v| self.changing(v)).transpose() {
            Ok(g) => g,
            Err(e) => return reply.error(e),
        };
        let r = match flags {
            f if f.is_empty() => self.core.rename(p, old, np, new, RenameMode::Replace),
            NOREPLACE => self.core.rename(p, old, np, new, RenameMode::NoReplace),
            RenameFlags::RENAME_EXCHANGE => self.core.rename(p, old, np, new, RenameMode::Exchange),
            WHITEOUT => self
                .core
                .rename_whiteout(p, old, np, new, false, owner(req)),
            f if f == WHITEOUT | NOREPLACE => {
                self.core.rename_whiteout(p, old, np, new, true, owner(req))
            }
            // EXCHANGE with another flag (the kernel refuses it first).
            _ => return reply.error(Errno::EINVAL),
        };
        empty(reply, r);
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        // The reply carries the file's attributes, which the kernel
        // caches: a lessee's writes must be the core's first.
        let _settled = match self.settled(ino.0) {
            Ok(g) => g,
            Err(e) => return reply.error(e),
        };
        entry(
            reply,
            self.core.link(ino.0, newparent.0, newname.as_bytes()),
        );
    }

    /// An immutable file opens only for reading, an append-only one for
    /// writing only with O_APPEND (the core's `may_open`).
    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let write = flags.0 & libc::O_ACCMODE != libc::O_RDONLY;
        let append = flags.0 & libc::O_APPEND != 0;
        if let Err(e) = self.core.may_open(ino.0, write, append) {
            return reply.error(errno(&e));
        }
        self.reply_open(ino.0, self.file_open, reply);
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let _settled = match self.settled_data(ino.0) {
            Ok(g) => g,
            Err(e) => return reply.error(e),
        };
        let mut buf = vec![0u8; size as usize];
        match self.core.read(ino.0, offset, &mut buf) {
            Ok(n) => reply.data(&buf[..n]),
            Err(e) => reply.error(errno(&e)),
        }
    }

    /// O_APPEND and O_SYNC/O_DSYNC are read from the flags the kernel
    /// sends with every write (the file's flags now, after any fcntl, plus
    /// RWF_DSYNC/RWF_SYNC), not from the open: they can change after it.
    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        // A page written back from a shared mapping has a fixed offset,
        // whichever open file the kernel sends it through.
        let page_writeback = write_flags.contains(WriteFlags::FUSE_WRITE_CACHE);
        let append = flags.0 & libc::O_APPEND != 0 && !page_writeback;
        // O_SYNC includes the O_DSYNC bit on Linux.
        let sync = self.writes_complete || flags.0 & libc::O_DSYNC != 0;
        let at = if append { None } else { Some(offset) };
        let _change = match self.changing(ino.0) {
            Ok(g) => g,
            Err(e) => return reply.error(e),
        };
        match self.core.write(ino.0, at, data, sync) {
            Ok((n, _)) => reply.written(n as u32),
            Err(e) => reply.error(errno(&e)),
        }
    }

    /// Nothing to write at close: every write is already in the pool.
    /// A mount that grants leases counts the close before it answers
    /// (`amber_lease::Closes`), and so must never answer ENOSYS, after
    /// which the kernel sends no more; one that grants none spares every
    /// later close the round trip where its writes are complete.
    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        match &self.granting {
            Some(g) => {
                g.closes.closed();
                reply.ok();
            }
            None if self.writes_complete => reply.error(Errno::ENOSYS),
            None => reply.ok(),
        }
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.release_handle(fh, reply);
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        if self.writes_complete {
            return reply.error(Errno::ENOSYS);
        }
        // A write lease on the file is adopted first: a returned one may
        // still be on its way, and the core's fsync writes the file's
        // attribute entry, which would take a seq of the grant and could
        // overwrite the lessee's newest entry (a shrink, found undone by
        // tests/multiproc/stress.py after an fsync that followed it).
        let _settled = match self.settled(ino.0) {
            Ok(g) => g,
            Err(e) => return reply.error(e),
        };
        empty(reply, self.core.fsync(ino.0));
    }

    /// Directories are counted as open too, so one removed while a
    /// process still lists it stays readable (and empty) until closed.
    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        self.reply_open(ino.0, FopenFlags::empty(), reply);
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        reply: ReplyDirectory,
    ) {
        dir::readdir(&self.core, ino.0, offset, reply);
    }

    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        reply: ReplyDirectoryPlus,
    ) {
        let settle = |entry| self.settled(entry);
        dir::readdirplus(&self.core, (ino.0, offset), &TTL, settle, reply);
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.release_handle(fh, reply);
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        // Every directory change is a committed transaction on return.
        if self.writes_complete {
            reply.error(Errno::ENOSYS);
        } else {
            empty(reply, self.core.fsync(ino.0));
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let s = self.core.statfs();
        let bsize = s.block_size as u32;
        reply.statfs(
            s.blocks,
            s.blocks_free,
            s.blocks_free,
            s.inodes,
            s.inodes_free,
            bsize,
            s.name_max as u32,
            bsize,
        );
    }

    fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        let name = name.as_bytes();
        let how = match xattr::set_mode(flags) {
            Ok(how) => how,
            Err(e) => return reply.error(e),
        };
        let (kind, gid) = match self.core.getattr(ino.0) {
            Ok(a) => (a.kind, a.gid),
            Err(e) => return reply.error(errno(&e)),
        };
        if let Err(e) = xattr::check(name, kind, req.uid(), Access::Write) {
            return reply.error(e);
        }
        let _settled = match self.settled(ino.0) {
            Ok(g) => g,
            Err(e) => return reply.error(e),
        };
        if xattr::is_acl(name) {
            // The kernel checked the caller owns the file.
            let drop_sgid = !privs::in_group_or_root(req, gid);
            return empty(reply, self.core.set_acl(ino.0, name, value, drop_sgid));
        }
        empty(reply, self.core.setxattr(ino.0, name, value, how));
    }

    fn getxattr(&self, req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let name = name.as_bytes();
        let kind = match self.core.getattr(ino.0) {
            Ok(a) => a.kind,
            Err(e) => return reply.error(errno(&e)),
        };
        if let Err(e) = xattr::check(name, kind, req.uid(), Access::Read) {
            return reply.error(e);
        }
        if let Some(v) = leases::control_value(self.granting.as_ref(), ino.0, name) {
            return xattr::reply_sized(&v, size, reply);
        }
        match self.core.getxattr(ino.0, name) {
            Ok(v) => xattr::reply_sized(&v, size, reply),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn listxattr(&self, req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        match self.core.listxattr(ino.0) {
            Ok(names) => xattr::reply_sized(&xattr::name_list(&names, req.uid()), size, reply),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let name = name.as_bytes();
        let kind = match self.core.getattr(ino.0) {
            Ok(a) => a.kind,
            Err(e) => return reply.error(errno(&e)),
        };
        if let Err(e) = xattr::check(name, kind, req.uid(), Access::Write) {
            return reply.error(e);
        }
        let _settled = match self.settled(ino.0) {
            Ok(g) => g,
            Err(e) => return reply.error(e),
        };
        empty(reply, self.core.removexattr(ino.0, name));
    }

    /// Only called on mounts without `default_permissions` (ours have it);
    /// answers from the permission bits for those.
    fn access(&self, req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        match self.core.getattr(ino.0) {
            Ok(a) if may_access(&a, req.uid(), req.gid(), mask.bits()) => reply.ok(),
            Ok(_) => reply.error(Errno::EACCES),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        if node_kind(mode) != Some(FileKind::Regular) {
            return reply.error(Errno::EINVAL);
        }
        let made = self
            .core
            .mknod(
                parent.0,
                name.as_bytes(),
                FileKind::Regular,
                mode & 0o7777,
                0,
                creator(req, umask),
            )
            .and_then(|a| Ok((self.open_handle(a.ino)?, a)));
        match made {
            Ok((fh, a)) => reply.created(
                &ttl_of(&TTL, &a),
                &file_attr(&a),
                Generation(a.generation.into()),
                fh,
                self.file_open,
            ),
            Err(e) => reply.error(errno(&e)),
        }
    }

    /// Modes the core has: allocate (0), allocate keeping the size, punch
    /// a hole (which Linux requires to keep the size), and zero a range,
    /// keeping the size or not. Others (collapse, insert, unshare) are
    /// EOPNOTSUPP.
    fn fallocate(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        const KEEP: i32 = libc::FALLOC_FL_KEEP_SIZE;
        const PUNCH: i32 = libc::FALLOC_FL_PUNCH_HOLE;
        const ZERO: i32 = libc::FALLOC_FL_ZERO_RANGE;
        let how = match mode {
            0 => FallocMode::Allocate { keep_size: false },
            KEEP => FallocMode::Allocate { keep_size: true },
            m if m == PUNCH | KEEP => FallocMode::PunchHole,
            ZERO => FallocMode::ZeroRange { keep_size: false },
            m if m == ZERO | KEEP => FallocMode::ZeroRange { keep_size: true },
            _ => return reply.error(Errno::EOPNOTSUPP),
        };
        if length == 0 {
            return reply.error(Errno::EINVAL);
        }
        let _change = match self.changing(ino.0) {
            Ok(g) => g,
            Err(e) => return reply.error(e),
        };
        let done = self.core.fallocate(ino.0, offset, length, how);
        empty(
            reply,
            done.and_then(|()| privs::drop_sgid_of_outsider(&self.core, req, ino.0)),
        );
    }

    /// lsattr and chattr (`ioctl.rs`); other ioctls: ENOTTY.
    fn ioctl(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _flags: IoctlFlags,
        cmd: u32,
        in_data: &[u8],
        _out_size: u32,
        reply: ReplyIoctl,
    ) {
        let _change = match ioctl::changes(cmd).then(|| self.changing(ino.0)) {
            Some(Err(e)) => return reply.error(e),
            g => g,
        };
        match ioctl::answer(&self.core, req.uid(), ino.0, cmd, in_data) {
            Ok(data) => reply.ioctl(0, &data),
            Err(e) => reply.error(e),
        }
    }

    /// The kernel sends only SEEK_DATA and SEEK_HOLE: it answers SEEK_SET,
    /// SEEK_CUR and SEEK_END itself from the file position and cached size.
    fn lseek(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: i64,
        whence: i32,
        reply: ReplyLseek,
    ) {
        let data = match whence {
            libc::SEEK_DATA => true,
            libc::SEEK_HOLE => false,
            _ => return reply.error(Errno::EINVAL),
        };
        let Ok(off) = u64::try_from(offset) else {
            return reply.error(Errno::ENXIO);
        };
        // A lessee's writes may fill holes and grow the file: the core
        // must have them before it says where data lies.
        let _settled = match self.settled(ino.0) {
            Ok(g) => g,
            Err(e) => return reply.error(e),
        };
        match self.core.seek_data(ino.0, off, data) {
            Ok(at) => reply.offset(at as i64),
            Err(e) => reply.error(errno(&e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_kinds() {
        assert_eq!(node_kind(libc::S_IFIFO | 0o644), Some(FileKind::Fifo));
        assert_eq!(node_kind(0o644), Some(FileKind::Regular));
        assert_eq!(node_kind(libc::S_IFDIR | 0o755), None);
    }

    #[test]
    fn config_carries_the_documented_options() {
        let c = session_config("amberfs:/p", 0);
        assert_eq!(c.n_threads, Some(1));
        assert_eq!(c.acl, SessionACL::All);
        assert!(c.mount_options.contains(&MountOption::DefaultPermissions));
        assert!(c
            .mount_options
            .contains(&MountOption::FSName("amberfs:/p".into())));
    }
}
