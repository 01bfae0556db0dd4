//! The image target: a base pool (`pools`) damaged as the input says,
//! then fsck, mount, repair and mount again, with the promises of
//! docs/design.md §7.1 as the oracle:
//!
//! * nothing panics, whatever the damage;
//! * a pool fsck calls clean (exit 0) mounts, every file, directory,
//!   symlink and attribute reads, it takes a new file, and it checks
//!   clean once unmounted;
//! * a repair that exits 0 or 1 leaves a pool the next fsck calls clean,
//!   and that pool does all of the above.

use crate::pools::{bases, Base};
use crate::walk;
use amber_core::check::{check, CheckOptions, CheckReport};
use amber_core::{Fs, MountOptions};
use amber_format::{FileKind, ROOT_INO};
use amber_sim::OverlayDevice;
use std::sync::Arc;

const CHECK: CheckOptions = CheckOptions { repair: false };
const REPAIR: CheckOptions = CheckOptions { repair: true };

/// Bytes of one damage in the input: region, kind, offset (4), value,
/// and one spare.
pub const DAMAGE_BYTES: usize = 8;
/// Most damages applied from one input.
const MAX_DAMAGES: usize = 64;
/// A damage whose region byte is this cuts the pool short instead.
pub const TRUNCATE: u8 = 0xff;

/// One input: `data[0]` picks the base pool, then each `DAMAGE_BYTES`
/// bytes damage it (see [`damage`]). Ok, or which promise broke.
pub fn check_case(data: &[u8]) -> Result<(), String> {
    let Some((&pick, rest)) = data.split_first() else {
        return Ok(());
    };
    let bases = bases();
    let base = &bases[pick as usize % bases.len()];
    let mut image = base.image.as_ref().clone();
    let mut done = Vec::new();
    for d in rest.chunks_exact(DAMAGE_BYTES).take(MAX_DAMAGES) {
        let d: &[u8; DAMAGE_BYTES] = d.try_into().expect("whole damages");
        done.push(damage(base, &mut image, d));
    }
    check_image(image, &base.options)
        .map_err(|e| format!("{} pool, {}: {e}", base.name, done.join(", ")))
}

/// Applies one damage: `d[0]` picks the region (or truncation), `d[1]` the
/// kind — set, flip or zero a byte, store a small number in a word (a
/// plausible block or inode number), zero a line or a block — and `d[2..6]`
/// the offset in the region. Says what it did.
fn damage(base: &Base, image: &mut Vec<u8>, d: &[u8; DAMAGE_BYTES]) -> String {
    let at = u32::from_le_bytes([d[2], d[3], d[4], d[5]]) as u64;
    if d[0] == TRUNCATE {
        let cut = ((at % 128 + 1) * 64) as usize;
        let len = image.len().saturating_sub(cut).max(1);
        image.truncate(len);
        return format!("cut to {len} bytes");
    }
    let r = &base.regions[d[0] as usize % base.regions.len()];
    let i = ((r.start + at % r.len.max(1)) as usize).min(image.len() - 1);
    let value = d[6];
    let (what, range) = match d[1] % 8 {
        0..=2 => ("set byte", i..i + 1),
        3 | 4 => ("flipped bits of byte", i..i + 1),
        5 => ("stored a small number at", i & !7..(i & !7) + 8),
        6 => ("zeroed the line of", i & !63..(i & !63) + 64),
        _ => ("zeroed the block of", i & !4095..(i & !4095) + 4096),
    };
    let range = range.start..range.end.min(image.len());
    match d[1] % 8 {
        0..=2 => image[i] = value,
        3 | 4 => image[i] ^= value | 1,
        5 => {
            let n = (value as u64 % 160).to_le_bytes();
            let len = range.len();
            image[range.clone()].copy_from_slice(&n[..len]);
        }
        _ => image[range.clone()].fill(0),
    }
    format!("{what} {i} ({})", r.name)
}

/// The promises above, for one image mounted with `opts`.
pub fn check_image(image: Vec<u8>, opts: &MountOptions) -> Result<(), String> {
    let image = Arc::new(image);
    let report = check(&OverlayDevice::new(Arc::clone(&image)), &CHECK);
    match &report {
        Ok(r) if r.exit_code() == 0 => use_pool(OverlayDevice::new(Arc::clone(&image)), opts)
            .map_err(|e| format!("fsck called the pool clean, yet {e}\nfsck:\n{r}"))?,
        // Whatever fsck found, mount must not panic; it may refuse.
        _ => try_pool(OverlayDevice::new(Arc::clone(&image)), opts),
    }
    let dev = OverlayDevice::new(image);
    let Ok(fixed) = check(&dev, &REPAIR) else {
        return Ok(());
    };
    if fixed.exit_code() >= 4 {
        return Ok(());
    }
    let again = check(&dev, &CHECK).map_err(|e| format!("unreadable after repair: {e}"))?;
    if again.exit_code() != 0 {
        return Err(format!(
            "repair exited {} and left:\n{again}\nrepair said:\n{fixed}",
            fixed.exit_code()
        ));
    }
    use_pool(dev, opts).map_err(|e| format!("after repair, {e}\nrepair said:\n{fixed}"))
}

/// Mounts, walks every file, makes a file, unmounts, and checks again.
fn use_pool(dev: OverlayDevice, opts: &MountOptions) -> Result<(), String> {
    let (fs, _) = Fs::mount(dev, opts.clone()).map_err(|e| format!("mount failed: {e}"))?;
    walk::walk(fs.core()).map_err(|e| format!("the walk failed: {e}"))?;
    probe(&fs).map_err(|e| format!("a new file failed: {e}"))?;
    let dev = Arc::clone(fs.core().device());
    fs.unmount().map_err(|e| format!("unmount failed: {e}"))?;
    let after: CheckReport = check(&*dev, &CHECK).map_err(|e| format!("fsck failed: {e}"))?;
    if after.exit_code() != 0 {
        return Err(format!("fsck after a mount and unmount:\n{after}"));
    }
    Ok(())
}

/// A mount that may fail, of a pool fsck did not call clean: whatever it
/// does it must return, and what it mounts must be walkable or fail with
/// an error.
fn try_pool(dev: OverlayDevice, opts: &MountOptions) {
    if let Ok((fs, _)) = Fs::mount(dev, opts.clone()) {
        let _ = walk::walk(fs.core());
    }
}

/// Creates, writes, reads back and removes a file in the root.
fn probe(fs: &Fs<OverlayDevice>) -> amber_core::Result<()> {
    let core = fs.core();
    let owner = amber_core::Owner::new(0, 0);
    let name = b"fuzz-probe";
    let f = core.mknod(ROOT_INO, name, FileKind::Regular, 0o644, 0, owner)?;
    let data = amber_sim::rng::bytes(0xF022, 5000);
    core.write(f.ino, Some(0), &data, false)?;
    let mut back = vec![0u8; data.len()];
    let n = core.read(f.ino, 0, &mut back)?;
    if n != data.len() || back != data {
        return Err(amber_core::FsError::Corrupted(
            "the probe file read back differently".into(),
        ));
    }
    core.unlink(ROOT_INO, name)
}
