//! A lessee's small overwrites through the zone (design.md §17.13): a
//! write inside one block, or across blocks of which this lease wrote
//! slices, goes into the next free slots of the lease's granted runs as
//! one extent of the one-fence zone (§11.7) — the
//! slices' new bytes, patched from their newest copy where the write
//! covers them only partly, streamed to the slots, and a checksummed head
//! naming the file, the first slice and a write number of the grant; one
//! fence. A 128-byte write then reads and writes two 64-byte slots, not a
//! 4 KiB block. The head counts to recovery at once (it outranks the
//! file's block, as every head above the floor does), and to the daemon's
//! verifier when the lease comes back.

use std::ops::Range;

use amber_core::data::{LeasedSlots, MAX_SLOT_RUNS};
use amber_format::zone::SLOT_SIZES;
use amber_format::zone_extent::{Extent, EXTENT_SIZE, MAX_EXTENT_SLOTS};
use amber_format::BLOCK_SIZE;
use amber_pmem::{PersistError, PmDevice};

/// The lease's zone slots, and the slices this lease wrote.
#[derive(Debug)]
pub struct Slices {
    ino: u32,
    grant: LeasedSlots,
    /// The run being filled, and its next free slot.
    run: usize,
    next: u32,
    /// Write numbers used, one per extent: never more than the slots.
    seqs: u64,
    /// The lease's window: the file blocks `rows` covers.
    window: Range<u64>,
    /// Per window block, 1 + its row in `copies`, or 0: no slices here.
    rows: Vec<u32>,
    /// Per row, each slice's newest copy: the pool offset of its slot,
    /// 0 while it is the block's own. A block's slices per row; rows
    /// only grow, at most one per window block.
    copies: Vec<u64>,
    /// Rows in use.
    used_rows: u32,
    /// One buffer for the extents' bytes.
    image: Vec<u8>,
}

impl Slices {
    /// The writer of `grant` for inode `ino` over the file blocks
    /// `window` (at most `max` long: the caller's bound on what this
    /// allocates), if every slot's head and data lie inside a pool of
    /// `pool_size` bytes and the grant's shape is one a daemon gives.
    pub fn new(
        ino: u64,
        grant: LeasedSlots,
        (window, max): (Range<u64>, u64),
        pool_size: u64,
    ) -> Option<Slices> {
        let len = usize::try_from(window.end.checked_sub(window.start)?)
            .ok()
            .filter(|&l| l as u64 <= max)?;
        let ino = u32::try_from(ino).ok()?;
        let slot = u64::from(grant.slot_size);
        let inside = |at: u64, len: u64| at.checked_add(len).is_some_and(|e| e <= pool_size);
        let sound = SLOT_SIZES.contains(&grant.slot_size)
            && (1..=MAX_SLOT_RUNS).contains(&grant.runs.len())
            && grant.seq > 0
            && grant.seq.checked_add(grant.count()).is_some()
            && grant.runs.iter().all(|r| {
                inside(r.head_at, u64::from(r.slots) * EXTENT_SIZE)
                    && inside(r.data_at, u64::from(r.slots) * slot)
            });
        sound.then(|| Slices {
            ino,
            grant,
            run: 0,
            next: 0,
            seqs: 0,
            window,
            rows: vec![0; len],
            copies: Vec::new(),
            used_rows: 0,
            image: Vec::new(),
        })
    }

    /// Whether this lease wrote slices of file block `fb`: any other
    /// write of it must wait for the daemon to write them back.
    pub fn holds(&self, fb: u64) -> bool {
        self.row(fb).is_some()
    }

    /// Whether this lease wrote any slice.
    pub fn any(&self) -> bool {
        self.used_rows > 0
    }

    /// Slices per block.
    fn per_block(&self) -> usize {
        (BLOCK_SIZE / u64::from(self.grant.slot_size)) as usize
    }

    /// The newest copies of block `fb`'s slices, if this lease wrote any.
    fn row(&self, fb: u64) -> Option<&[u64]> {
        let i = usize::try_from(fb.checked_sub(self.window.start)?).ok()?;
        let r = *self.rows.get(i)?;
        let per = self.per_block();
        (r > 0).then(|| &self.copies[(r as usize - 1) * per..r as usize * per])
    }

    /// Block `fb`'s row, made if it has none.
    fn row_mut(&mut self, fb: u64) -> &mut [u64] {
        let i = usize::try_from(fb - self.window.start).expect("a write inside the window");
        let per = self.per_block();
        if self.rows[i] == 0 {
            self.used_rows += 1;
            self.rows[i] = self.used_rows;
            self.copies.resize(self.used_rows as usize * per, 0);
        }
        let r = self.rows[i] as usize;
        &mut self.copies[(r - 1) * per..r * per]
    }

    /// Writes `data` at byte `off` of the file as one extent: `ends`
    /// names the file blocks of its first and last bytes and their pool
    /// offsets (the same block twice for a write inside one), every
    /// block between them mapped too. `None` when no granted run has
    /// room for it, it leaves the window, or its slices cannot be
    /// numbered: nothing was written.
    pub fn write<D: PmDevice>(
        &mut self,
        dev: &D,
        ends: [(u64, u64); 2],
        off: u64,
        data: &[u8],
    ) -> Option<Result<(), PersistError>> {
        let slot = u64::from(self.grant.slot_size);
        let end = off + data.len() as u64;
        assert!(
            !data.is_empty()
                && ends[0].0 == off / BLOCK_SIZE
                && ends[1].0 == (end - 1) / BLOCK_SIZE
        );
        if !self.window.contains(&ends[0].0) || !self.window.contains(&ends[1].0) {
            return None;
        }
        let (k0, k1) = (off / slot, (end - 1) / slot);
        let n = u32::try_from(k1 - k0 + 1).ok()?;
        let first = u32::try_from(k0).ok()?;
        if n > u32::from(MAX_EXTENT_SLOTS) || k1 > u64::from(u32::MAX) {
            return None;
        }
        let (head_at, data_at) = self.take(n)?;
        self.build_image(dev, ends, (k0, n), off, data);
        let seq = self.grant.seq + self.seqs;
        self.seqs += 1;
        let head = Extent {
            seq,
            slice: first,
            ino: self.ino,
            slots: u16::try_from(n).expect("at most MAX_EXTENT_SLOTS"),
        }
        .encode(&self.image);
        dev.write_nt(data_at, &self.image);
        // Two 16-byte stores, as the daemon's: a crash keeping the first
        // alone leaves a head whose checksum fails.
        for (i, half) in head.chunks_exact(16).enumerate() {
            let w = u128::from_le_bytes(half.try_into().expect("16 bytes"));
            dev.store_u128(head_at + 16 * i as u64, w);
        }
        dev.flush(head_at, EXTENT_SIZE);
        let done = dev.drain();
        if done.is_ok() {
            self.record(k0, n, data_at);
        }
        Some(done)
    }

    /// Slices `k0..k0 + n` (file-wide numbers) are newest in the slots
    /// from `data_at` on.
    fn record(&mut self, k0: u64, n: u32, data_at: u64) {
        let slot = u64::from(self.grant.slot_size);
        let per = self.per_block() as u64;
        for i in 0..u64::from(n) {
            let k = k0 + i;
            self.row_mut(k / per)[(k % per) as usize] = data_at + i * slot;
        }
    }

    /// Lays this lease's newest copies of the slices of file block `fb`
    /// over `buf`, which holds the block's bytes from byte `from` of it.
    pub fn overlay<D: PmDevice>(&self, dev: &D, fb: u64, from: u64, buf: &mut [u8]) {
        let Some(copies) = self.row(fb) else {
            return;
        };
        let slot = u64::from(self.grant.slot_size);
        let to = from + buf.len() as u64;
        for (k, &at) in copies.iter().enumerate() {
            let (s, e) = (k as u64 * slot, (k as u64 + 1) * slot);
            if at == 0 || e <= from || s >= to {
                continue;
            }
            let (lo, hi) = (s.max(from), e.min(to));
            let dst = usize::try_from(lo - from).expect("inside the buffer");
            let len = usize::try_from(hi - lo).expect("inside a slot");
            dev.read(at + (lo - s), &mut buf[dst..dst + len]);
        }
    }

    /// The head and data offsets of `n` free slots of one run, taken:
    /// the current run's next, else the next run's first.
    fn take(&mut self, n: u32) -> Option<(u64, u64)> {
        while let Some(r) = self.grant.runs.get(self.run) {
            if r.slots - self.next >= n {
                let i = u64::from(self.next);
                self.next += n;
                let slot = u64::from(self.grant.slot_size);
                return Some((r.head_at + i * EXTENT_SIZE, r.data_at + i * slot));
            }
            (self.run, self.next) = (self.run + 1, 0);
        }
        None
    }

    /// The extent's bytes: slices `k0..k0 + n` (file-wide numbers), the
    /// first and last from their newest copy where `data` (at `off`)
    /// covers them only partly (in the blocks `ends` names).
    fn build_image<D: PmDevice>(
        &mut self,
        dev: &D,
        ends: [(u64, u64); 2],
        (k0, n): (u64, u32),
        off: u64,
        data: &[u8],
    ) {
        let slot = u64::from(self.grant.slot_size);
        let base = k0 * slot;
        let len = u64::from(n) * slot;
        self.image
            .resize(usize::try_from(len).expect("at most 128 slots"), 0);
        let rel = usize::try_from(off - base).expect("inside the extent");
        let (head, tail) = (rel, len as usize - rel - data.len());
        if head > 0 {
            self.patch(dev, ends[0], k0, 0);
        }
        if tail > 0 {
            self.patch(dev, ends[1], k0 + u64::from(n) - 1, (n - 1) as usize);
        }
        self.image[rel..rel + data.len()].copy_from_slice(data);
    }

    /// Copies slice `k` (a file-wide number) of block `fb` (at `at`),
    /// from its newest copy, into the image's slice `i`.
    fn patch<D: PmDevice>(&mut self, dev: &D, (fb, at): (u64, u64), k: u64, i: usize) {
        let slot = self.grant.slot_size as usize;
        let k = k - fb * self.per_block() as u64;
        let copy = self.row(fb).map_or(0, |c| c[k as usize]);
        let from = if copy == 0 {
            at + k * slot as u64
        } else {
            copy
        };
        dev.read(from, &mut self.image[i * slot..(i + 1) * slot]);
    }
}
