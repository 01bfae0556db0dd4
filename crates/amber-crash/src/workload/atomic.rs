//! Workloads aimed at data policies whose writes are atomic (`cow`,
//! `finelog`, `lawn`): overwrites of every size and alignment class that
//! splits a write differently (one byte, whole and partial cache lines,
//! whole and partial blocks, across EOF, into a hole), the same range
//! rewritten again and again (LAWN alternates between its zone and the
//! file), and more distinct small slices than a small zone holds. Each
//! runs under every policy: under `direct` these are plain writes.

use super::{append, create, fsync, truncate, unlink, write, Op, KIB};
use amber_sim::SplitMix64;

/// Size of the file the atomic workloads overwrite: three blocks.
const FILE_SIZE: u64 = 12 * KIB;

/// Ops of the `atomic-random` workload after its setup; a handful, since
/// a write of up to 9000 bytes leaves many lines in flight per fence.
pub const ATOMIC_RANDOM_OPS: usize = 8;

/// Overwrites of assorted sizes and alignments on a preallocated, fsync'd
/// file whose last two blocks are a hole inside the size, each chosen for
/// how it splits into lines and blocks.
pub fn atomic() -> Vec<Op> {
    vec![
        create("f"),
        write("f", 0, 2 * 4 * KIB, 1),
        // Blocks 2 and 3 stay a hole inside the size.
        truncate("f", 4 * 4 * KIB),
        fsync("f"),
        // One byte: one line, one store.
        write("f", 100, 1, 2),
        // Two whole lines, 64-byte aligned.
        write("f", 256, 128, 3),
        // Unaligned at both ends, three lines.
        write("f", 1040, 170, 4),
        // Unaligned 200 bytes: four lines.
        write("f", 2010, 200, 5),
        // 1 KiB across the boundary of blocks 0 and 1.
        write("f", 3584, KIB, 6),
        // A whole aligned block.
        write("f", 4 * KIB, 4 * KIB, 7),
        // 6 KiB over two blocks, partial head and partial tail.
        write("f", KIB, 6 * KIB, 8),
        // Into the hole inside the size.
        write("f", 9000, 500, 9),
        // Straddling EOF: the size grows with the write.
        write("f", 16 * KIB - 100, 300, 10),
        // The same 128 bytes again and again, then ranges overlapping them.
        write("f", 512, 128, 11),
        write("f", 512, 128, 12),
        write("f", 512, 128, 13),
        write("f", 512, 128, 14),
        write("f", 550, 100, 15),
        write("f", 480, 128, 16),
        fsync("f"),
    ]
}

/// The `atomic-random` workload for `seed`: a fsync'd three-block file,
/// then seeded overwrites (1 to 9000 bytes anywhere in it, so across
/// lines, blocks and EOF), some appends and fsyncs.
pub fn atomic_random(seed: u64, ops: usize) -> Vec<Op> {
    let mut r = SplitMix64::new(seed ^ 0xA70_3C0F_F1E5);
    let mut out = vec![create("f"), write("f", 0, FILE_SIZE, 1), fsync("f")];
    for _ in 0..ops {
        let len = 1 + r.below(9000);
        let data_seed = r.next_u64();
        out.push(match r.below(8) {
            0 => append("f", len, data_seed),
            1 => fsync("f"),
            _ => write("f", r.below(FILE_SIZE), len, data_seed),
        });
    }
    out
}

/// Size of `zone-pressure`'s file "a": 80 regions of 512 bytes, the
/// largest LAWN slot.
const PRESSURE_FILE_SIZE: u64 = 40 * KIB;
/// Distinct slices `zone-pressure` overwrites in file "a": more than the
/// 64 slots of LAWN's smallest sub-zone (eight blocks of 512-byte slots),
/// which grows when 90% full; and in file "b", which then goes.
const SLICES_A: u64 = 66;
const SLICES_B: u64 = 8;

/// Slice `i`: 64 bytes in 512-byte region `i * 7 % 80` (7 is coprime with
/// 80, so the first 80 regions are distinct), at a line that varies with
/// `i`, so every slice is a distinct slot whatever LAWN's slot size.
fn slice(i: u64) -> u64 {
    i * 7 % (PRESSURE_FILE_SIZE / 512) * 512 + i % 8 * 64
}

/// Many small overwrites of distinct 64-byte slices of two files, with
/// fsyncs between them, a write-back of the least recently used ones, the
/// oldest slices written again, then a truncate and an unlink of files
/// with recent small overwrites. Under a policy without a zone or buffer
/// these are plain writes and the write-back does nothing.
pub fn zone_pressure() -> Vec<Op> {
    let mut ops = vec![
        create("a"),
        create("b"),
        write("a", 0, PRESSURE_FILE_SIZE, 1),
        write("b", 0, FILE_SIZE, 2),
        fsync("a"),
        fsync("b"),
    ];
    for i in 0..SLICES_A {
        ops.push(write("a", slice(i), 64, 100 + i));
        if i % 16 == 15 {
            ops.push(fsync("a"));
        }
    }
    for i in 0..SLICES_B {
        ops.push(write("b", slice(i), 64, 200 + i));
    }
    ops.push(fsync("b"));
    ops.push(Op::WriteBack { blocks: 2 });
    // The oldest slices again: back into a zone that just wrote them back.
    for i in 0..8 {
        ops.push(write("a", slice(i), 64, 300 + i));
    }
    ops.push(truncate("a", 1000));
    ops.push(unlink("b"));
    ops.push(Op::SyncAll);
    ops
}

/// Overwrites in `log-gc`'s first phase: more than a log page holds, all
/// of one block, so the first page's entries all die (fast GC).
const GC_OVERWRITES: u64 = 70;
/// (write, truncate) pairs of its second phase: the truncates' entries
/// stay until a rewrite, so the log passes two pages with few entries
/// still mapping pages (thorough GC).
const GC_PAIRS: u64 = 64;

/// NOVA's log garbage collection interrupted: small overwrites of one
/// block until a log page holds only dead entries and is unlinked, then
/// writes and truncates until the log is rewritten; under policies
/// without per-file logs these are plain writes and truncates.
pub fn log_gc() -> Vec<Op> {
    let mut ops = vec![create("g"), write("g", 0, 4 * KIB, 1), fsync("g")];
    for i in 0..GC_OVERWRITES {
        ops.push(write("g", (i % 4) * 64, 64, 10 + i));
    }
    for i in 0..GC_PAIRS {
        ops.push(write("g", 100, 64, 100 + i));
        ops.push(truncate("g", 6000 - i));
    }
    ops.push(fsync("g"));
    ops
}
