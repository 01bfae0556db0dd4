//! The cost model hinfs and amber decide by: what a cache line costs to
//! write to DRAM and to PM, and what a flushed line with its fence costs,
//! measured on this device at mount (`calibrate`), and HiNFS's Buffer
//! Benefit Model, which turns those costs and a block's write history
//! into a verdict per block (`bbm`). Both policies use it through this
//! interface only: hinfs to buffer per block, amber to decide whether its
//! DRAM buffer pays at all and how many zone slices a write may have.

pub(super) mod bbm;
pub(super) mod calibrate;

use amber_format::BLOCK_SIZE;

/// Bytes per cache line, the unit of fetch, flush and write-back (CLFW).
pub(super) const LINE: u64 = amber_pmem::CACHE_LINE;
/// Cache lines per block: one bit each in a `u64`.
pub(super) const LINES: u64 = BLOCK_SIZE / LINE;
const _: () = assert!(LINES == 64, "line bitmaps are u64");

/// Bits of lines `first..=last`.
pub(super) fn line_mask(first: u64, last: u64) -> u64 {
    assert!(first <= last && last < LINES, "line range {first}..={last}");
    let hi = if last == LINES - 1 {
        u64::MAX
    } else {
        (1u64 << (last + 1)) - 1
    };
    hi & !((1u64 << first) - 1)
}

/// Lines `[s, e)` of a block (byte offsets within it) touch.
pub(super) fn lines_of(s: u64, e: u64) -> u64 {
    assert!(s < e && e <= BLOCK_SIZE, "byte range {s}..{e}");
    line_mask(s / LINE, (e - 1) / LINE)
}

/// 16-byte zone descriptors per cache line.
const DESCS_PER_LINE: u64 = 4;

/// CPU time of one slice in a one-fence zone write beyond its lines, in
/// ns: its lookup and binding now and its unbinding at write-back (DRAM
/// hash and list work, a cache miss or two). Measured on the reference
/// host: 128 B against 1 KiB fsync'd writes under `dram`, 40 ns a slice
/// less its two lines (docs/results/onefence at `3b1271f`, BENCHMARKS.md
/// issue 18 point 3).
const SLICE_CPU_NS: f64 = 32.0;
/// CPU time of one out-of-place partial-block write beyond its lines and
/// fences, in ns (hunter's log tail, index and queue, and reading the
/// block's other bytes), measured the same way: a 2 KiB write through
/// hunter's data log takes 2.6 µs there, and the zone's 40 ns a slice
/// overtakes it near 48 slices.
const BLOCK_CPU_NS: f64 = 1100.0;

/// Most slices a small overwrite may have and still go through the
/// small-write zone for less than one out-of-place block, at `l` ns per
/// line of a fenced non-temporal block copy and `f` per flushed line with
/// its fence. The same write as one out-of-place block costs `64*l + 2*f`
/// (the block, its record and entry); the one-fence zone's rule counts
/// what `bench compare` measures for hunter's fsync'd block write, `68*l +
/// 4*f`, and its CPU work. A LAWN zone write (`extents` false)
/// of `k` slices of `s` lines costs about `k*s*l + (ceil(k/4) + 1)*f`
/// (slots streamed, then descriptor lines and the commit flushed). A
/// one-fence zone write costs `2*k*s*l + f` (slots streamed now and copied
/// back at the file's write-back, one head line and its fence; the
/// write-back's two fences are per file) plus each slice's CPU work,
/// against the block's own CPU work: on DRAM-speed PM these decide. On
/// DRAM-speed PM flushes dominate and only a few LAWN slices pay; on slow
/// PM bandwidth dominates instead.
pub(super) fn zone_max_slices(l: f64, f: f64, slot_size: u64, extents: bool) -> u64 {
    let lines_per_slice = (slot_size / LINE).max(1);
    let per_block = BLOCK_SIZE / (lines_per_slice * LINE);
    let zone = |k: u64| match extents {
        true => (2 * k * lines_per_slice) as f64 * l + f + k as f64 * SLICE_CPU_NS,
        false => (k * lines_per_slice) as f64 * l + (k.div_ceil(DESCS_PER_LINE) + 1) as f64 * f,
    };
    let block = match extents {
        // hunter's fsync'd block write as `bench compare` counts it: 68
        // charged lines and 4 fences, and its CPU work.
        true => (LINES + 4) as f64 * l + 4.0 * f + BLOCK_CPU_NS,
        false => LINES as f64 * l + 2.0 * f,
    };
    (1..=per_block)
        .take_while(|&k| zone(k) < block)
        .last()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_cover_the_right_lines() {
        assert_eq!(line_mask(0, 0), 1);
        assert_eq!(line_mask(0, 63), u64::MAX);
        assert_eq!(line_mask(2, 3), 0b1100);
        assert_eq!(lines_of(0, 64), 1);
        assert_eq!(lines_of(63, 65), 0b11);
        assert_eq!(lines_of(4000, 4096), 1 << 62 | 1 << 63);
    }

    /// Flushes dominate on fast PM: few slices pay; bandwidth on slow
    /// PM: most do; never more than a block's slices, and where fences
    /// are all that counts, exactly the slices whose descriptors share
    /// one line (same fences as the block).
    #[test]
    fn zone_writes_pay_up_to_where_flushes_cost_a_block() {
        let fast = zone_max_slices(0.2, 60.0, 256, false);
        let slow = zone_max_slices(20.0, 100.0, 256, false);
        assert!(fast < slow, "{fast} {slow}");
        assert!(slow <= BLOCK_SIZE / 256);
        assert_eq!(zone_max_slices(1.0, 1e6, 256, false), DESCS_PER_LINE);
    }

    /// The one-fence zone pays one fence whatever `k`, and each slice's
    /// lines twice (now and at write-back): up to about half a block when
    /// bandwidth is all that counts, nearly a block when fences are, and
    /// on DRAM the CPU work of slices against a block's.
    #[test]
    fn one_fence_zone_writes_pay_up_to_half_a_block_of_bandwidth() {
        // Bandwidth alone (slow PM: CPU work is small against 100 ns lines).
        assert_eq!(zone_max_slices(100.0, 0.0, 64, true), 34);
        assert_eq!(zone_max_slices(1.0, 1e6, 64, true), 64);
        // This host's DRAM: 2 KiB writes go through the zone too.
        assert_eq!(zone_max_slices(4.0, 190.0, 64, true), 48);
    }
}
