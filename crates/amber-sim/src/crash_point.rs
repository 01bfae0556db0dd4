//! What a crash at one instant may leave behind: the durable image plus, for
//! every line with pending stores, the contents each store prefix gives it.
//! The enumerator picks images from it; the overlay builds devices from it.

use crate::{Line, LINE_BYTES};
use std::sync::Arc;

/// One line's pending stores as the contents a crash may leave in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingLine {
    line: u64,
    /// Entry `k - 1` is the line after its first `k` pending stores.
    prefixes: Vec<Line>,
}

impl PendingLine {
    /// A pending line; `prefixes[k - 1]` is its content once its first `k`
    /// stores persisted.
    ///
    /// # Panics
    /// If `prefixes` is empty: a line with no pending store is not pending.
    pub fn new(line: u64, prefixes: Vec<Line>) -> Self {
        assert!(!prefixes.is_empty(), "pending line {line} has no stores");
        PendingLine { line, prefixes }
    }

    /// Line index (byte offset / 64).
    pub fn line(&self) -> u64 {
        self.line
    }

    /// Number of pending stores on the line.
    pub fn stores(&self) -> usize {
        self.prefixes.len()
    }

    /// Contents after each prefix, shortest first; the last one is what the
    /// program currently sees.
    pub fn prefixes(&self) -> &[Line] {
        &self.prefixes
    }

    /// Content after the first `k` stores (`1..=stores()`).
    pub fn prefix(&self, k: usize) -> &Line {
        assert!(
            (1..=self.prefixes.len()).contains(&k),
            "prefix {k} of a line with {} stores",
            self.prefixes.len()
        );
        &self.prefixes[k - 1]
    }
}

/// The state a crash just before fence number `fence` would find.
#[derive(Debug, Clone)]
pub struct CrashPoint {
    fence: u64,
    durable: Arc<Vec<u8>>,
    lines: Vec<PendingLine>,
}

impl CrashPoint {
    /// # Panics
    /// If the image is not whole lines, a line lies outside it, or the lines
    /// are not strictly increasing (the enumerator relies on that order for
    /// deterministic output).
    pub fn new(fence: u64, durable: Arc<Vec<u8>>, lines: Vec<PendingLine>) -> Self {
        assert_eq!(
            durable.len() % LINE_BYTES,
            0,
            "a crash image is made of whole cache lines"
        );
        let line_count = (durable.len() / LINE_BYTES) as u64;
        for pair in lines.windows(2) {
            assert!(pair[0].line < pair[1].line, "pending lines out of order");
        }
        if let Some(last) = lines.last() {
            assert!(
                last.line < line_count,
                "pending line {} outside the image",
                last.line
            );
        }
        CrashPoint {
            fence,
            durable,
            lines,
        }
    }

    /// How many drains the device had started before this point.
    pub fn fence(&self) -> u64 {
        self.fence
    }

    /// Everything fenced so far: the image if no pending store persisted.
    pub fn durable(&self) -> &Arc<Vec<u8>> {
        &self.durable
    }

    /// Lines with pending stores, in increasing line order.
    pub fn lines(&self) -> &[PendingLine] {
        &self.lines
    }

    /// The durable content of line `line`.
    pub fn durable_line(&self, line: u64) -> &[u8] {
        &self.durable[crate::span::line_range(line)]
    }
}
