//! HiNFS's mount-time calibration of its Buffer Benefit Model: the cost
//! of writing one cache line to DRAM and, non-temporally and fenced, to
//! PM, measured on this device because the core sees only a `PmDevice`
//! and cannot know the medium. `hinfs` and `amber` both decide with it
//! whether buffering in DRAM can pay at all; `amber` also sizes its zone
//! writes by the cost of one flushed line with its fence, measured on the
//! same blocks in the same pass.

use super::bbm::Costs;
use super::LINE;
use crate::data::Context;
use crate::error::Result;
use crate::time::ClockSource;
use amber_format::BLOCK_SIZE;
use amber_pmem::PmDevice;
use std::time::{Duration, Instant};

/// Bytes the calibration writes to each of DRAM and PM.
const CALIBRATION_BYTES: u64 = 64 << 10;
/// Repetitions; the fastest counts (the others include page faults and
/// interrupts).
const CALIBRATION_ROUNDS: u32 = 4;

/// Buffering pays only when a PM line costs at least this many DRAM
/// lines: the model's inequality counts line writes but not the fixed
/// cost of buffering a write (index, pool lock, LRW list, write-back
/// bookkeeping), which at DRAM-like PM exceeds the whole saving (at
/// `dram` this machine measures a ratio of ~2 and fileserver ran at
/// 0.71x direct when buffered; at 50 ns per line the ratio is ~70).
const MIN_PM_DRAM_RATIO: f64 = 4.0;

/// Whether costs `c` leave room for buffering to pay.
pub fn buffering_pays(c: Costs) -> bool {
    c.l_pm_ns >= MIN_PM_DRAM_RATIO * c.l_dram_ns
}

/// What the calibration measured, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measured {
    /// Per line written to DRAM, and non-temporally to PM.
    pub costs: Costs,
    /// One line stored, flushed and fenced on its own.
    pub flush_ns: f64,
}

/// Measures L_dram and L_pm (per cache line) by writing the same bytes
/// into a DRAM buffer and, with non-temporal stores and a fence, into
/// free data blocks borrowed from the allocator (scratch: a free block's
/// contents are never shown; it is freed again right after), and the cost
/// of one line flushed and fenced on its own, one per block. None when
/// the pool has no free block to measure on, and under the simulated
/// clock: a crash run must be a function of its seed, not of how fast this
/// machine wrote the calibration's lines (the model then keeps its
/// fallback costs).
pub fn measure<D: PmDevice>(fs: Context<'_, D>) -> Result<Option<Measured>> {
    if fs.options().clock == ClockSource::Simulated {
        return Ok(None);
    }
    let want = CALIBRATION_BYTES / BLOCK_SIZE;
    let mut blocks = Vec::new();
    while (blocks.len() as u64) < want {
        match fs.blocks().alloc(None) {
            Some(b) => blocks.push(b),
            None => break,
        }
    }
    if blocks.is_empty() {
        return Ok(None);
    }
    let bytes = blocks.len() as u64 * BLOCK_SIZE;
    let lines = (bytes / LINE) as f64;
    let src: Vec<u8> = (0..bytes).map(|i| (i * 31 % 251) as u8).collect();
    let mut dram = vec![0u8; bytes as usize];
    let (mut t_dram, mut t_pm, mut t_flush) = (Duration::MAX, Duration::MAX, Duration::MAX);
    let mut res = Ok(());
    for _ in 0..CALIBRATION_ROUNDS {
        let t = Instant::now();
        for (chunk, dst) in src
            .chunks(LINE as usize)
            .zip(dram.chunks_mut(LINE as usize))
        {
            dst.copy_from_slice(chunk);
        }
        t_dram = t_dram.min(t.elapsed());
        std::hint::black_box(&dram);
        let t = Instant::now();
        for (&b, chunk) in blocks.iter().zip(src.chunks(BLOCK_SIZE as usize)) {
            fs.device().write_nt(fs.layout().block_offset(b), chunk);
        }
        res = fs.drain();
        t_pm = t_pm.min(t.elapsed());
        if res.is_err() {
            break;
        }
        let t = Instant::now();
        for (&b, chunk) in blocks.iter().zip(src.chunks(LINE as usize)) {
            let at = fs.layout().block_offset(b);
            fs.device().write(at, chunk);
            fs.device().flush(at, LINE);
            res = fs.drain();
            if res.is_err() {
                break;
            }
        }
        t_flush = t_flush.min(t.elapsed());
        if res.is_err() {
            break;
        }
    }
    fs.blocks().free_all(&blocks);
    res?;
    let per_line = |d: Duration| (d.as_nanos() as f64 / lines).max(0.01);
    Ok(Some(Measured {
        costs: Costs {
            l_dram_ns: per_line(t_dram),
            l_pm_ns: per_line(t_pm),
        },
        flush_ns: (t_flush.as_nanos() as f64 / blocks.len() as f64).max(0.01),
    }))
}
