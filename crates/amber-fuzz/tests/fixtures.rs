//! Format fixtures (PRACTICES.md item 12): the five base pools of
//! `amber_fuzz::pools` as commit 178d5ec made them, before the on-media
//! structures became zerocopy structs, and the two nova pools as the
//! commit that introduced NOVA's logs made them, gzip'd in
//! `tests/fixtures/`. Every
//! later version must read them as they are: fsck calls each clean, it
//! mounts with its base's options, every file reads, a new file fits and
//! it checks clean again (`check_image`); and every structure in them
//! decodes and encodes back to its very bytes, so the format has not
//! moved by a bit.

use amber_core::check::{check, CheckOptions};
use amber_format::dirent::{self, SLOTS_PER_BLOCK, SLOT_SIZE};
use amber_format::journal::{self, encode_header, encode_payload, JournalState, HEADER_SIZE};
use amber_format::nova::{log_of, Entry, Footer, ENTRIES_PER_PAGE, ENTRY_SIZE, FOOTER_OFFSET};
use amber_format::split::{AttrEntry, LogicalInfo, Record, ENTRIES};
use amber_format::zone::{
    ZoneGeometry, FEATURE_ZONE, HEADER_COPY_B, HEADER_LEN, REGION_ZONE_START,
};
use amber_format::{
    xattr, FileKind, Inode, PoolLayout, Superblock, BLOCK_SIZE, INODE_SIZE, SUPERBLOCK_SIZE,
};
use amber_fuzz::check_image;
use amber_fuzz::pools::bases;
use amber_sim::OverlayDevice;
use std::io::Read;
use std::sync::Arc;

const FIXTURES: [&str; 7] = [
    "classic",
    "classic-crashed",
    "split",
    "split-crashed",
    "lfs",
    "nova",
    "nova-crashed",
];

fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/fixtures/{name}.pool.gz",
        env!("CARGO_MANIFEST_DIR")
    );
    let gz = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut image = Vec::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_end(&mut image)
        .unwrap_or_else(|e| panic!("{path}: {e}"));
    image
}

#[test]
fn pools_made_before_check_clean_mount_and_read() {
    for name in FIXTURES {
        let image = fixture(name);
        let report = check(
            &OverlayDevice::new(Arc::new(image.clone())),
            &CheckOptions { repair: false },
        )
        .unwrap_or_else(|e| panic!("{name}: fsck failed: {e}"));
        assert_eq!(report.exit_code(), 0, "{name}: fsck said\n{report}");
        let base = bases().iter().find(|b| b.name == name).expect("its base");
        check_image(image, &base.options).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

/// How many structures of each kind the fixtures hold.
#[derive(Debug, Default)]
struct Seen {
    superblocks: usize,
    inodes: usize,
    dirents: usize,
    xattrs: usize,
    journals: usize,
    records: usize,
    attr_entries: usize,
    zone_headers: usize,
    log_entries: usize,
    log_pages: usize,
}

#[test]
fn every_structure_encodes_back_to_its_bytes() {
    let mut seen = Seen::default();
    for name in FIXTURES {
        let image = fixture(name);
        superblocks_and_inodes(&image, &mut seen);
        lines(&image, &mut seen);
        blocks(&image, &mut seen);
        logs(&image, &mut seen);
    }
    eprintln!("{seen:?}");
    let Seen {
        superblocks,
        inodes,
        dirents,
        xattrs,
        journals: _,
        records,
        attr_entries,
        zone_headers,
        log_entries,
        log_pages,
    } = seen;
    for (what, n) in [
        ("superblocks", superblocks),
        ("inodes", inodes),
        ("dirents", dirents),
        ("xattr blocks", xattrs),
        ("logical-information records", records),
        ("attribute-log entries", attr_entries),
        ("zone headers", zone_headers),
        ("nova log entries", log_entries),
        ("nova log pages", log_pages),
    ] {
        assert!(n > 0, "the fixtures hold no {what}");
    }
}

fn superblocks_and_inodes(image: &[u8], seen: &mut Seen) {
    let mut layout = None;
    for off in Superblock::copy_offsets() {
        let raw: &[u8; SUPERBLOCK_SIZE] = image[off as usize..][..SUPERBLOCK_SIZE]
            .try_into()
            .expect("a copy");
        let sb = Superblock::decode(raw).expect("both copies valid");
        assert_eq!(&sb.encode(), raw, "superblock at {off}");
        layout = Some(sb.layout);
        seen.superblocks += 1;
    }
    let l = layout.expect("a superblock");
    for ino in 1..l.inode_count {
        let off = l.inode_offset(ino) as usize;
        let raw: &[u8; INODE_SIZE] = image[off..][..INODE_SIZE].try_into().expect("an inode");
        assert_eq!(&Inode::decode(raw).encode(), raw, "inode {ino}");
        seen.inodes += Inode::decode(raw).in_use() as usize;
    }
}

/// The 64-byte records in their regions: logical information and
/// attribute entries of a split pool, the zone header's two copies.
fn lines(image: &[u8], seen: &mut Seen) {
    let sb = Superblock::decode(image[..SUPERBLOCK_SIZE].try_into().expect("a copy"))
        .expect("a superblock");
    let at = |off: u64| -> &[u8; 64] { image[off as usize..][..64].try_into().expect("a line") };
    if let Some(r) = sb.split_regions() {
        for b in (r.li_start..sb.layout.total_blocks).filter(|&b| r.has_record(b)) {
            let raw = at(r.li_offset(b));
            if let Record::Valid(li) = LogicalInfo::decode(raw) {
                assert_eq!(&li.encode(), raw, "record of block {b}");
                seen.records += 1;
            }
        }
        for ino in 1..sb.layout.inode_count {
            for i in 0..ENTRIES {
                let raw = at(r.entry_offset(ino, i));
                if let Record::Valid(e) = AttrEntry::decode(raw) {
                    assert_eq!(&e.encode(), raw, "attribute entry {i} of inode {ino}");
                    seen.attr_entries += 1;
                }
            }
        }
    }
    if sb.feature_incompat & FEATURE_ZONE != 0 {
        let header = sb.regions[REGION_ZONE_START] * BLOCK_SIZE;
        for off in [header, header + HEADER_COPY_B] {
            let raw: &[u8; HEADER_LEN] = at(off);
            let g = ZoneGeometry::decode(raw).expect("a valid zone header");
            assert_eq!(&g.encode(), raw, "zone header at {off}");
            seen.zone_headers += 1;
        }
    }
}

/// Directory blocks, attribute blocks and journals, found by their
/// checksums in every block.
fn blocks(image: &[u8], seen: &mut Seen) {
    let bs = BLOCK_SIZE as usize;
    for (b, block) in image.chunks_exact(bs).enumerate() {
        if let Ok(attrs) = xattr::decode(block) {
            assert_eq!(
                xattr::encode(&attrs).as_deref(),
                Some(block),
                "xattrs, block {b}"
            );
            seen.xattrs += 1;
        }
        for slot in 0..SLOTS_PER_BLOCK {
            if let Ok(Some(e)) = dirent::decode(block, slot) {
                let bytes = dirent::encode(e.ino, e.dtype, &e.name);
                let raw = &block[slot * SLOT_SIZE..][..bytes.len()];
                assert_eq!(bytes, raw, "dirent in block {b} slot {slot}");
                seen.dirents += 1;
            }
        }
        if let JournalState::Committed(tx) = journal::decode(&image[b * bs..]) {
            let payload = encode_payload(&tx.entries);
            let header = encode_header(tx.seq, tx.entries.len() as u32, &payload);
            let raw = &image[b * bs..][..HEADER_SIZE + payload.len()];
            assert_eq!(
                [&header[..], &payload].concat(),
                raw,
                "journal at block {b}"
            );
            seen.journals += 1;
        }
    }
}

/// Every nova file's log, from head to tail: each page's footer and each
/// entry before the tail.
fn logs(image: &[u8], seen: &mut Seen) {
    let sb = Superblock::decode(image[..SUPERBLOCK_SIZE].try_into().expect("a copy"))
        .expect("a superblock");
    if sb.pool_layout() != PoolLayout::Nova {
        return;
    }
    let l = sb.layout;
    let line = |off: u64| -> &[u8; 64] { image[off as usize..][..64].try_into().expect("a line") };
    for ino in 1..l.inode_count {
        let off = l.inode_offset(ino) as usize;
        let inode = Inode::decode(image[off..][..INODE_SIZE].try_into().expect("an inode"));
        if inode.kind() != Some(FileKind::Regular) {
            continue;
        }
        let (mut page, tail) = log_of(&inode.inline);
        while page != 0 {
            let footer_at = l.block_offset(page) + FOOTER_OFFSET;
            let footer = Footer::decode(line(footer_at)).expect("a valid footer");
            assert_eq!(&footer.encode(), line(footer_at), "footer of page {page}");
            seen.log_pages += 1;
            let last = page == tail / BLOCK_SIZE;
            let end = if last {
                (tail % BLOCK_SIZE) / ENTRY_SIZE
            } else {
                ENTRIES_PER_PAGE
            };
            for slot in 0..end {
                let at = l.block_offset(page) + slot * ENTRY_SIZE;
                let e = Entry::decode(line(at)).expect("a valid entry");
                assert_eq!(&e.encode(), line(at), "entry at {at}");
                seen.log_entries += 1;
            }
            page = if last { 0 } else { footer.next };
        }
    }
}
