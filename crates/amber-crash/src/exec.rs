//! Running one [`Op`] on a mounted core: paths are resolved by lookups
//! from the root, as a front end would, so the op itself is the only
//! call that writes.

use crate::state::{Landing, WriteRange};
use crate::workload::{Op, WriteAt};
use amber_core::acl::from_text;
use amber_core::data::FallocMode;
use amber_core::fs::XattrSet;
use amber_core::{Core, FsError, MapId, MapInfo, MapRequest, Owner, SetAttr, TimeSet};
use amber_format::acl::{self, ACCESS_XATTR, DEFAULT_XATTR};
use amber_format::{FileKind, ROOT_INO};
use amber_pmem::PmDevice;
use amber_sim::rng;

/// Owner of everything the workloads create; not root, so chown is a change.
pub const OWNER: Owner = Owner::new(1000, 1000);

/// Most components a workload path has; bounds the resolve loop.
const MAX_COMPONENTS: usize = 64;

/// The inode at `path` ("" is the root).
pub fn resolve<D: PmDevice>(fs: &Core<D>, path: &str) -> Result<u64, FsError> {
    let mut ino = ROOT_INO;
    for name in path
        .split('/')
        .filter(|c| !c.is_empty())
        .take(MAX_COMPONENTS)
    {
        ino = fs.lookup(ino, name.as_bytes())?.ino;
    }
    Ok(ino)
}

/// The parent directory's inode and the last component of `path`.
fn parent<'p, D: PmDevice>(fs: &Core<D>, path: &'p str) -> Result<(u64, &'p [u8]), FsError> {
    let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
    Ok((resolve(fs, dir)?, name.as_bytes()))
}

/// Open handles and mappings by the numbers the workload gave them.
#[derive(Debug, Default)]
pub struct Handles {
    open: Vec<Option<u64>>,
    maps: Vec<Option<MapInfo>>,
    /// Write leases out, by path.
    pub(crate) leases: std::collections::BTreeMap<String, crate::lease::Leased>,
}

impl Handles {
    fn get(&self, h: usize) -> Result<u64, FsError> {
        self.open
            .get(h)
            .copied()
            .flatten()
            .ok_or(FsError::BadHandle)
    }

    /// Opens `path` as handle `h`, releasing what `h` held before.
    fn open<D: PmDevice>(&mut self, fs: &Core<D>, path: &str, h: usize) -> Result<(), FsError> {
        let ino = resolve(fs, path)?;
        fs.open(ino)?;
        if self.open.len() <= h {
            self.open.resize(h + 1, None);
        }
        if let Some(old) = self.open[h].replace(ino) {
            fs.release(old)?;
        }
        Ok(())
    }

    /// Closes handle `h`.
    fn release<D: PmDevice>(&mut self, fs: &Core<D>, h: usize) -> Result<(), FsError> {
        let ino = self.get(h)?;
        self.open[h] = None;
        fs.release(ino)
    }

    /// Inodes still open, to release before unmounting.
    pub fn drain(&mut self) -> Vec<u64> {
        self.open.drain(..).flatten().collect()
    }

    /// Mapping `m`.
    pub fn map(&self, m: usize) -> Result<MapInfo, FsError> {
        self.maps
            .get(m)
            .copied()
            .flatten()
            .ok_or(FsError::BadHandle)
    }

    /// Maps `path` as mapping `m` (shared, writable: a library mapping).
    fn map_file<D: PmDevice>(
        &mut self,
        fs: &Core<D>,
        path: &str,
        m: usize,
        (off, len): (u64, u64),
    ) -> Result<(), FsError> {
        let req = MapRequest {
            off,
            len,
            prot: libc::PROT_READ | libc::PROT_WRITE,
            may_write: true,
            sync: false,
        };
        let info = fs.map(resolve(fs, path)?, req, None)?;
        if self.maps.len() <= m {
            self.maps.resize(m + 1, None);
        }
        if let Some(old) = self.maps[m].replace(info) {
            fs.unmap(old.id)?;
        }
        Ok(())
    }

    /// Unmaps mapping `m`.
    fn unmap<D: PmDevice>(&mut self, fs: &Core<D>, m: usize) -> Result<(), FsError> {
        let info = self.map(m)?;
        self.maps[m] = None;
        fs.unmap(info.id)
    }

    /// Mappings still live, to unmap before unmounting.
    pub fn drain_maps(&mut self) -> Vec<MapId> {
        self.maps.drain(..).flatten().map(|m| m.id).collect()
    }
}

/// The write range an op would tear if interrupted, resolved before it
/// runs (an append's offset is the size before it). A write() lands
/// [`Landing::Whole`] when `atomic_writes` (the policy promises it, or the
/// harness forces the atomic oracle); a punch's in-place zeroing is no
/// write() and lands byte-wise under every policy.
pub fn write_range<D: PmDevice>(
    fs: &Core<D>,
    op: &Op,
    handles: &Handles,
    atomic_writes: bool,
) -> Option<WriteRange> {
    let write = if atomic_writes {
        Landing::Whole
    } else {
        Landing::ByteWise
    };
    let (ino, at, len, landing) = match op {
        Op::Write { path, at, len, .. } => (resolve(fs, path).ok()?, *at, len, write),
        Op::WriteHandle {
            handle, off, len, ..
        } => (
            handles.get(*handle).ok()?,
            WriteAt::Offset(*off),
            len,
            write,
        ),
        // A punch zeroes its edge blocks in place before unmapping the
        // rest: like a write of zeros, each byte may be old or new. A zero
        // range is a punch and then an allocation.
        Op::Punch { path, off, len } | Op::ZeroRange { path, off, len, .. } => (
            resolve(fs, path).ok()?,
            WriteAt::Offset(*off),
            len,
            Landing::ByteWise,
        ),
        Op::WriteSync { path, off, len, .. } | Op::LeaseWrite { path, off, len, .. } => {
            (resolve(fs, path).ok()?, WriteAt::Offset(*off), len, write)
        }
        // Stores through a mapping land line by line, in place.
        Op::MapStore { map, off, len, .. } => {
            let m = handles.map(*map).ok()?;
            (m.ino, WriteAt::Offset(m.off + off), len, Landing::ByteWise)
        }
        _ => return None,
    };
    let off = match at {
        WriteAt::Offset(o) => o,
        WriteAt::Append => fs.getattr(ino).ok()?.size,
    };
    Some(WriteRange {
        ino,
        off,
        len: *len,
        landing,
    })
}

/// Applies the attribute change `change` makes to an empty [`SetAttr`].
fn set(
    fs: &Core<impl PmDevice>,
    path: &str,
    change: impl FnOnce(&mut SetAttr),
) -> Result<(), FsError> {
    let mut s = SetAttr::default();
    change(&mut s);
    fs.setattr(resolve(fs, path)?, &s).map(drop)
}

/// Writes `len` bytes drawn from `seed` at `off` (`None` appends).
fn write_seeded(
    fs: &Core<impl PmDevice>,
    ino: u64,
    off: Option<u64>,
    len: u64,
    seed: u64,
    sync: bool,
) -> Result<(), FsError> {
    fs.write(ino, off, &rng::bytes(seed, len as usize), sync)
        .map(drop)
}

/// Runs `op`. The match lists every op, so a new one must be placed in
/// one of the groups below.
pub fn apply<D: PmDevice>(fs: &Core<D>, op: &Op, handles: &mut Handles) -> Result<(), FsError> {
    match op {
        Op::Mkdir { .. }
        | Op::Create { .. }
        | Op::Symlink { .. }
        | Op::Link { .. }
        | Op::Unlink { .. }
        | Op::Rmdir { .. }
        | Op::Rename { .. }
        | Op::RenameWhiteout { .. } => apply_namespace(fs, op),
        Op::Truncate { .. }
        | Op::Chmod { .. }
        | Op::Chown { .. }
        | Op::Utimens { .. }
        | Op::SetFlags { .. }
        | Op::SetXattr { .. }
        | Op::SetXattrTo { .. }
        | Op::RemoveXattr { .. }
        | Op::SetAcl { .. } => apply_attr(fs, op),
        Op::Write { .. }
        | Op::WriteHandle { .. }
        | Op::WriteSync { .. }
        | Op::LeaseGrant { .. }
        | Op::LeaseWrite { .. }
        | Op::LeaseTruncate { .. }
        | Op::LeaseAllocate { .. }
        | Op::LeaseReturn { .. }
        | Op::Fallocate { .. }
        | Op::ZeroRange { .. }
        | Op::Punch { .. }
        | Op::Fsync { .. }
        | Op::WriteBack { .. }
        | Op::SyncAll => apply_data(fs, op, handles),
        Op::Open { .. }
        | Op::Release { .. }
        | Op::Map { .. }
        | Op::MapStore { .. }
        | Op::Msync { .. }
        | Op::Unmap { .. } => apply_handle(fs, op, handles),
    }
}

/// Runs a namespace op.
fn apply_namespace<D: PmDevice>(fs: &Core<D>, op: &Op) -> Result<(), FsError> {
    match op {
        Op::Mkdir { path } => {
            let (p, name) = parent(fs, path)?;
            fs.mkdir(p, name, 0o755, OWNER).map(drop)
        }
        Op::Create { path } => {
            let (p, name) = parent(fs, path)?;
            fs.mknod(p, name, FileKind::Regular, 0o644, 0, OWNER)
                .map(drop)
        }
        Op::Symlink { path, target } => {
            let (p, name) = parent(fs, path)?;
            fs.symlink(p, name, target.as_bytes(), OWNER).map(drop)
        }
        Op::Link { from, to } => {
            let ino = resolve(fs, from)?;
            let (p, name) = parent(fs, to)?;
            fs.link(ino, p, name).map(drop)
        }
        Op::Unlink { path } => {
            let (p, name) = parent(fs, path)?;
            fs.unlink(p, name)
        }
        Op::Rmdir { path } => {
            let (p, name) = parent(fs, path)?;
            fs.rmdir(p, name)
        }
        Op::Rename { from, to, mode } => {
            let (p, name) = parent(fs, from)?;
            let (np, newname) = parent(fs, to)?;
            fs.rename(p, name, np, newname, *mode)
        }
        Op::RenameWhiteout { from, to } => {
            let (p, name) = parent(fs, from)?;
            let (np, newname) = parent(fs, to)?;
            fs.rename_whiteout(p, name, np, newname, false, OWNER)
        }
        _ => unreachable!("apply sends only namespace ops here"),
    }
}

/// Runs an attribute op (size, permissions, owners, times, flags,
/// extended attributes).
fn apply_attr<D: PmDevice>(fs: &Core<D>, op: &Op) -> Result<(), FsError> {
    match op {
        Op::Truncate { path, size } => set(fs, path, |a| a.size = Some(*size)),
        Op::Chmod { path, perm } => set(fs, path, |a| a.perm = Some(*perm)),
        Op::Chown { path, uid, gid } => {
            set(fs, path, |a| (a.uid, a.gid) = (Some(*uid), Some(*gid)))
        }
        Op::Utimens { path, atime, mtime } => set(fs, path, |a| {
            a.atime = Some(TimeSet::At(*atime));
            a.mtime = Some(TimeSet::At(*mtime));
        }),
        Op::SetFlags { path, flags } => fs.set_flags(resolve(fs, path)?, *flags).map(drop),
        Op::SetXattr {
            path,
            name,
            len,
            seed,
        } => fs.setxattr(
            resolve(fs, path)?,
            name.as_bytes(),
            &rng::bytes(*seed, *len),
            XattrSet::Either,
        ),
        Op::SetXattrTo { path, name, value } => fs.setxattr(
            resolve(fs, path)?,
            name.as_bytes(),
            value.as_bytes(),
            XattrSet::Either,
        ),
        Op::RemoveXattr { path, name } => fs.removexattr(resolve(fs, path)?, name.as_bytes()),
        Op::SetAcl { path, default, acl } => set_acl(fs, path, *default, acl),
        _ => unreachable!("apply sends only attribute ops here"),
    }
}

/// Sets the ACL `text` names (getfacl's short form; empty: none).
fn set_acl<D: PmDevice>(
    fs: &Core<D>,
    path: &str,
    default: bool,
    text: &str,
) -> Result<(), FsError> {
    let name = if default { DEFAULT_XATTR } else { ACCESS_XATTR };
    let value = if text.is_empty() {
        acl::VERSION.to_le_bytes().to_vec()
    } else {
        from_text(text)
            .map_err(|_| FsError::InvalidArgument("a workload's ACL text"))?
            .encode()
    };
    fs.set_acl(resolve(fs, path)?, name, &value, false)
}

/// Runs an op on a numbered handle or mapping.
fn apply_handle<D: PmDevice>(fs: &Core<D>, op: &Op, handles: &mut Handles) -> Result<(), FsError> {
    match op {
        Op::Open { path, handle } => handles.open(fs, path, *handle),
        Op::Release { handle } => handles.release(fs, *handle),
        Op::Map {
            path,
            map,
            off,
            len,
        } => handles.map_file(fs, path, *map, (*off, *len)),
        Op::MapStore {
            map,
            off,
            len,
            seed,
        } => fs.map_store(
            handles.map(*map)?.id,
            *off,
            &rng::bytes(*seed, *len as usize),
        ),
        Op::Msync { map } => fs.sync_map(handles.map(*map)?.id),
        Op::Unmap { map } => handles.unmap(fs, *map),
        _ => unreachable!("apply sends only handle ops here"),
    }
}

/// Runs a data op: a write, an allocation change or a flush.
/// Runs an op of another process's write lease (`crate::lease`).
fn apply_lease<D: PmDevice>(fs: &Core<D>, op: &Op, handles: &mut Handles) -> Result<(), FsError> {
    match op {
        Op::LeaseGrant { path } => {
            let leased = crate::lease::Leased::grant(fs, resolve(fs, path)?)?;
            if let Some(old) = handles.leases.insert(path.clone(), leased) {
                old.give_back(fs)?;
            }
            Ok(())
        }
        Op::LeaseWrite {
            path,
            off,
            len,
            seed,
        } => {
            let l = handles.leases.get_mut(path).ok_or(FsError::BadHandle)?;
            l.write(fs, *off, &rng::bytes(*seed, *len as usize))
        }
        Op::LeaseTruncate { path, size } => {
            let l = handles.leases.get_mut(path).ok_or(FsError::BadHandle)?;
            if l.truncate(fs, *size)? {
                let l = handles.leases.remove(path).ok_or(FsError::BadHandle)?;
                l.give_back(fs)?;
            }
            Ok(())
        }
        Op::LeaseAllocate {
            path,
            off,
            len,
            keep_size,
        } => {
            let l = handles.leases.get_mut(path).ok_or(FsError::BadHandle)?;
            l.allocate(fs, (*off, *len), *keep_size)
        }
        Op::LeaseReturn { path } => {
            let l = handles.leases.remove(path).ok_or(FsError::BadHandle)?;
            l.give_back(fs)
        }
        _ => unreachable!("apply_data sends only lease ops here"),
    }
}

fn apply_data<D: PmDevice>(fs: &Core<D>, op: &Op, handles: &mut Handles) -> Result<(), FsError> {
    match op {
        Op::Write {
            path,
            at,
            len,
            seed,
        } => {
            let off = match at {
                WriteAt::Offset(o) => Some(*o),
                WriteAt::Append => None,
            };
            write_seeded(fs, resolve(fs, path)?, off, *len, *seed, false)
        }
        Op::WriteHandle {
            handle,
            off,
            len,
            seed,
        } => write_seeded(fs, handles.get(*handle)?, Some(*off), *len, *seed, false),
        Op::WriteSync {
            path,
            off,
            len,
            seed,
        } => write_seeded(fs, resolve(fs, path)?, Some(*off), *len, *seed, true),
        Op::LeaseGrant { .. }
        | Op::LeaseWrite { .. }
        | Op::LeaseTruncate { .. }
        | Op::LeaseAllocate { .. }
        | Op::LeaseReturn { .. } => apply_lease(fs, op, handles),
        Op::Fallocate {
            path,
            off,
            len,
            keep_size,
        } => {
            let mode = FallocMode::Allocate {
                keep_size: *keep_size,
            };
            fs.fallocate(resolve(fs, path)?, *off, *len, mode)
        }
        Op::ZeroRange {
            path,
            off,
            len,
            keep_size,
        } => {
            let mode = FallocMode::ZeroRange {
                keep_size: *keep_size,
            };
            fs.fallocate(resolve(fs, path)?, *off, *len, mode)
        }
        Op::Punch { path, off, len } => {
            fs.fallocate(resolve(fs, path)?, *off, *len, FallocMode::PunchHole)
        }
        Op::Fsync { path } => fs.fsync(resolve(fs, path)?),
        Op::WriteBack { blocks } => fs.write_back(*blocks).map(drop),
        Op::SyncAll => fs.sync_all(),
        _ => unreachable!("apply sends only data ops here"),
    }
}
