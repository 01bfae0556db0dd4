//! [`MmapDevice`]: a pool file or DAX device mapped into the address space.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::flush::{self, FlushKind};
use crate::info::{MapInfo, MapKind};
use crate::lock::PoolLock;
use crate::mapping::{Mapping, HUGE_PAGE};
use crate::region::Region;
use crate::{cpu, MapError, PersistError, PmDevice, PoolPages, WriteStats};

/// Smallest pool the device layer maps: one page. The format layer has its
/// own, larger minimum.
pub const MIN_POOL_SIZE: u64 = 4096;

/// What "durable" has to mean for a pool that is not on DAX.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Durability {
    /// Treat the mapping as PM and persist with CPU cache flushes. Right for
    /// DAX and for PM emulated on tmpfs or DRAM; on a disk-backed file the
    /// data is then durable only once the kernel writes the pages back.
    #[default]
    Auto,
    /// The pool is a file on an ordinary file system and must survive power
    /// loss: persist with `msync`. DAX mappings ignore this, they need no
    /// msync.
    Msync,
}

/// How to map a pool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MapOptions {
    /// Durability wanted from non-DAX files.
    pub durability: Durability,
    /// Forces a flush kind, beating `AMBER_FLUSH` and detection; mapping
    /// fails if this CPU cannot execute it.
    pub flush_override: Option<FlushKind>,
}

/// A pool mapped from a file or device-DAX node, exclusively locked.
pub struct MmapDevice {
    // Field order is drop order: unmap before the lock's descriptor closes.
    region: Region,
    info: MapInfo,
    /// The pool's descriptor as windows map it (none for anonymous
    /// memory); it is the lock's, which outlives it.
    pages: Option<PoolPages>,
    lock: Option<PoolLock>,
}

impl MmapDevice {
    /// Creates a new pool file of `size` bytes and maps it. Refuses to touch
    /// an existing file, and reserves the space up front so a full file
    /// system fails here rather than with SIGBUS on a later store.
    pub fn create(path: &Path, size: u64, options: &MapOptions) -> Result<MmapDevice, MapError> {
        if size < MIN_POOL_SIZE {
            return Err(MapError::TooSmall {
                path: path.to_path_buf(),
                size,
                min: MIN_POOL_SIZE,
            });
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| MapError::io(path, "create", e))?;
        let created = PoolLock::acquire(file, path, false)
            .and_then(|lock| {
                allocate(lock.file(), path, size)?;
                Ok(lock)
            })
            .and_then(|lock| {
                let target = Target {
                    path,
                    size,
                    kind: MapKind::File,
                    align: HUGE_PAGE,
                    granule: crate::window::page_size(),
                    read_only: false,
                };
                map_file(lock, &target, options)
            });
        if created.is_err() {
            // The file is ours and holds nothing yet; leaving it would make
            // the retry fail with "already exists".
            let _ = std::fs::remove_file(path);
        }
        created
    }

    /// Opens and maps an existing pool: a regular file or a device-DAX
    /// character device.
    pub fn open(path: &Path, options: &MapOptions) -> Result<MmapDevice, MapError> {
        MmapDevice::open_with(path, options, Access::ExclusiveLock)
    }

    /// Opens and maps an existing pool read-only (`O_RDONLY`, `PROT_READ`,
    /// a shared lock): for a pool on read-only media or without write
    /// permission, and for tools that must leave the pool as it is. Every
    /// store is refused ([`PmDevice::read_only`]); nothing can reach the
    /// pool through this device.
    pub fn open_read_only(path: &Path, options: &MapOptions) -> Result<MmapDevice, MapError> {
        MmapDevice::open_with(path, options, Access::SharedLock)
    }

    /// Maps a pool that a running daemon holds, read-only and without a
    /// lock, for a process the daemon granted read leases (design.md
    /// §17.3): the daemon's exclusive lock stays, and a lease — recalled
    /// before the daemon changes the file it covers — vouches for the
    /// blocks read. Every store is refused, as for `open_read_only`.
    pub fn open_for_lessee(path: &Path, options: &MapOptions) -> Result<MmapDevice, MapError> {
        MmapDevice::open_with(path, options, Access::Lessee)
    }

    /// Maps a pool that a running daemon holds, writable and without its
    /// lock, for a process the daemon may grant write leases (design.md
    /// §17.4): it stores only into blocks a lease granted it. It holds a
    /// lessee's lock (`PoolLock::lessee_writer`) until
    /// [`MmapDevice::stop_writing`], so no later mount recovers the pool
    /// while it might still store.
    pub fn open_for_lessee_writer(
        path: &Path,
        options: &MapOptions,
    ) -> Result<MmapDevice, MapError> {
        MmapDevice::open_with(path, options, Access::LesseeWriter)
    }

    /// The pool file's descriptor, if the device has one: a forked child
    /// of a lessee closes its copy, so the child never keeps the lessee's
    /// lock (which belongs to the open file description) alive.
    pub fn file_descriptor(&self) -> Option<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        self.lock.as_ref().map(|l| l.file().as_raw_fd())
    }

    /// A lessee writer promises to store nothing more: its daemon is gone
    /// and no lease of it is held. Drops its lessee's lock.
    pub fn stop_writing(&self) {
        if let Some(l) = &self.lock {
            l.release_lessee();
        }
    }

    fn open_with(
        path: &Path,
        options: &MapOptions,
        access: Access,
    ) -> Result<MmapDevice, MapError> {
        let read_only = !matches!(access, Access::ExclusiveLock | Access::LesseeWriter);
        let meta = std::fs::metadata(path).map_err(|e| MapError::io(path, "inspect", e))?;
        let file_type = meta.file_type();
        let (kind, size, granule) = if file_type.is_file() {
            (MapKind::File, meta.len(), crate::window::page_size())
        } else if file_type.is_char_device() {
            let (size, granule) = dev_dax_geometry(path, meta.rdev())?;
            (MapKind::DevDax, size, granule)
        } else {
            return Err(MapError::NotPmCapable {
                path: path.to_path_buf(),
                found: describe(&file_type),
            });
        };
        if size < MIN_POOL_SIZE {
            return Err(MapError::TooSmall {
                path: path.to_path_buf(),
                size,
                min: MIN_POOL_SIZE,
            });
        }
        let file = OpenOptions::new()
            .read(true)
            .write(!read_only)
            .open(path)
            .map_err(|e| MapError::io(path, "open", e))?;
        let lock = match access {
            Access::Lessee => PoolLock::unlocked(file),
            Access::LesseeWriter => PoolLock::lessee_writer(file, path)?,
            _ => PoolLock::acquire(file, path, read_only)?,
        };
        let target = Target {
            path,
            size,
            kind,
            align: granule.max(HUGE_PAGE),
            granule,
            read_only,
        };
        map_file(lock, &target, options)
    }

    /// Maps `size` bytes of zeroed anonymous memory: a device for tests and
    /// benchmarks on DRAM with the same primitives as a real pool.
    pub fn anonymous(size: u64, options: &MapOptions) -> Result<MmapDevice, MapError> {
        let flush = flush::choose(options.flush_override, false, false)?;
        let map =
            Mapping::map(None, size as usize, HUGE_PAGE, libc::MAP_PRIVATE).map_err(|errno| {
                MapError::Mmap {
                    path: None,
                    size,
                    errno,
                }
            })?;
        let region = Region::new(map, size, flush)?;
        let info = describe_map(&region, None, MapKind::Anonymous, size, false);
        Ok(MmapDevice {
            region,
            info,
            pages: None,
            lock: None,
        })
    }

    /// What the mapping turned out to be.
    pub fn info(&self) -> &MapInfo {
        &self.info
    }

    pub(crate) fn region(&self) -> &Region {
        &self.region
    }
}

/// How a pool is opened: to write it, holding it alone; to read it,
/// sharing it with other readers; or to read what a daemon's leases
/// vouch for, with no lock at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    ExclusiveLock,
    SharedLock,
    Lessee,
    LesseeWriter,
}

/// What `map_file` maps: the pool's path, size, kind, the alignment its
/// mapping wants (huge pages), the unit the pool maps in at all (a page,
/// or device-DAX's alignment), and whether it is opened read-only.
struct Target<'a> {
    path: &'a Path,
    size: u64,
    kind: MapKind,
    align: usize,
    granule: usize,
    read_only: bool,
}

/// Maps a locked pool, preferring `MAP_SYNC` (DAX) and falling back to a
/// plain shared mapping where the file system cannot do it.
fn map_file(lock: PoolLock, t: &Target<'_>, options: &MapOptions) -> Result<MmapDevice, MapError> {
    let fd = lock.file().as_raw_fd();
    let (path, size) = (t.path, t.size);
    let len = usize::try_from(size).map_err(|_| MapError::Mmap {
        path: Some(path.to_path_buf()),
        size,
        errno: libc::EFBIG,
    })?;
    let mmap_err = |errno| MapError::Mmap {
        path: Some(path.to_path_buf()),
        size,
        errno,
    };
    let prot = if t.read_only {
        libc::PROT_READ
    } else {
        libc::PROT_READ | libc::PROT_WRITE
    };
    let sync_flags = libc::MAP_SHARED_VALIDATE | libc::MAP_SYNC;
    let (map, map_sync) = match Mapping::map_prot(Some(fd), len, t.align, sync_flags, prot) {
        Ok(map) => (map, true),
        // Not DAX (EOPNOTSUPP), or a kernel older than MAP_SYNC (EINVAL).
        Err(libc::EOPNOTSUPP | libc::EINVAL) => (
            Mapping::map_prot(Some(fd), len, t.align, libc::MAP_SHARED, prot).map_err(mmap_err)?,
            false,
        ),
        Err(errno) => return Err(mmap_err(errno)),
    };
    let kind = match t.kind {
        MapKind::File if map_sync => MapKind::DaxFile,
        other => other,
    };
    let dax = matches!(kind, MapKind::DaxFile | MapKind::DevDax);
    let msync_needed = options.durability == Durability::Msync && !dax;
    let flush = flush::choose(options.flush_override, msync_needed, dax)?;
    let region = Region::with_access(map, size, flush, t.read_only)?;
    let info = describe_map(&region, Some(path.to_path_buf()), kind, size, map_sync);
    let pages = PoolPages::new(fd, t.granule, dax, t.read_only);
    Ok(MmapDevice {
        region,
        info,
        pages: Some(pages),
        lock: Some(lock),
    })
}

fn describe_map(
    region: &Region,
    path: Option<PathBuf>,
    kind: MapKind,
    size: u64,
    map_sync: bool,
) -> MapInfo {
    MapInfo {
        path,
        kind,
        size,
        map_sync,
        huge_page_aligned: region.base_addr().is_multiple_of(HUGE_PAGE),
        read_only: region.read_only(),
        flush: region.flush_kind(),
        nt_store: region.nt_width(),
        cpu_model: cpu::model_name(),
    }
}

/// Reserves the file's blocks; file systems without `fallocate` get a
/// sparse file instead.
fn allocate(file: &File, path: &Path, size: u64) -> Result<(), MapError> {
    let len = libc::off_t::try_from(size).map_err(|_| MapError::NoSpace {
        path: path.to_path_buf(),
        size,
    })?;
    // SAFETY: the descriptor is owned by `file` and open for writing.
    let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len) };
    match rc {
        0 => Ok(()),
        libc::ENOSPC | libc::EFBIG => Err(MapError::NoSpace {
            path: path.to_path_buf(),
            size,
        }),
        libc::EOPNOTSUPP | libc::EINVAL => file
            .set_len(size)
            .map_err(|e| MapError::io(path, "size", e)),
        errno => Err(MapError::io(
            path,
            "allocate space for",
            io::Error::from_raw_os_error(errno),
        )),
    }
}

/// Size and alignment of a device-DAX node, from sysfs (a mapping of it
/// must start and end on that alignment); any other character device is
/// refused.
fn dev_dax_geometry(path: &Path, rdev: u64) -> Result<(u64, usize), MapError> {
    // glibc's gnu_dev_major / gnu_dev_minor encoding.
    let major = ((rdev >> 32) & 0xffff_f000) | ((rdev >> 8) & 0xfff);
    let minor = ((rdev >> 12) & 0xffff_ff00) | (rdev & 0xff);
    let sys = PathBuf::from(format!("/sys/dev/char/{major}:{minor}"));
    let is_dax = std::fs::canonicalize(sys.join("subsystem"))
        .map(|s| s.file_name().is_some_and(|n| n == "dax"))
        .unwrap_or(false);
    if !is_dax {
        return Err(MapError::NotPmCapable {
            path: path.to_path_buf(),
            found: "a character device that is not device-DAX",
        });
    }
    let read_num = |name: &str| -> Result<u64, MapError> {
        let file = sys.join(name);
        let text = std::fs::read_to_string(&file).map_err(|e| MapError::io(&file, "read", e))?;
        text.trim().parse().map_err(|_| MapError::Io {
            path: file.clone(),
            action: "parse",
            source: io::Error::new(
                io::ErrorKind::InvalidData,
                format!("not a number: {text:?}"),
            ),
        })
    };
    let size = read_num("size")?;
    // Device-DAX refuses mappings not aligned to its page size (4 KiB,
    // 2 MiB or 1 GiB). Kernels export it in one of two places, or (old
    // ones) not at all, meaning 2 MiB.
    let align = read_num("align")
        .or_else(|_| read_num("device/align"))
        .ok()
        .and_then(|a| usize::try_from(a).ok())
        .filter(|a| a.is_power_of_two() && *a >= crate::window::page_size())
        .unwrap_or(HUGE_PAGE);
    Ok((size, align))
}

fn describe(file_type: &std::fs::FileType) -> &'static str {
    if file_type.is_dir() {
        "a directory"
    } else if file_type.is_block_device() {
        "a block device (use a file on a DAX file system, or a device-DAX node)"
    } else if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

impl PmDevice for MmapDevice {
    fn size(&self) -> u64 {
        self.region.size()
    }

    fn read_only(&self) -> bool {
        self.region.read_only()
    }

    fn read(&self, off: u64, buf: &mut [u8]) {
        self.region.read(off, buf)
    }

    fn write(&self, off: u64, data: &[u8]) {
        self.region.write(off, data)
    }

    fn write_nt(&self, off: u64, data: &[u8]) {
        self.region.write_nt(off, data)
    }

    fn zero_nt(&self, off: u64, len: u64) {
        self.region.zero_nt(off, len)
    }

    fn load_u64(&self, off: u64) -> u64 {
        self.region.load_u64(off)
    }

    fn store_u64(&self, off: u64, value: u64) {
        self.region.store_u64(off, value)
    }

    fn store_u128(&self, off: u64, value: u128) {
        self.region.store_u128(off, value)
    }

    fn flush(&self, off: u64, len: u64) {
        self.region.flush(off, len)
    }

    fn drain(&self) -> Result<(), PersistError> {
        self.region.drain()
    }

    fn stats(&self) -> WriteStats {
        self.region.stats()
    }

    fn populate(&self, off: u64, len: u64) {
        self.region.populate(off, len)
    }

    fn prefetch(&self, off: u64, len: u64) {
        self.region.prefetch(off, len)
    }

    fn pages(&self) -> Option<&PoolPages> {
        self.pages.as_ref()
    }
}
