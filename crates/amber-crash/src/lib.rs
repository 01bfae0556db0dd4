//! Amber's crash-consistency harness, in the manner of Chipmunk: run a
//! workload on the crash simulator's recording device, and at every fence
//! of every operation build the crash images the enumerator picks, recover
//! each on a copy-on-write overlay, and require the recovered pool to
//! (1) mount, (2) pass fsck, (3) show a state the interrupted operation may
//! leave, and (4) take new files and delete everything. `amberfs
//! crashtest` and CI call [`run`].
//!
//! What (3) allows follows from what the mounted policy declares, never
//! from its name: a policy durable on return (`direct`, `cow`, `finelog`,
//! `lawn`) must show exactly the state before or after the operation,
//! except that an interrupted write may tear byte-wise inside its range
//! ([`judge`]); a policy that buffers writes in DRAM (`hinfs`) is judged
//! by what it promises instead ([`History::judge`]); and a policy whose
//! writes are atomic loses the byte-wise allowance: each write's range is
//! all old or all new ([`Landing::Whole`]).
//!
//! The oracle compares with the states the same run observed before and
//! after each op rather than replaying on a fresh pool: the core is
//! deterministic given the ops, so these are the states a replay would
//! give, and inode numbers can be compared too.
#![forbid(unsafe_code)]

mod digest;
mod exec;
mod image;
mod lease;
mod state;
mod workload;

pub use state::{capture, diff, judge, Content, FsState, History, Landing, Node, WriteRange};
pub use workload::{atomic_random, random, Op, Workload, WriteAt, ATOMIC_RANDOM_OPS, RANDOM_OPS};

use amber_core::data::layout_for;
use amber_core::fs::{format_for_replay, mount};
use amber_core::{Core, Durability, MountOptions};
use amber_format::{FormatParams, PoolLayout};
use amber_sim::{enumerate, CrashImage, CrashPoint, EnumConfig, OverlayDevice, RecordingDevice};
use digest::Digest;
use serde::Serialize;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Pool the workloads run on: small so every crash image's recovery scans
/// little, yet big enough for a multi-block file beside a tree.
pub const POOL_SIZE: u64 = 1 << 20;

/// Violations kept in a report; more are counted, not stored, so a badly
/// broken build cannot exhaust memory.
const MAX_KEPT_VIOLATIONS: usize = 1000;
/// Failing images saved per run, for the same reason on disk.
const MAX_SAVED_IMAGES: usize = 20;

/// A small pool, in the layout the policy keeps its files in.
fn format_params(layout: PoolLayout) -> FormatParams {
    FormatParams {
        pool_size: POOL_SIZE,
        inode_count: 64,
        journal_count: 2,
        journal_blocks: 8,
        layout,
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct CrashConfig {
    /// A name from [`workload_names`].
    pub workload: String,
    /// Generates the `random` and `atomic-random` workloads and seeds the
    /// enumerator's sampling (it replaces `enum_config.seed`), so one
    /// number replays a run.
    pub seed: u64,
    pub enum_config: EnumConfig,
    /// Stop checking after this many images in total (quick runs); the
    /// workload still runs to the end.
    pub max_images: Option<u64>,
    /// Where to save failing pre-recovery images (replay one with
    /// `RecordingDevice::from_image` and `amber_core::fs::mount`).
    pub save_dir: Option<PathBuf>,
    /// The data policy the workload runs under. It is judged by what it
    /// declares once mounted: durable on return strictly (before or after,
    /// data torn only inside the interrupted write), buffering by what it
    /// promises ([`History::judge`]), and with atomic writes no tear at
    /// all. A name this build does not know fails the run.
    pub policy: String,
    /// More mount options, comma-separated, appended to `policy=NAME` for
    /// the workload's mount and for every recovery (e.g. a policy's own
    /// sizing, to force eviction on a small pool); empty for none.
    pub mount_options: String,
    /// Recovers every image under this policy (its defaults) instead of
    /// the run's: `direct` after `lawn` makes every recovery fold the
    /// small-write zone back into the files. None: the run's own.
    pub recover_policy: Option<String>,
    /// Judges every write() as atomic even if the policy does not promise
    /// it. Exists only for the harness's self-test: under `direct` it must
    /// report torn writes, proving the atomic-write oracle can fail.
    pub force_atomic_oracle: bool,
}

impl CrashConfig {
    /// Every workload, default enumeration, no cap.
    pub fn new(workload: &str, seed: u64) -> Self {
        CrashConfig {
            workload: workload.to_string(),
            seed,
            enum_config: EnumConfig::default(),
            max_images: None,
            save_dir: None,
            policy: "direct".into(),
            mount_options: String::new(),
            recover_policy: None,
            force_atomic_oracle: false,
        }
    }
}

/// One crash image the oracle rejected.
#[derive(Debug, Clone, Serialize)]
pub struct Violation {
    pub workload: String,
    pub seed: u64,
    pub op_index: usize,
    pub op: String,
    /// Number of the fence (drain) the crash precedes, counted from format.
    pub fence: u64,
    /// Which pending lines persisted, as `line@prefix`.
    pub image: String,
    pub what: String,
    pub saved_image: Option<String>,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "workload {} seed {} op #{} ({}) fence {} image [{}]: {}",
            self.workload, self.seed, self.op_index, self.op, self.fence, self.image, self.what
        )?;
        if let Some(p) = &self.saved_image {
            write!(f, " (saved to {p})")?;
        }
        Ok(())
    }
}

/// Counts for one workload.
#[derive(Debug, Clone, Serialize)]
pub struct WorkloadStats {
    pub workload: String,
    pub ops: usize,
    pub fences: u64,
    pub images_checked: u64,
    pub violations: u64,
    pub elapsed_secs: f64,
    pub images_per_sec: f64,
}

/// The outcome of [`run`].
#[derive(Debug, Clone, Serialize)]
pub struct CrashReport {
    pub seed: u64,
    pub images_checked: u64,
    /// Crash points examined (fences inside ops, plus each op's tail).
    pub fences: u64,
    pub ops: usize,
    /// Up to 1000 violations; `violation_count` counts them all.
    pub violations: Vec<Violation>,
    pub violation_count: u64,
    /// Whether `max_images` stopped checking early.
    pub capped: bool,
    /// How the images were judged, from what the policy declared:
    /// "durable on return" or "buffering", then ", ordered files" for a
    /// buffering policy that keeps each file's changes in order, and
    /// ", atomic writes" when the atomic-write oracle was on; empty if
    /// nothing ran.
    pub oracle: String,
    pub elapsed_secs: f64,
    pub images_per_sec: f64,
    pub workloads: Vec<WorkloadStats>,
    /// A fingerprint (FNV-1a) of every crash point's pending stores and of
    /// each workload's final image, whether checked or not: two runs of
    /// one seed, policy and options give the same one on any machine.
    pub digest: String,
}

impl CrashReport {
    /// Whether no image was rejected.
    pub fn is_clean(&self) -> bool {
        self.violation_count == 0
    }

    /// The report as JSON, for `--json`.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report always serializes")
    }
}

impl fmt::Display for CrashReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for w in &self.workloads {
            writeln!(
                f,
                "{:<9} {:>3} ops {:>5} fences {:>8} images {:>8.0} images/s {:>6.2} s  {}",
                w.workload,
                w.ops,
                w.fences,
                w.images_checked,
                w.images_per_sec,
                w.elapsed_secs,
                if w.violations == 0 {
                    "ok".to_string()
                } else {
                    format!("{} VIOLATION(S)", w.violations)
                }
            )?;
        }
        for v in &self.violations {
            writeln!(f, "VIOLATION: {v}")?;
        }
        if self.violation_count as usize > self.violations.len() {
            writeln!(
                f,
                "... and {} more violation(s)",
                self.violation_count as usize - self.violations.len()
            )?;
        }
        write!(
            f,
            "seed {} (digest {}): {} ops, {} crash points, {} images checked in {:.2} s \
             ({:.0} images/s){}, oracle {}: {}",
            self.seed,
            self.digest,
            self.ops,
            self.fences,
            self.images_checked,
            self.elapsed_secs,
            self.images_per_sec,
            if self.capped { ", capped" } else { "" },
            if self.oracle.is_empty() {
                "none"
            } else {
                &self.oracle
            },
            if self.is_clean() {
                "no violations".to_string()
            } else {
                format!("{} violation(s)", self.violation_count)
            }
        )
    }
}

/// Workload names `run` accepts: every named workload, then `all`.
pub fn workload_names() -> Vec<&'static str> {
    let mut names = workload::NAMES.to_vec();
    names.push("all");
    names
}

/// The ops of workload `name` for `seed` (for display and replay).
pub fn workload(name: &str, seed: u64) -> Option<Workload> {
    workload::named(name, seed)
}

/// Runs the configured workload(s) and checks every crash image.
pub fn run(cfg: &CrashConfig) -> Result<CrashReport, String> {
    let names: Vec<&str> = if cfg.workload == "all" {
        workload::NAMES.to_vec()
    } else {
        vec![cfg.workload.as_str()]
    };
    let mut loaded = Vec::with_capacity(names.len());
    for n in names {
        loaded.push(workload::named(n, cfg.seed).ok_or_else(|| {
            format!(
                "unknown workload {n:?} (known: {})",
                workload_names().join(", ")
            )
        })?);
    }
    run_workloads(cfg, &loaded)
}

/// Runs the given workloads (tests use it for shortened ones).
pub fn run_workloads(cfg: &CrashConfig, workloads: &[Workload]) -> Result<CrashReport, String> {
    let started = Instant::now();
    let mut rep = CrashReport {
        seed: cfg.seed,
        images_checked: 0,
        fences: 0,
        ops: 0,
        violations: Vec::new(),
        violation_count: 0,
        capped: false,
        oracle: String::new(),
        elapsed_secs: 0.0,
        images_per_sec: 0.0,
        workloads: Vec::new(),
        digest: String::new(),
    };
    let mut digest = Digest::default();
    for w in workloads {
        let t = Instant::now();
        let (images, fences, violations) = (rep.images_checked, rep.fences, rep.violation_count);
        Runner {
            cfg,
            w,
            rep: &mut rep,
            digest: &mut digest,
        }
        .run()?;
        let elapsed = t.elapsed().as_secs_f64();
        let images = rep.images_checked - images;
        rep.workloads.push(WorkloadStats {
            workload: w.name.clone(),
            ops: w.ops.len(),
            fences: rep.fences - fences,
            images_checked: images,
            violations: rep.violation_count - violations,
            elapsed_secs: elapsed,
            images_per_sec: per_sec(images, elapsed),
        });
        rep.ops += w.ops.len();
    }
    rep.elapsed_secs = started.elapsed().as_secs_f64();
    rep.images_per_sec = per_sec(rep.images_checked, rep.elapsed_secs);
    rep.digest = digest.hex();
    Ok(rep)
}

/// The mount options of a run: the policy, `buffering=always` (read only
/// by a policy that buffers in DRAM, which then buffers whatever the
/// recording device's calibration says: the buffer is what is under test),
/// the simulated clock (so the timestamps stored, and with them the crash
/// images, depend on the seed alone), `noatime` (the harness reads every
/// file after each op to judge it; under relatime those reads would move
/// atime and make every later fsync persist times the workload never
/// changed, so the paths a user's fsync takes would go untested — the
/// oracle leaves times out anyway), then the configured extras, which may
/// override them.
fn mount_text(cfg: &CrashConfig) -> String {
    let mut text = format!(
        "policy={},buffering=always,clock=simulated,noatime",
        cfg.policy
    );
    if !cfg.mount_options.is_empty() {
        text.push(',');
        text.push_str(&cfg.mount_options);
    }
    text
}

fn per_sec(n: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        n as f64 / secs
    } else {
        0.0
    }
}

/// `line@prefix` for every line an image persisted.
fn describe(point: &CrashPoint, image: &CrashImage) -> String {
    if image.is_nothing_persisted() {
        return "nothing persisted".into();
    }
    image
        .choices()
        .iter()
        .map(|c| {
            let line = &point.lines()[c.slot as usize];
            format!("{}@{}/{}", line.line(), c.prefix, line.stores())
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// What an image is judged against.
struct Judged<'a> {
    before: &'a FsState,
    after: &'a FsState,
    range: Option<&'a WriteRange>,
    /// Under a buffering policy: what the run wrote and made durable.
    history: Option<&'a History>,
    /// The mount options every image is recovered with.
    recover_with: &'a MountOptions,
}

impl Judged<'_> {
    fn judge(&self, got: &FsState) -> Result<(), String> {
        let strict = judge(got, self.before, self.after, self.range);
        match (strict, self.history) {
            (Ok(()), _) => Ok(()),
            (Err(e), None) => Err(e),
            (Err(_), Some(h)) => h.judge(got, self.before, self.after, self.range),
        }
    }
}

/// An op that ran, as the history learns from it.
struct Done<'a> {
    op: &'a Op,
    after: &'a FsState,
    range: Option<&'a WriteRange>,
    handles: &'a exec::Handles,
    /// The policy is durable on return (a run that maps files keeps a
    /// history under it too): each write() is durable when it returns.
    writes_durable: bool,
}

/// Tells a history what `d.op` made durable.
///
/// Per-file durability (user.amberfs.durability): an fsync of a lazy file
/// makes nothing durable, and every write to a sync file is an O_SYNC
/// write. A punch or a zero range, like truncate and fallocate, is durable
/// on return under every policy (design.md §14.2): its zeroed range stays
/// zero. msync makes its mapping's file durable (the workloads store
/// through one mapping of a file at a time); a store through a mapping
/// makes nothing durable and covers what was.
fn note_persisted(h: &mut History, fs: &Core<RecordingDevice>, d: &Done<'_>) {
    let asks = |ino| fs.durability(ino).unwrap_or_default();
    let (op, after, range) = (d.op, d.after, d.range);
    let synced = match op {
        // A leased truncate or allocation is durable on return, and with
        // it every earlier change of the file (the grant persisted it,
        // and each leased write was durable on return).
        Op::Fsync { path } | Op::LeaseTruncate { path, .. } | Op::LeaseAllocate { path, .. } => {
            after
                .nodes
                .get(path.as_str())
                .filter(|n| asks(n.ino) != Durability::Lazy)
                .map(|n| vec![n.ino])
                .unwrap_or_default()
        }
        Op::SyncAll => History::files(after),
        Op::Msync { map } => d.handles.map(*map).map(|m| vec![m.ino]).unwrap_or_default(),
        _ => Vec::new(),
    };
    let sync_range = match op {
        Op::WriteSync { .. } | Op::LeaseWrite { .. } | Op::Punch { .. } | Op::ZeroRange { .. } => {
            range
        }
        Op::Write { .. } | Op::WriteHandle { .. } => {
            range.filter(|r| d.writes_durable || asks(r.ino) == Durability::Sync)
        }
        _ => None,
    };
    let written = match op {
        Op::Write { .. }
        | Op::WriteHandle { .. }
        | Op::WriteSync { .. }
        | Op::LeaseWrite { .. }
        | Op::MapStore { .. } => range,
        _ => None,
    };
    h.persisted(after, &synced, sync_range, written);
}

/// Where an image is within the run, for a violation.
struct Site<'a> {
    op_index: usize,
    op: &'a Op,
    point: &'a CrashPoint,
    image: &'a CrashImage,
}

struct Runner<'a> {
    cfg: &'a CrashConfig,
    w: &'a Workload,
    rep: &'a mut CrashReport,
    digest: &'a mut Digest,
}

impl Runner<'_> {
    fn fail<T>(&self, what: String) -> Result<T, String> {
        Err(format!(
            "workload {} (seed {}): {what}",
            self.w.name, self.cfg.seed
        ))
    }

    /// Formats a recording pool for the run's policy and mounts it: the
    /// device, the mounted core, its options and whether the pool has the
    /// split layout.
    fn start(
        &self,
    ) -> Result<
        (
            Arc<RecordingDevice>,
            Core<RecordingDevice>,
            MountOptions,
            bool,
        ),
        String,
    > {
        let opts = match MountOptions::parse(&mount_text(self.cfg)) {
            Ok(o) => o,
            Err(e) => {
                return self.fail(format!(
                    "policy {:?} with options {:?}: {e}",
                    self.cfg.policy, self.cfg.mount_options
                ))
            }
        };
        let layout = layout_for(&opts);
        let split = layout != PoolLayout::Classic;
        let dev = Arc::new(RecordingDevice::new(POOL_SIZE));
        if let Err(e) = format_for_replay(&*dev, &format_params(layout), self.cfg.seed) {
            return self.fail(format!("format: {e}"));
        }
        // The core's mount: no background threads, so write-back happens
        // only where the workload says (fsync, syncfs, WriteBack), and a
        // run is deterministic.
        match mount(Arc::clone(&dev), opts.clone()) {
            Ok((fs, _)) => Ok((dev, fs, opts, split)),
            Err(e) => self.fail(format!("mount: {e}")),
        }
    }

    /// The options each crash image is recovered under.
    ///
    /// A policy durable on return recovers under the run's own options,
    /// as a user remounts: its durability may rest on structures its
    /// mount replays, laid out as its options say; so does one whose
    /// pool layout only its own family mounts (the split layout). A
    /// buffering policy keeps nothing of its own across a crash (its
    /// buffer is gone), so its images recover under `direct`, the
    /// block-map policy its classic pool takes with nothing to set up,
    /// sparing hinfs a DRAM-vs-PM calibration per mount (it would make
    /// its runs four times longer).
    fn recovery_options(
        &self,
        opts: MountOptions,
        durable: bool,
        split: bool,
    ) -> Result<MountOptions, String> {
        Ok(match &self.cfg.recover_policy {
            Some(p) => match MountOptions::parse(&format!("policy={p},clock=simulated,noatime")) {
                Ok(o) => o,
                Err(e) => return self.fail(format!("recovery policy {p:?}: {e}")),
            },
            None if durable || split => opts,
            None => MountOptions {
                policy: "direct".into(),
                clock: opts.clock,
                atime: opts.atime,
                nodiratime: opts.nodiratime,
                ..MountOptions::default()
            },
        })
    }

    fn run(mut self) -> Result<(), String> {
        let (dev, fs, opts, split) = self.start()?;
        let durable = fs.policy_durable_on_return();
        let recovery_opts = self.recovery_options(opts, durable, split)?;
        let (atomic, mut history) = self.oracle(&fs);
        let writes_durable = durable;
        // The hook only records: it runs inside the workload core's drain,
        // with that core's locks held, and the images are checked after
        // the op, once its "after" state is known.
        let points: Arc<Mutex<Vec<CrashPoint>>> = Arc::default();
        let sink = Arc::clone(&points);
        dev.set_fence_hook(Some(Box::new(move |p: &CrashPoint| {
            sink.lock().expect("hook lock").push(p.clone())
        })));
        let mut handles = exec::Handles::default();
        for (i, op) in self.w.ops.iter().enumerate() {
            let mut before = state::capture(&fs)
                .or_else(|e| self.fail(format!("before op #{i} ({op}): {e}")))?;
            lease::overlay(&handles.leases, &mut before);
            let range = exec::write_range(&fs, op, &handles, atomic);
            dev.arm_fence_hook(true);
            let res = exec::apply(&fs, op, &mut handles);
            dev.arm_fence_hook(false);
            if let Err(e) = res {
                if !self.w.tolerate_errors {
                    return self.fail(format!("op #{i} ({op}) failed: {e}"));
                }
            }
            let mut after =
                state::capture(&fs).or_else(|e| self.fail(format!("after op #{i} ({op}): {e}")))?;
            lease::overlay(&handles.leases, &mut after);
            let mut pts = std::mem::take(&mut *points.lock().expect("hook lock"));
            let tail = dev.crash_point();
            if !tail.lines().is_empty() {
                pts.push(tail);
            }
            if let Some(h) = history.as_mut() {
                h.observe(&before);
                h.observe(&after);
            }
            for p in &pts {
                self.digest.point(p);
                let judged = Judged {
                    before: &before,
                    after: &after,
                    range: range.as_ref(),
                    history: history.as_ref(),
                    recover_with: &recovery_opts,
                };
                self.check_point(i, op, p, &judged);
            }
            if let Some(h) = history.as_mut() {
                let done = Done {
                    op,
                    after: &after,
                    range: range.as_ref(),
                    handles: &handles,
                    writes_durable,
                };
                note_persisted(h, &fs, &done);
            }
        }
        dev.set_fence_hook(None);
        self.finish(&fs, &mut handles)?;
        self.digest.image(&dev.durable_image());
        Ok(())
    }

    /// What the workload left open goes back — leases, mappings, open
    /// files — and the pool is unmounted.
    fn finish(
        &self,
        fs: &Core<RecordingDevice>,
        handles: &mut exec::Handles,
    ) -> Result<(), String> {
        for l in std::mem::take(&mut handles.leases).into_values() {
            if let Err(e) = l.give_back(fs) {
                return self.fail(format!("lease return at the end: {e}"));
            }
        }
        for id in handles.drain_maps() {
            if let Err(e) = fs.unmap(id) {
                return self.fail(format!("unmap at the end: {e}"));
            }
        }
        for ino in handles.drain() {
            if let Err(e) = fs.release(ino) {
                return self.fail(format!("release at the end: {e}"));
            }
        }
        if let Err(e) = fs.unmount() {
            return self.fail(format!("final unmount: {e}"));
        }
        Ok(())
    }

    /// How the run's images are judged, from what the mounted policy
    /// declares (named in the report): whether a write() lands whole, and
    /// the history a buffering policy is judged by. Stores through a
    /// mapping wait in the CPU cache until msync, and writes over mapped
    /// blocks go in place: a run that maps files is judged by a history,
    /// byte-wise and unordered, under every policy (design.md §16.5).
    fn oracle(&mut self, fs: &Core<RecordingDevice>) -> (bool, Option<History>) {
        let durable = fs.policy_durable_on_return();
        let maps = self.w.maps_files();
        let atomic = !maps && (fs.policy_atomic_writes() || self.cfg.force_atomic_oracle);
        let ordered = !maps && !durable && fs.policy_ordered_files();
        self.rep.oracle = format!(
            "{}{}{}{}",
            if durable {
                "durable on return"
            } else {
                "buffering"
            },
            if maps { ", mapped files" } else { "" },
            if ordered { ", ordered files" } else { "" },
            if atomic { ", atomic writes" } else { "" }
        );
        (atomic, (!durable || maps).then(|| History::new(ordered)))
    }

    fn check_point(&mut self, op_index: usize, op: &Op, point: &CrashPoint, j: &Judged<'_>) {
        let ecfg = EnumConfig {
            seed: self.cfg.seed,
            ..self.cfg.enum_config.clone()
        };
        self.rep.fences += 1;
        for image in enumerate(point, &ecfg).images {
            if self
                .cfg
                .max_images
                .is_some_and(|m| self.rep.images_checked >= m)
            {
                self.rep.capped = true;
                return;
            }
            self.rep.images_checked += 1;
            let dev = Arc::new(OverlayDevice::from_crash(point, &image));
            let outcome = catch_unwind(AssertUnwindSafe(|| image::check(dev, j.recover_with)))
                .unwrap_or_else(|p| Err(format!("panic: {}", panic_text(&p))))
                .and_then(|got| j.judge(&got));
            if let Err(what) = outcome {
                let site = Site {
                    op_index,
                    op,
                    point,
                    image: &image,
                };
                self.violation(&site, what);
            }
        }
    }

    fn violation(&mut self, site: &Site<'_>, what: String) {
        self.rep.violation_count += 1;
        if self.rep.violations.len() >= MAX_KEPT_VIOLATIONS {
            return;
        }
        let saved_image = self.save(site);
        self.rep.violations.push(Violation {
            workload: self.w.name.clone(),
            seed: self.cfg.seed,
            op_index: site.op_index,
            op: site.op.to_string(),
            fence: site.point.fence(),
            image: describe(site.point, site.image),
            what,
            saved_image,
        });
    }

    /// Saves the pre-recovery image; a failure to save is reported in the
    /// path field rather than hiding the violation.
    fn save(&self, site: &Site<'_>) -> Option<String> {
        let dir = self.cfg.save_dir.as_ref()?;
        if self.rep.violations.len() >= MAX_SAVED_IMAGES {
            return None;
        }
        let path = dir.join(format!(
            "crash-{}-seed{}-op{}-fence{}-{}.img",
            self.w.name,
            self.cfg.seed,
            site.op_index,
            site.point.fence(),
            self.rep.violations.len()
        ));
        let bytes = OverlayDevice::from_crash(site.point, site.image).to_image();
        Some(
            match std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&path, bytes)) {
                Ok(()) => path.display().to_string(),
                Err(e) => format!("(not saved: {e})"),
            },
        )
    }
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "(non-string panic)".into())
}

/// Recovers, fscks and uses one image with the mount options `opts`,
/// returning its recovered state: the per-image half of the oracle, for
/// replaying a saved image (with the options of the run that saved it).
pub fn check_overlay(dev: Arc<OverlayDevice>, opts: &MountOptions) -> Result<FsState, String> {
    image::check(dev, opts)
}
