//! Writes and punches over pinned blocks: in place, so a mapping and
//! `write()` always meet on one PM page, whatever the policy does with
//! the file's other blocks.

use crate::data::FallocStep;
use crate::error::Result;
use crate::fs::Core;
use crate::inode::InodeState;
use amber_format::BLOCK_SIZE;
use amber_pmem::PmDevice;

/// Zeros a punch over pinned blocks writes, a piece at a time.
static ZEROS: [u8; 64 << 10] = [0; 64 << 10];

impl<D: PmDevice> Core<D> {
    /// Whether a change of bytes `[off, off + len)` touches a pinned
    /// block.
    pub(crate) fn touches_pins(st: &InodeState, off: u64, len: u64) -> bool {
        len > 0
            && st
                .maps
                .as_ref()
                .is_some_and(|m| m.any_pinned(off / BLOCK_SIZE, (off + len - 1) / BLOCK_SIZE))
    }

    /// A write of `data` at `at` over a file some of whose blocks are
    /// pinned: each run of pinned blocks goes in place
    /// (`DataPolicy::write_in_place`), each other run as the policy
    /// writes, in order. Such a write is atomic only run by run, and a
    /// pinned run not even that (README, "Mapped files").
    pub(crate) fn write_over_pins(
        &self,
        st: &mut InodeState,
        at: u64,
        data: &[u8],
        sync: bool,
    ) -> Result<usize> {
        let end = at + data.len() as u64;
        let runs = match st.maps.as_deref() {
            Some(m) => m.runs(at / BLOCK_SIZE, (end - 1) / BLOCK_SIZE),
            None => vec![(at / BLOCK_SIZE, (end - 1) / BLOCK_SIZE, false)],
        };
        let ctx = self.context();
        for (first, last, pinned) in runs {
            let s = at.max(first * BLOCK_SIZE);
            let e = end.min((last + 1) * BLOCK_SIZE);
            let piece = &data[(s - at) as usize..(e - at) as usize];
            let res = if pinned {
                self.policy().write_in_place(ctx, st, s, piece, sync)
            } else {
                self.policy().write(ctx, st, s, piece, sync)
            };
            self.guard(res)?;
        }
        Ok(data.len())
    }

    /// A punch of `[off, off + len)` over pinned blocks: their bytes in
    /// the range (below the end of file) are zeroed in place and the
    /// blocks stay, since a mapping shows them; the other runs are
    /// punched as the policy punches. The range reads as zeros either
    /// way; only the pinned blocks' space is not given back until they
    /// are unpinned and punched again (README, "Mapped files").
    pub(crate) fn punch_over_pins(&self, st: &mut InodeState, off: u64, len: u64) -> Result<()> {
        let end = (off + len).min(st.size());
        if off >= end {
            return Ok(());
        }
        let runs = match st.maps.as_deref() {
            Some(m) => m.runs(off / BLOCK_SIZE, (end - 1) / BLOCK_SIZE),
            None => vec![(off / BLOCK_SIZE, (end - 1) / BLOCK_SIZE, false)],
        };
        let ctx = self.context();
        for (first, last, pinned) in runs {
            let s = off.max(first * BLOCK_SIZE);
            let e = end.min((last + 1) * BLOCK_SIZE);
            if !pinned {
                let res = self
                    .policy()
                    .fallocate(ctx, st, s, e - s, FallocStep::PunchHole);
                self.guard(res)?;
                continue;
            }
            let mut at = s;
            // Each round zeroes at least one byte: bounded by the run.
            while at < e {
                let n = (e - at).min(ZEROS.len() as u64) as usize;
                let res = self
                    .policy()
                    .write_in_place(ctx, st, at, &ZEROS[..n], false);
                self.guard(res)?;
                at += n as u64;
            }
        }
        Ok(())
    }
}
