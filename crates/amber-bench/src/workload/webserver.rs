//! Webserver: read-mostly; per loop a thread opens and reads ten whole
//! files, chosen from the whole set, then appends one record to a log
//! file every thread shares (filebench's `webserver.f`; legacy study
//! §III-B: "All the threads append 8K to a common log file").
//!
//! Defaults and their sources:
//! * mean file size 32 KiB, reads in 1 MiB calls, 8 KiB log appends, R/W
//!   10:1, no fsync, no creates or deletes: legacy study Table I
//!   (webserver: 32K, depth 2.5, 500K files, I/O 1M/8K, 10:1);
//! * directory width 20: filebench's `meandirwidth` (depth 2.8 at the
//!   default file count, near Table I's 2.5).
//!
//! Scaled down: 5,000 files (the paper's 500K / 100) and one thread (the
//! paper's 50); `--files` and `--threads` restore them. Log records are
//! all `--append-size` bytes (Table I gives one size, not a mean), which
//! also lets the verification pass check the log whatever order the
//! threads' appends landed in.

use super::{initial_size, Content, Flow, Limit, Op, Params, LOG};
use amber_sim::SplitMix64;

pub fn defaults() -> Params {
    Params {
        files: 5_000,
        file_size: 32 << 10,
        io_size: 1 << 20,
        append_size: 8 << 10,
        dir_width: 20,
        threads: 1,
        limit: Limit::Ops(200_000),
        read_ratio: 0,
        prewrite: 0,
        fsync: super::Fsync::None,
        seed: 42,
    }
}

pub(crate) struct Webserver;

impl Flow for Webserver {
    /// Log records this thread appended.
    type State = u64;

    fn init(&self, _: &Params, _: usize) -> u64 {
        0
    }

    fn step(&self, p: &Params, rng: &mut SplitMix64, s: &mut u64, ops: &mut Vec<Op>) -> bool {
        for _ in 0..10 {
            let file = rng.below(p.files);
            ops.push(Op::Open { file });
            ops.push(Op::Read {
                file,
                off: 0,
                len: initial_size(p, file),
            });
        }
        ops.push(Op::AppendLog { len: p.append_size });
        *s += 1;
        true
    }

    fn expected(&self, p: &Params, states: &[u64]) -> Vec<(u64, Content)> {
        let mut out: Vec<(u64, Content)> = (0..p.files)
            .map(|id| {
                (
                    id,
                    Content::Pattern {
                        size: initial_size(p, id),
                    },
                )
            })
            .collect();
        out.push((
            LOG,
            Content::Records {
                count: states.iter().sum(),
                len: p.append_size,
            },
        ));
        out
    }
}
