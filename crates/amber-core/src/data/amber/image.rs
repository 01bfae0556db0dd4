//! A buffered block's image and which of its lines it holds.
//!
//! An image is fetched line by line, as the writes that reach it need:
//! a write fetches only the lines it covers in part (at most two, its
//! first and its last), never the rest of the block. SQLite's WAL page lands
//! at the head of the block after its frame's header, and fetching that
//! block's other ~4 KiB cost a cold PM read per frame that nothing used
//! when the frame went back in place (§18). A line not held is read from
//! PM (the zone's slices over the file's block) where the image would
//! be, and the out-of-place write-back, which writes whole blocks, fetches
//! every line first. PM keeps those lines' newest bytes meanwhile: while
//! the file has buffered blocks nothing else of it reaches PM (the
//! buffer's invariant), and a block past the size was zeroed on PM by the
//! write that grew the file over it.

use super::super::cost::{lines_of, LINE};
use crate::error::Result;
use amber_format::BLOCK_SIZE;

/// Every line of a block.
pub(super) const ALL: u64 = u64::MAX;

/// One buffered block: the file block's newest bytes in the lines it
/// holds, and the lines written since it was buffered (the model's Ncf
/// at an fsync). A block with no line written is a clean copy of what PM
/// holds, kept after an fsync's write-back (`FileBuf::tail`).
pub(super) struct Block {
    pub image: Box<[u8]>,
    pub dirty: u64,
    /// Lines of `image` that hold the block's newest bytes; every dirty
    /// line is one.
    pub held: u64,
}

/// The lines a write of file bytes `[off, end)` covers in part (at most
/// its first and its last), as (file block, line): the only bytes of a
/// block it must fetch before it is buffered.
pub(super) fn edge_lines(off: u64, end: u64) -> impl Iterator<Item = (u64, u64)> {
    let first = (!off.is_multiple_of(LINE)).then_some(off / LINE);
    let last = (!end.is_multiple_of(LINE)).then_some(end / LINE);
    let last = last.filter(|&l| Some(l) != first);
    let per_block = BLOCK_SIZE / LINE;
    first
        .into_iter()
        .chain(last)
        .map(move |l| (l / per_block, l % per_block))
}

/// The lines `[s, e)` of a block covers whole.
fn whole_lines(s: u64, e: u64) -> u64 {
    let (first, end) = (s.div_ceil(LINE), e / LINE);
    if first >= end {
        return 0;
    }
    lines_of(first * LINE, end * LINE)
}

/// The runs of set bits in a mask of lines, as (first line, lines).
pub(super) fn line_runs(mut mask: u64) -> impl Iterator<Item = (u64, u64)> {
    let mut base = 0;
    std::iter::from_fn(move || {
        if mask == 0 {
            return None;
        }
        let skip = u64::from(mask.trailing_zeros());
        mask >>= skip;
        let run = u64::from(mask.trailing_ones());
        let first = base + skip;
        mask = mask.checked_shr(run as u32).unwrap_or(0);
        base = first + run;
        Some((first, run))
    })
}

/// Fills `out`, the block's bytes from offset `a`: those below `n` (the
/// file's size within the block) through `fetch` (block offset, bytes),
/// zeros past it.
pub(super) fn fetch_range(
    a: u64,
    n: u64,
    out: &mut [u8],
    fetch: &mut impl FnMut(u64, &mut [u8]) -> Result<()>,
) -> Result<()> {
    let below = (n.max(a) - a).min(out.len() as u64) as usize;
    if below > 0 {
        fetch(a, &mut out[..below])?;
    }
    out[below..].fill(0);
    Ok(())
}

impl Block {
    /// The lines a fresh block holds: those wholly at or past `n`, the
    /// file's size within the block, which read as zeros.
    pub fn fresh_lines(n: u64) -> u64 {
        let from = n.div_ceil(LINE) * LINE;
        if from < BLOCK_SIZE {
            lines_of(from, BLOCK_SIZE)
        } else {
            0
        }
    }

    /// A block to be filled from `image` (a spare one, holding anything),
    /// holding its `fresh_lines`, zeroed.
    pub fn fresh(mut image: Box<[u8]>, n: u64) -> Block {
        let from = n.div_ceil(LINE) * LINE;
        image[from.min(BLOCK_SIZE) as usize..].fill(0);
        Block {
            image,
            dirty: 0,
            held: Block::fresh_lines(n),
        }
    }

    /// Makes every line of `mask` held, as `fetch_range` fills them.
    pub fn fetch(
        &mut self,
        mask: u64,
        n: u64,
        mut fetch: impl FnMut(u64, &mut [u8]) -> Result<()>,
    ) -> Result<()> {
        for (first, run) in line_runs(mask & !self.held) {
            let (a, b) = (first * LINE, (first + run) * LINE);
            fetch_range(a, n, &mut self.image[a as usize..b as usize], &mut fetch)?;
        }
        self.held |= mask;
        Ok(())
    }

    /// Takes `bytes` as line `line`'s newest bytes (fetched by the caller
    /// before it could change the block: `edge_lines`).
    pub fn hold_line(&mut self, line: u64, bytes: &[u8; LINE as usize]) {
        let a = (line * LINE) as usize;
        self.image[a..a + LINE as usize].copy_from_slice(bytes);
        self.held |= 1 << line;
    }

    /// Writes `data` at block offset `s`; the lines it covers in part must
    /// be held. Returns the lines it wrote.
    pub fn write(&mut self, s: u64, data: &[u8]) -> u64 {
        let e = s + data.len() as u64;
        let touched = lines_of(s, e);
        assert_eq!(
            touched & !whole_lines(s, e) & !self.held,
            0,
            "a write's partial lines are fetched first"
        );
        self.image[s as usize..e as usize].copy_from_slice(data);
        self.held |= touched;
        self.dirty |= touched;
        touched
    }

    /// Copies block bytes `[s, s + out.len())` into `out`: held lines
    /// from the image, the others through `fetch` (block offset, bytes).
    pub fn read(
        &self,
        s: u64,
        out: &mut [u8],
        mut fetch: impl FnMut(u64, &mut [u8]) -> Result<()>,
    ) -> Result<()> {
        let e = s + out.len() as u64;
        let touched = lines_of(s, e);
        if touched & self.held == touched {
            out.copy_from_slice(&self.image[s as usize..e as usize]);
            return Ok(());
        }
        let clip = |first: u64, run: u64| ((first * LINE).max(s), ((first + run) * LINE).min(e));
        for (first, run) in line_runs(touched & self.held) {
            let (a, b) = clip(first, run);
            out[(a - s) as usize..(b - s) as usize]
                .copy_from_slice(&self.image[a as usize..b as usize]);
        }
        for (first, run) in line_runs(touched & !self.held) {
            let (a, b) = clip(first, run);
            fetch(a, &mut out[(a - s) as usize..(b - s) as usize])?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_of_lines() {
        let runs = |m| line_runs(m).collect::<Vec<_>>();
        assert_eq!(runs(0), []);
        assert_eq!(runs(1), [(0, 1)]);
        assert_eq!(runs(ALL), [(0, 64)]);
        assert_eq!(runs(0b1011_0110), [(1, 2), (4, 2), (7, 1)]);
        assert_eq!(runs(1 << 63), [(63, 1)]);
        assert_eq!(runs((ALL << 60) | 3), [(0, 2), (60, 4)]);
    }

    #[test]
    fn whole_lines_of_ranges() {
        assert_eq!(whole_lines(0, 64), 1);
        assert_eq!(whole_lines(1, 64), 0);
        assert_eq!(whole_lines(1, 200), 0b110);
        assert_eq!(whole_lines(10, 20), 0);
        assert_eq!(whole_lines(0, BLOCK_SIZE), ALL);
    }

    /// A block over "PM" bytes `pm`, the size `n` bytes into it.
    fn pm_fetch(pm: &[u8]) -> impl FnMut(u64, &mut [u8]) -> Result<()> + '_ {
        |at, out| {
            out.copy_from_slice(&pm[at as usize..at as usize + out.len()]);
            Ok(())
        }
    }

    #[test]
    fn edges_of_writes() {
        let edges = |o, e| edge_lines(o, e).collect::<Vec<_>>();
        assert_eq!(edges(0, 4096), []);
        assert_eq!(edges(10, 20), [(0, 0)]);
        assert_eq!(edges(4152, 4176), [(1, 0), (1, 1)]);
        assert_eq!(edges(4160, 4170), [(1, 1)]);
        assert_eq!(edges(4176, 8272), [(1, 1), (2, 1)]);
        assert_eq!(edges(4090, 4100), [(0, 63), (1, 0)]);
        assert_eq!(edges(64, 130), [(0, 2)]);
    }

    /// A fresh block holds its zeros past the size; a write takes its
    /// partial lines first; reads take the rest from PM; every byte reads
    /// as PM overlaid with the write, and zeros past the size.
    #[test]
    fn lines_are_held_as_writes_need_them() {
        let pm: Vec<u8> = (0..BLOCK_SIZE).map(|i| (i % 251) as u8 + 1).collect();
        let n = 3000;
        let mut b = Block::fresh(vec![0xee; BLOCK_SIZE as usize].into(), n);
        assert_eq!(b.held, lines_of(3008, BLOCK_SIZE));
        for (_, line) in edge_lines(100, 1100) {
            let a = (line * LINE) as usize;
            b.hold_line(line, pm[a..a + 64].try_into().unwrap());
        }
        assert_eq!(b.write(100, &[7; 1000]), lines_of(100, 1100));
        let mut model = pm.clone();
        model[n as usize..].fill(0);
        model[100..1100].fill(7);
        let mut out = vec![0; BLOCK_SIZE as usize];
        b.read(0, &mut out, pm_fetch(&pm)).unwrap();
        assert!(out[..n as usize] == model[..n as usize]);
        assert!(out[3008..] == model[3008..]);
        b.fetch(ALL, n, pm_fetch(&pm)).unwrap();
        assert_eq!(b.held, ALL);
        assert!(b.image[..] == model[..]);
        assert_eq!(b.dirty, lines_of(100, 1100));
    }

    #[test]
    #[should_panic(expected = "partial lines are fetched first")]
    fn a_write_over_a_line_not_held_is_refused() {
        let mut b = Block::fresh(vec![0; BLOCK_SIZE as usize].into(), BLOCK_SIZE);
        b.write(10, &[1; 10]);
    }
}
