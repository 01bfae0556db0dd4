//! The `mapped` workload (design.md §16): a file mapped shared and
//! written both ways — stores through the mapping (the library's store
//! path, which the crash simulator sees), write() over and around its
//! pinned blocks, msync — while it grows and shrinks under the mapping,
//! is punched, and a second, unlinked file lives on through its mapping
//! until it is unmapped. Under amber the file first holds an own-commit
//! block and a zone slice, which pinning must settle.

use super::{append, create, s, truncate, unlink, write, Op};
use amber_format::BLOCK_SIZE;

const BS: u64 = BLOCK_SIZE;

fn map(path: &str, map: usize, len: u64) -> Op {
    Op::Map {
        path: s(path),
        map,
        off: 0,
        len,
    }
}

fn store(map: usize, off: u64, len: u64, seed: u64) -> Op {
    Op::MapStore {
        map,
        off,
        len,
        seed,
    }
}

pub(super) fn mapped() -> Vec<Op> {
    vec![
        create("m"),
        write("m", 0, 3 * BS + 100, 1),
        Op::Fsync { path: s("m") },
        // Under amber: a whole block that commits itself (its record's
        // checksum names its bytes) and a slice in the zone, both settled
        // before the mapping pins their blocks.
        write("m", 2 * BS + 5, 10, 13),
        write("m", BS, BS, 12),
        // Durable already: this fsync persists nothing of it.
        Op::Fsync { path: s("m") },
        map("m", 0, 6 * BS),
        store(0, 100, 200, 2),
        store(0, BS - 10, 20, 3),
        Op::Msync { map: 0 },
        // write() over pinned blocks goes in place; then stores again.
        write("m", 50, 100, 4),
        store(0, 3 * BS + 50, 30, 5),
        // Growth under the mapping shows the new blocks.
        append("m", 2 * BS, 6),
        store(0, 4 * BS + 10, 100, 7),
        Op::Punch {
            path: s("m"),
            off: BS,
            len: BS,
        },
        // A shrink hides what it cuts off; the new last page's tail is
        // zeroed in place.
        truncate("m", 2 * BS + 10),
        store(0, 2 * BS - 5, 10, 8),
        Op::Fsync { path: s("m") },
        // A mapped file outlives its name until it is unmapped.
        create("n"),
        write("n", 0, BS, 9),
        map("n", 1, BS),
        unlink("n"),
        store(1, 10, 20, 10),
        Op::Unmap { map: 1 },
        truncate("m", 5 * BS),
        store(0, 4 * BS, 64, 11),
        Op::Unmap { map: 0 },
        Op::SyncAll,
    ]
}
