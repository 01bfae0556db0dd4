//! Path resolution from the pool's root. Paths are absolute within the
//! pool ("/a/b"; a missing leading slash means the same). Symlinks are
//! followed in intermediate components, and in the last one when asked;
//! "." and ".." are understood; at most 40 symlinks per resolution, as
//! Linux's ELOOP limit.

use crate::error::{FsError, Result};
use crate::fs::Core;
use amber_format::{FileKind, ROOT_INO};
use amber_pmem::PmDevice;

/// Most symlinks followed in one resolution.
const MAX_SYMLINKS: usize = 40;
/// Longest path accepted (PATH_MAX).
const PATH_MAX: usize = 4096;

/// The components of `p`, without empty ones and ".".
pub fn components(p: &str) -> Result<Vec<&[u8]>> {
    if p.len() > PATH_MAX {
        return Err(FsError::NameTooLong);
    }
    if p.as_bytes().contains(&0) {
        return Err(FsError::InvalidName);
    }
    Ok(p.split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .map(str::as_bytes)
        .collect())
}

/// The inode `p` names.
pub fn resolve<D: PmDevice>(fs: &Core<D>, p: &str, follow_last: bool) -> Result<u64> {
    let mut budget = MAX_SYMLINKS;
    walk(fs, ROOT_INO, &components(p)?, follow_last, &mut budget)
}

fn walk<D: PmDevice>(
    fs: &Core<D>,
    start: u64,
    comps: &[&[u8]],
    follow_last: bool,
    budget: &mut usize,
) -> Result<u64> {
    let mut at = start;
    for (i, comp) in comps.iter().enumerate() {
        let a = fs.getattr(at)?;
        if a.kind != FileKind::Directory {
            return Err(FsError::NotADirectory);
        }
        let child = fs.lookup(at, comp)?;
        let last = i + 1 == comps.len();
        if child.kind == FileKind::Symlink && (!last || follow_last) {
            if *budget == 0 {
                return Err(FsError::SymlinkLoop);
            }
            *budget -= 1;
            let target = fs.readlink(child.ino)?;
            let target = String::from_utf8(target).map_err(|_| FsError::InvalidName)?;
            let base = if target.starts_with('/') {
                ROOT_INO
            } else {
                at
            };
            at = walk(fs, base, &components(&target)?, true, budget)?;
        } else {
            at = child.ino;
        }
    }
    Ok(at)
}

/// The directory that would hold `p`, and `p`'s last component.
pub fn resolve_parent<'a, D: PmDevice>(fs: &Core<D>, p: &'a str) -> Result<(u64, &'a [u8])> {
    let comps = components(p)?;
    let Some((last, dirs)) = comps.split_last() else {
        return Err(FsError::InvalidName); // the root has no parent entry
    };
    if *last == b".." {
        return Err(FsError::InvalidName);
    }
    let mut budget = MAX_SYMLINKS;
    let parent = walk(fs, ROOT_INO, dirs, true, &mut budget)?;
    Ok((parent, last))
}
