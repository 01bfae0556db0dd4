//! Random small writes, optionally mixed with reads, on one preallocated
//! file: the fio runs of lawn.txt §5.2 (request sizes 128 B to 4 KiB;
//! random writes alone and read/write mixes 3/7, 5/5, 7/3; synchronous).
//! Offsets are aligned to the request size, as fio's are; each thread
//! works in its own stripe of the file, or (`--files` equal to
//! `--threads`) in a file of its own, so writers of different files can
//! run in parallel.
//!
//! Defaults and their sources:
//! * 128 B requests (`--io-size`, 128..=4096): lawn's smallest, where its
//!   9.5-12x gains are reported;
//! * `--read-ratio 0` (reads per ten ops: 3, 5 and 7 give lawn's mixes);
//! * `--read-ratio 10 --prewrite N` for lawn's random reads (Figure 5(e)):
//!   N untimed random writes after setup fill a lawn zone with slices and
//!   scatter a copy-on-write file's blocks; the timed runs then only read
//!   (the verification pass checks every block the prewrite wrote);
//! * `--fsync every`: lawn's writes are synchronous; `N` or `none` relax it;
//! * one 256 MiB file: lawn uses 60 GB (five times its DRAM) to defeat the
//!   page cache; a directory target should be dropped from the cache
//!   (`--drop-caches`) instead on this 24 GiB machine.
//!
//! Writes store version 1 of the file's content over version 0, so the
//! verification pass knows each block's expected bytes from which blocks
//! the model says were written.

use super::{Content, Flow, Fsync, Limit, Op, Params};
use amber_sim::SplitMix64;

pub fn defaults() -> Params {
    Params {
        files: 1,
        file_size: 256 << 20,
        io_size: 128,
        append_size: 16 << 10,
        dir_width: 20,
        threads: 1,
        limit: Limit::Ops(200_000),
        read_ratio: 0,
        prewrite: 0,
        fsync: Fsync::Every,
        seed: 42,
    }
}

pub(crate) fn validate(p: &Params) -> Result<(), String> {
    if !(128..=4096).contains(&p.io_size) {
        return Err(format!(
            "randwrite: --io-size {} is outside lawn's 128..=4096 bytes",
            p.io_size
        ));
    }
    if p.files != 1 && p.files != p.threads as u64 {
        return Err(
            "randwrite works on one file shared by the threads (--files 1) or on one file per \
             thread (--files equal to --threads)"
                .into(),
        );
    }
    if p.file_size / p.io_size < p.threads as u64 {
        return Err("randwrite: --file-size must hold one --io-size block per thread".into());
    }
    Ok(())
}

pub(crate) struct Randwrite;

/// One thread's stripe (of the shared file, or the whole of its own file)
/// and which of the file's blocks it has overwritten.
#[derive(Debug, Clone)]
pub(crate) struct Stripe {
    file: u64,
    first: u64,
    blocks: u64,
    covered: Vec<u64>,
    writes: u64,
}

impl Flow for Randwrite {
    type State = Stripe;

    fn init(&self, p: &Params, thread: usize) -> Stripe {
        let total = p.file_size / p.io_size;
        let (file, first, blocks) = if p.files > 1 {
            (thread as u64, 0, total)
        } else {
            let per = total / p.threads as u64;
            (0, per * thread as u64, per)
        };
        Stripe {
            file,
            first,
            blocks,
            covered: vec![0; total.div_ceil(64) as usize],
            writes: 0,
        }
    }

    fn step(&self, p: &Params, rng: &mut SplitMix64, s: &mut Stripe, ops: &mut Vec<Op>) -> bool {
        let block = s.first + rng.below(s.blocks);
        let off = block * p.io_size;
        if rng.below(10) < u64::from(p.read_ratio) {
            ops.push(Op::Read {
                file: s.file,
                off,
                len: p.io_size,
            });
        } else {
            s.writes += 1;
            s.covered[(block / 64) as usize] |= 1 << (block % 64);
            ops.push(Op::Write {
                file: s.file,
                off,
                len: p.io_size,
                ver: 1,
                sync: p.fsync.after(s.writes),
            });
        }
        true
    }

    fn expected(&self, p: &Params, states: &[Stripe]) -> Vec<(u64, Content)> {
        (0..p.files)
            .map(|file| {
                let mut covered = vec![0u64; (p.file_size / p.io_size).div_ceil(64) as usize];
                for s in states.iter().filter(|s| s.file == file) {
                    for (c, w) in covered.iter_mut().zip(&s.covered) {
                        *c |= w;
                    }
                }
                let content = Content::Patched {
                    size: p.file_size,
                    unit: p.io_size,
                    covered,
                };
                (file, content)
            })
            .collect()
    }
}
