//! A lessee's writes (design.md §17.4): an overwrite inside one block
//! the file maps, wholly below its size, goes out of place into a block
//! of the lease's grant — the write's bytes merged with the old block's —
//! with an own-commit record (§13.6) naming the file, the block's index,
//! a seq of the grant, the write's time and the checksum of the 4,096
//! bytes. One fence makes both durable: the write is atomic and durable
//! on return, before the daemon knows of it; the daemon's verifier, or a
//! recovery after a crash, finds it by its record alone. Anything else
//! (a write across blocks, into a hole, past the size) is the kernel's.

use std::collections::BTreeMap;

use amber_core::Run;
use amber_format::split::{LogicalInfo, OwnCommit, Record, LI_SIZE};
use amber_format::{Timespec, BLOCK_SIZE};
use amber_pmem::{PersistError, PmDevice};

use crate::wire::Writes;

/// The state of one write-leased window: what is granted, what is used,
/// and where the blocks this lease rewrote lie now.
#[derive(Debug)]
pub struct Writer {
    ino: u64,
    grant: Writes,
    used: usize,
    /// File blocks this lease rewrote, and their pool offsets now
    /// (ordered: a write's link is the nearest one below it).
    moved: BTreeMap<u64, u64>,
    /// The newest write's time: the file's mtime and ctime since.
    newest: Option<Timespec>,
}

/// Why a write is not the lessee's to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotMine {
    /// Across blocks, into a hole, or not wholly below the size: the
    /// kernel's.
    Shape,
    /// Every granted block is used: return the lease and ask again.
    Spent,
}

impl Writer {
    /// The writer of a grant for `ino`, if every granted block and its
    /// record lie inside a pool of `pool_size` bytes: a grant is the
    /// daemon's word, but a bad one must not make this process store
    /// outside its mapping.
    pub fn new(ino: u64, grant: Writes, pool_size: u64) -> Option<Writer> {
        let fits = |b: u64| {
            b.checked_add(1)
                .and_then(|e| e.checked_mul(BLOCK_SIZE))
                .is_some_and(|e| e <= pool_size)
                && b.checked_mul(LI_SIZE)
                    .and_then(|o| o.checked_add(grant.records + LI_SIZE))
                    .is_some_and(|e| e <= pool_size)
        };
        grant.blocks.iter().all(|&b| fits(b)).then(|| Writer {
            ino,
            grant,
            used: 0,
            moved: BTreeMap::new(),
            newest: None,
        })
    }

    /// Where file block `fb` lies now: rewritten by this lease, or as the
    /// grant's `runs` say (`None`: a hole).
    pub fn locate(&self, runs: &[Run], fb: u64) -> Option<u64> {
        self.moved.get(&fb).copied().or_else(|| located(runs, fb))
    }

    /// The file blocks this lease rewrote and their pool offsets now.
    pub fn moved(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.moved.iter().map(|(&fb, &at)| (fb, at))
    }

    /// Whether this lease rewrote any block.
    pub fn moved_any(&self) -> bool {
        !self.moved.is_empty()
    }

    /// The newest write's time, if this lease wrote.
    pub fn newest(&self) -> Option<Timespec> {
        self.newest
    }

    /// Writes `data` at byte `off` of the file (`size` bytes, mapped as
    /// `runs` and this lease's writes say) as one own commit at `time`.
    pub fn write<D: PmDevice>(
        &mut self,
        dev: &D,
        (runs, size): (&[Run], u64),
        off: u64,
        data: &[u8],
        time: Timespec,
    ) -> Result<Result<(), PersistError>, NotMine> {
        let fb = off / BLOCK_SIZE;
        let last = off.saturating_add(data.len() as u64);
        if data.is_empty() || (last - 1) / BLOCK_SIZE != fb || (fb + 1) * BLOCK_SIZE > size {
            return Err(NotMine::Shape);
        }
        let old = self.locate(runs, fb).ok_or(NotMine::Shape)?;
        let Some(&block) = self.grant.blocks.get(self.used) else {
            return Err(NotMine::Spent);
        };
        let li = LogicalInfo {
            seq: self.grant.seq + self.used as u64,
            ino: self.ino,
            generation: self.grant.generation,
            file_block: fb,
            link: self.link(dev, runs, fb, old),
            own: None,
        };
        let at = usize::try_from(off - fb * BLOCK_SIZE).expect("inside a block");
        let done = commit(dev, self.grant.records, (block, old), li, time, (at, data));
        // A failed fence may still have made the block durable: the block
        // is spent either way, and the caller refuses further writes.
        self.used += 1;
        if done.is_ok() {
            self.moved.insert(fb, block * BLOCK_SIZE);
            self.newest = Some(time);
        }
        Ok(done)
    }

    /// The block below `fb` in the chain: the nearest lower mapped block
    /// this window knows, else what the old block's record links to (the
    /// daemon's verifier rewrites a wrong one).
    fn link<D: PmDevice>(&self, dev: &D, runs: &[Run], fb: u64, old: u64) -> u64 {
        let below_run = |fb: u64| {
            let i = runs.partition_point(|r| r.file_block < fb);
            i.checked_sub(1).map(|i| {
                let r = &runs[i];
                (r.file_block + r.blocks - 1).min(fb - 1)
            })
        };
        let moved_below = self.moved.range(..fb).next_back().map(|(&m, _)| m);
        let nearest = below_run(fb).into_iter().chain(moved_below).max();
        if let Some(n) = nearest.and_then(|n| self.locate(runs, n)) {
            return n / BLOCK_SIZE;
        }
        let mut raw = [0u8; LI_SIZE as usize];
        dev.read(self.grant.records + (old / BLOCK_SIZE) * LI_SIZE, &mut raw);
        match LogicalInfo::decode(&raw) {
            Record::Valid(li) if li.ino == self.ino => li.link,
            _ => 0,
        }
    }
}

/// The pool offset of file block `fb` in `runs` (sorted, disjoint).
fn located(runs: &[Run], fb: u64) -> Option<u64> {
    let i = runs.partition_point(|r| r.file_block + r.blocks <= fb);
    runs.get(i)
        .filter(|r| r.file_block <= fb)
        .map(|r| r.pool_off + (fb - r.file_block) * BLOCK_SIZE)
}

/// Streams the block image — `data` at byte `at`, over the bytes at pool
/// offset `old` — into granted block `block`, then its record (`li` with
/// the image's checksum and `time`), and fences once.
fn commit<D: PmDevice>(
    dev: &D,
    records: u64,
    (block, old): (u64, u64),
    li: LogicalInfo,
    time: Timespec,
    (at, data): (usize, &[u8]),
) -> Result<(), PersistError> {
    let bs = BLOCK_SIZE as usize;
    let merged;
    let image = if data.len() == bs {
        data
    } else {
        let mut b = vec![0u8; bs];
        dev.read(old, &mut b);
        b[at..at + data.len()].copy_from_slice(data);
        merged = b;
        &merged[..]
    };
    dev.write_nt(block * BLOCK_SIZE, image);
    let li = LogicalInfo {
        own: Some(OwnCommit::new(time, image)),
        ..li
    };
    dev.write_nt(records + block * LI_SIZE, &li.encode());
    dev.drain()
}
