//! The single-threaded driver: one pool on an anonymous mapping, one
//! model, and the two kinds of remount (clean, and "crash": the `Fs` is
//! dropped without unmount, so the next mount runs recovery).

use super::apply::compare;
use super::check::check_tree;
use super::ops::Op;
use super::tree::Tree;
use amber_core::{Fs, MountOptions};
use amber_format::FormatParams;
use amber_pmem::{MapOptions, MmapDevice};
use std::sync::Arc;

/// A freshly formatted and mounted pool of `size` bytes.
pub fn fresh_fs(size: u64) -> Fs<MmapDevice> {
    let dev = MmapDevice::anonymous(size, &MapOptions::default()).expect("anonymous mapping");
    Fs::format(&dev, &FormatParams::for_size(size)).expect("format");
    Fs::mount(dev, MountOptions::default()).expect("mount").0
}

/// Unmounts (cleanly or not) and mounts the same device again. The caller
/// must hold no other clone of `fs` and no open `File`. Besides the
/// recovery report, checks that free block and inode counts survive: the
/// allocators are rebuilt from metadata on mount, so a difference is a
/// leak (or a double use) on one side.
pub fn remount(fs: Fs<MmapDevice>, clean: bool) -> Result<Fs<MmapDevice>, String> {
    let before = fs.statfs();
    let dev = fs.core().device().clone();
    if clean {
        fs.unmount().map_err(|e| format!("unmount: {e:?}"))?;
    } else {
        drop(fs);
    }
    let dev = Arc::try_unwrap(dev).map_err(|_| "device still in use after unmount".to_string())?;
    let (fs, rep) = Fs::mount(dev, MountOptions::default()).map_err(|e| format!("mount: {e:?}"))?;
    if clean && !rep.was_clean {
        return Err(format!("clean unmount, but mount ran recovery: {rep:?}"));
    }
    let after = fs.statfs();
    if (before.blocks_free, before.inodes_free) != (after.blocks_free, after.inodes_free) {
        return Err(format!(
            "{} remount changed free counts: before {before:?}, after {after:?} ({rep:?})",
            if clean { "clean" } else { "crash" }
        ));
    }
    Ok(fs)
}

pub struct Harness {
    fs: Option<Fs<MmapDevice>>,
    pub tree: Tree,
    /// Operations applied so far, for failure messages.
    pub done: Vec<Op>,
}

impl Harness {
    pub fn new(size: u64) -> Harness {
        let fs = fresh_fs(size);
        let root = fs.metadata("/").expect("root").permissions().mode();
        Harness {
            fs: Some(fs),
            tree: Tree::new(root),
            done: Vec::new(),
        }
    }

    pub fn fs(&self) -> &Fs<MmapDevice> {
        self.fs.as_ref().expect("mounted")
    }

    /// Applies one operation to both sides; a remount is followed by a
    /// whole-tree comparison.
    pub fn step(&mut self, op: &Op) -> Result<(), String> {
        self.done.push(op.clone());
        match op {
            Op::Remount | Op::CrashRemount => {
                let fs = self.fs.take().expect("mounted");
                self.fs = Some(remount(fs, *op == Op::Remount)?);
                self.check()
            }
            _ => compare(self.fs.as_ref().expect("mounted"), "", &mut self.tree, op),
        }
    }

    pub fn check(&self) -> Result<(), String> {
        check_tree(self.fs(), "", &self.tree)
    }

    /// A failure message: what went wrong, at which step, after what.
    pub fn report(&self, what: &str) -> String {
        let n = self.done.len();
        let tail = n.saturating_sub(40);
        let mut s = format!("step {}: {what}\nlast operations:\n", n.saturating_sub(1));
        for (i, op) in self.done.iter().enumerate().skip(tail) {
            s += &format!("  {i:4}: {op:?}\n");
        }
        s
    }

    /// Applies `ops`, then compares the whole tree, remounts cleanly and
    /// compares again.
    pub fn run(&mut self, ops: &[Op]) -> Result<(), String> {
        for op in ops {
            self.step(op).map_err(|e| self.report(&e))?;
        }
        self.check()
            .map_err(|e| self.report(&format!("final check: {e}")))?;
        self.step(&Op::Remount)
            .map_err(|e| self.report(&format!("final remount: {e}")))
    }
}
