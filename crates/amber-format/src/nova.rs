//! NOVA's per-inode logs (feature `FEATURE_NOVA`, NOVA FAST'16 §3-4): a
//! regular file's data is named by the write entries of a log of its own,
//! a singly linked list of 4 KiB log pages, and a write commits by one
//! 8-byte store of the log's tail in the inode. Everything else of the
//! pool (directories, symlinks, attribute blocks, the journals) is the
//! classic format.
//!
//! A nova regular file keeps its log in the first 16 bytes of the inode's
//! inline area (bytes 128..144, which only symlinks use otherwise), so the
//! head and the tail can be switched together by one 16-byte atomic store:
//!
//! ```text
//! inode bytes 128..136  log head: the first log page's block (0: no log)
//! inode bytes 136..144  log tail: the pool byte offset of the next free
//!                       entry slot, in the last page (0: no log)
//!
//! log page (4096 bytes): entries 0..63 (64 bytes each), then the footer
//!   4032  8  next page's block (0: none); read only before the tail page
//!   4040  8  inode number          4048  4  inode generation
//!   4052 40  reserved, zero        (the footer's last 4 bytes are 4092..4096)
//!   4092  4  CRC-32C of footer bytes 8..28 (owner; `next` changes in place)
//!
//! entry (64 bytes)
//!    0  1  kind: 1 write, 2 attributes, 3 punch
//!    1  1  flags: bit 0 = truncate (unmap every page from the size up)
//!    2  2  reserved, zero
//!    4  4  pages: file pages the entry covers (0 for attributes)
//!    8  8  pgoff: first file page (file offset / 4096)
//!   16  8  block: first PM block of a write's run (pages are contiguous)
//!   24  8  size: the file's size once the entry applies
//!   32  8  mtime seconds           40  4  mtime nanoseconds
//!   44  4  ctime nanoseconds       48  8  ctime seconds
//!   56  4  inode generation
//!   60  4  CRC-32C of bytes 0..60
//! ```
//!
//! Entries between the head and the tail exist; nothing past the tail
//! does, and the tail page's `next` is never followed. Replaying the
//! entries in order gives the file's pages, size and times (docs/design.md
//! §15).

use crate::crc::crc32c;
use crate::error::FormatError;
use crate::inode::{Timespec, INLINE_MAX};
use crate::layout::BLOCK_SIZE;
use std::mem::offset_of;
use zerocopy::little_endian::{I64, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Incompatible feature bit: regular files keep their data in per-inode
/// logs instead of block maps, so an amberfs without it must refuse the
/// pool.
pub const FEATURE_NOVA: u64 = 1 << 3;
/// Bytes of one log entry (one cache line).
pub const ENTRY_SIZE: u64 = 64;
/// Entries in one log page; the page's last 64 bytes are its footer.
pub const ENTRIES_PER_PAGE: u64 = BLOCK_SIZE / ENTRY_SIZE - 1;
/// Byte offset of the footer in a log page.
pub const FOOTER_OFFSET: u64 = ENTRIES_PER_PAGE * ENTRY_SIZE;
/// Byte offset of the log head inside the inode (the inline area's start,
/// 16-byte aligned so head and tail switch with one atomic store).
pub const OFF_LOG_HEAD: usize = 128;
/// Byte offset of the log tail inside the inode.
pub const OFF_LOG_TAIL: usize = OFF_LOG_HEAD + 8;

const _: () = assert!(OFF_LOG_HEAD.is_multiple_of(16));
const _: () = assert!(OFF_LOG_TAIL + 8 <= OFF_LOG_HEAD + INLINE_MAX);
const _: () = assert!(FOOTER_OFFSET + ENTRY_SIZE == BLOCK_SIZE);

/// What a log entry records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// Pages `pgoff..pgoff + pages` now live in blocks `block..`.
    Write,
    /// Only the size and times changed (setattr, truncate).
    Attr,
    /// Pages `pgoff..pgoff + pages` are holes now (fallocate's punch).
    Punch,
}

impl EntryKind {
    fn code(self) -> u8 {
        match self {
            EntryKind::Write => 1,
            EntryKind::Attr => 2,
            EntryKind::Punch => 3,
        }
    }

    fn from_code(c: u8) -> Option<EntryKind> {
        Some(match c {
            1 => EntryKind::Write,
            2 => EntryKind::Attr,
            3 => EntryKind::Punch,
            _ => return None,
        })
    }
}

/// Entry flag: replaying the entry unmaps every page from its size up.
pub const FLAG_TRUNCATE: u8 = 1;

/// One log entry, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// What it records.
    pub kind: EntryKind,
    /// `FLAG_*` bits.
    pub flags: u8,
    /// File pages covered (0 for `Attr`).
    pub pages: u32,
    /// First file page covered.
    pub pgoff: u64,
    /// First PM block of a `Write`'s run (0 otherwise).
    pub block: u64,
    /// The file's size once the entry applies.
    pub size: u64,
    /// The file's mtime once the entry applies.
    pub mtime: Timespec,
    /// The file's ctime once the entry applies.
    pub ctime: Timespec,
    /// The inode's generation when it was written.
    pub generation: u32,
}

/// An entry as it lies on media (the table above).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct RawEntry {
    kind: u8,
    flags: u8,
    reserved: [u8; 2],
    pages: U32,
    pgoff: U64,
    block: U64,
    size: U64,
    mtime_secs: I64,
    mtime_nsecs: U32,
    ctime_nsecs: U32,
    ctime_secs: I64,
    generation: U32,
    crc: U32,
}

assert_layout!(RawEntry, ENTRY_SIZE as usize, {
    kind: 0, flags: 1, reserved: 2, pages: 4, pgoff: 8, block: 16, size: 24,
    mtime_secs: 32, mtime_nsecs: 40, ctime_nsecs: 44, ctime_secs: 48,
    generation: 56, crc: 60,
});

impl Entry {
    /// Encodes with its checksum.
    pub fn encode(&self) -> [u8; ENTRY_SIZE as usize] {
        let raw = RawEntry {
            kind: self.kind.code(),
            flags: self.flags,
            reserved: [0; 2],
            pages: self.pages.into(),
            pgoff: self.pgoff.into(),
            block: self.block.into(),
            size: self.size.into(),
            mtime_secs: self.mtime.secs.into(),
            mtime_nsecs: self.mtime.nsecs.into(),
            ctime_nsecs: self.ctime.nsecs.into(),
            ctime_secs: self.ctime.secs.into(),
            generation: self.generation.into(),
            crc: 0.into(),
        };
        let mut out = [0u8; ENTRY_SIZE as usize];
        out.copy_from_slice(raw.as_bytes());
        let crc = crc32c(&out[..60]);
        out[60..].copy_from_slice(&crc.to_le_bytes());
        out
    }

    /// Decodes and validates the checksum, the kind and the flags (bounds
    /// are the reader's: they depend on the pool).
    pub fn decode(b: &[u8; ENTRY_SIZE as usize]) -> Result<Entry, FormatError> {
        let raw = RawEntry::ref_from_bytes(b).expect("64 bytes");
        if raw.crc.get() != crc32c(&b[..60]) {
            return Err(FormatError::InvalidField {
                what: "log entry checksum",
                value: raw.crc.get().into(),
            });
        }
        let kind = EntryKind::from_code(raw.kind).ok_or(FormatError::InvalidField {
            what: "log entry kind",
            value: raw.kind.into(),
        })?;
        if raw.flags & !FLAG_TRUNCATE != 0 || raw.reserved != [0; 2] {
            return Err(FormatError::InvalidField {
                what: "log entry flags",
                value: raw.flags.into(),
            });
        }
        Ok(Entry {
            kind,
            flags: raw.flags,
            pages: raw.pages.get(),
            pgoff: raw.pgoff.get(),
            block: raw.block.get(),
            size: raw.size.get(),
            mtime: Timespec {
                secs: raw.mtime_secs.get(),
                nsecs: raw.mtime_nsecs.get(),
            },
            ctime: Timespec {
                secs: raw.ctime_secs.get(),
                nsecs: raw.ctime_nsecs.get(),
            },
            generation: raw.generation.get(),
        })
    }

    /// Whether replaying it unmaps the pages from its size up.
    pub fn truncates(&self) -> bool {
        self.flags & FLAG_TRUNCATE != 0
    }
}

/// A log page's footer, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footer {
    /// The next page's block (0: none).
    pub next: u64,
    /// The inode whose log this page is.
    pub ino: u64,
    /// That inode's generation.
    pub generation: u32,
}

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct RawFooter {
    next: U64,
    ino: U64,
    generation: U32,
    reserved: [u8; 40],
    crc: U32,
}

assert_layout!(RawFooter, ENTRY_SIZE as usize, {
    next: 0, ino: 8, generation: 16, reserved: 20, crc: 60,
});

/// Byte offset of `next` in the footer (stored in place by itself).
pub const OFF_FOOTER_NEXT: u64 = offset_of!(RawFooter, next) as u64;

impl Footer {
    /// Encodes with the owner's checksum.
    pub fn encode(&self) -> [u8; ENTRY_SIZE as usize] {
        let raw = RawFooter {
            next: self.next.into(),
            ino: self.ino.into(),
            generation: self.generation.into(),
            reserved: [0; 40],
            crc: 0.into(),
        };
        let mut out = [0u8; ENTRY_SIZE as usize];
        out.copy_from_slice(raw.as_bytes());
        let crc = crc32c(&out[8..20]);
        out[60..].copy_from_slice(&crc.to_le_bytes());
        out
    }

    /// Decodes and validates the owner's checksum and the reserved bytes.
    pub fn decode(b: &[u8; ENTRY_SIZE as usize]) -> Result<Footer, FormatError> {
        let raw = RawFooter::ref_from_bytes(b).expect("64 bytes");
        if raw.crc.get() != crc32c(&b[8..20]) {
            return Err(FormatError::InvalidField {
                what: "log page footer checksum",
                value: raw.crc.get().into(),
            });
        }
        if raw.reserved.iter().any(|&x| x != 0) {
            return Err(FormatError::InvalidField {
                what: "log page footer reserved bytes",
                value: 0,
            });
        }
        Ok(Footer {
            next: raw.next.get(),
            ino: raw.ino.get(),
            generation: raw.generation.get(),
        })
    }
}

/// A nova file's (head, tail) from its inode's inline bytes.
pub fn log_of(inline: &[u8; INLINE_MAX]) -> (u64, u64) {
    let word = |at: usize| u64::from_le_bytes(inline[at..at + 8].try_into().expect("8 bytes"));
    (word(0), word(8))
}

/// Stores (head, tail) into an inode's inline bytes.
pub fn set_log(inline: &mut [u8; INLINE_MAX], head: u64, tail: u64) {
    inline[..8].copy_from_slice(&head.to_le_bytes());
    inline[8..16].copy_from_slice(&tail.to_le_bytes());
}

/// The (head, tail) pair as the one 16-byte value stored at
/// [`OFF_LOG_HEAD`] (little-endian: head in the low half).
pub fn log_word(head: u64, tail: u64) -> u128 {
    u128::from(head) | (u128::from(tail) << 64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn entry_round_trips(kind in 0..3usize, flags in 0..2u8, pages: u32, pgoff: u64,
                             block: u64, size: u64, ms: i64, mn: u32, cs: i64, cn: u32, g: u32) {
            let kind = [EntryKind::Write, EntryKind::Attr, EntryKind::Punch][kind];
            let e = Entry { kind, flags, pages, pgoff, block, size,
                mtime: Timespec { secs: ms, nsecs: mn }, ctime: Timespec { secs: cs, nsecs: cn },
                generation: g };
            let b = e.encode();
            prop_assert_eq!(Entry::decode(&b), Ok(e));
        }

        #[test]
        fn footer_round_trips(next: u64, ino: u64, generation: u32) {
            let f = Footer { next, ino, generation };
            let b = f.encode();
            prop_assert_eq!(Footer::decode(&b), Ok(f));
        }
    }

    /// A torn entry (any byte changed) fails its checksum; zeros are no
    /// entry at all.
    #[test]
    fn damage_is_detected() {
        let e = Entry {
            kind: EntryKind::Write,
            flags: 0,
            pages: 1,
            pgoff: 3,
            block: 99,
            size: 16384,
            mtime: Timespec::default(),
            ctime: Timespec::default(),
            generation: 1,
        };
        let good = e.encode();
        for i in 0..64 {
            let mut b = good;
            b[i] ^= 1;
            assert!(Entry::decode(&b).is_err(), "byte {i}");
        }
        assert!(Entry::decode(&[0; 64]).is_err());
    }

    /// A footer's `next` is stored in place without its checksum.
    #[test]
    fn next_is_outside_the_checksum() {
        let f = Footer {
            next: 5,
            ino: 7,
            generation: 2,
        };
        let mut b = f.encode();
        b[..8].copy_from_slice(&42u64.to_le_bytes());
        assert_eq!(Footer::decode(&b).unwrap().next, 42);
    }

    #[test]
    fn log_fields_round_trip() {
        let mut inline = [0u8; INLINE_MAX];
        set_log(&mut inline, 12, 12 * 4096 + 128);
        assert_eq!(log_of(&inline), (12, 12 * 4096 + 128));
        assert_eq!(
            log_word(12, 77).to_le_bytes()[..16],
            [&12u64.to_le_bytes()[..], &77u64.to_le_bytes()[..]].concat()[..]
        );
    }
}
