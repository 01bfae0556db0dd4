//! Extended attributes by inode, with the size protocol of getxattr(2)
//! and listxattr(2): a zero-length buffer asks for the size, a short one
//! is ERANGE.

use amber_core::fs::XattrSet;

use super::errno::{Errno, PResult};
use super::pool::Pool;

/// Copies `data` into `buf` as the xattr calls return it.
pub fn sized(data: &[u8], buf: &mut [u8]) -> PResult<usize> {
    if buf.is_empty() {
        return Ok(data.len());
    }
    let out = buf.get_mut(..data.len()).ok_or(Errno(libc::ERANGE))?;
    out.copy_from_slice(data);
    Ok(data.len())
}

impl Pool {
    pub fn getxattr(&self, ino: u64, name: &[u8], buf: &mut [u8]) -> PResult<usize> {
        sized(&self.core().getxattr(ino, name)?, buf)
    }

    /// The names, each followed by a NUL.
    pub fn listxattr(&self, ino: u64, buf: &mut [u8]) -> PResult<usize> {
        let mut list = Vec::new();
        for n in self.core().listxattr(ino)? {
            list.extend_from_slice(&n);
            list.push(0);
        }
        sized(&list, buf)
    }

    /// setxattr(2) with flags 0, XATTR_CREATE or XATTR_REPLACE.
    pub fn setxattr(&self, ino: u64, name: &[u8], value: &[u8], flags: i32) -> PResult<()> {
        let how = match flags {
            0 => XattrSet::Either,
            libc::XATTR_CREATE => XattrSet::Create,
            libc::XATTR_REPLACE => XattrSet::Replace,
            _ => return Err(Errno(libc::EINVAL)),
        };
        Ok(self.core().setxattr(ino, name, value, how)?)
    }

    pub fn removexattr(&self, ino: u64, name: &[u8]) -> PResult<()> {
        Ok(self.core().removexattr(ino, name)?)
    }
}
