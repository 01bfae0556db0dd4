//! Sequential populate: each thread creates its files and writes them
//! front to back in 4 KiB calls; the repetition ends when every file is
//! full (hunter.txt §IV-B: "the write bandwidth when populating different
//! size files with a single thread", 4 KiB-aligned I/O, and threads that
//! "populate a total of 4GiB files under the same directory").
//!
//! Defaults and their sources:
//! * 4 KiB writes: hunter §IV-B ("aligned to a block size (4KiB)");
//! * one 1 GiB file, in one directory: within hunter's 64 MiB..4 GiB
//!   range; `--files 4 --file-size 1G --threads 4` is its concurrency run
//!   (4 GiB in total; give a larger `--pool-size`);
//! * `--fsync none` (fio's default): Amber's writes are durable when they
//!   return; a kernel file system's are not, so `--fsync every` or `N` for
//!   the same promise.
//!
//! Every repetition starts from no files (removed untimed beforehand), so
//! each one allocates, as a populate must.

use super::{Content, Flow, Fsync, Limit, Op, Params};
use amber_sim::SplitMix64;

pub fn defaults() -> Params {
    Params {
        files: 1,
        file_size: 1 << 30,
        io_size: 4 << 10,
        append_size: 16 << 10,
        dir_width: 1_000_000,
        threads: 1,
        limit: Limit::Complete,
        read_ratio: 0,
        prewrite: 0,
        fsync: Fsync::None,
        seed: 42,
    }
}

pub(crate) struct Populate;

/// One thread's files and how many it has written.
#[derive(Debug, Clone)]
pub(crate) struct Todo {
    ids: Vec<u64>,
    done: usize,
}

impl Flow for Populate {
    type State = Todo;

    fn init(&self, p: &Params, thread: usize) -> Todo {
        Todo {
            ids: (thread as u64..p.files).step_by(p.threads).collect(),
            done: 0,
        }
    }

    /// One file per step: created, then written in `io_size` calls.
    fn step(&self, p: &Params, _: &mut SplitMix64, s: &mut Todo, ops: &mut Vec<Op>) -> bool {
        let Some(&file) = s.ids.get(s.done) else {
            return false;
        };
        s.done += 1;
        ops.push(Op::Create { file });
        let mut n = 0;
        for off in (0..p.file_size).step_by(p.io_size as usize) {
            n += 1;
            ops.push(Op::Write {
                file,
                off,
                len: p.io_size.min(p.file_size - off),
                ver: 0,
                sync: p.fsync.after(n),
            });
        }
        true
    }

    fn expected(&self, p: &Params, states: &[Todo]) -> Vec<(u64, Content)> {
        states
            .iter()
            .flat_map(|s| {
                s.ids.iter().enumerate().map(move |(i, &id)| {
                    let c = if i < s.done {
                        Content::Pattern { size: p.file_size }
                    } else {
                        Content::Absent
                    };
                    (id, c)
                })
            })
            .collect()
    }

    fn fresh_each_round(&self) -> bool {
        true
    }
}
