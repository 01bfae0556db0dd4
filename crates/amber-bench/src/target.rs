//! Where a benchmark runs: a directory on any mounted file system (POSIX
//! calls through std), or an Amber pool driven through the library with a
//! chosen policy and emulator preset. Every workload is written once
//! against [`Target`], so each target does the same operations on the same
//! data volume.

use amber_core::data::layout_for;
use amber_core::{Fs, MountOptions, OpenOptions};
use amber_format::FormatParams;
use amber_pmem::{Emulated, EmulatorSpec, MapOptions, MmapDevice, PmDevice, WriteStats};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The device every Amber benchmark runs on.
pub type BenchDevice = Emulated<MmapDevice>;

/// Creates (replacing any old file) a pool file of `size` bytes and maps it.
pub fn open_pool(path: &Path, size: u64, preset: &str) -> Result<BenchDevice, String> {
    let spec = EmulatorSpec::parse(preset).map_err(|e| e.to_string())?;
    if path.exists() {
        std::fs::remove_file(path)
            .map_err(|e| format!("cannot remove old pool {}: {e}", path.display()))?;
    }
    let dev = MmapDevice::create(path, size, &MapOptions::default())
        .map_err(|e| format!("cannot create pool {}: {e}", path.display()))?;
    // Warm-up: fault every page in now, so no measured run pays for the
    // first touch of a fresh tmpfs file.
    dev.zero_nt(0, size);
    dev.drain().map_err(|e| e.to_string())?;
    Ok(Emulated::new(dev, spec))
}

/// Creates a fresh pool as [`open_pool`] does and formats it for the
/// policy `opts` names (HUNTER's split layout when it wants one).
pub fn format_pool(
    path: &Path,
    size: u64,
    opts: &MountOptions,
    preset: &str,
) -> Result<BenchDevice, String> {
    let params = FormatParams {
        layout: layout_for(opts),
        ..FormatParams::for_size(size)
    };
    let dev = open_pool(path, size, preset)?;
    Fs::format(&dev, &params).map_err(|e| e.to_string())?;
    Ok(dev)
}

/// An open file of a target. Offsets are explicit so threads never share
/// a cursor.
pub trait TargetFile: Send {
    fn write_at(&mut self, buf: &[u8], off: u64) -> io::Result<()>;
    /// Reads exactly `buf.len()` bytes unless the file ends first; returns
    /// how many were read.
    fn read_at(&mut self, buf: &mut [u8], off: u64) -> io::Result<usize>;
    /// Appends at the end of the file (O_APPEND semantics).
    fn append(&mut self, buf: &[u8]) -> io::Result<()>;
    fn fsync(&mut self) -> io::Result<()>;
    fn size(&mut self) -> io::Result<u64>;
}

/// A file system under test. Paths are relative to the target's root and
/// use '/'.
pub trait Target: Send + Sync {
    /// How results name it, e.g. `amberfs:direct`, `bare` or `posix:/mnt/ext4`.
    fn name(&self) -> String;
    /// Amber's policy, or "-".
    fn policy(&self) -> String;
    /// The emulator preset, or "-" for a kernel file system.
    fn preset(&self) -> String;
    /// Creates (or truncates) a file and opens it for reading and writing;
    /// `sync` asks for O_SYNC.
    fn create(&self, path: &str, sync: bool) -> io::Result<Box<dyn TargetFile>>;
    /// Opens an existing file for reading and writing.
    fn open(&self, path: &str, append: bool) -> io::Result<Box<dyn TargetFile>>;
    fn mkdir_all(&self, path: &str) -> io::Result<()>;
    fn remove_file(&self, path: &str) -> io::Result<()>;
    /// Removes a directory tree.
    fn remove_all(&self, path: &str) -> io::Result<()>;
    /// Names in a directory (not "." or "..").
    fn list(&self, path: &str) -> io::Result<Vec<String>>;
    fn size(&self, path: &str) -> io::Result<u64>;
    /// Clean-up between trials: a fresh mount for Amber (everything written
    /// stays), or dropping the kernel's caches for a directory target.
    fn reset(&self) -> io::Result<()>;
    /// Bytes, lines and fences written to PM so far (Amber and bare
    /// targets), for write amplification.
    fn pm_stats(&self) -> Option<WriteStats>;
    /// The data policy's counters since the last mount (`reset`), by
    /// name; empty for targets and policies without any.
    fn policy_stats(&self) -> Vec<(String, u64)> {
        Vec::new()
    }
}

/// What `drop_caches` to write between trials of a directory target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropCaches {
    None,
    /// 1: page cache.
    PageCache,
    /// 2: dentries and inodes.
    Dentries,
    /// 3: both.
    All,
}

/// A directory on a mounted file system, used through POSIX calls.
pub struct PosixTarget {
    root: PathBuf,
    drop: DropCaches,
}

impl PosixTarget {
    pub fn new(root: PathBuf, drop: DropCaches) -> PosixTarget {
        PosixTarget { root, drop }
    }

    /// Creates the root directory if needed (for tests and fresh runs).
    pub fn with_root_created(self) -> PosixTarget {
        let _ = std::fs::create_dir_all(&self.root);
        self
    }

    fn p(&self, path: &str) -> PathBuf {
        self.root.join(path.trim_start_matches('/'))
    }
}

/// A file and whether it was opened O_APPEND (then the kernel places
/// appends atomically; otherwise an append writes at the current size).
struct PosixFile(std::fs::File, bool);

impl TargetFile for PosixFile {
    fn write_at(&mut self, buf: &[u8], off: u64) -> io::Result<()> {
        self.0.write_all_at(buf, off)
    }

    fn read_at(&mut self, buf: &mut [u8], off: u64) -> io::Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            match self.0.read_at(&mut buf[done..], off + done as u64)? {
                0 => break,
                n => done += n,
            }
        }
        Ok(done)
    }

    fn append(&mut self, buf: &[u8]) -> io::Result<()> {
        if self.1 {
            use std::io::Write;
            self.0.write_all(buf)
        } else {
            let end = self.0.metadata()?.len();
            self.0.write_all_at(buf, end)
        }
    }

    fn fsync(&mut self) -> io::Result<()> {
        self.0.sync_all()
    }

    fn size(&mut self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }
}

impl Target for PosixTarget {
    fn name(&self) -> String {
        format!("posix:{}", self.root.display())
    }

    fn policy(&self) -> String {
        "-".into()
    }

    fn preset(&self) -> String {
        "-".into()
    }

    fn create(&self, path: &str, sync: bool) -> io::Result<Box<dyn TargetFile>> {
        use std::os::unix::fs::OpenOptionsExt;
        let mut o = std::fs::OpenOptions::new();
        o.read(true).write(true).create(true).truncate(true);
        if sync {
            o.custom_flags(libc_o_sync());
        }
        Ok(Box::new(PosixFile(o.open(self.p(path))?, false)))
    }

    fn open(&self, path: &str, append: bool) -> io::Result<Box<dyn TargetFile>> {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .append(append)
            .open(self.p(path))?;
        Ok(Box::new(PosixFile(f, append)))
    }

    fn mkdir_all(&self, path: &str) -> io::Result<()> {
        std::fs::create_dir_all(self.p(path))
    }

    fn remove_file(&self, path: &str) -> io::Result<()> {
        std::fs::remove_file(self.p(path))
    }

    fn remove_all(&self, path: &str) -> io::Result<()> {
        match std::fs::remove_dir_all(self.p(path)) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            r => r,
        }
    }

    fn list(&self, path: &str) -> io::Result<Vec<String>> {
        std::fs::read_dir(self.p(path))?
            .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect()
    }

    fn size(&self, path: &str) -> io::Result<u64> {
        Ok(std::fs::metadata(self.p(path))?.len())
    }

    fn reset(&self) -> io::Result<()> {
        let level = match self.drop {
            DropCaches::None => return Ok(()),
            DropCaches::PageCache => "1",
            DropCaches::Dentries => "2",
            DropCaches::All => "3",
        };
        // Dirty pages must be written before they can be dropped.
        std::process::Command::new("sync").status()?;
        std::fs::write("/proc/sys/vm/drop_caches", level)
    }

    fn pm_stats(&self) -> Option<WriteStats> {
        None
    }
}

/// O_SYNC, spelled out so this crate needs no libc dependency.
fn libc_o_sync() -> i32 {
    0o4010000
}

/// How long `reset` waits for the last user of an unmounted pool.
const RESET_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// An Amber pool driven through the library.
pub struct AmberTarget {
    pool: PathBuf,
    policy: String,
    preset: String,
    /// The mounted file system; `reset` swaps in a fresh mount.
    fs: Mutex<Option<Fs<BenchDevice>>>,
}

fn to_io(e: amber_core::FsError) -> io::Error {
    e.into()
}

impl AmberTarget {
    /// Makes a fresh pool of `size` bytes at `pool` (replacing any file
    /// there) and mounts it with `policy` (a name, optionally followed by
    /// `,`-separated mount options) behind emulator `preset`.
    pub fn create(
        pool: &Path,
        size: u64,
        policy: &str,
        preset: &str,
    ) -> Result<AmberTarget, String> {
        let t = AmberTarget {
            pool: pool.to_path_buf(),
            policy: policy.to_string(),
            preset: preset.to_string(),
            fs: Mutex::new(None),
        };
        let opts = t.options().map_err(|e| e.to_string())?;
        let dev = format_pool(pool, size, &opts, preset)?;
        t.mount(dev).map_err(|e| e.to_string())?;
        Ok(t)
    }

    fn options(&self) -> io::Result<MountOptions> {
        MountOptions::parse(&format!("policy={}", self.policy)).map_err(to_io)
    }

    fn mount(&self, dev: BenchDevice) -> io::Result<()> {
        let (fs, _) = Fs::mount(dev, self.options()?).map_err(to_io)?;
        *self.fs.lock().expect("mount lock") = Some(fs);
        Ok(())
    }

    /// The mounted file system.
    pub fn fs(&self) -> Fs<BenchDevice> {
        self.fs
            .lock()
            .expect("mount lock")
            .clone()
            .expect("mounted")
    }

    /// Unmounts cleanly and removes the pool file.
    pub fn destroy(self) -> io::Result<()> {
        if let Some(fs) = self.fs.lock().expect("mount lock").take() {
            fs.unmount().map_err(to_io)?;
        }
        std::fs::remove_file(&self.pool)
    }
}

/// An Amber file and whether it was opened O_APPEND (as `PosixFile`).
struct AmberFile(amber_core::File<BenchDevice>, bool);

impl TargetFile for AmberFile {
    fn write_at(&mut self, buf: &[u8], off: u64) -> io::Result<()> {
        self.0.write_at(buf, off).map(drop).map_err(to_io)
    }

    fn read_at(&mut self, buf: &mut [u8], off: u64) -> io::Result<usize> {
        self.0.read_at(buf, off).map_err(to_io)
    }

    fn append(&mut self, buf: &[u8]) -> io::Result<()> {
        if self.1 {
            use std::io::Write;
            self.0.write_all(buf)
        } else {
            let end = self.0.metadata().map_err(to_io)?.len();
            self.0.write_at(buf, end).map(drop).map_err(to_io)
        }
    }

    fn fsync(&mut self) -> io::Result<()> {
        self.0.sync_all().map_err(to_io)
    }

    fn size(&mut self) -> io::Result<u64> {
        Ok(self.0.metadata().map_err(to_io)?.len())
    }
}

impl Target for AmberTarget {
    fn name(&self) -> String {
        format!("amberfs:{}", self.policy)
    }

    /// The policy's name, without any mount options that followed it.
    fn policy(&self) -> String {
        self.policy
            .split(',')
            .next()
            .unwrap_or_default()
            .to_string()
    }

    fn preset(&self) -> String {
        self.preset.clone()
    }

    fn create(&self, path: &str, sync: bool) -> io::Result<Box<dyn TargetFile>> {
        let fs = self.fs();
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .sync(sync)
            .open(&fs, path)
            .map_err(to_io)?;
        Ok(Box::new(AmberFile(f, false)))
    }

    fn open(&self, path: &str, append: bool) -> io::Result<Box<dyn TargetFile>> {
        let fs = self.fs();
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .append(append)
            .open(&fs, path)
            .map_err(to_io)?;
        Ok(Box::new(AmberFile(f, false)))
    }

    fn mkdir_all(&self, path: &str) -> io::Result<()> {
        self.fs().create_dir_all(path).map_err(to_io)
    }

    fn remove_file(&self, path: &str) -> io::Result<()> {
        self.fs().remove_file(path).map_err(to_io)
    }

    fn remove_all(&self, path: &str) -> io::Result<()> {
        let fs = self.fs();
        let md = match fs.symlink_metadata(path) {
            Err(amber_core::FsError::NotFound) => return Ok(()),
            r => r.map_err(to_io)?,
        };
        if !md.is_dir() {
            return fs.remove_file(path).map_err(to_io);
        }
        // Depth-first with an explicit stack: no recursion limit to hit.
        let mut stack = vec![(path.trim_end_matches('/').to_string(), false)];
        while let Some((dir, visited)) = stack.pop() {
            if visited {
                fs.remove_dir(&dir).map_err(to_io)?;
                continue;
            }
            stack.push((dir.clone(), true));
            for e in fs.read_dir(&dir).map_err(to_io)? {
                let child = format!("{dir}/{}", e.name);
                if e.file_type.is_dir() {
                    stack.push((child, false));
                } else {
                    fs.remove_file(&child).map_err(to_io)?;
                }
            }
        }
        Ok(())
    }

    fn list(&self, path: &str) -> io::Result<Vec<String>> {
        Ok(self
            .fs()
            .read_dir(path)
            .map_err(to_io)?
            .into_iter()
            .map(|e| e.name)
            .collect())
    }

    fn size(&self, path: &str) -> io::Result<u64> {
        Ok(self.fs().metadata(path).map_err(to_io)?.len())
    }

    /// Unmounts and mounts again: DRAM state starts cold, PM keeps
    /// everything (the NVMFS-IOzone "fresh mount" clean-up).
    fn reset(&self) -> io::Result<()> {
        let mut slot = self.fs.lock().expect("mount lock");
        let old = slot
            .take()
            .ok_or_else(|| io::Error::other("pool not mounted"))?;
        let dev = old
            .into_device(true, RESET_WAIT)
            .map_err(io::Error::other)?;
        drop(slot);
        self.mount(dev)
    }

    fn pm_stats(&self) -> Option<WriteStats> {
        Some(self.fs().core().device().stats())
    }

    fn policy_stats(&self) -> Vec<(String, u64)> {
        self.fs().core().policy_stats()
    }
}
