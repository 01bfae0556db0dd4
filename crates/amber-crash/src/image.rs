//! Checking one crash image: recover it, read its state, check its
//! metadata, and prove it can be used, each on its own copy-on-write
//! overlay so the workload's pool is never touched.
//!
//! Order, and why: fsck the raw crash image first (a user may well run
//! fsck before mounting after a crash; it must see only what mount
//! repairs by design, such as a committed journal or an orphan, never an
//! error), then mount (recovery must succeed), capture the state, then
//! unmount cleanly and run fsck on the unmounted image. fsck judges the
//! image exactly as recovery left it plus a clean unmount, which is what a
//! user's next mount sees, and it never races a mounted core's caches.
//! Only then is the pool mounted again and used (create, write, read back,
//! delete everything), so usability problems are not mistaken for recovery
//! ones.

use crate::exec::OWNER;
use crate::state::{capture, FsState};
use amber_core::check::{self, CheckOptions};
use amber_core::fs::mount;
use amber_core::{Core, MountOptions};
use amber_format::{FileKind, ROOT_INO};
use amber_pmem::PmDevice;
use amber_sim::rng;
use amber_sim::OverlayDevice;
use std::sync::Arc;

/// Name of the file the usability probe creates.
const PROBE: &[u8] = b".crash-probe";
/// Deepest directory the clean-up descends into; a test tree is far
/// shallower, so hitting it means a cycle.
const MAX_DEPTH: usize = 256;

/// fsck without repair. After a clean unmount the pool must also say so,
/// which fsck alone reports only as a note.
fn fsck<D: PmDevice>(dev: &D, unmounted: bool) -> Result<(), String> {
    let rep = check::check(dev, &CheckOptions { repair: false }).map_err(|e| e.to_string())?;
    if !rep.is_clean() {
        let problems: Vec<String> = rep.problems.iter().map(|p| p.to_string()).collect();
        return Err(problems.join("; "));
    }
    if unmounted && !rep.was_clean {
        return Err("the unmounted pool is not marked clean".into());
    }
    Ok(())
}

/// Recovers `dev` by mounting it with `opts` (for every mount here),
/// returns its state, and checks it with fsck and the usability probe.
/// Any error names the stage that failed.
pub fn check(dev: Arc<OverlayDevice>, opts: &MountOptions) -> Result<FsState, String> {
    fsck(&*dev, false).map_err(|e| format!("fsck before recovery: {e}"))?;
    let (fs, _) = mount(Arc::clone(&dev), opts.clone()).map_err(|e| format!("recovery: {e}"))?;
    let state = capture(&fs).map_err(|e| format!("reading the recovered tree: {e}"))?;
    fs.unmount()
        .map_err(|e| format!("unmount after recovery: {e}"))?;
    drop(fs);
    fsck(&*dev, true).map_err(|e| format!("fsck after recovery: {e}"))?;
    prove_usable(dev, opts).map_err(|e| format!("using the recovered pool: {e}"))?;
    Ok(state)
}

/// Chipmunk's last step: a recovered pool must take new files and give
/// every inode back when everything is deleted.
fn prove_usable(dev: Arc<OverlayDevice>, opts: &MountOptions) -> Result<(), String> {
    let (fs, rep) = mount(dev, opts.clone()).map_err(|e| format!("remount: {e}"))?;
    if !rep.was_clean {
        return Err("the remount after a clean unmount needed recovery".into());
    }
    let f = fs
        .mknod(ROOT_INO, PROBE, FileKind::Regular, 0o644, 0, OWNER)
        .map_err(|e| format!("create: {e}"))?;
    let data = rng::bytes(0xC0DE, 5000);
    fs.write(f.ino, Some(0), &data, false)
        .map_err(|e| format!("write: {e}"))?;
    let mut back = vec![0u8; data.len()];
    let n = fs
        .read(f.ino, 0, &mut back)
        .map_err(|e| format!("read: {e}"))?;
    if n != data.len() || back != data {
        return Err("the probe file read back differently".into());
    }
    remove_all(&fs, ROOT_INO, "", 0)?;
    let sf = fs.statfs();
    if sf.inodes_free + 1 != sf.inodes {
        return Err(format!(
            "{} inode(s) still in use after deleting everything",
            sf.inodes - sf.inodes_free - 1
        ));
    }
    fs.unmount().map_err(|e| format!("final unmount: {e}"))
}

/// Deletes everything under directory `dir` (depth-first), clearing
/// immutable and append-only flags first, as a user must (chattr -ia).
fn remove_all<D: PmDevice>(fs: &Core<D>, dir: u64, path: &str, depth: usize) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!("/{path} is deeper than {MAX_DEPTH}: a cycle?"));
    }
    fs.set_flags(dir, 0)
        .map_err(|e| format!("clearing the flags of /{path}: {e}"))?;
    let mut entries = Vec::new();
    fs.readdir(dir, 0, |e| {
        entries.push(e);
        true
    })
    .map_err(|e| format!("readdir /{path}: {e}"))?;
    for e in entries {
        let child = format!("{path}/{}", String::from_utf8_lossy(&e.name));
        if e.kind == FileKind::Directory {
            remove_all(fs, e.ino, &child, depth + 1)?;
            fs.rmdir(dir, &e.name)
                .map_err(|err| format!("rmdir {child}: {err}"))?;
        } else {
            fs.set_flags(e.ino, 0)
                .map_err(|err| format!("clearing the flags of {child}: {err}"))?;
            fs.unlink(dir, &e.name)
                .map_err(|err| format!("unlink {child}: {err}"))?;
        }
    }
    Ok(())
}
