//! One cache line's stores that are not yet durable, in program order.
//!
//! Vinter's model: stores to one line reach PM in program order, so what a
//! crash leaves of a line is always a prefix of its pending list. A store that
//! spans lines is one record per line (the pieces can persist independently);
//! an 8- or 16-byte atomic store never spans a line, so it is one record and
//! is never torn.

use crate::{Line, LINE_BYTES};

/// The bytes one store wrote into one line.
#[derive(Debug, Clone)]
pub(crate) struct StoreRecord {
    start: u8,
    len: u8,
    /// Kept at their in-line positions so applying is one slice copy.
    bytes: Line,
}

impl StoreRecord {
    /// A record of `data` written at byte `start` of a line.
    pub(crate) fn new(start: usize, data: &[u8]) -> Self {
        assert!(
            !data.is_empty() && start + data.len() <= LINE_BYTES,
            "a store record must lie inside one line (start={start}, len={})",
            data.len()
        );
        let mut bytes = [0u8; LINE_BYTES];
        bytes[start..start + data.len()].copy_from_slice(data);
        StoreRecord {
            start: start as u8,
            len: data.len() as u8,
            bytes,
        }
    }

    pub(crate) fn apply(&self, line: &mut [u8]) {
        assert_eq!(line.len(), LINE_BYTES);
        let range = usize::from(self.start)..usize::from(self.start) + usize::from(self.len);
        line[range.clone()].copy_from_slice(&self.bytes[range]);
    }
}

/// The pending list of one line plus how much of it has been flushed.
///
/// Flushed records always form a prefix of the list: a flush marks every
/// record pending at that moment, later stores append behind them, and a
/// non-temporal store flushes the cached records before it (see
/// [`PendingStores::push`]). So a count is enough, and the fence can apply
/// exactly that prefix without breaking the per-line ordering.
#[derive(Debug, Default)]
pub(crate) struct PendingStores {
    records: Vec<StoreRecord>,
    flushed: usize,
}

impl PendingStores {
    /// Appends a store. A non-temporal store (`nt`) is born flushed and also
    /// marks the cached records before it flushed, because x86 evicts
    /// (writes back) a cached copy of the line a non-temporal store hits
    /// (Intel SDM vol. 1, 10.4.6.2); that is also what keeps the flushed
    /// records a prefix.
    pub(crate) fn push(&mut self, record: StoreRecord, nt: bool) {
        self.records.push(record);
        if nt {
            self.flushed = self.records.len();
        }
    }

    /// Marks every pending record flushed; returns whether any was not.
    pub(crate) fn flush(&mut self) -> bool {
        let newly = self.flushed < self.records.len();
        self.flushed = self.records.len();
        newly
    }

    /// Applies the flushed prefix to the durable copy of the line and forgets
    /// it; returns how many records were applied. Records stored after the
    /// flush stay pending.
    pub(crate) fn apply_flushed(&mut self, durable_line: &mut [u8]) -> usize {
        assert!(self.flushed <= self.records.len());
        let n = self.flushed;
        for record in self.records.drain(..n) {
            record.apply(durable_line);
        }
        self.flushed = 0;
        n
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The line's content after each prefix of its records (1..=n), starting
    /// from its durable content: the candidates a crash may leave behind.
    pub(crate) fn prefixes(&self, durable_line: &[u8]) -> Vec<Line> {
        assert_eq!(durable_line.len(), LINE_BYTES);
        let mut line: Line = [0u8; LINE_BYTES];
        line.copy_from_slice(durable_line);
        self.records
            .iter()
            .map(|record| {
                record.apply(&mut line);
                line
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::{PendingStores, StoreRecord};
    use crate::LINE_BYTES;

    #[test]
    fn flushed_prefix_applies_and_later_stores_stay() {
        let mut p = PendingStores::default();
        p.push(StoreRecord::new(0, &[1, 1]), false);
        assert!(p.flush());
        assert!(!p.flush(), "re-flushing flushes nothing new");
        p.push(StoreRecord::new(1, &[2]), false);
        let mut durable = [0u8; LINE_BYTES];
        assert_eq!(p.apply_flushed(&mut durable), 1);
        assert_eq!(&durable[..3], &[1, 1, 0]);
        assert!(!p.is_empty(), "the store after the flush is still pending");
        assert_eq!(p.prefixes(&durable).len(), 1);
        assert_eq!(&p.prefixes(&durable)[0][..3], &[1, 2, 0]);
    }

    #[test]
    fn nt_store_flushes_the_cached_records_before_it() {
        let mut p = PendingStores::default();
        p.push(StoreRecord::new(0, &[1]), false);
        p.push(StoreRecord::new(8, &[2]), true);
        let mut durable = [0u8; LINE_BYTES];
        assert_eq!(p.apply_flushed(&mut durable), 2);
        assert!(p.is_empty());
        assert_eq!((durable[0], durable[8]), (1, 2));
    }

    #[test]
    fn prefixes_accumulate_in_program_order() {
        let mut p = PendingStores::default();
        p.push(StoreRecord::new(0, &[9; 4]), false);
        p.push(StoreRecord::new(2, &[7; 4]), false);
        let pre = p.prefixes(&[0u8; LINE_BYTES]);
        assert_eq!(&pre[0][..6], &[9, 9, 9, 9, 0, 0]);
        assert_eq!(&pre[1][..6], &[9, 9, 7, 7, 7, 7]);
    }
}
