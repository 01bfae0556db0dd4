//! Metadata journal records. Each journal holds at most one transaction: a
//! 64-byte header followed by redo entries, each the new bytes for one
//! range of metadata.
//!
//! ```text
//! header (64 bytes, at the journal's first byte)
//! off size field
//!   0   4  magic "JTX1" (0: journal empty)
//!   4   4  entry count
//!   8   8  sequence number
//!  16   4  payload length in bytes
//!  20   4  CRC-32C of header bytes 0..20 and 24..64 and the payload
//!  24  40  reserved, zero
//! entry (8-byte aligned, payload follows the header)
//!   0   8  target byte offset in the pool
//!   8   4  length n
//!  12   4  reserved, zero
//!  16   n  new bytes, padded with zeros to a multiple of 8
//! ```
//! Commit protocol (docs/design.md): write header and entries, flush,
//! fence — the transaction is committed iff the checksum matches; apply the
//! entries in place, flush, fence; retire by storing 0 over bytes 0..8,
//! flush, fence. Recovery replays every committed transaction (redo is
//! idempotent) and retires it.

use crate::le::*;

/// Bytes of the transaction header.
pub const HEADER_SIZE: usize = 64;
/// Bytes of an entry's header.
pub const ENTRY_HEADER: usize = 16;
/// Header magic of a committed transaction.
pub const TX_MAGIC: u32 = u32::from_le_bytes(*b"JTX1");
/// Most entries one transaction may hold.
pub const MAX_ENTRIES: usize = 512;

/// One redo entry: write `data` at `offset`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub offset: u64,
    pub data: Vec<u8>,
}

/// Bytes an entry of `len` data bytes takes in the journal.
pub fn entry_footprint(len: usize) -> usize {
    ENTRY_HEADER + len.next_multiple_of(8)
}

/// Encodes the payload (entries) of a transaction.
pub fn encode_payload(entries: &[Entry]) -> Vec<u8> {
    let total: usize = entries.iter().map(|e| entry_footprint(e.data.len())).sum();
    let mut p = vec![0u8; total];
    let mut at = 0;
    for e in entries {
        put_u64(&mut p, at, e.offset);
        put_u32(&mut p, at + 8, e.data.len() as u32);
        p[at + ENTRY_HEADER..at + ENTRY_HEADER + e.data.len()].copy_from_slice(&e.data);
        at += entry_footprint(e.data.len());
    }
    p
}

/// Encodes the header that commits `payload`.
pub fn encode_header(seq: u64, entry_count: u32, payload: &[u8]) -> [u8; HEADER_SIZE] {
    let mut h = [0u8; HEADER_SIZE];
    put_u32(&mut h, 0, TX_MAGIC);
    put_u32(&mut h, 4, entry_count);
    put_u64(&mut h, 8, seq);
    put_u32(&mut h, 16, payload.len() as u32);
    let crc = header_crc(&h, payload);
    put_u32(&mut h, 20, crc);
    h
}

fn header_crc(h: &[u8; HEADER_SIZE], payload: &[u8]) -> u32 {
    let c = crc32c(&h[..20]);
    let c = crc32c_append(c, &h[24..]);
    crc32c_append(c, payload)
}

/// A committed transaction found in a journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    pub seq: u64,
    pub entries: Vec<Entry>,
}

/// What a journal's header says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JournalState {
    /// Nothing to replay.
    Empty,
    /// A header that never committed (torn or partly written): ignore it.
    Uncommitted,
    /// A committed transaction to replay.
    Committed(Committed),
}

/// Reads the transaction in `journal` (the journal's whole bytes). Every
/// length is checked against the journal before use, so no garbage can
/// make this read out of bounds; a checksum mismatch means "not committed".
pub fn decode(journal: &[u8]) -> JournalState {
    assert!(journal.len() >= HEADER_SIZE);
    let mut h = [0u8; HEADER_SIZE];
    h.copy_from_slice(&journal[..HEADER_SIZE]);
    let magic = get_u32(&h, 0);
    if magic == 0 {
        return JournalState::Empty;
    }
    if magic != TX_MAGIC {
        return JournalState::Uncommitted;
    }
    let count = get_u32(&h, 4) as usize;
    let len = get_u32(&h, 16) as usize;
    if count > MAX_ENTRIES || len > journal.len() - HEADER_SIZE {
        return JournalState::Uncommitted;
    }
    let payload = &journal[HEADER_SIZE..HEADER_SIZE + len];
    if get_u32(&h, 20) != header_crc(&h, payload) {
        return JournalState::Uncommitted;
    }
    let mut entries = Vec::with_capacity(count);
    let mut at = 0;
    for _ in 0..count {
        if at + ENTRY_HEADER > len {
            return JournalState::Uncommitted;
        }
        let offset = get_u64(payload, at);
        let n = get_u32(payload, at + 8) as usize;
        if n > len || at + entry_footprint(n) > len {
            return JournalState::Uncommitted;
        }
        let data = payload[at + ENTRY_HEADER..at + ENTRY_HEADER + n].to_vec();
        entries.push(Entry { offset, data });
        at += entry_footprint(n);
    }
    JournalState::Committed(Committed {
        seq: get_u64(&h, 8),
        entries,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn journal_with(entries: &[Entry]) -> Vec<u8> {
        let p = encode_payload(entries);
        let h = encode_header(9, entries.len() as u32, &p);
        let mut j = vec![0u8; 8192];
        j[..64].copy_from_slice(&h);
        j[64..64 + p.len()].copy_from_slice(&p);
        j
    }

    #[test]
    fn round_trip() {
        let es = vec![
            Entry {
                offset: 4096,
                data: vec![1, 2, 3],
            },
            Entry {
                offset: 100,
                data: vec![9; 64],
            },
        ];
        let j = journal_with(&es);
        assert_eq!(
            decode(&j),
            JournalState::Committed(Committed {
                seq: 9,
                entries: es
            })
        );
        assert_eq!(decode(&[0u8; 128]), JournalState::Empty);
    }

    #[test]
    fn torn_or_garbage_is_uncommitted() {
        let es = vec![Entry {
            offset: 4096,
            data: vec![1, 2, 3],
        }];
        let mut j = journal_with(&es);
        j[64 + 16] ^= 1;
        assert_eq!(decode(&j), JournalState::Uncommitted);
        let mut g = vec![0xffu8; 4096];
        g[..4].copy_from_slice(b"JTX1");
        assert_eq!(decode(&g), JournalState::Uncommitted);
    }
}
