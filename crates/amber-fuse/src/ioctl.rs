//! The file-attribute ioctls (lsattr, chattr, xfs_io's chattr). The kernel
//! forwards them to FUSE only for regular files and directories, and only
//! from its own file-attribute calls: FS_IOC_GETFLAGS / FS_IOC_SETFLAGS
//! with the flags as a 4-byte int (not the long the ioctl numbers name),
//! and FS_IOC_FSGETXATTR / FS_IOC_FSSETXATTR with a `struct fsxattr`. It
//! reads the old attributes through FSGETXATTR before every change,
//! chattr's included, and turns an ENOTTY there into EOPNOTSUPP, so both
//! forms must be answered. The only flags are immutable and append-only
//! (format::inode::flags, Linux's FS_*_FL values).

use amber_core::Core;
use amber_format::inode::flags::{APPEND, IMMUTABLE};
use amber_pmem::PmDevice;
use fuser::Errno;

use crate::errno::errno;

const GETFLAGS: u32 = libc::FS_IOC_GETFLAGS as u32;
const SETFLAGS: u32 = libc::FS_IOC_SETFLAGS as u32;
/// _IOR('X', 31, struct fsxattr)
const FSGETXATTR: u32 = 0x801c_581f;
/// _IOW('X', 32, struct fsxattr)
const FSSETXATTR: u32 = 0x401c_5820;
/// `struct fsxattr`: xflags, extsize, nextents, projid, cowextsize (u32
/// each), 8 bytes of padding.
const FSXATTR_SIZE: usize = 28;
/// FS_XFLAG_IMMUTABLE and FS_XFLAG_APPEND.
const XFLAG_IMMUTABLE: u32 = 0x8;
const XFLAG_APPEND: u32 = 0x10;
/// Pairs of (FS_*_FL, FS_XFLAG_*) for the flags that exist.
const PAIRS: [(u32, u32); 2] = [(IMMUTABLE, XFLAG_IMMUTABLE), (APPEND, XFLAG_APPEND)];

/// The fsxattr flags of inode flags.
fn xflags_of(flags: u32) -> u32 {
    PAIRS
        .iter()
        .filter(|(f, _)| flags & f != 0)
        .fold(0, |x, (_, xf)| x | xf)
}

/// The inode flags an fsxattr asks for; None if it asks for anything else
/// (other xflags, an extent size hint, a project).
fn flags_of(fsx: &[u8; FSXATTR_SIZE]) -> Option<u32> {
    let word = |i: usize| u32::from_ne_bytes([fsx[i], fsx[i + 1], fsx[i + 2], fsx[i + 3]]);
    let (xflags, extsize, projid, cowextsize) = (word(0), word(4), word(12), word(16));
    let known = XFLAG_IMMUTABLE | XFLAG_APPEND;
    if xflags & !known != 0 || extsize != 0 || projid != 0 || cowextsize != 0 {
        return None;
    }
    Some(
        PAIRS
            .iter()
            .filter(|(_, xf)| xflags & xf != 0)
            .fold(0, |f, (fl, _)| f | fl),
    )
}

/// Whether ioctl `cmd` changes the flags: the file's leases are recalled
/// first, as for any change of it (an immutable file's lessee would
/// write on).
pub fn changes(cmd: u32) -> bool {
    matches!(cmd, SETFLAGS | FSSETXATTR)
}

/// Answers ioctl `cmd` on `ino` from caller `uid`: the reply's data, or
/// the errno. Changing a flag takes root: the kernel has checked that the
/// caller owns the file and holds CAP_LINUX_IMMUTABLE, which the daemon
/// cannot see.
pub fn answer<D: PmDevice>(
    core: &Core<D>,
    uid: u32,
    ino: u64,
    cmd: u32,
    in_data: &[u8],
) -> Result<Vec<u8>, Errno> {
    let current = core.flags(ino).map_err(|e| errno(&e))?;
    let wanted = match cmd {
        GETFLAGS => return Ok(current.to_ne_bytes().to_vec()),
        FSGETXATTR => {
            let mut fsx = vec![0u8; FSXATTR_SIZE];
            fsx[..4].copy_from_slice(&xflags_of(current).to_ne_bytes());
            return Ok(fsx);
        }
        SETFLAGS => match in_data.get(..4).map(<[u8; 4]>::try_from) {
            Some(Ok(b)) => u32::from_ne_bytes(b),
            _ => return Err(Errno::EINVAL),
        },
        FSSETXATTR => match in_data
            .get(..FSXATTR_SIZE)
            .map(<&[u8; FSXATTR_SIZE]>::try_from)
        {
            Some(Ok(fsx)) => flags_of(fsx).ok_or(Errno::EOPNOTSUPP)?,
            _ => return Err(Errno::EINVAL),
        },
        _ => return Err(Errno::ENOTTY),
    };
    if wanted != current && uid != 0 {
        return Err(Errno::EPERM);
    }
    core.set_flags(ino, wanted).map_err(|e| errno(&e))?;
    Ok(Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xflags_map_both_ways() {
        assert_eq!(
            xflags_of(IMMUTABLE | APPEND),
            XFLAG_IMMUTABLE | XFLAG_APPEND
        );
        assert_eq!(xflags_of(0), 0);
        let mut fsx = [0u8; FSXATTR_SIZE];
        fsx[..4].copy_from_slice(&XFLAG_APPEND.to_ne_bytes());
        assert_eq!(flags_of(&fsx), Some(APPEND));
        // Read-only nextents is ignored; an extent size hint is not ours.
        fsx[8] = 3;
        assert_eq!(flags_of(&fsx), Some(APPEND));
        fsx[4] = 1;
        assert_eq!(flags_of(&fsx), None);
        let mut noatime = [0u8; FSXATTR_SIZE];
        noatime[..4].copy_from_slice(&0x40u32.to_ne_bytes());
        assert_eq!(flags_of(&noatime), None);
    }

    #[test]
    fn ioctl_numbers_are_the_kernels() {
        assert_eq!(GETFLAGS, 0x8008_6601);
        assert_eq!(SETFLAGS, 0x4008_6602);
    }
}
