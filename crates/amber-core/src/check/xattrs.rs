//! An inode's attributes: a block or a run (format::xattr) inside the
//! data area, owned by no one else, that decodes with a valid checksum,
//! and whose ACLs are sound (`acls.rs`). A head or run that cannot be
//! trusted is detached by repair (its attributes are lost, its blocks go
//! back to the free space), never guessed at.

use super::acls::check_acls;
use super::inodes::Owners;
use super::repair::inode_off;
use super::Ctx;
use amber_format::xattr;
use amber_format::{FileKind, BLOCK_SIZE};
use amber_pmem::PmDevice;

/// Byte offset of the xattr-block field.
const OFF_XATTR: u64 = amber_format::inode::OFF_XATTR as u64;

/// Validates and claims the attributes of inode `ino` (a kind with a mode,
/// for its ACLs) that start at block `b`; returns the blocks it owns.
pub(super) fn check_xattr<D: PmDevice>(
    cx: &mut Ctx<'_, D>,
    owners: &mut Owners,
    ino: u64,
    kind_mode: (FileKind, u32),
    b: u64,
) -> Vec<u64> {
    if b == 0 {
        return Vec::new();
    }
    if !cx.layout.is_data_block(b) {
        let why = format!("inode {ino} has attribute block {b}, outside the data area");
        detach(cx, ino, why);
        return Vec::new();
    }
    if let Some(&first) = owners.get(&b) {
        cx.unfixable(format!(
            "block {b} (attribute block of inode {ino}) is also owned by inode {first}"
        ));
        return Vec::new();
    }
    owners.insert(b, ino);
    let n = match xattr::blocks_of(&cx.media.block(b)) {
        Ok(n) => n,
        Err(e) => return detach_owned(cx, ino, format!("inode {ino}: {e} (block {b})"), vec![b]),
    };
    let run: Vec<u64> = (b..b + n).collect();
    if let Some(&x) = run.iter().find(|&&x| !cx.layout.is_data_block(x)) {
        let why = format!(
            "inode {ino}'s attribute run from block {b} has block {x} outside the data area"
        );
        return detach_owned(cx, ino, why, vec![b]);
    }
    if let Some((x, first)) = run[1..]
        .iter()
        .find_map(|x| owners.get(x).map(|f| (*x, *f)))
    {
        cx.unfixable(format!(
            "block {x} (attribute run of inode {ino}) is also owned by inode {first}"
        ));
        return vec![b];
    }
    run[1..].iter().for_each(|&x| {
        owners.insert(x, ino);
    });
    let mut buf = vec![0u8; (n * BLOCK_SIZE) as usize];
    cx.media.read(b * BLOCK_SIZE, &mut buf);
    match xattr::decode(&buf) {
        Err(e) => detach_owned(cx, ino, format!("inode {ino}: {e} (block {b})"), run),
        Ok(attrs) => {
            check_acls(cx, ino, kind_mode, &run, &attrs);
            run
        }
    }
}

/// Reports `why`; repair clears the inode's attribute field.
fn detach<D: PmDevice>(cx: &mut Ctx<'_, D>, ino: u64, why: String) {
    let off = inode_off(&cx.layout, ino) + OFF_XATTR;
    cx.fixable(
        why,
        "the attribute block is detached (its attributes are lost)",
        |f| f.zero(off, 8),
    );
}

/// The same for blocks the inode owns on media: until repair detaches
/// them they stay its own.
fn detach_owned<D: PmDevice>(
    cx: &mut Ctx<'_, D>,
    ino: u64,
    why: String,
    owned: Vec<u64>,
) -> Vec<u64> {
    detach(cx, ino, why);
    if cx.repair {
        Vec::new()
    } else {
        owned
    }
}
