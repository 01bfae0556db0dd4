//! Webproxy: a caching proxy; per loop a thread deletes a cached object,
//! creates a new one with one append, and reads five objects whole
//! (filebench's `webproxy.f`: create-write-close, 5 x open-read-close,
//! delete; reads to writes 5:1).
//!
//! Defaults and their sources:
//! * mean file size 32 KiB, one flat directory (depth 0.7 at 500K files),
//!   reads in 1 MiB calls and 32 KiB appends, R/W 5:1, no fsync: legacy
//!   study Table I (webproxy: 32K, 0.7, 500K files, I/O 1M/32K, 5:1);
//! * 80% of the files exist at the start: filebench's `prealloc=80`.
//!
//! Scaled down: 5,000 files (the paper's 500K / 100) and one thread (the
//! paper's 50); `--files` and `--threads` restore them.

use super::{draw_append, Content, FileSet, Flow, Limit, Op, Params};
use amber_sim::SplitMix64;

pub fn defaults() -> Params {
    Params {
        files: 5_000,
        file_size: 32 << 10,
        io_size: 1 << 20,
        append_size: 32 << 10,
        dir_width: 1_000_000,
        threads: 1,
        limit: Limit::Ops(200_000),
        read_ratio: 0,
        prewrite: 0,
        fsync: super::Fsync::None,
        seed: 42,
    }
}

pub(crate) struct Webproxy;

impl Flow for Webproxy {
    type State = FileSet;

    fn init(&self, p: &Params, thread: usize) -> FileSet {
        FileSet::new(p, thread, 80)
    }

    fn step(&self, p: &Params, rng: &mut SplitMix64, s: &mut FileSet, ops: &mut Vec<Op>) -> bool {
        ops.extend(s.delete(rng));
        // Created empty, then filled by one append (appendfilerand).
        let l = s.create(rng, 0, ops);
        ops.push(s.append(l, draw_append(rng, p.append_size)));
        for _ in 0..5 {
            if let Some(l) = s.pick(rng) {
                s.read_whole(l, ops);
            }
        }
        true
    }

    fn expected(&self, _: &Params, states: &[FileSet]) -> Vec<(u64, Content)> {
        states.iter().flat_map(|s| s.expected()).collect()
    }
}
