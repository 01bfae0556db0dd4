//! Descriptors of served files. Each is a real kernel descriptor number
//! (reserved by `reserve`, an O_PATH descriptor of /dev/null), so it never
//! collides with a kernel file, and any call that reaches the kernel with
//! it fails (EBADF, ENOTDIR) instead of touching another file. The table
//! maps the number to the open file description; dup'd numbers share one.
//!
//! Lookups are on every read and write: a bit per descriptor answers
//! "not served" with one load, and each slot has its own lock and cache
//! line, so threads using different descriptors never contend.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::RwLock;

use super::errno::{Errno, PResult};
use super::file::OpenFile;

/// Highest descriptor number served, exclusive (RLIMIT_NOFILE's usual
/// hard limit).
pub const MAX_FDS: usize = 1 << 20;
const PER_CHUNK: usize = 64;

#[repr(align(64))]
#[derive(Default)]
struct Slot(RwLock<Option<Arc<OpenFile>>>);

struct Chunk {
    served: AtomicU64,
    slots: [Slot; PER_CHUNK],
}

pub struct FdTable {
    chunks: Box<[OnceLock<Box<Chunk>>]>,
}

impl Default for FdTable {
    fn default() -> Self {
        FdTable {
            chunks: (0..MAX_FDS / PER_CHUNK).map(|_| OnceLock::new()).collect(),
        }
    }
}

#[inline]
fn split(fd: i32) -> Option<(usize, usize)> {
    let fd = usize::try_from(fd).ok().filter(|&f| f < MAX_FDS)?;
    Some((fd / PER_CHUNK, fd % PER_CHUNK))
}

impl FdTable {
    #[inline]
    fn chunk(&self, fd: i32) -> Option<(&Chunk, usize)> {
        let (c, i) = split(fd)?;
        Some((self.chunks[c].get()?, i))
    }

    /// Whether `fd` is a served descriptor: one or two loads.
    #[inline]
    pub fn is_served(&self, fd: i32) -> bool {
        self.chunk(fd)
            .is_some_and(|(c, i)| c.served.load(Ordering::Acquire) & (1 << i) != 0)
    }

    /// Runs `f` on the description `fd` names, holding it for the call (a
    /// close on another thread waits).
    pub fn with<R>(&self, fd: i32, f: impl FnOnce(&Arc<OpenFile>) -> R) -> Option<R> {
        let (c, i) = self.chunk(fd)?;
        let slot = c.slots[i].0.read();
        slot.as_ref().map(f)
    }

    /// Makes `fd` name `file`; returns what it named before.
    pub fn insert(&self, fd: i32, file: Arc<OpenFile>) -> PResult<Option<Arc<OpenFile>>> {
        let (c, i) = split(fd).ok_or(Errno(libc::EMFILE))?;
        let chunk = self.chunks[c].get_or_init(|| {
            Box::new(Chunk {
                served: AtomicU64::new(0),
                slots: std::array::from_fn(|_| Slot::default()),
            })
        });
        let old = chunk.slots[i].0.write().replace(file);
        chunk.served.fetch_or(1 << i, Ordering::Release);
        Ok(old)
    }

    /// Forgets `fd`; returns the description it named.
    pub fn remove(&self, fd: i32) -> Option<Arc<OpenFile>> {
        let (c, i) = self.chunk(fd)?;
        c.served.fetch_and(!(1 << i), Ordering::Release);
        c.slots[i].0.write().take()
    }

    /// Every served descriptor number.
    pub fn served(&self) -> Vec<i32> {
        let mut out = Vec::new();
        for (n, c) in self.chunks.iter().enumerate() {
            let Some(c) = c.get() else { continue };
            let bits = c.served.load(Ordering::Acquire);
            for i in (0..PER_CHUNK).filter(|i| bits & (1 << i) != 0) {
                out.push((n * PER_CHUNK + i) as i32);
            }
        }
        out
    }
}
