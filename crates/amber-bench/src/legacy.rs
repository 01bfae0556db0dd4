//! The legacy study's method (legacy-fs-on-nvm-study.txt): the kernel's
//! block file systems on a RAM-backed block device, in the configurations
//! the study compares (ext2; ext4 default, nodelalloc and data=journal;
//! xfs with 4 and with many allocation groups), each running the same
//! workloads beside Amber, reported normalized to a reference.
//!
//! A RAM-backed device is a sparse file in /dev/shm behind a loop device;
//! only the pages a file system writes take memory. Every device, mount
//! and image is owned by a [`LoopFs`] guard that unmounts, detaches and
//! deletes on drop, so an error or a panic mid-run leaves nothing behind.

use crate::compare::{self, Plan, Row};
use crate::progress::Progress;
use crate::target::{AmberTarget, DropCaches, PosixTarget, Target, TargetFile};
use crate::workload::{self, Params};
use amber_pmem::WriteStats;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One file-system configuration of the study.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variant {
    /// How results name it, e.g. `ext4-nodelalloc`.
    pub name: String,
    fstype: &'static str,
    mkfs: Vec<String>,
    mount_options: &'static str,
}

/// The smallest device every variant formats: mkfs.xfs refuses file
/// systems under 300 MB.
pub const MIN_DEVICE: u64 = 512 << 20;

/// An allocation group must hold xfs's 64 MiB internal log with room to
/// spare, which bounds the "large" count on small devices.
const XFS_AG_MIN: u64 = 80 << 20;

/// The study's six configurations for a device of `size` bytes. Lazy
/// inode-table and journal initialization is off: it would otherwise run
/// in a kernel thread during the measurements.
pub fn variants(size: u64) -> Vec<Variant> {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let ext4 = s(&[
        "mkfs.ext4",
        "-F",
        "-q",
        "-E",
        "lazy_itable_init=0,lazy_journal_init=0",
    ]);
    let many = (size / XFS_AG_MIN).clamp(4, 32);
    let v = |name: &str, fstype, mkfs: Vec<String>, mount_options| Variant {
        name: name.into(),
        fstype,
        mkfs,
        mount_options,
    };
    vec![
        v("ext2", "ext2", s(&["mkfs.ext2", "-F", "-q"]), ""),
        v("ext4", "ext4", ext4.clone(), ""),
        v("ext4-nodelalloc", "ext4", ext4.clone(), "nodelalloc"),
        v("ext4-data-journal", "ext4", ext4, "data=journal"),
        v(
            "xfs-ag4",
            "xfs",
            s(&["mkfs.xfs", "-f", "-q", "-d", "agcount=4"]),
            "",
        ),
        v(
            &format!("xfs-ag{many}"),
            "xfs",
            s(&["mkfs.xfs", "-f", "-q", "-d", &format!("agcount={many}")]),
            "",
        ),
    ]
}

/// Why this process cannot run the study, if it cannot: creating loop
/// devices and mounting need root and a loop driver.
pub fn unavailable() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let euid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|r| r.split_whitespace().nth(1).map(str::to_string));
    if euid.as_deref() != Some("0") {
        return Some("needs root to create loop devices and mount file systems".into());
    }
    if !Path::new("/dev/loop-control").exists() {
        return Some("no loop device support (/dev/loop-control is missing)".into());
    }
    None
}

fn run(cmd: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {cmd}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd} {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success() || !o.stderr.is_empty())
}

/// Makes sure mkfs.ext2/ext4 and mkfs.xfs exist, installing e2fsprogs and
/// xfsprogs with apt-get where they do not (root has been checked).
pub fn ensure_tools() -> Result<(), String> {
    let missing: Vec<&str> = [("mkfs.ext4", "e2fsprogs"), ("mkfs.xfs", "xfsprogs")]
        .into_iter()
        .filter(|(tool, _)| !have(tool))
        .map(|(_, pkg)| pkg)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    crate::progress::note(format_args!("legacy: installing {}", missing.join(" ")));
    let mut args = vec!["install", "-y", "-q"];
    args.extend(&missing);
    run("apt-get", &args)
        .map_err(|e| format!("{} missing and not installable: {e}", missing.join(" ")))?;
    Ok(())
}

/// A formatted, mounted RAM-backed loop device; dropping it unmounts,
/// detaches the loop device and deletes the image and mount point.
pub struct LoopFs {
    image: PathBuf,
    mountpoint: PathBuf,
    device: Option<String>,
    mounted: bool,
}

impl LoopFs {
    /// Creates `dir/NAME.img` of `size` bytes (sparse), attaches it,
    /// formats it as `v` and mounts it on `dir/NAME`.
    pub fn create(v: &Variant, dir: &Path, size: u64) -> Result<LoopFs, String> {
        let mut fs = LoopFs {
            image: dir.join(format!("{}.img", v.name)),
            mountpoint: dir.join(&v.name),
            device: None,
            mounted: false,
        };
        let f = std::fs::File::create(&fs.image)
            .map_err(|e| format!("cannot create {}: {e}", fs.image.display()))?;
        f.set_len(size).map_err(|e| e.to_string())?;
        drop(f);
        let image = fs.image.to_string_lossy().into_owned();
        fs.device = Some(run("losetup", &["-f", "--show", &image])?);
        let dev = fs.device.clone().expect("just set");
        let mut mkfs: Vec<&str> = v.mkfs[1..].iter().map(String::as_str).collect();
        mkfs.push(&dev);
        run(&v.mkfs[0], &mkfs)?;
        std::fs::create_dir_all(&fs.mountpoint).map_err(|e| e.to_string())?;
        let mnt = fs.mountpoint.to_string_lossy().into_owned();
        let mut args = vec!["-t", v.fstype];
        if !v.mount_options.is_empty() {
            args.extend(["-o", v.mount_options]);
        }
        args.extend([dev.as_str(), mnt.as_str()]);
        run("mount", &args)?;
        fs.mounted = true;
        Ok(fs)
    }

    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        let mnt = self.mountpoint.to_string_lossy().into_owned();
        if self.mounted {
            // A busy mount (a straggling writer) gets a few tries, then a
            // lazy unmount so the device can still be detached.
            let clean = (0..5).any(|i| {
                if i > 0 {
                    std::thread::sleep(std::time::Duration::from_millis(200));
                }
                run("umount", &[&mnt]).is_ok()
            });
            if !clean {
                if let Err(e) = run("umount", &["-l", &mnt]) {
                    crate::progress::note(format_args!("legacy: cannot unmount {mnt}: {e}"));
                }
            }
        }
        let _ = std::fs::remove_dir(&self.mountpoint);
        if let Some(dev) = &self.device {
            if let Err(e) = run("losetup", &["-d", dev]) {
                crate::progress::note(format_args!("legacy: cannot detach {dev}: {e}"));
            }
        }
        let _ = std::fs::remove_file(&self.image);
    }
}

/// A directory target named after its file-system configuration, so
/// records and ratio notes say `ext4-nodelalloc`, not a mount path.
struct Named {
    name: String,
    inner: PosixTarget,
}

impl Target for Named {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn policy(&self) -> String {
        self.inner.policy()
    }
    fn preset(&self) -> String {
        self.inner.preset()
    }
    fn create(&self, path: &str, sync: bool) -> io::Result<Box<dyn TargetFile>> {
        self.inner.create(path, sync)
    }
    fn open(&self, path: &str, append: bool) -> io::Result<Box<dyn TargetFile>> {
        self.inner.open(path, append)
    }
    fn mkdir_all(&self, path: &str) -> io::Result<()> {
        self.inner.mkdir_all(path)
    }
    fn remove_file(&self, path: &str) -> io::Result<()> {
        self.inner.remove_file(path)
    }
    fn remove_all(&self, path: &str) -> io::Result<()> {
        self.inner.remove_all(path)
    }
    fn list(&self, path: &str) -> io::Result<Vec<String>> {
        self.inner.list(path)
    }
    fn size(&self, path: &str) -> io::Result<u64> {
        self.inner.size(path)
    }
    fn reset(&self) -> io::Result<()> {
        self.inner.reset()
    }
    fn pm_stats(&self) -> Option<WriteStats> {
        self.inner.pm_stats()
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where images, mount points and the Amber pool live (a tmpfs).
    pub dir: PathBuf,
    pub device_size: u64,
    pub pool_size: u64,
    /// Emulator preset of the Amber target.
    pub preset: String,
    /// Variant names to run (see [`variants`]); empty means all.
    pub filesystems: Vec<String>,
    pub workloads: Vec<String>,
    /// Overrides of each workload's own parameters.
    pub files: Option<u64>,
    pub ops: Option<u64>,
    pub threads: usize,
    pub reps: usize,
    pub warmup: usize,
    /// The target every other is normalized to.
    pub baseline: String,
    /// Amber policies measured beside the kernel file systems, each on
    /// its own pool (named `amberfs:POLICY` in results); empty for kernel
    /// file systems only.
    pub amber: Vec<String>,
}

/// The Amber policy `bench legacy` measures unless told otherwise: the
/// in-place, direct-access design the study holds up (PMFS).
pub const AMBER_POLICY: &str = "direct";

/// Runs every workload on every chosen variant and Amber, interleaved
/// per workload, the baseline first so each row's ratio is the study's
/// normalized figure.
pub fn run_study(cfg: &Config) -> Result<Vec<Row>, String> {
    let all = variants(cfg.device_size);
    let chosen: Vec<Variant> = if cfg.filesystems.is_empty() {
        all.clone()
    } else {
        cfg.filesystems
            .iter()
            .map(|n| {
                all.iter().find(|v| v.name == *n).cloned().ok_or_else(|| {
                    let names: Vec<&str> = all.iter().map(|v| v.name.as_str()).collect();
                    format!(
                        "unknown file system {n:?}; choose from {}",
                        names.join(", ")
                    )
                })
            })
            .collect::<Result<_, _>>()?
    };
    let mut names: Vec<String> = chosen.iter().map(|v| v.name.clone()).collect();
    for p in &cfg.amber {
        names.push(format!("amberfs:{p}"));
    }
    if !names.contains(&cfg.baseline) {
        return Err(format!(
            "baseline {:?} is not among the targets ({})",
            cfg.baseline,
            names.join(", ")
        ));
    }
    let mut params = Vec::new();
    for w in &cfg.workloads {
        let mut p: Params = workload::defaults(w)?;
        p.threads = cfg.threads;
        if let Some(f) = cfg.files {
            p.files = f;
        }
        if let Some(n) = cfg.ops {
            p.limit = workload::Limit::Ops(n);
        }
        workload::validate(w, &p)?;
        params.push((w.clone(), p));
    }
    ensure_tools()?;
    let work = cfg.dir.join(format!("amber-legacy-{}", std::process::id()));
    std::fs::create_dir_all(&work).map_err(|e| format!("cannot create {}: {e}", work.display()))?;
    let result = run_in(cfg, &chosen, &params, &work);
    let _ = std::fs::remove_dir_all(&work);
    result
}

fn run_in(
    cfg: &Config,
    chosen: &[Variant],
    params: &[(String, Params)],
    work: &Path,
) -> Result<Vec<Row>, String> {
    // Declared before the targets that use them, so they drop after.
    let mut mounts = Vec::new();
    for v in chosen {
        mounts.push((v.name.clone(), LoopFs::create(v, work, cfg.device_size)?));
    }
    let mut targets: Vec<Box<dyn Target>> = mounts
        .iter()
        .map(|(name, m)| -> Box<dyn Target> {
            Box::new(Named {
                name: name.clone(),
                inner: PosixTarget::new(m.mountpoint().to_path_buf(), DropCaches::All),
            })
        })
        .collect();
    let pools: Vec<PathBuf> = (0..cfg.amber.len())
        .map(|i| work.join(format!("amber-{i}.pool")))
        .collect();
    for (policy, pool) in cfg.amber.iter().zip(&pools) {
        targets.push(Box::new(AmberTarget::create(
            pool,
            cfg.pool_size,
            policy,
            &cfg.preset,
        )?));
    }
    // The baseline first: compare reports every ratio to the first target.
    targets.sort_by_key(|t| t.name() != cfg.baseline);
    let refs: Vec<&dyn Target> = targets.iter().map(|t| t.as_ref()).collect();
    let bar = Progress::new(
        (params.len() * cfg.reps * refs.len()) as u64,
        "legacy study",
    );
    let mut rows = Vec::new();
    for (w, p) in params {
        let plan = Plan {
            workload: w.clone(),
            params: p.clone(),
            threads: vec![cfg.threads],
            reps: cfg.reps,
            warmup: cfg.warmup,
        };
        rows.extend(compare::run(&plan, &refs, &mut |_| bar.inc(1))?);
    }
    bar.finish();
    drop(refs);
    drop(targets);
    for pool in &pools {
        let _ = std::fs::remove_file(pool);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn six_configurations_with_a_bounded_large_agcount() {
        let v = variants(3 << 30);
        let names: Vec<&str> = v.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "ext2",
                "ext4",
                "ext4-nodelalloc",
                "ext4-data-journal",
                "xfs-ag4",
                "xfs-ag32"
            ]
        );
        assert_eq!(variants(MIN_DEVICE)[5].name, "xfs-ag6");
        assert_eq!(v[2].mount_options, "nodelalloc");
        assert_eq!(v[3].mount_options, "data=journal");
    }

    fn loops_of(image: &Path) -> bool {
        run("losetup", &["-a"]).is_ok_and(|out| out.contains(&*image.to_string_lossy()))
    }

    /// A tiny study on two file systems and Amber, then nothing left:
    /// no mount, no loop device, no image.
    #[test]
    fn tiny_study_runs_and_cleans_up() {
        if let Some(why) = unavailable() {
            eprintln!("legacy test skipped: {why}");
            return;
        }
        let dir = tempfile::tempdir_in("/dev/shm").unwrap();
        let cfg = Config {
            dir: dir.path().to_path_buf(),
            device_size: MIN_DEVICE,
            pool_size: 64 << 20,
            preset: "dram".into(),
            filesystems: vec!["ext4".into(), "xfs-ag4".into()],
            workloads: vec!["varmail".into()],
            files: Some(8),
            ops: Some(200),
            threads: 1,
            reps: 2,
            warmup: 0,
            baseline: "ext4".into(),
            amber: vec![AMBER_POLICY.into()],
        };
        let rows = run_study(&cfg).unwrap();
        let tput: Vec<&Row> = rows
            .iter()
            .filter(|r| r.record.metric == "throughput")
            .collect();
        let targets: Vec<&str> = tput.iter().map(|r| r.record.target.as_str()).collect();
        assert_eq!(targets, ["ext4", "xfs-ag4", "amberfs:direct"]);
        assert_eq!(tput[0].ratio_to_first, Some(1.0));
        assert!(tput.iter().all(|r| r.record.value > 0.0));
        let work = dir
            .path()
            .join(format!("amber-legacy-{}", std::process::id()));
        assert!(!work.exists(), "work directory removed");
        assert!(!loops_of(&work), "a loop device is still attached");
        let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
        assert!(!mounts.contains(&*work.to_string_lossy()));
    }

    #[test]
    fn guard_cleans_up_after_a_failed_mount() {
        if unavailable().is_some() {
            return;
        }
        let dir = tempfile::tempdir_in("/dev/shm").unwrap();
        let bad = Variant {
            name: "bad".into(),
            fstype: "ext4",
            mkfs: vec!["mkfs.ext2".into(), "-F".into(), "-q".into()],
            mount_options: "no_such_option",
        };
        let image = dir.path().join("bad.img");
        assert!(LoopFs::create(&bad, dir.path(), MIN_DEVICE).is_err());
        assert!(!image.exists(), "image removed");
        assert!(!loops_of(&image), "loop device detached");
        assert!(!dir.path().join("bad").exists(), "mount point removed");
    }

    #[test]
    fn unknown_names_are_rejected_before_any_device_is_made() {
        let cfg = Config {
            dir: std::env::temp_dir(),
            device_size: MIN_DEVICE,
            pool_size: 64 << 20,
            preset: "dram".into(),
            filesystems: vec!["zfs".into()],
            workloads: vec!["varmail".into()],
            files: None,
            ops: None,
            threads: 1,
            reps: 1,
            warmup: 0,
            baseline: "ext4".into(),
            amber: vec![AMBER_POLICY.into()],
        };
        assert!(run_study(&cfg).unwrap_err().contains("unknown file system"));
        let cfg = Config {
            filesystems: vec![],
            baseline: "ntfs".into(),
            ..cfg
        };
        assert!(run_study(&cfg).unwrap_err().contains("baseline"));
    }
}
