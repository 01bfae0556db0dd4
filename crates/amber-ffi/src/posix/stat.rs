//! The kernel's stat, statx, statfs and statvfs shapes of the core's
//! attributes.

use amber_core::{Attr, StatFs};
use amber_format::inode::flags;
use amber_format::{Timespec, BLOCK_SIZE};

/// The device number every served file reports: tools that compare
/// st_dev (tar, cp -x, find -xdev, du) see one file system.
pub const DEV: u64 = 0xA3BE;
/// The statfs f_type of a served file system ("AMBR").
pub const MAGIC: i64 = 0x414D_4252;

/// The zero value of a libc struct of plain integers.
fn zeroed<T: Copy>() -> T {
    // SAFETY: only instantiated below with libc's stat, statx, statfs and
    // statvfs, structs of integers (and integer arrays) for which all
    // zero bytes are a valid value.
    unsafe { std::mem::zeroed() }
}

fn mode(a: &Attr) -> u32 {
    a.kind.mode_bits() | (a.perm & 0o7777)
}

fn ts(t: Timespec) -> (i64, i64) {
    (t.secs, i64::from(t.nsecs))
}

pub fn stat(a: &Attr) -> libc::stat {
    let mut s: libc::stat = zeroed();
    s.st_dev = DEV;
    s.st_ino = a.ino;
    s.st_mode = mode(a);
    s.st_nlink = u64::from(a.nlink);
    s.st_uid = a.uid;
    s.st_gid = a.gid;
    s.st_rdev = a.rdev;
    s.st_size = a.size as i64;
    s.st_blksize = BLOCK_SIZE as i64;
    s.st_blocks = a.blocks as i64;
    (s.st_atime, s.st_atime_nsec) = ts(a.atime);
    (s.st_mtime, s.st_mtime_nsec) = ts(a.mtime);
    (s.st_ctime, s.st_ctime_nsec) = ts(a.ctime);
    s
}

fn sx_ts(t: Timespec) -> libc::statx_timestamp {
    let mut x: libc::statx_timestamp = zeroed();
    x.tv_sec = t.secs;
    x.tv_nsec = t.nsecs;
    x
}

/// statx's view of `a`, with the append-only and immutable flags as
/// attributes (what ext4 reports for `chattr +a` and `+i`).
pub fn statx(a: &Attr) -> libc::statx {
    let mut x: libc::statx = zeroed();
    x.stx_mask = libc::STATX_BASIC_STATS | libc::STATX_BTIME;
    let shown = [
        (flags::APPEND, libc::STATX_ATTR_APPEND as u64),
        (flags::IMMUTABLE, libc::STATX_ATTR_IMMUTABLE as u64),
    ];
    x.stx_attributes_mask = shown.iter().fold(0, |m, (_, attr)| m | attr);
    for (flag, attr) in shown {
        if a.flags & flag != 0 {
            x.stx_attributes |= attr;
        }
    }
    x.stx_blksize = BLOCK_SIZE as u32;
    x.stx_nlink = a.nlink;
    x.stx_uid = a.uid;
    x.stx_gid = a.gid;
    x.stx_mode = mode(a) as u16;
    x.stx_ino = a.ino;
    x.stx_size = a.size;
    x.stx_blocks = a.blocks;
    x.stx_atime = sx_ts(a.atime);
    x.stx_btime = sx_ts(a.crtime);
    x.stx_ctime = sx_ts(a.ctime);
    x.stx_mtime = sx_ts(a.mtime);
    x.stx_rdev_major = libc::major(a.rdev);
    x.stx_rdev_minor = libc::minor(a.rdev);
    x.stx_dev_major = libc::major(DEV);
    x.stx_dev_minor = libc::minor(DEV);
    x
}

pub fn statvfs(s: &StatFs) -> libc::statvfs {
    let mut v: libc::statvfs = zeroed();
    v.f_bsize = s.block_size;
    v.f_frsize = s.block_size;
    v.f_blocks = s.blocks;
    v.f_bfree = s.blocks_free;
    v.f_bavail = s.blocks_free;
    v.f_files = s.inodes;
    v.f_ffree = s.inodes_free;
    v.f_favail = s.inodes_free;
    v.f_fsid = DEV;
    v.f_namemax = s.name_max;
    v
}

pub fn statfs(s: &StatFs) -> libc::statfs {
    let mut v: libc::statfs = zeroed();
    v.f_type = MAGIC;
    v.f_bsize = s.block_size as i64;
    v.f_frsize = s.block_size as i64;
    v.f_blocks = s.blocks;
    v.f_bfree = s.blocks_free;
    v.f_bavail = s.blocks_free;
    v.f_files = s.inodes;
    v.f_ffree = s.inodes_free;
    v.f_namelen = s.name_max as i64;
    v
}
