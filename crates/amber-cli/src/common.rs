//! What every command shares: the error type that carries advice to the
//! user, size parsing, opening and mounting a pool, and date formatting.
//!
//! Messages are built here rather than in each command so that one failure
//! (a missing pool, a pool held by another process, a corrupt superblock)
//! reads the same whichever command ran into it.

use std::fmt;
use std::io::Write;
use std::path::Path;

use amber_core::{Escaped, File, Fs, FsError, MountOptions, RecoveryReport};
use amber_format::Timespec;
use amber_pmem::{
    Emulated, EmulatorSpec, MapError, MapOptions, MmapDevice, PersistError, PmDevice, PoolPages,
    WriteStats,
};

/// A failure already worded for the user: what went wrong and what to do.
#[derive(Debug)]
pub struct CliError {
    message: String,
    closed_output: bool,
}

impl CliError {
    pub fn new(message: impl Into<String>) -> CliError {
        CliError {
            message: message.into(),
            closed_output: false,
        }
    }

    /// The reader of standard output went away (`| head`): the command
    /// stops, and exits without a message (crate::output).
    pub fn closed_output() -> CliError {
        CliError {
            message: "standard output was closed".into(),
            closed_output: true,
        }
    }

    pub fn is_closed_output(&self) -> bool {
        self.closed_output
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

pub type CliResult<T> = Result<T, CliError>;

/// Copy unit of put, get and cat: large enough that per-call costs
/// vanish, small enough that a file of any size copies in constant memory.
pub const CHUNK: usize = 1 << 20;

pub use crate::output::{warn, Shown};

/// Sizes in the one grammar of the core, the CLI and the workbench
/// (binary suffixes: pools are mapped in pages and huge pages, where
/// decimal sizes would never line up).
pub use amber_core::units::parse_size;

/// A byte count for people (shared with the workbench's notes).
pub use amber_bench::record::human_bytes;

/// The `mkfs` hint printed wherever the user has no pool yet.
pub fn mkfs_hint(pool: &Path) -> String {
    format!("'amberfs mkfs {} --size 64M'", pool.shown())
}

/// Words a device-layer failure for the CLI. The cases a user hits
/// everyday (no pool yet, pool busy, a file too small to be a pool) get
/// advice naming amberfs commands; the rest already say what to do.
pub fn map_error(pool: &Path, err: MapError) -> CliError {
    let p = pool.shown();
    CliError::new(match err {
        MapError::NotFound { .. } => format!(
            "cannot open pool {p}: no such file — create it with {}",
            mkfs_hint(pool)
        ),
        MapError::InUse { .. } => format!(
            "pool {p} is in use by another process (it holds the pool lock); wait for it to \
             finish or stop it — `fuser {p}` shows which process it is"
        ),
        MapError::ReadOnly { .. } | MapError::PermissionDenied { .. } => format!(
            "cannot open pool {p} for writing: {} — commands that only read it (info, fsck \
             without --repair, ls, cat, get, salvage) open it read-only by themselves; mount \
             it read-only with 'amberfs mount -o ro {p} DIR'; to change it, copy it to \
             writable storage first",
            match err {
                MapError::ReadOnly { .. } => "it is on a read-only file system or device",
                _ => "permission denied",
            }
        ),
        MapError::TooSmall { size, .. } => format!(
            "pool {p} is only {size} bytes, too small to be an Amber pool (truncated?); \
             restore the full file, or create a new pool with {}",
            mkfs_hint(pool)
        ),
        other => format!("cannot open pool {p}: {other}"),
    })
}

/// Opens and locks a pool for exclusive use.
pub fn open_device(pool: &Path) -> CliResult<MmapDevice> {
    MmapDevice::open(pool, &MapOptions::default()).map_err(|e| map_error(pool, e))
}

/// Opens a pool read-only (shared with other readers, never written).
pub fn open_read_only(pool: &Path) -> CliResult<MmapDevice> {
    MmapDevice::open_read_only(pool, &MapOptions::default()).map_err(|e| map_error(pool, e))
}

/// Opens a pool for a command that only reads it: read-write as usual,
/// or read-only when its media or permissions allow nothing else.
pub fn open_for_reading(pool: &Path) -> CliResult<MmapDevice> {
    match MmapDevice::open(pool, &MapOptions::default()) {
        Err(MapError::ReadOnly { .. } | MapError::PermissionDenied { .. }) => {
            MmapDevice::open_read_only(pool, &MapOptions::default()).map_err(|e| match e {
                MapError::PermissionDenied { .. } => CliError::new(format!(
                    "cannot read pool {}: permission denied — fix its permissions or run as a \
                     user who may read it",
                    pool.display()
                )),
                other => map_error(pool, other),
            })
        }
        other => other.map_err(|e| map_error(pool, e)),
    }
}

/// Words a failure to read or mount a pool as a whole. The core's own
/// messages for format errors (bad magic, newer version, bad checksum,
/// truncation) already carry advice.
pub fn pool_error(pool: &Path, err: FsError) -> CliError {
    let p = pool.shown();
    if err == FsError::NeedsRecovery {
        return CliError::new(format!(
            "cannot read pool {p} read-only: it was not unmounted cleanly, and recovery needs \
             write access — run 'amberfs fsck --repair' on a writable copy ('cp {p} COPY', \
             then 'amberfs fsck --repair COPY'), or copy its files out with 'amberfs salvage \
             {p} DIR' (it recovers in memory and writes nothing)"
        ));
    }
    CliError::new(format!("cannot use pool {p}: {err}"))
}

/// Words a failure of an operation on `path` inside the pool, with the
/// amberfs command that helps for the usual causes.
pub fn path_error(pool: &Path, action: &str, path: impl AsRef<[u8]>, err: FsError) -> CliError {
    let path = path.as_ref();
    let p = pool.shown();
    let shown = Escaped(path);
    let advice = match &err {
        FsError::NotFound => format!(
            " — see what exists with 'amberfs ls {p} {}'",
            Escaped(parent_of(path))
        ),
        FsError::AlreadyExists => {
            format!(" — remove it first with 'amberfs rm {p} {shown}' or pick another name")
        }
        FsError::NotADirectory => " — a component of the path is a file, not a directory".into(),
        FsError::DirectoryNotEmpty => {
            format!(" — remove its contents too with 'amberfs rm -r {p} {shown}'")
        }
        FsError::NoSpace => " — remove files from the pool or make a larger pool".into(),
        FsError::InvalidName | FsError::NameTooLong => {
            " — names must be 1 to 255 bytes without '/' or NUL, and not '.' or '..'".into()
        }
        _ => String::new(),
    };
    CliError::new(format!(
        "cannot {action} {shown} in pool {p}: {err}{advice}"
    ))
}

/// The directory part of a pool path, for advice about where to look.
fn parent_of(path: &[u8]) -> &[u8] {
    let end = path.iter().rposition(|&b| b != b'/').map_or(0, |i| i + 1);
    match path[..end].iter().rposition(|&b| b == b'/') {
        Some(0) | None => b"/",
        Some(i) => &path[..i],
    }
}

/// The last component of a pool path or local path, as the name a copy
/// gets when its destination is a directory.
pub fn base_name(path: &str) -> Option<&str> {
    path.trim_end_matches('/')
        .rsplit('/')
        .next()
        .filter(|n| !n.is_empty() && *n != "." && *n != "..")
}

/// Joins a directory path inside the pool and an entry name (any bytes).
pub fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    let mut path = dir.to_vec();
    if !dir.ends_with(b"/") {
        path.push(b'/');
    }
    path.extend_from_slice(name);
    path
}

/// The options that decide how a pool is mounted, checked before the pool
/// is opened so that a typo never touches it.
pub struct MountConfig {
    emulate: Option<EmulatorSpec>,
    options: MountOptions,
    /// The command only reads: a pool that cannot be opened for writing
    /// is opened and mounted read-only instead.
    reads_only: bool,
}

impl MountConfig {
    pub fn parse(emulate: Option<&str>, options: Option<&str>) -> CliResult<MountConfig> {
        let emulate = emulate
            .map(EmulatorSpec::parse)
            .transpose()
            .map_err(|e| CliError::new(format!("--emulate: {e}")))?;
        let options = MountOptions::parse(options.unwrap_or("")).map_err(|e| {
            CliError::new(format!(
                "bad mount options {:?} given with -o: {e}",
                options.unwrap_or("")
            ))
        })?;
        Ok(MountConfig {
            emulate,
            options,
            reads_only: false,
        })
    }

    /// For a command that only reads the pool (ls, cat, get): one on
    /// read-only media, or not writable by the user, is read read-only.
    pub fn reading(self) -> MountConfig {
        MountConfig {
            reads_only: true,
            ..self
        }
    }

    /// The emulator spec the pool runs behind, as `--emulate` takes it;
    /// empty for none.
    pub fn emulate_spec(&self) -> String {
        self.emulate.map(|s| s.to_string()).unwrap_or_default()
    }

    /// Whether the mount is read-only (`-o ro`).
    pub fn read_only(&self) -> bool {
        self.options.read_only
    }

    /// Whether reads leave atime alone (`-o noatime`).
    pub fn noatime(&self) -> bool {
        self.options.atime == amber_core::fs::AtimeRule::Never
    }

    /// The device to mount and the options to mount it with.
    fn open(&self, pool: &Path) -> CliResult<(MmapDevice, MountOptions)> {
        let mut options = self.options.clone();
        let dev = if options.read_only {
            open_read_only(pool)?
        } else if self.reads_only {
            let dev = open_for_reading(pool)?;
            options.read_only = dev.read_only();
            dev
        } else {
            open_device(pool)?
        };
        Ok((dev, options))
    }
}

/// A pool as a command mounts it: as mapped, or behind the emulator when
/// `--emulate` asks for slower media. One type for both keeps every
/// command free of generics.
pub enum PoolDevice {
    Plain(MmapDevice),
    Emulated(Emulated<MmapDevice>),
}

macro_rules! delegate {
    ($self:ident, $dev:ident => $call:expr) => {
        match $self {
            PoolDevice::Plain($dev) => $call,
            PoolDevice::Emulated($dev) => $call,
        }
    };
}

impl PmDevice for PoolDevice {
    fn size(&self) -> u64 {
        delegate!(self, d => d.size())
    }

    fn read_only(&self) -> bool {
        delegate!(self, d => d.read_only())
    }

    fn read(&self, off: u64, buf: &mut [u8]) {
        delegate!(self, d => d.read(off, buf))
    }

    fn write(&self, off: u64, data: &[u8]) {
        delegate!(self, d => d.write(off, data))
    }

    fn write_nt(&self, off: u64, data: &[u8]) {
        delegate!(self, d => d.write_nt(off, data))
    }

    fn zero_nt(&self, off: u64, len: u64) {
        delegate!(self, d => d.zero_nt(off, len))
    }

    fn load_u64(&self, off: u64) -> u64 {
        delegate!(self, d => d.load_u64(off))
    }

    fn store_u64(&self, off: u64, value: u64) {
        delegate!(self, d => d.store_u64(off, value))
    }

    fn store_u128(&self, off: u64, value: u128) {
        delegate!(self, d => d.store_u128(off, value))
    }

    fn flush(&self, off: u64, len: u64) {
        delegate!(self, d => d.flush(off, len))
    }

    fn drain(&self) -> Result<(), PersistError> {
        delegate!(self, d => d.drain())
    }

    fn stats(&self) -> WriteStats {
        delegate!(self, d => d.stats())
    }

    fn populate(&self, off: u64, len: u64) {
        delegate!(self, d => d.populate(off, len))
    }

    fn prefetch(&self, off: u64, len: u64) {
        delegate!(self, d => d.prefetch(off, len))
    }

    fn pages(&self) -> Option<&PoolPages> {
        delegate!(self, d => d.pages())
    }
}

/// A mounted pool for the offline tools.
pub type PoolFs = Fs<PoolDevice>;

/// Opens `pool` (behind the emulator if asked) and mounts it, recovering
/// it if the last session did not end cleanly.
pub fn mount_pool(pool: &Path, config: &MountConfig) -> CliResult<(PoolFs, RecoveryReport)> {
    let (dev, options) = config.open(pool)?;
    let dev = match config.emulate {
        Some(spec) => PoolDevice::Emulated(Emulated::new(dev, spec)),
        None => PoolDevice::Plain(dev),
    };
    Fs::mount(dev, options).map_err(|e| pool_error(pool, e))
}

/// Mounts `pool`, runs `action`, and unmounts cleanly whatever `action`
/// returned, so a failed `put` still leaves a pool that needs no recovery.
/// If the mount had to recover from a crash, says so: the user should know
/// the last session did not end cleanly.
pub fn with_mounted<T>(
    pool: &Path,
    config: &MountConfig,
    action: impl FnOnce(&PoolFs) -> CliResult<T>,
) -> CliResult<T> {
    let (fs, report) = mount_pool(pool, config)?;
    if !report.was_clean {
        warn(format!("{}: {report}", pool.shown()));
    }
    let result = action(&fs);
    let unmounted = fs.unmount().map_err(|e| {
        CliError::new(format!(
            "could not unmount pool {} cleanly: {e}; the next mount will recover it",
            pool.shown()
        ))
    });
    match (result, unmounted) {
        (Err(e), Err(u)) => {
            warn(u);
            Err(e)
        }
        (Err(e), Ok(())) => Err(e),
        (Ok(_), Err(u)) => Err(u),
        (Ok(value), Ok(())) => Ok(value),
    }
}

/// Why streaming a file out of the pool stopped.
pub enum CopyOutError {
    /// Reading the pool failed.
    Pool(FsError),
    /// Writing the destination failed.
    Output(std::io::Error),
}

/// Streams a pool file to `out` a chunk at a time; returns the bytes copied.
pub fn copy_out(file: &File<PoolDevice>, out: &mut impl Write) -> Result<u64, CopyOutError> {
    let mut buf = vec![0u8; CHUNK];
    let mut at = 0u64;
    loop {
        let n = file.read_at(&mut buf, at).map_err(CopyOutError::Pool)?;
        if n == 0 {
            return Ok(at);
        }
        out.write_all(&buf[..n]).map_err(CopyOutError::Output)?;
        at += n as u64;
    }
}

/// A timestamp as `YYYY-MM-DD HH:MM:SS` in UTC: the same on every machine,
/// so listings and test expectations do not depend on the local zone.
pub fn format_time(t: Timespec) -> String {
    let days = t.secs.div_euclid(86_400);
    let of_day = t.secs.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_sizes() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(64 << 20), "64.0 MiB");
        assert_eq!(human_bytes(3 << 29), "1.5 GiB");
    }

    #[test]
    fn times_are_utc_calendar_dates() {
        let at = |secs| format_time(Timespec { secs, nsecs: 0 });
        assert_eq!(at(0), "1970-01-01 00:00:00");
        assert_eq!(at(951_782_400), "2000-02-29 00:00:00");
        assert_eq!(at(1_700_000_000), "2023-11-14 22:13:20");
        assert_eq!(at(-1), "1969-12-31 23:59:59");
    }

    #[test]
    fn path_helpers() {
        assert_eq!(parent_of(b"/a/b"), b"/a");
        assert_eq!(parent_of(b"/a/b/"), b"/a");
        assert_eq!(parent_of(b"/a"), b"/");
        assert_eq!(parent_of(b"a"), b"/");
        assert_eq!(base_name("/x/y.bin"), Some("y.bin"));
        assert_eq!(base_name("dir/"), Some("dir"));
        assert_eq!(base_name("/"), None);
        assert_eq!(join(b"/", b"a"), b"/a");
        assert_eq!(join(b"/d\xfe", b"a\xff"), b"/d\xfe/a\xff");
    }
}
