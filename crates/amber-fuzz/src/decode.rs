//! The decoding target: every decoder of format v1 over arbitrary bytes.
//! Decoders must never panic on what they are given, and a value a
//! decoder accepts must come back unchanged from its encoder and the
//! decoder again (a decoder that accepts more than the encoder can say
//! would let two byte strings mean one thing, or lose a field). Inodes
//! with their reserved bytes zero and descriptors must come back as the
//! very bytes.

use amber_format::dirent::{self, SLOTS_PER_BLOCK, SLOT_SIZE};
use amber_format::inode::RESERVED;
use amber_format::journal::{self, encode_header, encode_payload, JournalState, HEADER_SIZE};
use amber_format::split::{AttrEntry, LogicalInfo, Record};
use amber_format::superblock::SUPERBLOCK_SIZE;
use amber_format::zone::{Descriptor, ZoneGeometry, DESC_SIZE, HEADER_LEN};
use amber_format::zone_extent::{Extent, EXTENT_SIZE};
use amber_format::{acl, xattr, Inode, Superblock, BLOCK_SIZE, INODE_SIZE};

/// Longest input looked at: a journal's largest size.
const MAX_INPUT: usize = 256 * BLOCK_SIZE as usize;

/// `data` from `at`, cut or zero-padded to `N` bytes.
fn window<const N: usize>(data: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    let src = data.get(at..).unwrap_or(&[]);
    let n = src.len().min(N);
    out[..n].copy_from_slice(&src[..n]);
    out
}

/// Runs every decoder over `data` (see the module docs); panics on a
/// broken contract.
pub fn decode_all(data: &[u8]) {
    let data = &data[..data.len().min(MAX_INPUT)];
    superblocks(data);
    let block: [u8; BLOCK_SIZE as usize] = window(data, 0);
    inodes(&block);
    dirents(&block);
    records(&block);
    attributes(data, &block);
    journal_of(data);
}

/// Attribute blocks and runs (as many blocks as the head claims, when
/// the input has them), and POSIX ACL values.
fn attributes(data: &[u8], block: &[u8]) {
    let blocks = xattr::blocks_of(block).unwrap_or(1) as usize;
    let whole = data.get(..blocks * BLOCK_SIZE as usize).unwrap_or(block);
    if let Ok(attrs) = xattr::decode(whole) {
        let again = xattr::encode(&attrs).expect("decoded attributes fit a run");
        assert_eq!(xattr::decode(&again), Ok(attrs), "xattr round trip");
    }
    if let Ok(Some(acl)) = acl::decode(data.get(..BLOCK_SIZE as usize).unwrap_or(data)) {
        assert_eq!(acl::decode(&acl.encode()), Ok(Some(acl)), "ACL round trip");
    }
}

fn superblocks(data: &[u8]) {
    let a: [u8; SUPERBLOCK_SIZE] = window(data, 0);
    let b: [u8; SUPERBLOCK_SIZE] = window(data, SUPERBLOCK_SIZE);
    for bytes in [&a, &b] {
        if let Ok(sb) = Superblock::decode(bytes) {
            assert_eq!(
                Superblock::decode(&sb.encode()),
                Ok(sb),
                "superblock round trip"
            );
        }
    }
    if let Ok(sb) = Superblock::choose(&a, &b) {
        assert!(Superblock::decode(&a) == Ok(sb.clone()) || Superblock::decode(&b) == Ok(sb));
    }
}

fn inodes(block: &[u8; BLOCK_SIZE as usize]) {
    for raw in block.chunks_exact(INODE_SIZE) {
        let raw: &[u8; INODE_SIZE] = raw.try_into().expect("an inode's bytes");
        let i = Inode::decode(raw);
        assert_eq!(Inode::decode(&i.encode()), i, "inode round trip");
        if RESERVED
            .iter()
            .all(|&(a, b)| raw[a..b].iter().all(|&x| x == 0))
        {
            assert_eq!(&i.encode(), raw, "inode bytes round trip");
        }
    }
}

fn dirents(block: &[u8; BLOCK_SIZE as usize]) {
    for slot in 0..SLOTS_PER_BLOCK {
        let Ok(Some(e)) = dirent::decode(block, slot) else {
            continue;
        };
        let mut again = vec![0u8; SLOT_SIZE * SLOTS_PER_BLOCK];
        let bytes = dirent::encode(e.ino, e.dtype, &e.name);
        again[..bytes.len()].copy_from_slice(&bytes);
        assert_eq!(dirent::decode(&again, 0), Ok(Some(e)), "dirent round trip");
    }
}

/// The 16-, 32-, 64-byte records: zone descriptors, extent heads (over
/// the bytes after them as their slots) and header, logical information,
/// attribute entries.
fn records(block: &[u8; BLOCK_SIZE as usize]) {
    for (i, raw) in block.chunks_exact(EXTENT_SIZE as usize).enumerate() {
        let raw: &[u8; EXTENT_SIZE as usize] = raw.try_into().expect("32 bytes");
        if let Ok(Some(e)) = Extent::decode(raw) {
            let at = (i + 1) * EXTENT_SIZE as usize;
            let slots = &block[at..block.len().min(at + e.slots as usize * 64)];
            if Extent::matches(raw, slots) {
                assert_eq!(&e.encode(slots), raw, "extent head round trip");
            }
        }
    }
    for raw in block.chunks_exact(DESC_SIZE as usize) {
        let raw: &[u8; DESC_SIZE as usize] = raw.try_into().expect("16 bytes");
        if let Ok(Some(d)) = Descriptor::decode(raw) {
            assert_eq!(&d.encode().to_le_bytes(), raw, "descriptor round trip");
        }
    }
    for raw in block.chunks_exact(HEADER_LEN) {
        let raw: &[u8; HEADER_LEN] = raw.try_into().expect("64 bytes");
        if let Ok(g) = ZoneGeometry::decode(raw) {
            assert_eq!(
                ZoneGeometry::decode(&g.encode()),
                Ok(g),
                "zone header round trip"
            );
        }
        if let Record::Valid(li) = LogicalInfo::decode(raw) {
            assert_eq!(
                LogicalInfo::decode(&li.encode()),
                Record::Valid(li),
                "record round trip"
            );
        }
        if let Record::Valid(e) = AttrEntry::decode(raw) {
            assert_eq!(
                AttrEntry::decode(&e.encode()),
                Record::Valid(e),
                "entry round trip"
            );
        }
    }
}

fn journal_of(data: &[u8]) {
    let mut j = data.to_vec();
    j.resize(j.len().max(HEADER_SIZE), 0);
    let JournalState::Committed(c) = journal::decode(&j) else {
        return;
    };
    let payload = encode_payload(&c.entries);
    let mut again = encode_header(c.seq, c.entries.len() as u32, &payload).to_vec();
    again.extend_from_slice(&payload);
    assert_eq!(
        journal::decode(&again),
        JournalState::Committed(c),
        "journal round trip"
    );
}
