//! The `nova` policy: NOVA's data path as published (Xu and Swanson,
//! FAST'16), the baseline LAWN and HUNTER measure themselves against.
//! Every regular file has a log of its own in PM (format::nova): a write
//! copies the pages it touches to new blocks (a partial page takes the
//! rest of the old one), appends a write entry per run of new blocks, and
//! commits them with one 8-byte store of the log tail; the replaced blocks
//! are freed once that store is durable. A DRAM index per file, rebuilt
//! from the log when the file is loaded, answers reads (the inode's block
//! index, so reads are `direct`'s). Truncate and setattr append attribute
//! entries, fallocate write and punch entries; log pages whose entries are
//! all dead are unlinked (fast GC) and a log under half live is rewritten
//! (thorough GC, `gc.rs`). Every write is atomic and durable on return.
//! docs/design.md §15.

mod append;
mod gc;
mod ops;

use super::{DataPolicy, Direct, FallocStep};
use crate::data::Context;
use crate::error::Result;
use crate::filelog::FileLog;
use crate::inode::InodeState;
use amber_format::nova::log_of;
use amber_format::{FileKind, Inode, PoolLayout, BLOCK_SIZE};
use amber_pmem::PmDevice;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The NOVA policy.
#[derive(Default)]
pub struct Nova {
    stats: Stats,
}

/// Counters for the workbench.
#[derive(Default)]
pub(super) struct Stats {
    /// Entries appended.
    entries: AtomicU64,
    /// Log pages taken for new entries.
    log_pages: AtomicU64,
    /// Log pages fast GC unlinked.
    fast_gc_pages: AtomicU64,
    /// Logs thorough GC rewrote.
    thorough_gcs: AtomicU64,
    /// Log pages thorough GC freed.
    thorough_gc_pages: AtomicU64,
}

/// Runs `f` on the file's replayed log, with the inode's block index as
/// the log's map (the two are one index: reads use the inode's). A file
/// first used since it was loaded is replayed here.
fn with_log<D: PmDevice, R>(
    fs: Context<'_, D>,
    st: &mut InodeState,
    f: impl FnOnce(&mut FileLog, &mut InodeState) -> Result<R>,
) -> Result<R> {
    let mut log = match st.policy.take().map(|b| b.downcast::<FileLog>()) {
        Some(Ok(log)) => log,
        _ => Box::new(replay(fs, st)?),
    };
    log.map = std::mem::take(&mut st.map);
    let r = f(&mut log, st);
    st.map = std::mem::take(&mut log.map);
    st.disk.blocks = st.map.mapped() + log.pages.len() as u64;
    st.policy = Some(log);
    r
}

/// Reads the file's log from PM.
fn replay<D: PmDevice>(fs: Context<'_, D>, st: &InodeState) -> Result<FileLog> {
    let dev = fs.device();
    let read = |off: u64, buf: &mut [u8]| dev.read(off, buf);
    FileLog::replay(&read, fs.layout(), st.ino, &st.disk)
}

/// The inode's size and times as the log says: the newest entry's size
/// and mtime, and the later of its ctime and the inode's (a chmod or link
/// changes only the inode's). An empty log keeps the inode's.
fn attrs_from(log: &FileLog, d: &mut Inode) {
    if let Some((size, mtime, ctime)) = log.attrs {
        d.size = size;
        d.mtime = mtime;
        d.ctime = d.ctime.max(ctime);
    }
}

impl<D: PmDevice> DataPolicy<D> for Nova {
    fn name(&self) -> &'static str {
        "nova"
    }

    fn write(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        off: u64,
        data: &[u8],
        _sync: bool,
    ) -> Result<usize> {
        ops::write(fs, st, off, data, &self.stats)?;
        Ok(data.len())
    }

    fn write_in_place(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        off: u64,
        data: &[u8],
        _sync: bool,
    ) -> Result<usize> {
        ops::write_in_place(fs, st, off, data, &self.stats)?;
        Ok(data.len())
    }

    fn touch(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        now: amber_format::Timespec,
    ) -> Result<()> {
        ops::touch(fs, st, now, &self.stats)
    }

    fn truncate(&self, fs: Context<'_, D>, st: &mut InodeState, size: u64) -> Result<()> {
        ops::truncate(fs, st, size, &self.stats)
    }

    fn fallocate(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        off: u64,
        len: u64,
        mode: FallocStep,
    ) -> Result<()> {
        match mode {
            FallocStep::Allocate { keep_size } => {
                ops::allocate(fs, st, off, off + len, keep_size, &self.stats)
            }
            FallocStep::PunchHole => ops::punch(fs, st, off, off + len, &self.stats),
        }
    }

    fn pool_layout(&self) -> PoolLayout {
        PoolLayout::Nova
    }

    fn atomic_writes(&self) -> bool {
        true
    }

    fn load(&self, fs: Context<'_, D>, st: &mut InodeState) -> Result<()> {
        if st.kind() != FileKind::Regular {
            return Ok(());
        }
        let mut log = replay(fs, st)?;
        attrs_from(&log, &mut st.disk);
        st.map = std::mem::take(&mut log.map);
        st.disk.blocks = st.map.mapped() + log.pages.len() as u64;
        st.policy = Some(Box::new(log));
        Ok(())
    }

    fn setattr_tx(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        new: &mut Inode,
        _tx: &mut crate::journal::Tx,
    ) -> Result<()> {
        if st.kind() != FileKind::Regular || new.mtime == st.disk.mtime {
            return Ok(());
        }
        ops::set_mtime(fs, st, new, &self.stats)
    }

    fn fsync(&self, fs: Context<'_, D>, st: &mut InodeState) -> Result<()> {
        Direct.fsync(fs, st)
    }

    fn forget(&self, fs: Context<'_, D>, st: &mut InodeState) {
        if st.kind() != FileKind::Regular {
            return;
        }
        let pages = match st.policy.take().map(|b| b.downcast::<FileLog>()) {
            Some(Ok(log)) => log.pages,
            // Never used since it was loaded: the inode names the log.
            _ => replay(fs, st).map(|l| l.pages).unwrap_or_default(),
        };
        let data: Vec<u64> = st
            .map
            .mapped_in(0, u64::MAX / BLOCK_SIZE)
            .map(|(_, b)| b)
            .collect();
        fs.blocks().free_all(&pages);
        fs.blocks().free_all(&data);
    }

    fn describe(&self, _fs: Context<'_, D>, st: &InodeState) -> Vec<(String, String)> {
        let (head, tail) = log_of(&st.disk.inline);
        let mut out = vec![
            ("log_head".to_string(), head.to_string()),
            ("log_tail".to_string(), tail.to_string()),
        ];
        if let Some(log) = st.policy.as_ref().and_then(|b| b.downcast_ref::<FileLog>()) {
            out.push(("log_pages".into(), log.pages.len().to_string()));
            out.push(("log_entries".into(), log.entries.to_string()));
            out.push(("live_entries".into(), log.live.count().to_string()));
        }
        out
    }

    fn stats(&self) -> Vec<(String, u64)> {
        let s = &self.stats;
        [
            ("entries", &s.entries),
            ("log_pages", &s.log_pages),
            ("fast_gc_pages", &s.fast_gc_pages),
            ("thorough_gcs", &s.thorough_gcs),
            ("thorough_gc_pages", &s.thorough_gc_pages),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.load(Relaxed)))
        .collect()
    }
}
