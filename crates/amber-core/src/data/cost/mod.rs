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

/// Most slices a small overwrite may have and still go through the
/// small-write zone for less than one out-of-place block, at `l` ns per
/// line of a fenced non-temporal block copy and `f` per flushed line with
/// its fence. A zone write of `k` slices of `s` lines costs about
/// `k*s*l + (ceil(k/4) + 1)*f` (slots streamed, then descriptor lines and
/// the commit flushed); the same write as one out-of-place block
/// `64*l + 2*f` (the block, its record and entry). On DRAM-speed PM
/// flushes dominate and only a few slices pay; on slow PM bandwidth
/// dominates and most partial writes do.
pub(super) fn zone_max_slices(l: f64, f: f64, slot_size: u64) -> u64 {
    let lines_per_slice = (slot_size / LINE).max(1);
    let per_block = BLOCK_SIZE / (lines_per_slice * LINE);
    let zone =
        |k: u64| (k * lines_per_slice) as f64 * l + (k.div_ceil(DESCS_PER_LINE) + 1) as f64 * f;
    let block = LINES as f64 * l + 2.0 * f;
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
        let fast = zone_max_slices(0.2, 60.0, 256);
        let slow = zone_max_slices(20.0, 100.0, 256);
        assert!(fast < slow, "{fast} {slow}");
        assert!(slow <= BLOCK_SIZE / 256);
        assert_eq!(zone_max_slices(1.0, 1e6, 256), DESCS_PER_LINE);
    }
}
