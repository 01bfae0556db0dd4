//! The single-threaded driver: one pool on an anonymous mapping, one
//! model, and the two kinds of remount (clean, and "crash": the `Fs` is
//! dropped without unmount, so the next mount runs recovery).

use super::apply::{compare, first_diff, to_e};
use super::check::check_tree;
use super::ops::{pattern, Op, SLOTS};
use super::tree::{Body, Id, Tree};
use amber_core::{File, Fs, MountOptions, OpenOptions};
use amber_format::FormatParams;
use amber_pmem::{MapOptions, MmapDevice};

/// Mount options naming `policy`, which may carry options of its own
/// after a comma (`amber,amber_buffer=always`); a buffering policy (hinfs
/// and its variants) buffers whatever the device's calibration says, so
/// the model exercises the buffer.
pub fn options(policy: &str) -> MountOptions {
    let extra = if policy.starts_with("hinfs") {
        ",buffering=always"
    } else {
        ""
    };
    MountOptions::parse(&format!("policy={policy}{extra}")).expect("known policy")
}

/// A freshly formatted pool of `size` bytes, mounted with `policy`.
pub fn fresh_fs(size: u64, policy: &str) -> Fs<MmapDevice> {
    let dev = MmapDevice::anonymous(size, &MapOptions::default()).expect("anonymous mapping");
    let params = FormatParams {
        layout: amber_core::data::layout_for(&options(policy)),
        ..FormatParams::for_size(size)
    };
    Fs::format(&dev, &params).expect("format");
    Fs::mount(dev, options(policy)).expect("mount").0
}

/// Unmounts (cleanly or not) and mounts the same device again. The caller
/// must hold no other clone of `fs` and no open `File`. Besides the
/// recovery report, checks that free block and inode counts survive: the
/// allocators are rebuilt from metadata on mount, so a difference is a
/// leak (or a double use) on one side.
///
/// A policy that buffers writes in DRAM promises only fsync'd data after
/// a crash, and the model has no notion of "older but durable" contents:
/// under such a policy every file is synced before a crash remount (the
/// crash tests in amber-crash check un-fsync'd crash states). It also
/// allocates PM blocks only at write-back, so the free counts compared
/// are taken after that sync (unmount would do it anyway).
pub fn remount(fs: Fs<MmapDevice>, clean: bool, policy: &str) -> Result<Fs<MmapDevice>, String> {
    if !fs.core().policy_durable_on_return() {
        fs.core()
            .sync_all()
            .map_err(|e| format!("sync before remounting: {e:?}"))?;
    }
    let before = fs.statfs();
    // A write-back thread in the middle of a pass holds the core (and the
    // device) until the pass ends.
    let dev = fs
        .into_device(clean, std::time::Duration::from_secs(10))
        .map_err(|e| e.to_string())?;
    let (fs, rep) = Fs::mount(dev, options(policy)).map_err(|e| format!("mount: {e:?}"))?;
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
    /// Open handles and the model node each keeps alive. Declared before
    /// `fs` only for clarity: they are closed explicitly before remounts.
    handles: [Option<(File<MmapDevice>, Id)>; SLOTS],
    fs: Option<Fs<MmapDevice>>,
    pub tree: Tree,
    /// Operations applied so far, for failure messages.
    pub done: Vec<Op>,
    policy: &'static str,
}

impl Harness {
    pub fn new(size: u64, policy: &'static str) -> Harness {
        let fs = fresh_fs(size, policy);
        let root = fs.metadata("/").expect("root").permissions().mode();
        Harness {
            handles: Default::default(),
            fs: Some(fs),
            tree: Tree::new(root),
            done: Vec::new(),
            policy,
        }
    }

    pub fn fs(&self) -> &Fs<MmapDevice> {
        self.fs.as_ref().expect("mounted")
    }

    /// Applies one operation to both sides; a remount is followed by a
    /// whole-tree comparison.
    // Tests are exempt from the 80-line limit: one arm per operation.
    #[allow(clippy::too_many_lines)]
    pub fn step(&mut self, op: &Op) -> Result<(), String> {
        self.done.push(op.clone());
        match op {
            Op::Remount | Op::CrashRemount => {
                // A handle holds a clone of the Fs: close them all first.
                for slot in 0..SLOTS {
                    self.close(slot);
                }
                let fs = self.fs.take().expect("mounted");
                self.fs = Some(remount(fs, *op == Op::Remount, self.policy)?);
                self.check()
            }
            Op::Open { path, slot } => {
                self.close(*slot);
                let a = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(self.fs(), path)
                    .map_err(to_e);
                let m = self.tree.open(path);
                match (a, m) {
                    (Ok(f), Ok(id)) => {
                        self.handles[*slot] = Some((f, id));
                        Ok(())
                    }
                    (Err(a), Err(m)) if a == m => Ok(()),
                    (a, m) => {
                        if let Ok(id) = m {
                            self.tree.close(id);
                        }
                        Err(format!(
                            "{op:?}\n  amber: {:?}\n  model: {m:?}",
                            a.map(|_| ())
                        ))
                    }
                }
            }
            Op::HWrite {
                slot,
                off,
                len,
                fill,
            } => {
                let Some((f, id)) = &self.handles[*slot] else {
                    return Ok(());
                };
                let data = pattern(*len, *fill);
                let a = f.write_at(&data, *off).map_err(to_e);
                let m = self.tree.write_id(*id, *off, &data);
                if a != Ok(m) {
                    return Err(format!("{op:?}: amber {a:?}, model Ok({m})"));
                }
                Ok(())
            }
            Op::HRead { slot } => {
                let Some((f, id)) = &self.handles[*slot] else {
                    return Ok(());
                };
                let Body::File(want) = &self.tree.node(*id).body else {
                    unreachable!("handles are opened on files")
                };
                let meta = f
                    .metadata()
                    .map_err(|e| format!("{op:?}: metadata {e:?}"))?;
                let mut got = vec![0u8; want.len() + 100];
                let n = f
                    .read_at(&mut got, 0)
                    .map_err(|e| format!("{op:?}: read {e:?}"))?;
                got.truncate(n);
                let links = self.tree.node(*id).links;
                if meta.len() != want.len() as u64 || meta.attr().nlink != links {
                    return Err(format!(
                        "{op:?}: size {} nlink {}, model {} and {links}",
                        meta.len(),
                        meta.attr().nlink,
                        want.len()
                    ));
                }
                if let Some(i) = first_diff(&got, want) {
                    return Err(format!("{op:?}: contents differ at byte {i}"));
                }
                Ok(())
            }
            Op::Close { slot } => {
                self.close(*slot);
                Ok(())
            }
            _ => compare(self.fs.as_ref().expect("mounted"), "", &mut self.tree, op),
        }
    }

    /// Closes handle `slot` on both sides, if open.
    fn close(&mut self, slot: usize) {
        if let Some((f, id)) = self.handles[slot].take() {
            drop(f);
            self.tree.close(id);
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
        for (i, op) in ops.iter().enumerate() {
            self.step(op).map_err(|e| self.report(&e))?;
            // A whole-tree check now and then catches damage to entries
            // no later operation happens to look at.
            if i % 50 == 49 {
                self.check()
                    .map_err(|e| self.report(&format!("periodic check: {e}")))?;
            }
        }
        for slot in 0..SLOTS {
            self.close(slot);
        }
        self.check()
            .map_err(|e| self.report(&format!("final check: {e}")))?;
        self.step(&Op::Remount)
            .map_err(|e| self.report(&format!("final remount: {e}")))
    }
}
