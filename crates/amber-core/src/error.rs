//! Typed errors of the core file system. Corruption is kept apart from
//! persistence failures and from ordinary POSIX conditions; errno values
//! exist only at the edges (FUSE adapter, CLI).

use amber_format::FormatError;
use amber_pmem::{MapError, PersistError};
use std::error::Error;
use std::sync::Arc;

/// Why a file-system operation failed. A variant that wraps another
/// error keeps it typed and shows its message as its own (with advice),
/// so `source()` hands on that error's source rather than the error
/// itself: a chain printed cause by cause says each thing once.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FsError {
    /// No file by that name or number (ENOENT).
    NotFound,
    /// The name is taken (EEXIST).
    AlreadyExists,
    /// A path component, or a directory operation's target, is not a
    /// directory (ENOTDIR).
    NotADirectory,
    /// A file operation was asked of a directory (EISDIR).
    IsADirectory,
    /// rmdir, or a rename over a directory, found it not empty
    /// (ENOTEMPTY).
    DirectoryNotEmpty,
    /// A name or path component is empty, contains '/' or NUL, or is "."/".." where
    /// those cannot be used.
    InvalidName,
    /// A name over 255 bytes, a path over 4096 or a symlink target over
    /// 4095 (ENAMETOOLONG).
    NameTooLong,
    /// An argument is out of range; the text says which.
    InvalidArgument(&'static str),
    /// No free blocks or inodes left; the operation had no effect.
    NoSpace,
    /// The DRAM a request needs could not be had (ENOMEM); the operation
    /// had no effect.
    OutOfMemory,
    /// The inode already has the most links an inode may have (EMLINK).
    TooManyLinks,
    /// The operation is not allowed on this kind of file (e.g. a hard link
    /// to a directory).
    NotPermitted,
    /// An immutable or append-only flag (chattr +i, +a) forbids the
    /// operation; the text says which (EPERM).
    Protected(&'static str),
    /// Too many symbolic links while resolving a path.
    SymlinkLoop,
    /// The file would exceed the largest size format v1 describes.
    FileTooLarge,
    /// No data or hole at or after the offset (ENXIO).
    NoSuchOffset,
    /// No such extended attribute (ENODATA).
    NoAttribute,
    /// An extended attribute value is too large (E2BIG).
    AttributeTooLarge,
    /// The handle does not allow this (e.g. writing a read-only handle).
    BadHandle,
    /// Renaming a directory into its own subtree.
    WouldCreateCycle,
    /// The mounted policy does not offer this operation; the text says
    /// why (EOPNOTSUPP).
    Unsupported(&'static str),
    /// The pool's metadata is inconsistent; run fsck.
    Corrupted(String),
    /// The pool could not be read as an Amber pool.
    Format(FormatError),
    /// A persist failed earlier; the file system refuses further writes.
    Poisoned(PersistError),
    /// The pool or mapping could not be opened (`From<MapError>`).
    Device(DeviceError),
    /// The file system is mounted read-only (EROFS): nothing may change.
    ReadOnly,
    /// A read-only mount found a pool that was not unmounted cleanly:
    /// recovery would have to write it.
    NeedsRecovery,
    /// The handle or the file does not allow the access asked (a
    /// writable shared mapping of an append-only file, `PROT_WRITE` on a
    /// mapping made through a read-only handle); the text says which
    /// (EACCES).
    AccessDenied(&'static str),
    /// The file's blocks cannot be shown in the caller's address space
    /// (a mapping on a device that cannot map its pages again); the text
    /// says why (ENODEV).
    NotMappable(&'static str),
}

impl std::fmt::Display for FsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FsError::NotFound => f.write_str("no such file or directory"),
            FsError::AlreadyExists => f.write_str("file exists"),
            FsError::NotADirectory => f.write_str("not a directory"),
            FsError::IsADirectory => f.write_str("is a directory"),
            FsError::DirectoryNotEmpty => f.write_str("directory not empty"),
            FsError::InvalidName => f.write_str("invalid file name"),
            FsError::NameTooLong => f.write_str("file name longer than 255 bytes"),
            FsError::InvalidArgument(what) => write!(f, "invalid argument: {what}"),
            FsError::NoSpace => f.write_str("no space left in the pool"),
            FsError::OutOfMemory => f.write_str("not enough memory for the request"),
            FsError::TooManyLinks => f.write_str("too many links"),
            FsError::NotPermitted => f.write_str("operation not permitted"),
            FsError::Protected(why) => write!(f, "operation not permitted: {why}"),
            FsError::SymlinkLoop => f.write_str("too many levels of symbolic links"),
            FsError::FileTooLarge => f.write_str("file too large"),
            FsError::BadHandle => f.write_str("operation not allowed by how the file was opened"),
            FsError::NoAttribute => f.write_str("no such extended attribute"),
            FsError::NoSuchOffset => f.write_str("no data at or after that offset"),
            FsError::AttributeTooLarge => {
                f.write_str("extended attribute value larger than the 4 KiB an inode holds")
            }
            FsError::WouldCreateCycle => {
                f.write_str("cannot move a directory into its own subdirectory")
            }
            FsError::Unsupported(why) => write!(f, "operation not supported: {why}"),
            FsError::Corrupted(what) => {
                write!(f, "pool is corrupt ({what}): run `amberfs fsck --repair`")
            }
            FsError::Format(e) => write!(f, "{e}"),
            FsError::Poisoned(e) => write!(
                f,
                "{e}; the file system refuses further writes: unmount and run `amberfs fsck`"
            ),
            FsError::Device(e) => write!(f, "{e}"),
            FsError::ReadOnly => f.write_str("read-only file system"),
            FsError::NeedsRecovery => f.write_str(
                "the pool was not unmounted cleanly and recovery needs write access, so a \
                 read-only open cannot use it: run `amberfs fsck --repair` on a writable copy of \
                 the pool, or copy its files out with `amberfs salvage POOL DIR` (it recovers in \
                 memory and writes nothing)",
            ),
            FsError::AccessDenied(why) => write!(f, "permission denied: {why}"),
            FsError::NotMappable(why) => write!(f, "the file cannot be mapped: {why}"),
        }
    }
}

impl Error for FsError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            FsError::Format(e) => e.source(),
            FsError::Poisoned(e) => e.source(),
            FsError::Device(e) => e.source(),
            _ => None,
        }
    }
}

/// Why the pool could not be opened or mapped: the device layer's typed
/// error, shared by the clones of the [`FsError`] that carries it (a
/// [`MapError`] may hold an `io::Error`, which cannot be cloned).
#[derive(Debug, Clone)]
pub struct DeviceError(Arc<MapError>);

impl DeviceError {
    /// The device layer's error.
    pub fn map_error(&self) -> &MapError {
        &self.0
    }
}

/// Two are equal when they are one error, or say the same thing.
impl PartialEq for DeviceError {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.to_string() == other.0.to_string()
    }
}

impl Eq for DeviceError {}

impl std::fmt::Display for DeviceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Shows the mapping error's message, so hands on its source.
impl Error for DeviceError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.0.source()
    }
}

impl From<MapError> for FsError {
    fn from(e: MapError) -> Self {
        FsError::Device(DeviceError(Arc::new(e)))
    }
}

impl From<FormatError> for FsError {
    fn from(e: FormatError) -> Self {
        FsError::Format(e)
    }
}

impl From<PersistError> for FsError {
    fn from(e: PersistError) -> Self {
        FsError::Poisoned(e)
    }
}

/// Result of core operations.
pub type Result<T> = std::result::Result<T, FsError>;

impl From<FsError> for std::io::Error {
    /// For the `Read`/`Write`/`Seek` impls: the library's edge to std::io.
    fn from(e: FsError) -> Self {
        use std::io::ErrorKind as K;
        let kind = match &e {
            FsError::NotFound => K::NotFound,
            FsError::AlreadyExists => K::AlreadyExists,
            FsError::NotADirectory => K::NotADirectory,
            FsError::IsADirectory => K::IsADirectory,
            FsError::DirectoryNotEmpty => K::DirectoryNotEmpty,
            FsError::InvalidName | FsError::NameTooLong | FsError::InvalidArgument(_) => {
                K::InvalidInput
            }
            FsError::NoSpace => K::StorageFull,
            FsError::OutOfMemory => K::OutOfMemory,
            FsError::FileTooLarge => K::FileTooLarge,
            FsError::Unsupported(_) => K::Unsupported,
            FsError::BadHandle
            | FsError::NotPermitted
            | FsError::Protected(_)
            | FsError::AccessDenied(_) => K::PermissionDenied,
            FsError::NotMappable(_) => K::Unsupported,
            FsError::Corrupted(_) | FsError::Format(_) => K::InvalidData,
            FsError::ReadOnly | FsError::NeedsRecovery => K::ReadOnlyFilesystem,
            _ => K::Other,
        };
        std::io::Error::new(kind, e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The messages of `e` and of every source under it.
    fn chain(e: &(dyn Error + 'static)) -> Vec<String> {
        std::iter::successors(Some(e), |&e| e.source())
            .map(|e| e.to_string())
            .collect()
    }

    #[test]
    fn wrapped_errors_stay_typed_and_keep_their_sources() {
        let io = std::io::Error::other("disk on fire");
        let map = MapError::Io {
            path: "/p".into(),
            action: "read",
            source: io,
        };
        let said = map.to_string();
        let e = FsError::from(map);
        let FsError::Device(d) = &e else {
            panic!("{e:?}");
        };
        assert!(matches!(d.map_error(), MapError::Io { .. }));
        assert_eq!(chain(&e), [said, "disk on fire".to_string()]);
        assert_eq!(e.clone(), e);
        let persist = FsError::from(PersistError::media("msync: EIO"));
        assert_eq!(chain(&persist).len(), 1);
        assert!(persist.to_string().contains("msync: EIO"));
        let io = std::io::Error::from(e);
        assert!(io.get_ref().is_some_and(|inner| inner.is::<FsError>()));
    }
}
