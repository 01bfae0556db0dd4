//! Splitting a byte range into its cache-line pieces, because both the
//! persistence model and the copy-on-write overlay work one line at a time.

use crate::LINE_BYTES;
use std::ops::Range;

/// One line's share of a byte range: the line index, where the piece starts
/// inside the line, and which bytes of the caller's range it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LinePiece {
    pub(crate) line: u64,
    pub(crate) in_line: usize,
    pub(crate) src: Range<usize>,
}

/// The pieces of `[off, off + len)`, in address order. The iterator yields
/// exactly one item per covered line, so its length is bounded by `len`.
pub(crate) fn pieces(off: u64, len: u64) -> impl Iterator<Item = LinePiece> {
    let line_bytes = LINE_BYTES as u64;
    let mut pos = off;
    let end = off + len;
    std::iter::from_fn(move || {
        if pos >= end {
            return None;
        }
        let line = pos / line_bytes;
        let in_line = (pos % line_bytes) as usize;
        let take = (line_bytes - pos % line_bytes).min(end - pos);
        let src_start = (pos - off) as usize;
        pos += take;
        Some(LinePiece {
            line,
            in_line,
            src: src_start..src_start + take as usize,
        })
    })
}

/// Byte range of line `line` inside a pool image.
pub(crate) fn line_range(line: u64) -> Range<usize> {
    let start = line as usize * LINE_BYTES;
    start..start + LINE_BYTES
}

#[cfg(test)]
mod tests {
    use super::{pieces, LinePiece};

    #[test]
    fn unaligned_range_splits_at_line_boundaries() {
        let got: Vec<LinePiece> = pieces(60, 72).collect();
        assert_eq!(
            got,
            vec![
                LinePiece {
                    line: 0,
                    in_line: 60,
                    src: 0..4
                },
                LinePiece {
                    line: 1,
                    in_line: 0,
                    src: 4..68
                },
                LinePiece {
                    line: 2,
                    in_line: 0,
                    src: 68..72
                },
            ]
        );
        assert_eq!(pieces(5, 0).count(), 0);
        assert_eq!(pieces(64, 64).count(), 1);
    }
}
