//! One mounted pool behind the C ABI or the interposer: the library's
//! `Fs`, the descriptor table, the gate that closing waits on, and the
//! owner new files get.

use std::path::Path;
use std::sync::Arc;

use amber_core::{Core, Fs, MountOptions, Owner};
use amber_pmem::{Emulated, EmulatorSpec, MapError, MapOptions, MmapDevice};

use super::errno::{Errno, PResult};
use super::fdtable::FdTable;
use super::file::OpenFile;
use super::gate::{Gate, Pass};
use super::locks::Flocks;
use super::reserve;

/// The device under every pool opened here: the mapping, behind the PM
/// emulator (`dram`, no added cost, unless asked), as the benchmarks run.
pub type Dev = Emulated<MmapDevice>;

pub struct Pool {
    fs: Fs<Dev>,
    owner: Owner,
    gate: Gate,
    pub files: FdTable,
    pub flocks: Flocks,
}

/// Why a pool could not be opened: the errno, and a message for a person.
#[derive(Debug)]
pub struct OpenError {
    pub errno: Errno,
    pub message: String,
}

fn open_error(errno: i32, message: String) -> OpenError {
    OpenError {
        errno: Errno(errno),
        message,
    }
}

/// Run first by each of the pool's background threads: it takes a private
/// copy of the descriptor table and closes every descriptor in it. The
/// threads never use one (they work on the mapped pool), and while the
/// program's table is shared with them Linux takes and drops a file
/// reference on every descriptor call the program makes (BENCHMARKS,
/// "In-process"). The copy must hold no descriptor afterwards, or a file
/// the program closes would stay open in it (a pipe's reader would never
/// see its end): so where close_range(2) is missing (Linux before 5.9)
/// the table is not unshared at all and the thread shares it as before.
fn detach_descriptors() {
    detach(&[]);
}

/// As the pool's threads do, for a thread that keeps descriptors of its
/// own: the interposer's lease thread, its socket and the pool file (which
/// it maps map leases' pages from, design.md §17.14), `keep`.
pub fn detach_descriptors_but(keep: &[std::os::fd::RawFd]) {
    let mut keep: Vec<u32> = keep.iter().filter_map(|&k| u32::try_from(k).ok()).collect();
    keep.sort_unstable();
    detach(&keep);
}

/// Unshares the thread's descriptor table and closes all of it but
/// `keep` (sorted).
fn detach(keep: &[u32]) {
    let close_range = |first: u32, last: u32| {
        // SAFETY: close_range(2) takes plain integers; the caller decides
        // whose table it closes in.
        unsafe { libc::syscall(libc::SYS_close_range, first, last, 0u32) }
    };
    // A probe that closes nothing: no descriptor has the largest number.
    if close_range(u32::MAX, u32::MAX) != 0 {
        return;
    }
    // SAFETY: unshare(2) affects only the calling thread's own task.
    if unsafe { libc::unshare(libc::CLONE_FILES) } != 0 {
        return;
    }
    // The table is now this thread's alone (unshare succeeded), so this
    // leaves the program's untouched.
    let mut next = 0u32;
    for &k in keep {
        if k > next {
            close_range(next, k - 1);
        }
        next = next.max(k.saturating_add(1));
    }
    close_range(next, u32::MAX);
}

impl Pool {
    /// Opens and mounts `path` with mount options `options` (as `amberfs
    /// mount -o`) behind the emulator preset or spec `emulate` (as
    /// `--emulate`; empty means `dram`), recovering it after a crash.
    /// A pool another process holds fails with EBUSY.
    pub fn open(path: &Path, options: &str, emulate: &str) -> Result<Pool, OpenError> {
        let opts = MountOptions::parse(options)
            .map_err(|e| open_error(libc::EINVAL, format!("mount options {options:?}: {e}")))?;
        let spec = if emulate.is_empty() {
            EmulatorSpec::dram()
        } else {
            EmulatorSpec::parse(emulate).map_err(|e| open_error(libc::EINVAL, e.to_string()))?
        };
        let dev = MmapDevice::open(path, &MapOptions::default()).map_err(|e| {
            let errno = match &e {
                MapError::InUse { .. } => libc::EBUSY,
                MapError::NotFound { .. } => libc::ENOENT,
                MapError::TooSmall { .. } | MapError::NotPmCapable { .. } => libc::EINVAL,
                _ => libc::EIO,
            };
            open_error(errno, format!("cannot open pool {}: {e}", path.display()))
        })?;
        amber_core::data::on_background_thread_start(detach_descriptors);
        let (fs, _report) = Fs::mount(Emulated::new(dev, spec), opts).map_err(|e| {
            open_error(
                Errno::from(e.clone()).0,
                format!("cannot mount pool {}: {e}", path.display()),
            )
        })?;
        Ok(Pool {
            fs,
            owner: Owner::current_process(),
            gate: Gate::default(),
            files: FdTable::default(),
            flocks: Flocks::default(),
        })
    }

    pub fn core(&self) -> &Arc<Core<Dev>> {
        self.fs.core()
    }

    pub fn fs(&self) -> &Fs<Dev> {
        &self.fs
    }

    /// Who new files belong to.
    pub fn owner(&self) -> Owner {
        self.owner
    }

    /// Enters the pool for one call; EIO once it is closing.
    pub fn enter(&self) -> PResult<Pass<'_>> {
        self.gate.enter().ok_or(Errno(libc::EIO))
    }

    /// Gives `file` a descriptor: a fresh kernel descriptor number, close-
    /// on-exec if `cloexec`.
    pub fn install(&self, file: OpenFile, cloexec: bool) -> PResult<i32> {
        let fd = reserve::fd(cloexec)?;
        match self.files.insert(fd, Arc::new(file)) {
            Ok(_) => Ok(fd),
            Err(e) => {
                reserve::close(fd);
                Err(e)
            }
        }
    }

    /// Closes served descriptor `fd`: the kernel number is freed, and the
    /// file with it when no other descriptor shares its description.
    pub fn close_fd(&self, fd: i32) -> PResult<()> {
        let file = self.files.remove(fd).ok_or(Errno(libc::EBADF))?;
        self.flocks.release(&file);
        reserve::close(fd);
        Ok(())
    }

    /// Unmounts cleanly once the calls in flight have left: every
    /// descriptor still open is closed first. Later calls fail with EIO.
    pub fn close(&self) -> PResult<()> {
        if !self.gate.close() {
            return Err(Errno(libc::EBADF));
        }
        for fd in self.files.served() {
            // Only fails for a descriptor another thread closed meanwhile.
            let _ = self.close_fd(fd);
        }
        self.core().unmount().map_err(Errno::from)
    }
}
