//! readdir and readdirplus. The kernel resumes a listing at the offset of
//! the last entry it kept, so every entry carries one: "." is 1, ".." is
//! 2, and a core entry is its cookie + 2 (core cookies are never 0, so no
//! offset is used twice). Offset 0 starts from the beginning.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::time::Duration;

use amber_core::{Core, DirEntry};
use amber_pmem::PmDevice;
use fuser::{Errno, FileType, Generation, INodeNo, ReplyDirectory, ReplyDirectoryPlus};

use crate::attr::{file_attr, file_type};
use crate::errno::errno;

const DOT: u64 = 1;
const DOTDOT: u64 = 2;

/// Most entries read ahead for one readdirplus reply. The reply holds
/// what fits in the kernel's buffer (a page is about 25 entries with
/// attributes); what does not fit is read again by the next call.
const PLUS_BATCH: usize = 128;

/// The core position to resume from after the entry at `offset`.
fn core_pos(offset: u64) -> u64 {
    offset.saturating_sub(DOTDOT)
}

/// The inode ".." names. Only `ls -i`-style readers look at it (the
/// kernel resolves ".." itself), so a directory removed while open, whose
/// parent may be gone, names itself rather than failing the listing.
fn parent_of<D: PmDevice>(core: &Core<D>, ino: u64) -> u64 {
    core.lookup(ino, b"..").map_or(ino, |a| a.ino)
}

pub fn readdir<D: PmDevice>(core: &Core<D>, ino: u64, offset: u64, mut reply: ReplyDirectory) {
    if offset < DOT && reply.add(INodeNo(ino), DOT, FileType::Directory, ".") {
        return reply.ok();
    }
    if offset < DOTDOT {
        let parent = INodeNo(parent_of(core, ino));
        if reply.add(parent, DOTDOT, FileType::Directory, "..") {
            return reply.ok();
        }
    }
    let listed = core.readdir(ino, core_pos(offset), |e| {
        let name = OsStr::from_bytes(&e.name);
        !reply.add(INodeNo(e.ino), e.cookie + DOTDOT, file_type(e.kind), name)
    });
    match listed {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(errno(&e)),
    }
}

/// Lists directory `ino` from `offset` with each entry's attributes,
/// which the kernel caches for `ttl` as a `stat`'s: each entry's is read
/// after `settle` recalled a write lease on it and while its guard holds
/// (a lessee's writes change the size behind the core until then; LevelDB
/// listed its directory and then stat'ed a table it had just written,
/// got the size from before the lease, and failed its own read past it).
pub fn readdirplus<D: PmDevice, G>(
    core: &Core<D>,
    (ino, offset): (u64, u64),
    ttl: &Duration,
    settle: impl Fn(u64) -> Result<G, Errno>,
    mut reply: ReplyDirectoryPlus,
) {
    // "." and ".." get attributes too, though the kernel takes no lookup
    // reference for them.
    let dots = [(DOT, ino, "."), (DOTDOT, parent_of(core, ino), "..")];
    for (off, dino, name) in dots {
        if offset >= off {
            continue;
        }
        let a = match core.getattr(dino) {
            Ok(a) => a,
            Err(e) => return reply.error(errno(&e)),
        };
        let gen = Generation(a.generation.into());
        if reply.add(INodeNo(dino), off, name, ttl, &file_attr(&a), gen) {
            return reply.ok();
        }
    }
    // Collected first and only then stat'ed: the core holds the
    // directory's lock during readdir, and taking a child's lock under it
    // would invert the ascending-inode order unlink and rename lock in.
    let mut batch: Vec<DirEntry> = Vec::new();
    let listed = core.readdir(ino, core_pos(offset), |e| {
        batch.push(e);
        batch.len() < PLUS_BATCH
    });
    if let Err(e) = listed {
        return reply.error(errno(&e));
    }
    for e in batch {
        let _settled = match settle(e.ino) {
            Ok(g) => g,
            Err(e) => return reply.error(e),
        };
        let a = match core.getattr(e.ino) {
            Ok(a) => a,
            // Removed since it was listed: a listing may or may not show
            // an entry removed meanwhile (POSIX), so leave it out.
            Err(amber_core::FsError::NotFound) => continue,
            Err(err) => return reply.error(errno(&err)),
        };
        let gen = Generation(a.generation.into());
        let name = OsStr::from_bytes(&e.name);
        if reply.add(
            INodeNo(e.ino),
            e.cookie + DOTDOT,
            name,
            &crate::ttl_of(ttl, &a),
            &file_attr(&a),
            gen,
        ) {
            break;
        }
    }
    reply.ok()
}
