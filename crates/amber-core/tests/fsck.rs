//! fsck of classic pools: clean pools stay clean, each kind of damage is
//! reported in words and repaired where it is safe (after which the pool
//! mounts and checks clean). The fuzz test over damaged images of both
//! layouts is crates/amber-fuzz/tests/images.rs; split pools' damage is
//! fsck_split.rs.

use amber_core::acl::{from_text, to_text};
use amber_core::check::{check, CheckOptions, CheckReport, Severity};
use amber_core::data::FallocMode;
use amber_core::fs::{format, mount, read_superblock, XattrSet};
use amber_core::{Owner, RenameMode};
use amber_format::acl::{ACCESS_XATTR, DEFAULT_XATTR};
use amber_format::journal::{encode_header, encode_payload, Entry};
use amber_format::{dirent, xattr};
use amber_format::{
    FileKind, FormatParams, Inode, Layout, PoolLayout, BLOCK_SIZE, INODE_SIZE, ROOT_INO,
};
use amber_pmem::{MapOptions, MmapDevice, PmDevice};
use amber_sim::OverlayDevice;
use std::sync::Arc;

mod common;
use common::{direct, errors};

const ME: Owner = Owner::new(1000, 1000);

const CHECK: CheckOptions = CheckOptions { repair: false };
const REPAIR: CheckOptions = CheckOptions { repair: true };

fn params(size: u64) -> FormatParams {
    FormatParams {
        pool_size: size,
        inode_count: 64,
        journal_count: 2,
        journal_blocks: 8,
        layout: PoolLayout::Classic,
    }
}

/// Inode numbers of the populated pool's files.
struct Tree {
    a: u64,
    b: u64,
    big: u64,
    small: u64,
    other: u64,
    linked: u64,
}

/// A pool with directories, a multi-block file (so a map node), one-block
/// files, hard links, both kinds of symlink, a FIFO, a rename and an
/// unlink behind it, cleanly unmounted.
fn populated(size: u64) -> (Arc<MmapDevice>, Tree) {
    let dev = Arc::new(MmapDevice::anonymous(size, &MapOptions::default()).unwrap());
    format(&*dev, &params(size)).unwrap();
    let (fs, _) = mount(dev.clone(), direct()).unwrap();
    let a = fs.mkdir(ROOT_INO, b"a", 0o755, ME).unwrap().ino;
    let b = fs.mkdir(a, b"b", 0o755, ME).unwrap().ino;
    let big = fs
        .mknod(a, b"big", FileKind::Regular, 0o644, 0, ME)
        .unwrap()
        .ino;
    fs.write(big, Some(0), &vec![7u8; 5 * 4096 + 10], false)
        .unwrap();
    let small = fs
        .mknod(ROOT_INO, b"small", FileKind::Regular, 0o644, 0, ME)
        .unwrap()
        .ino;
    fs.write(small, Some(0), b"hello", false).unwrap();
    let other = fs
        .mknod(ROOT_INO, b"other", FileKind::Regular, 0o644, 0, ME)
        .unwrap()
        .ino;
    fs.write(other, Some(0), &[1u8; 100], false).unwrap();
    let linked = fs
        .mknod(b, b"linked", FileKind::Regular, 0o600, 0, ME)
        .unwrap()
        .ino;
    fs.link(linked, ROOT_INO, b"hardlink").unwrap();
    fs.symlink(ROOT_INO, b"short", b"a/big", ME).unwrap();
    fs.symlink(a, b"long", &[b'x'; 300], ME).unwrap();
    fs.mknod(ROOT_INO, b"fifo", FileKind::Fifo, 0o644, 0, ME)
        .unwrap();
    fs.setxattr(small, b"user.tag", b"blue", XattrSet::Either)
        .unwrap();
    // Blocks beyond the size, a punched hole, and a two-level sparse map.
    let keep_size = FallocMode::Allocate { keep_size: true };
    fs.fallocate(other, 8192, 8192, keep_size).unwrap();
    fs.fallocate(big, 4096, 2 * 4096, FallocMode::PunchHole)
        .unwrap();
    let sparse = fs
        .mknod(a, b"sparse", FileKind::Regular, 0o644, 0, ME)
        .unwrap()
        .ino;
    fs.write(sparse, Some(600 * 4096), b"far", false).unwrap();
    let gone = fs
        .mknod(ROOT_INO, b"gone", FileKind::Regular, 0o644, 0, ME)
        .unwrap()
        .ino;
    fs.write(gone, Some(0), &[2u8; 9000], false).unwrap();
    fs.unlink(ROOT_INO, b"gone").unwrap();
    fs.mkdir(ROOT_INO, b"c", 0o755, ME).unwrap();
    fs.rename(ROOT_INO, b"c", b, b"moved", RenameMode::Replace)
        .unwrap();
    fs.unmount().unwrap();
    drop(fs);
    let t = Tree {
        a,
        b,
        big,
        small,
        other,
        linked,
    };
    (dev, t)
}

fn layout<D: PmDevice>(dev: &D) -> Layout {
    read_superblock(dev).unwrap().layout
}

fn inode<D: PmDevice>(dev: &D, ino: u64) -> Inode {
    let mut b = [0u8; INODE_SIZE];
    dev.read(layout(dev).inode_offset(ino), &mut b);
    Inode::decode(&b)
}

fn put_inode<D: PmDevice>(dev: &D, ino: u64, i: &Inode) {
    dev.write_persist(layout(dev).inode_offset(ino), &i.encode())
        .unwrap();
}

/// Byte offset of the entry `name` in a one-block directory.
fn entry_off<D: PmDevice>(dev: &D, dir: u64, name: &[u8]) -> (u64, dirent::Dirent) {
    let d = inode(dev, dir);
    assert_eq!(d.map_height, 0, "one-block directory");
    let off = d.map_root * BLOCK_SIZE;
    let mut block = vec![0u8; BLOCK_SIZE as usize];
    dev.read(off, &mut block);
    let mut slot = 0;
    while slot < dirent::SLOTS_PER_BLOCK {
        match dirent::decode(&block, slot).unwrap() {
            Some(e) if e.name == name => return (off + slot as u64 * 64, e),
            Some(e) => slot += e.nslots,
            None => slot += 1,
        }
    }
    panic!("no entry {name:?}");
}

/// Checks, expects an error mentioning `words`, repairs, and expects the
/// repaired pool to check clean and mount.
fn damage_is_repaired(dev: &Arc<MmapDevice>, words: &str) -> CheckReport {
    let r = check(&**dev, &CHECK).unwrap();
    assert_eq!(r.exit_code(), 4, "{r}");
    assert!(
        errors(&r).iter().any(|w| w.contains(words)),
        "no error saying {words:?}:\n{r}"
    );
    let fixed = check(&**dev, &REPAIR).unwrap();
    assert_eq!(fixed.exit_code(), 1, "{fixed}");
    assert!(fixed
        .problems
        .iter()
        .any(|p| p.severity == Severity::Repaired && p.what.contains(words)));
    let again = check(&**dev, &CHECK).unwrap();
    assert!(again.is_clean(), "not clean after repair:\n{again}");
    assert_eq!(again.exit_code(), 0);
    let (fs, _) = mount(dev.clone(), direct()).unwrap();
    fs.unmount().unwrap();
    drop(fs);
    assert!(check(&**dev, &CHECK).unwrap().is_clean());
    fixed
}

#[test]
fn fresh_pool_is_clean() {
    let dev = MmapDevice::anonymous(1 << 20, &MapOptions::default()).unwrap();
    format(&dev, &params(1 << 20)).unwrap();
    let r = check(&dev, &CHECK).unwrap();
    assert!(r.problems.is_empty(), "{r}");
    assert_eq!(r.exit_code(), 0);
    assert!(r.was_clean);
    assert_eq!((r.inodes_in_use, r.directories, r.files), (1, 1, 0));
    assert_eq!(r.blocks_in_use, 0);
    assert_eq!(r.blocks_free, layout(&dev).data_blocks());
}

#[test]
fn populated_pool_is_clean_in_both_modes() {
    let (dev, _) = populated(1 << 20);
    for opts in [CHECK, REPAIR, CHECK] {
        let r = check(&*dev, &opts).unwrap();
        assert!(r.problems.is_empty(), "{r}");
        assert_eq!(r.exit_code(), 0);
        // root, a, b, moved; big, small, other, linked, sparse; 2 symlinks, fifo
        assert_eq!((r.inodes_in_use, r.directories, r.files), (12, 4, 5));
        assert!(r.blocks_in_use >= 12, "{r}");
    }
}

#[test]
fn unparseable_pools_are_errors_not_reports() {
    let dev = MmapDevice::anonymous(1 << 20, &MapOptions::default()).unwrap();
    assert!(check(&dev, &CHECK).is_err(), "zeroed device has no magic");
    format(&dev, &params(1 << 20)).unwrap();
    let image = read_all(&dev);
    let short = OverlayDevice::new(Arc::new(image[..512 * 1024].to_vec()));
    assert!(check(&short, &CHECK).is_err(), "truncated pool");
}

#[test]
fn wrong_link_count() {
    let (dev, t) = populated(1 << 20);
    let mut i = inode(&*dev, t.linked);
    i.nlink = 5;
    put_inode(&*dev, t.linked, &i);
    damage_is_repaired(&dev, "has link count 5 but should have 2");
    assert_eq!(inode(&*dev, t.linked).nlink, 2);
}

/// A name is any bytes but '/' and NUL: a report shows it escaped, on
/// one line (amber_core::Escaped), never raw.
#[test]
fn reports_show_names_escaped() {
    let dev = Arc::new(MmapDevice::anonymous(1 << 20, &MapOptions::default()).unwrap());
    format(&*dev, &params(1 << 20)).unwrap();
    let (fs, _) = mount(dev.clone(), direct()).unwrap();
    let ino = fs
        .mknod(ROOT_INO, b"we\nird\xff", FileKind::Regular, 0o644, 0, ME)
        .unwrap()
        .ino;
    fs.unmount().unwrap();
    drop(fs);
    let mut i = inode(&*dev, ino);
    i.nlink = 3;
    put_inode(&*dev, ino, &i);
    damage_is_repaired(&dev, "(/we\\nird\\xff) has link count 3 but should have 1");
}

#[test]
fn bad_dirent_checksum() {
    let (dev, t) = populated(1 << 20);
    let (off, _) = entry_off(&*dev, ROOT_INO, b"hardlink");
    dev.write_persist(off + 17, b"X").unwrap();
    damage_is_repaired(&dev, "checksum mismatch");
    // The zeroed entry took one of the file's two links.
    assert_eq!(inode(&*dev, t.linked).nlink, 1);
}

#[test]
fn entry_naming_a_free_inode() {
    let (dev, t) = populated(1 << 20);
    let (off, e) = entry_off(&*dev, ROOT_INO, b"other");
    let bad = dirent::encode(60, e.dtype, &e.name);
    dev.write_persist(off, &bad).unwrap();
    let r = damage_is_repaired(&dev, "names inode 60, which is free");
    // With its only entry gone, the file is unreachable: freed.
    assert!(r
        .problems
        .iter()
        .any(|p| p.what.contains(&format!("inode {} (Regular", t.other))));
    assert!(!inode(&*dev, t.other).in_use());
}

#[test]
fn saved_bitmap_wrong() {
    let (dev, t) = populated(1 << 20);
    let l = layout(&*dev);
    let b = inode(&*dev, t.small).map_root;
    let off = l.bitmap_start * BLOCK_SIZE + b / 8;
    let mut byte = [0u8];
    dev.read(off, &mut byte);
    byte[0] &= !(1 << (b % 8));
    dev.write_persist(off, &byte).unwrap();
    damage_is_repaired(&dev, "in use are marked free");
}

#[test]
fn one_superblock_copy_smashed() {
    for copy in [0u64, 1] {
        let (dev, _) = populated(1 << 20);
        dev.write_persist(copy * BLOCK_SIZE + 40, &[0xAB; 64])
            .unwrap();
        damage_is_repaired(&dev, "superblock copy");
    }
}

#[test]
fn bad_map_pointer() {
    let (dev, t) = populated(1 << 20);
    let i = inode(&*dev, t.big);
    assert_eq!(i.map_height, 1);
    // Entry 4 of the leaf node points into the inode table.
    dev.write_persist(i.map_root * BLOCK_SIZE + 32, &5u64.to_le_bytes())
        .unwrap();
    let r = damage_is_repaired(&dev, "points at block 5, outside the data area");
    // Fixing the pointer also fixes what depends on it.
    assert!(r.problems.iter().any(|p| p.what.contains("block(s)")));
    let (fs, _) = mount(dev.clone(), direct()).unwrap();
    let mut buf = vec![1u8; 4096];
    fs.read(t.big, 4 * 4096, &mut buf).unwrap();
    assert_eq!(buf, vec![0u8; 4096], "the cleared block reads as a hole");
}

#[test]
fn block_owned_twice_is_left_uncorrected() {
    let (dev, t) = populated(1 << 20);
    let mut i = inode(&*dev, t.other);
    i.map_root = inode(&*dev, t.small).map_root;
    put_inode(&*dev, t.other, &i);
    let r = check(&*dev, &REPAIR).unwrap();
    let msg = format!(
        "is owned by inode {} and inode {}; left uncorrected",
        t.small, t.other
    );
    assert!(errors(&r).iter().any(|w| w.contains(&msg)), "{r}");
    assert_eq!(r.exit_code(), 4);
    let again = check(&*dev, &CHECK).unwrap();
    assert_eq!(errors(&again).len(), 1, "{again}");
}

#[test]
fn unreachable_directory_is_freed_with_its_subtree() {
    let (dev, t) = populated(1 << 20);
    let (off, e) = entry_off(&*dev, ROOT_INO, b"a");
    dev.write_persist(off, &vec![0u8; e.nslots * 64]).unwrap();
    let r = check(&*dev, &CHECK).unwrap();
    assert!(errors(&r)
        .iter()
        .any(|w| w.contains(&format!("inode {} (Directory", t.a))));
    let fixed = check(&*dev, &REPAIR).unwrap();
    assert_eq!(fixed.exit_code(), 1, "{fixed}");
    assert!(!inode(&*dev, t.a).in_use());
    assert!(!inode(&*dev, t.big).in_use());
    // Reachable through /hardlink, so kept, with one link.
    assert_eq!(inode(&*dev, t.linked).nlink, 1);
    assert!(check(&*dev, &CHECK).unwrap().is_clean());
    mount(dev, direct()).unwrap();
}

#[test]
fn directory_cycle_cut_off_from_the_root() {
    let (dev, t) = populated(1 << 20);
    // /a/b/loop -> /a, and /a's own entry gone: a and b only reach each other.
    let (off, e) = entry_off(&*dev, ROOT_INO, b"a");
    dev.write_persist(off, &vec![0u8; e.nslots * 64]).unwrap();
    let b_block = inode(&*dev, t.b).map_root * BLOCK_SIZE;
    let looped = dirent::encode(t.a, FileKind::Directory.dtype(), b"loop");
    dev.write_persist(b_block + 40 * 64, &looped).unwrap();
    let r = check(&*dev, &CHECK).unwrap();
    let errs = errors(&r);
    assert!(
        errs.iter()
            .any(|w| w.contains(&format!("directory inode {} has parent field 1", t.a))),
        "{r}"
    );
    for ino in [t.a, t.b] {
        let words = format!("inode {ino} (Directory, link count");
        assert!(errs.iter().any(|w| w.contains(&words)), "{r}");
    }
    assert_eq!(check(&*dev, &REPAIR).unwrap().exit_code(), 1);
    assert!(!inode(&*dev, t.a).in_use() && !inode(&*dev, t.b).in_use());
    assert!(check(&*dev, &CHECK).unwrap().is_clean());
    mount(dev, direct()).unwrap();
}

#[test]
fn bad_attribute_block() {
    let (dev, t) = populated(1 << 20);
    let b = inode(&*dev, t.small).xattr_block;
    assert_ne!(b, 0);
    dev.write_persist(b * BLOCK_SIZE + 20, b"?").unwrap();
    damage_is_repaired(&dev, "attribute block fails its checksum");
    assert_eq!(inode(&*dev, t.small).xattr_block, 0);
}

/// Immutable and append-only are flags a pool may hold; any other bit
/// of the field is reported and cleared, the known ones kept.
#[test]
fn unknown_inode_flags() {
    use amber_format::inode::flags::{APPEND, IMMUTABLE};
    let (dev, t) = populated(1 << 20);
    let mut i = inode(&*dev, t.small);
    i.flags = IMMUTABLE | APPEND;
    put_inode(&*dev, t.small, &i);
    assert!(check(&*dev, &CHECK).unwrap().is_clean());
    i.flags |= 0x4000_0100;
    put_inode(&*dev, t.small, &i);
    damage_is_repaired(&dev, "flags 0x40000100, which have no meaning");
    assert_eq!(inode(&*dev, t.small).flags, IMMUTABLE | APPEND);
}

#[test]
fn wrong_type_and_dirty_free_slot() {
    let (dev, _) = populated(1 << 20);
    let (off, e) = entry_off(&*dev, ROOT_INO, b"fifo");
    let bad = dirent::encode(e.ino, FileKind::Socket.dtype(), &e.name);
    dev.write_persist(off, &bad).unwrap();
    damage_is_repaired(&dev, "is a Fifo");
    let root = inode(&*dev, ROOT_INO);
    dev.write_persist(root.map_root * BLOCK_SIZE + 63 * 64 + 30, b"z")
        .unwrap();
    damage_is_repaired(&dev, "free slot holds non-zero bytes");
}

fn commit_tx<D: PmDevice>(dev: &D, entries: &[Entry]) {
    let l = layout(dev);
    let payload = encode_payload(entries);
    let header = encode_header(99, entries.len() as u32, &payload);
    let base = l.journal_offset(1);
    dev.write_persist(base + 64, &payload).unwrap();
    dev.write_persist(base, &header).unwrap();
}

#[test]
fn crashed_pool_is_judged_after_replay() {
    let (dev, t) = populated(1 << 20);
    // Crash while mounted, with a committed transaction that sets a link
    // count which is not yet in place.
    let (fs, _) = mount(dev.clone(), direct()).unwrap();
    drop(fs);
    let mut i = inode(&*dev, t.small);
    let l = layout(&*dev);
    commit_tx(
        &*dev,
        &[Entry {
            offset: l.inode_offset(t.small),
            data: i.encode().to_vec(),
        }],
    );
    i.nlink = 9;
    put_inode(&*dev, t.small, &i);
    let r = check(&*dev, &CHECK).unwrap();
    assert!(r.is_clean(), "{r}");
    assert!(!r.was_clean);
    assert_eq!(r.journal_transactions_pending, 1);
    assert!(r.problems[0].what.contains("needs recovery: 1 journal"));
    let r = check(&*dev, &REPAIR).unwrap();
    assert_eq!(r.exit_code(), 0, "{r}");
    assert_eq!(inode(&*dev, t.small).nlink, 1);
    assert_eq!(
        check(&*dev, &CHECK).unwrap().journal_transactions_pending,
        0
    );
    mount(dev, direct()).unwrap();
}

#[test]
fn committed_transaction_in_a_clean_pool() {
    let (dev, t) = populated(1 << 20);
    let l = layout(&*dev);
    commit_tx(
        &*dev,
        &[Entry {
            offset: l.inode_offset(t.small),
            data: inode(&*dev, t.small).encode().to_vec(),
        }],
    );
    assert!(mount(dev.clone(), direct()).is_err());
    damage_is_repaired(&dev, "marked cleanly unmounted");
}

#[test]
fn orphans_and_crash_block_counts_are_notes() {
    let (dev, t) = populated(1 << 20);
    let (fs, _) = mount(dev.clone(), direct()).unwrap();
    fs.open(t.other).unwrap();
    fs.unlink(ROOT_INO, b"other").unwrap();
    drop(fs);
    let mut i = inode(&*dev, t.small);
    i.blocks = 3;
    put_inode(&*dev, t.small, &i);
    let r = check(&*dev, &CHECK).unwrap();
    assert!(r.is_clean(), "{r}");
    assert_eq!(r.problems.len(), 2, "{r}");
    assert!(r.problems[1]
        .what
        .contains(&format!("orphan inode {} (unlinked while open)", t.other)));
    let (_, rep) = mount(dev, direct()).unwrap();
    assert_eq!(rep.orphans_freed, 1);
}

fn read_all<D: PmDevice>(dev: &D) -> Vec<u8> {
    let mut image = vec![0u8; dev.size() as usize];
    dev.read(0, &mut image);
    image
}

/// Rewrites inode `ino`'s attribute block with `edit` applied to its list.
fn edit_xattrs<D: PmDevice>(dev: &D, ino: u64, edit: impl FnOnce(&mut Vec<xattr::Xattr>)) {
    let b = inode(dev, ino).xattr_block;
    assert_ne!(b, 0);
    let mut block = vec![0u8; BLOCK_SIZE as usize];
    dev.read(b * BLOCK_SIZE, &mut block);
    let mut attrs = xattr::decode(&block).unwrap();
    edit(&mut attrs);
    dev.write_persist(b * BLOCK_SIZE, &xattr::encode(&attrs).unwrap())
        .unwrap();
}

/// A pool whose `small` has an access ACL (named user 7) and whose `a`
/// has a default ACL.
fn with_acls() -> (Arc<MmapDevice>, Tree) {
    let (dev, t) = populated(1 << 20);
    let (fs, _) = mount(dev.clone(), direct()).unwrap();
    let access = from_text("u::rw-,u:7:rw-,g::r--,m::r--,o::r--").unwrap();
    fs.set_acl(t.small, ACCESS_XATTR, &access.encode(), false)
        .unwrap();
    let default = from_text("u::rwx,g::r-x,o::---").unwrap();
    fs.set_acl(t.a, DEFAULT_XATTR, &default.encode(), false)
        .unwrap();
    fs.unmount().unwrap();
    drop(fs);
    assert!(check(&*dev, &CHECK).unwrap().is_clean());
    (dev, t)
}

#[test]
fn an_acl_that_is_not_one_is_removed() {
    let (dev, t) = with_acls();
    edit_xattrs(&*dev, t.small, |attrs| {
        let a = attrs.iter_mut().find(|a| a.name == ACCESS_XATTR).unwrap();
        a.value.truncate(a.value.len() - 3);
    });
    damage_is_repaired(&dev, "posix_acl_access: ACL value is not a header");
    let (fs, _) = mount(dev.clone(), direct()).unwrap();
    assert!(!fs.has_acl(t.small).unwrap());
    assert_eq!(fs.getxattr(t.small, b"user.tag").unwrap(), b"blue");
    assert_eq!(fs.getattr(t.small).unwrap().perm, 0o644);
}

#[test]
fn an_access_acl_out_of_step_with_the_mode_follows_the_mode() {
    let (dev, t) = with_acls();
    let mut i = inode(&*dev, t.small);
    i.mode = (i.mode & !0o777) | 0o600;
    put_inode(&*dev, t.small, &i);
    damage_is_repaired(&dev, "grants 644 but the mode says 600");
    let (fs, _) = mount(dev.clone(), direct()).unwrap();
    let v = fs.getxattr(t.small, ACCESS_XATTR).unwrap();
    let acl = amber_format::acl::decode(&v).unwrap().unwrap();
    assert_eq!(to_text(&acl), "u::rw-,u:7:rw-,g::r--,m::---,o::---");
}

#[test]
fn a_default_acl_on_a_file_is_removed() {
    let (dev, t) = with_acls();
    let default = from_text("u::rwx,g::r-x,o::---").unwrap().encode();
    edit_xattrs(&*dev, t.small, |attrs| {
        attrs.push(xattr::Xattr {
            name: DEFAULT_XATTR.to_vec(),
            value: default,
        });
    });
    damage_is_repaired(&dev, "posix_acl_default: a Regular cannot hold it");
}
