//! Write leases in one process, for the crash suite: the daemon's side
//! (`Core::write_lease`, `Core::adopt`) and the lessee's (`amber_lease`'s
//! `Writer`) over the one device the crash simulator records, so every
//! store of the protocol is a crash point — including the stores of
//! other files' ops while a lease is out.

use std::collections::BTreeMap;

use amber_core::data::LeaseEnd;
use amber_core::{Core, FsError, WriteLease};
use amber_format::BLOCK_SIZE;
use amber_lease::{Writer, Writes, WINDOW_BLOCKS};
use amber_pmem::PmDevice;

use crate::state::{Content, FsState};

/// Blocks granted per lease: the workload's writes under one lease fit,
/// and some stay unused, so their return is exercised too.
const GRANTED: usize = 16;

/// A write lease the workload holds, as another process would.
#[derive(Debug)]
pub struct Leased {
    ino: u64,
    lease: WriteLease,
    writer: Writer,
}

impl Leased {
    /// A write lease on the first window of `ino`.
    pub fn grant<D: PmDevice>(fs: &Core<D>, ino: u64) -> Result<Leased, FsError> {
        let lease = fs
            .write_lease(ino, (0, WINDOW_BLOCKS), GRANTED)?
            .ok_or(FsError::Unsupported("the policy grants no write leases"))?;
        let view = (0..WINDOW_BLOCKS, lease.view.size);
        let writer = Writer::new(ino, Writes::of(&lease), view, fs.device().size()).ok_or(
            FsError::Corrupted("a write lease granted blocks outside the pool".into()),
        )?;
        Ok(Leased { ino, lease, writer })
    }

    /// Writes `data` at `off` as the lessee.
    pub fn write<D: PmDevice>(
        &mut self,
        fs: &Core<D>,
        off: u64,
        data: &[u8],
    ) -> Result<(), FsError> {
        match self
            .writer
            .write(&**fs.device(), &self.lease.view.runs, off, data, fs.now())
        {
            Ok(r) => r.map_err(FsError::from),
            Err(_) => Err(FsError::InvalidArgument(
                "a leased write must lie inside the lease's window and grant",
            )),
        }
    }

    /// Sets the file's size to `size` as the lessee; true if that shrank
    /// it, which ends the lease (the caller gives it back).
    pub fn truncate<D: PmDevice>(&mut self, fs: &Core<D>, size: u64) -> Result<bool, FsError> {
        match self
            .writer
            .truncate(&**fs.device(), &self.lease.view.runs, size, fs.now())
        {
            Ok(r) => r.map_err(FsError::from),
            Err(_) => Err(FsError::InvalidArgument(
                "a leased truncate must lie inside the lease's window and grant",
            )),
        }
    }

    /// The lease comes back: the daemon adopts its writes.
    pub fn give_back<D: PmDevice>(self, fs: &Core<D>) -> Result<(), FsError> {
        fs.adopt(self.ino, &self.lease.writes, LeaseEnd::Returned)
            .map(drop)
    }
}

/// What the leases still out wrote, laid over `st` (read through the
/// core, which does not know those writes yet): the file at the size the
/// lessee's writes left, each block it wrote, and the part past the size
/// the core knows (appended in place), from where they lie — the state a
/// reader of the lessee's mapping sees, and recovery must keep.
pub fn overlay<D: PmDevice>(fs: &Core<D>, leases: &BTreeMap<String, Leased>, st: &mut FsState) {
    for (path, l) in leases {
        let Some(Content::File(bytes)) = st.nodes.get_mut(path.as_str()).map(|n| &mut n.content)
        else {
            continue;
        };
        let known = bytes.len() as u64 / BLOCK_SIZE;
        bytes.resize(usize::try_from(l.writer.size()).unwrap_or(usize::MAX), 0);
        let grown = (known..l.writer.size().div_ceil(BLOCK_SIZE)).filter(|fb| *fb < WINDOW_BLOCKS);
        let blocks = l.writer.moved().map(|(fb, _)| fb).chain(grown);
        for fb in blocks {
            let Some(at) = l.writer.locate(&l.lease.view.runs, fb) else {
                continue;
            };
            let start = usize::try_from(fb * BLOCK_SIZE).unwrap_or(usize::MAX);
            let end = bytes.len().min(start.saturating_add(BLOCK_SIZE as usize));
            if start < end {
                fs.device().read(at, &mut bytes[start..end]);
            }
        }
    }
}
