//! Varmail: a mail server; per loop a thread deletes a message, creates
//! one with an append and fsync, reads one whole and appends to it with
//! fsync, and reads another whole (filebench's `varmail.f`; hinfs.txt
//! Table 1: "create-append-sync, read-append-sync, read, and delete").
//! The fsyncs make it the metadata- and sync-heavy case.
//!
//! Defaults and their sources:
//! * 1,000 files of 16 KiB mean in one flat directory, 16 KiB appends,
//!   1 MiB reads: filebench's `varmail.f` defaults (`nfiles=1000`,
//!   `meandirwidth=1000000`, `filesize=16k`, `meanappendsize=16k`,
//!   `iosize=1m`), which hinfs.txt §5.2 runs (the legacy study's Table I
//!   has no varmail row);
//! * 80% of the files exist at the start: filebench's `prealloc=80`.
//!
//! Not scaled (1,000 files is filebench's own size); one thread instead of
//! filebench's 16, for a 2-core machine; `--threads` restores them.

use super::{draw_append, Content, FileSet, Flow, Limit, Op, Params};
use amber_sim::SplitMix64;

pub fn defaults() -> Params {
    Params {
        files: 1_000,
        file_size: 16 << 10,
        io_size: 1 << 20,
        append_size: 16 << 10,
        dir_width: 1_000_000,
        threads: 1,
        limit: Limit::Ops(100_000),
        read_ratio: 0,
        prewrite: 0,
        fsync: super::Fsync::Every,
        seed: 42,
    }
}

pub(crate) struct Varmail;

impl Flow for Varmail {
    type State = FileSet;

    fn init(&self, p: &Params, thread: usize) -> FileSet {
        FileSet::new(p, thread, 80)
    }

    fn step(&self, p: &Params, rng: &mut SplitMix64, s: &mut FileSet, ops: &mut Vec<Op>) -> bool {
        ops.extend(s.delete(rng));
        let l = s.create(rng, 0, ops);
        ops.push(s.append(l, draw_append(rng, p.append_size)));
        ops.push(Op::Fsync { file: s.id(l) });
        if let Some(l) = s.pick(rng) {
            s.read_whole(l, ops);
            ops.push(s.append(l, draw_append(rng, p.append_size)));
            ops.push(Op::Fsync { file: s.id(l) });
        }
        if let Some(l) = s.pick(rng) {
            s.read_whole(l, ops);
        }
        true
    }

    fn expected(&self, _: &Params, states: &[FileSet]) -> Vec<(u64, Content)> {
        states.iter().flat_map(|s| s.expected()).collect()
    }
}
