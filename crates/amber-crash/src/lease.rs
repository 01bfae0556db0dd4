//! Write leases in one process, for the crash suite: the daemon's side
//! (`Core::write_lease`, `Core::adopt`) and the lessee's (`amber_lease`'s
//! `Writer`) over the one device the crash simulator records, so every
//! store of the protocol is a crash point — including the stores of
//! other files' ops while a lease is out. What the lessee's writes should
//! leave is modelled here byte by byte, apart from the media, so the
//! oracle sees a lessee that stores the wrong bytes.

use std::collections::BTreeMap;

use amber_core::data::LeaseEnd;
use amber_core::{Core, FsError, WriteLease};
use amber_lease::{NotMine, Writer, Writes, WINDOW_BLOCKS};
use amber_pmem::PmDevice;

use crate::state::{Content, FsState};

/// Blocks granted per lease: the workload's writes under one lease fit,
/// and some stay unused, so their return is exercised too. (amber adds
/// 64 zone slots: a block's, so a whole block over slices fits, and
/// the workload's small writes run out of them, returning the lease and
/// taking a new one as the interposer does.)
const GRANTED: usize = 16;

/// A write lease the workload holds, as another process would.
#[derive(Debug)]
pub struct Leased {
    ino: u64,
    lease: WriteLease,
    writer: Writer,
    /// The file's bytes as the lessee's writes should have left them:
    /// read through the core at the grant, then each write and truncate
    /// applied here as POSIX says.
    model: Vec<u8>,
}

impl Leased {
    /// A write lease on the first window of `ino`.
    pub fn grant<D: PmDevice>(fs: &Core<D>, ino: u64) -> Result<Leased, FsError> {
        let (lease, writer) = lease_of(fs, ino)?;
        let size = usize::try_from(lease.view.size).map_err(|_| FsError::FileTooLarge)?;
        let mut model = vec![0u8; size];
        let n = fs.read(ino, 0, &mut model)?;
        model.truncate(n);
        Ok(Leased {
            ino,
            lease,
            writer,
            model,
        })
    }

    /// Runs `op` on the writer; when the grant is spent, gives the lease
    /// back and takes a new one first (the interposer's `renew`).
    fn leased<D: PmDevice, T>(
        &mut self,
        fs: &Core<D>,
        mut op: impl FnMut(
            &mut Writer,
            &WriteLease,
        ) -> Result<Result<T, amber_pmem::PersistError>, NotMine>,
        what: &'static str,
    ) -> Result<T, FsError> {
        let done = match op(&mut self.writer, &self.lease) {
            Err(NotMine::Spent) => {
                self.writer.seal(&**fs.device())?;
                fs.adopt(self.ino, &self.lease.writes, LeaseEnd::Returned)?;
                (self.lease, self.writer) = lease_of(fs, self.ino)?;
                op(&mut self.writer, &self.lease)
            }
            done => done,
        };
        match done {
            Ok(r) => r.map_err(FsError::from),
            Err(_) => Err(FsError::InvalidArgument(what)),
        }
    }

    /// Writes `data` at `off` as the lessee.
    pub fn write<D: PmDevice>(
        &mut self,
        fs: &Core<D>,
        off: u64,
        data: &[u8],
    ) -> Result<(), FsError> {
        let (dev, now) = (&**fs.device(), fs.now());
        self.leased(
            fs,
            |w, l| w.write(dev, &l.view.runs, off, data, now),
            "a leased write must lie inside the lease's window and grant",
        )?;
        let at = usize::try_from(off).map_err(|_| FsError::FileTooLarge)?;
        let end = at + data.len();
        if end > self.model.len() {
            self.model.resize(end, 0);
        }
        self.model[at..end].copy_from_slice(data);
        Ok(())
    }

    /// Sets the file's size to `size` as the lessee; true if that shrank
    /// it, which ends the lease (the caller gives it back).
    pub fn truncate<D: PmDevice>(&mut self, fs: &Core<D>, size: u64) -> Result<bool, FsError> {
        let (dev, now) = (&**fs.device(), fs.now());
        let shrank = self.leased(
            fs,
            |w, l| w.truncate(dev, &l.view.runs, size, now),
            "a leased truncate must lie inside the lease's window and grant",
        )?;
        self.model
            .resize(usize::try_from(size).map_err(|_| FsError::FileTooLarge)?, 0);
        Ok(shrank)
    }

    /// Allocates `[off, off + len)` as the lessee (`fallocate` mode 0, or
    /// `FALLOC_FL_KEEP_SIZE` if `keep_size`): zeros where the file had
    /// none, and without `keep_size` a size of at least the range's end.
    pub fn allocate<D: PmDevice>(
        &mut self,
        fs: &Core<D>,
        (off, len): (u64, u64),
        keep_size: bool,
    ) -> Result<(), FsError> {
        let (dev, now) = (&**fs.device(), fs.now());
        self.leased(
            fs,
            |w, l| w.allocate(dev, &l.view.runs, (off, len), keep_size, now),
            "a leased allocation must lie inside the lease's window and grant",
        )?;
        let end = off.saturating_add(len);
        if !keep_size && end > self.model.len() as u64 {
            self.model
                .resize(usize::try_from(end).map_err(|_| FsError::FileTooLarge)?, 0);
        }
        Ok(())
    }

    /// The lease comes back: the lessee seals its zone writes' time
    /// (`Writer::seal`), the daemon adopts its writes.
    pub fn give_back<D: PmDevice>(mut self, fs: &Core<D>) -> Result<(), FsError> {
        self.writer.seal(&**fs.device())?;
        fs.adopt(self.ino, &self.lease.writes, LeaseEnd::Returned)
            .map(drop)
    }
}

/// A write lease on the first window of `ino` and its writer.
fn lease_of<D: PmDevice>(fs: &Core<D>, ino: u64) -> Result<(WriteLease, Writer), FsError> {
    let lease = fs
        .write_lease(ino, (0, WINDOW_BLOCKS), GRANTED)?
        .ok_or(FsError::Unsupported("the policy grants no write leases"))?;
    let view = (0..WINDOW_BLOCKS, lease.view.size);
    let writer = Writer::new(ino, Writes::of(&lease), view, fs.device().size()).ok_or(
        FsError::Corrupted("a write lease granted blocks outside the pool".into()),
    )?;
    Ok((lease, writer))
}

/// What the leases still out wrote, laid over `st` (read through the
/// core, which does not know those writes yet): each leased file as its
/// model says — the state the lessee's writes promised, and recovery
/// must keep.
pub fn overlay(leases: &BTreeMap<String, Leased>, st: &mut FsState) {
    for (path, l) in leases {
        if let Some(Content::File(bytes)) = st.nodes.get_mut(path.as_str()).map(|n| &mut n.content)
        {
            bytes.clone_from(&l.model);
        }
    }
}
