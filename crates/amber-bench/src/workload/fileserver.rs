//! Fileserver: a server hosting users' home directories; each thread works
//! on its own files and, per loop, creates and writes a whole file, appends
//! to one, reads one whole, deletes one and stats one (filebench's
//! `fileserver.f` flow; metadata and data operations 1:1).
//!
//! Defaults and their sources:
//! * mean file size 128 KiB, appends 16 KiB (mean), directory width 20
//!   (depth log20(files), 3.8 at the paper's 100K files): legacy study
//!   Table I (fileserver: 128K, depth 3.8, 100K files, I/O 16K, R/W 1:2);
//! * whole-file reads and writes in 1 MiB calls: hinfs.txt §5.2 (mean I/O
//!   size 1 MB, filebench's default `iosize`);
//! * 80% of the files exist at the start: filebench's `prealloc=80`;
//! * no fsync: Table I.
//!
//! Scaled down: 2,000 files (the paper's 100K / 50, about 250 MiB) and one
//! thread (the paper's 50 on a 48-core server), so a run fits a 2-core
//! machine with a 2 GiB pool; `--files` and `--threads` restore them.

use super::{draw_append, draw_size, Content, FileSet, Flow, Limit, Op, Params};
use amber_sim::SplitMix64;

pub fn defaults() -> Params {
    Params {
        files: 2_000,
        file_size: 128 << 10,
        io_size: 1 << 20,
        append_size: 16 << 10,
        dir_width: 20,
        threads: 1,
        limit: Limit::Ops(100_000),
        read_ratio: 0,
        prewrite: 0,
        fsync: super::Fsync::None,
        seed: 42,
    }
}

pub(crate) struct Fileserver;

impl Flow for Fileserver {
    type State = FileSet;

    fn init(&self, p: &Params, thread: usize) -> FileSet {
        FileSet::new(p, thread, 80)
    }

    fn step(&self, p: &Params, rng: &mut SplitMix64, s: &mut FileSet, ops: &mut Vec<Op>) -> bool {
        let size = draw_size(rng, p.file_size);
        s.create(rng, size, ops);
        if let Some(l) = s.pick(rng) {
            ops.push(Op::Open { file: s.id(l) });
            ops.push(s.append(l, draw_append(rng, p.append_size)));
        }
        if let Some(l) = s.pick(rng) {
            s.read_whole(l, ops);
        }
        ops.extend(s.delete(rng));
        if let Some(l) = s.pick(rng) {
            ops.push(Op::Stat { file: s.id(l) });
        }
        true
    }

    fn expected(&self, _: &Params, states: &[FileSet]) -> Vec<(u64, Content)> {
        states.iter().flat_map(|s| s.expected()).collect()
    }
}
