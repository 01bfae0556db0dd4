//! Reads of the pool as mount would see it: the device's bytes with the
//! committed-but-unreplayed journal entries laid over them. Without this a
//! check of a crashed pool would report every in-flight operation as
//! corruption.

use amber_format::journal::Entry;
use amber_format::BLOCK_SIZE;
use amber_pmem::PmDevice;

pub(super) struct Media<'a, D: PmDevice> {
    dev: &'a D,
    /// Redo entries to lay over the device, in replay order; validated to
    /// lie inside the pool.
    patches: Vec<Entry>,
}

impl<'a, D: PmDevice> Media<'a, D> {
    pub fn new(dev: &'a D) -> Self {
        Media {
            dev,
            patches: Vec::new(),
        }
    }

    pub fn dev(&self) -> &'a D {
        self.dev
    }

    pub fn add_patches(&mut self, entries: Vec<Entry>) {
        self.patches.extend(entries);
    }

    /// The caller has validated `[off, off + buf.len())` against the pool.
    pub fn read(&self, off: u64, buf: &mut [u8]) {
        self.dev.read(off, buf);
        let end = off + buf.len() as u64;
        for p in &self.patches {
            let p_end = p.offset + p.data.len() as u64;
            let (s, e) = (off.max(p.offset), end.min(p_end));
            if s < e {
                buf[(s - off) as usize..(e - off) as usize]
                    .copy_from_slice(&p.data[(s - p.offset) as usize..(e - p.offset) as usize]);
            }
        }
    }

    /// Block `b`, already checked to be inside the pool.
    pub fn block(&self, b: u64) -> Vec<u8> {
        let mut buf = vec![0u8; BLOCK_SIZE as usize];
        self.read(b * BLOCK_SIZE, &mut buf);
        buf
    }
}
