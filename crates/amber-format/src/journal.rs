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
//! Commit protocol (docs/design.md §4): stream entries and header, fence —
//! the transaction is committed iff the checksum matches; apply the
//! entries in place, fence; retire by streaming zeros over the header's
//! line, fence (a partly zeroed header is empty or fails its checksum).
//! Recovery replays every committed transaction (redo is idempotent) and
//! retires it.

use crate::crc::{crc32c, crc32c_append};
use std::mem::offset_of;
use zerocopy::little_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Bytes of the transaction header.
pub const HEADER_SIZE: usize = 64;
/// Bytes of an entry's header.
pub const ENTRY_HEADER: usize = 16;
/// Header magic of a committed transaction.
pub const TX_MAGIC: u32 = u32::from_le_bytes(*b"JTX1");
/// Most entries one transaction may hold.
pub const MAX_ENTRIES: usize = 512;

/// A transaction header as it lies on media (the table above).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct RawHeader {
    magic: U32,
    entry_count: U32,
    seq: U64,
    payload_len: U32,
    crc: U32,
    reserved: [u8; 40],
}

assert_layout!(RawHeader, HEADER_SIZE, {
    magic: 0, entry_count: 4, seq: 8, payload_len: 16, crc: 20, reserved: 24,
});

/// A redo entry's header as it lies on media, its bytes following it.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct RawEntry {
    offset: U64,
    len: U32,
    reserved: [u8; 4],
}

assert_layout!(RawEntry, ENTRY_HEADER, { offset: 0, len: 8, reserved: 12 });

/// One redo entry: write `data` at `offset`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Byte offset in the pool where `data` goes: from the inode table on
    /// and inside the pool (recovery refuses any other before replaying).
    pub offset: u64,
    /// The new bytes, stored unpadded here and padded to 8 on media.
    pub data: Vec<u8>,
}

/// Bytes an entry of `len` data bytes takes in the journal.
pub fn entry_footprint(len: usize) -> usize {
    ENTRY_HEADER + len.next_multiple_of(8)
}

/// Appends one entry (its header, `data`, zeros to a multiple of 8) to a
/// payload under construction.
pub fn push_entry(payload: &mut Vec<u8>, offset: u64, data: &[u8]) {
    let h = RawEntry {
        offset: offset.into(),
        len: (data.len() as u32).into(),
        reserved: [0; 4],
    };
    let end = payload.len() + entry_footprint(data.len());
    payload.extend_from_slice(h.as_bytes());
    payload.extend_from_slice(data);
    payload.resize(end, 0);
}

/// Encodes the payload (entries) of a transaction.
pub fn encode_payload(entries: &[Entry]) -> Vec<u8> {
    let total: usize = entries.iter().map(|e| entry_footprint(e.data.len())).sum();
    let mut p = Vec::with_capacity(total);
    for e in entries {
        push_entry(&mut p, e.offset, &e.data);
    }
    p
}

/// Encodes the header that commits `payload`.
pub fn encode_header(seq: u64, entry_count: u32, payload: &[u8]) -> [u8; HEADER_SIZE] {
    let mut h = RawHeader {
        magic: TX_MAGIC.into(),
        entry_count: entry_count.into(),
        seq: seq.into(),
        payload_len: (payload.len() as u32).into(),
        crc: U32::ZERO,
        reserved: [0; 40],
    };
    h.crc = header_crc(h.as_bytes(), payload).into();
    zerocopy::transmute!(h)
}

/// The header's checksum: every header byte but its own four, then the
/// payload.
fn header_crc(h: &[u8], payload: &[u8]) -> u32 {
    const AT: usize = offset_of!(RawHeader, crc);
    let c = crc32c(&h[..AT]);
    let c = crc32c_append(c, &h[AT + 4..HEADER_SIZE]);
    crc32c_append(c, payload)
}

/// A committed transaction found in a journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    /// The transaction's number, increasing across the pool's journals;
    /// after recovery new transactions continue past the highest found.
    /// Replay needs no order: unretired transactions never share bytes.
    pub seq: u64,
    /// The redo entries, in the order they were written.
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
    let (h, rest) = RawHeader::ref_from_prefix(journal).expect("a journal holds a header");
    let magic = h.magic.get();
    if magic == 0 {
        return JournalState::Empty;
    }
    if magic != TX_MAGIC {
        return JournalState::Uncommitted;
    }
    let count = h.entry_count.get() as usize;
    let len = h.payload_len.get() as usize;
    if count > MAX_ENTRIES || len > rest.len() {
        return JournalState::Uncommitted;
    }
    let payload = &rest[..len];
    if h.crc.get() != header_crc(h.as_bytes(), payload) {
        return JournalState::Uncommitted;
    }
    let mut entries = Vec::with_capacity(count);
    let mut at = 0;
    for _ in 0..count {
        let Ok((e, data)) = RawEntry::ref_from_prefix(&payload[at..]) else {
            return JournalState::Uncommitted;
        };
        let n = e.len.get() as usize;
        if n > len || at + entry_footprint(n) > len {
            return JournalState::Uncommitted;
        }
        entries.push(Entry {
            offset: e.offset.get(),
            data: data[..n].to_vec(),
        });
        at += entry_footprint(n);
    }
    JournalState::Committed(Committed {
        seq: h.seq.get(),
        entries,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Every transaction decodes to itself, and its bytes encode back
        /// unchanged.
        #[test]
        fn decode_inverts_encode(
            seq: u64,
            entries in proptest::collection::vec(
                (any::<u64>(), proptest::collection::vec(any::<u8>(), 0..100)),
                0..20,
            ),
        ) {
            let entries: Vec<Entry> =
                entries.into_iter().map(|(offset, data)| Entry { offset, data }).collect();
            let p = encode_payload(&entries);
            let h = encode_header(seq, entries.len() as u32, &p);
            let bytes = [&h[..], &p, &[0; 64]].concat();
            let JournalState::Committed(tx) = decode(&bytes) else {
                return Err(TestCaseError::fail("not committed"));
            };
            prop_assert_eq!(encode_payload(&tx.entries), p);
            prop_assert_eq!(encode_header(tx.seq, tx.entries.len() as u32, &encode_payload(&tx.entries)), h);
            prop_assert_eq!(tx, Committed { seq, entries });
        }
    }

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
