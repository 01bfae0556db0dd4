//! Why a pool could not be created, opened or mapped, worded so the user
//! knows what to change.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use crate::FlushKind;

/// A pool could not be mapped.
#[non_exhaustive]
#[derive(Debug)]
pub enum MapError {
    /// `create` refuses to overwrite an existing pool.
    AlreadyExists { path: PathBuf },
    /// The pool file or device does not exist.
    NotFound { path: PathBuf },
    /// The process may not open the pool read-write.
    PermissionDenied { path: PathBuf },
    /// The pool is on a read-only file system or device (EROFS): it can
    /// only be opened read-only.
    ReadOnly { path: PathBuf },
    /// The pool is smaller than the minimum the device layer accepts.
    TooSmall { path: PathBuf, size: u64, min: u64 },
    /// The path is neither a regular file nor a device-DAX character device.
    NotPmCapable { path: PathBuf, found: &'static str },
    /// Another open device (in this or another process) holds the pool lock.
    InUse { path: PathBuf },
    /// The file system cannot back the whole pool.
    NoSpace { path: PathBuf, size: u64 },
    /// `mmap` refused the mapping.
    Mmap {
        path: Option<PathBuf>,
        size: u64,
        errno: i32,
    },
    /// A forced flush kind needs an instruction this CPU lacks.
    FlushUnsupported { kind: FlushKind },
    /// The CPU lacks an instruction the device layer cannot do without.
    CpuUnsupported { missing: &'static str },
    /// `AMBER_FLUSH` holds a value that names no flush kind.
    BadFlushOverride { value: String },
    /// Any other I/O failure while preparing the pool.
    Io {
        path: PathBuf,
        action: &'static str,
        source: io::Error,
    },
}

impl MapError {
    /// Classifies an I/O error so the common cases get their own advice.
    pub(crate) fn io(path: &Path, action: &'static str, source: io::Error) -> MapError {
        let path = path.to_path_buf();
        if source.raw_os_error() == Some(libc::EROFS) {
            return MapError::ReadOnly { path };
        }
        match source.kind() {
            io::ErrorKind::NotFound => MapError::NotFound { path },
            io::ErrorKind::PermissionDenied => MapError::PermissionDenied { path },
            io::ErrorKind::AlreadyExists => MapError::AlreadyExists { path },
            _ => MapError::Io {
                path,
                action,
                source,
            },
        }
    }
}

impl fmt::Display for MapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MapError::AlreadyExists { path } => write!(
                f,
                "pool {} already exists; open it instead, or remove it first to start over",
                path.display()
            ),
            MapError::NotFound { path } => write!(
                f,
                "pool {} not found; check the path, or create the pool first",
                path.display()
            ),
            MapError::PermissionDenied { path } => write!(
                f,
                "permission denied opening pool {} read-write; fix its permissions or run as a user that owns it",
                path.display()
            ),
            MapError::ReadOnly { path } => write!(
                f,
                "pool {} is on a read-only file system or device; open it read-only \
                 (MmapDevice::open_read_only) or make its media writable",
                path.display()
            ),
            MapError::TooSmall { path, size, min } => write!(
                f,
                "pool {} is {size} bytes, smaller than the minimum of {min} bytes; recreate it with a larger size",
                path.display()
            ),
            MapError::NotPmCapable { path, found } => write!(
                f,
                "{} is {found}, not a regular file or a device-DAX character device (/dev/daxX.Y); point at a pool file or a DAX device",
                path.display()
            ),
            MapError::InUse { path } => write!(
                f,
                "pool {} is in use by another process (or another open handle in this one); close that first, \
                 or check with `fuser {}` which process holds it",
                path.display(),
                path.display()
            ),
            MapError::NoSpace { path, size } => write!(
                f,
                "not enough space to back pool {} ({size} bytes); free space on its file system or choose a smaller size",
                path.display()
            ),
            MapError::Mmap { path, size, errno } => {
                let what = match path {
                    Some(p) => format!("pool {}", p.display()),
                    None => "anonymous memory".to_string(),
                };
                write!(
                    f,
                    "mmap of {what} ({size} bytes) failed: {} (errno {errno}); check the address-space and memory limits (ulimit -v, vm.max_map_count)",
                    io::Error::from_raw_os_error(*errno)
                )
            }
            MapError::FlushUnsupported { kind } => write!(
                f,
                "flush kind `{kind}` was forced but this CPU lacks the instruction; choose another with AMBER_FLUSH or MapOptions::flush_override"
            ),
            MapError::CpuUnsupported { missing } => write!(
                f,
                "this CPU lacks {missing}, which crash-atomic commits need; run Amber on a newer CPU"
            ),
            MapError::BadFlushOverride { value } => write!(
                f,
                "AMBER_FLUSH={value:?} is not a flush kind; use one of clwb, clflushopt, clflush, none, msync, or unset it"
            ),
            MapError::Io {
                path,
                action,
                source,
            } => write!(f, "could not {action} {}: {source}", path.display()),
        }
    }
}

impl std::error::Error for MapError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            MapError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
