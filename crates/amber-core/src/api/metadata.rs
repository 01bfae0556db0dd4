//! `Metadata`, `FileType` and `Permissions`, as in std::fs.

use crate::time::to_system;
use crate::types::Attr;
use amber_format::FileKind;
use std::time::SystemTime;

/// The kind of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileType(pub FileKind);

impl FileType {
    /// Whether it is a directory.
    pub fn is_dir(&self) -> bool {
        self.0 == FileKind::Directory
    }

    /// Whether it is a regular file (not a directory, symlink or special
    /// file).
    pub fn is_file(&self) -> bool {
        self.0 == FileKind::Regular
    }

    /// Whether it is a symbolic link.
    pub fn is_symlink(&self) -> bool {
        self.0 == FileKind::Symlink
    }
}

/// Permission bits (including set-id and sticky).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Permissions(u32);

impl Permissions {
    /// The permissions of a mode word; its file-type bits are dropped.
    pub fn from_mode(mode: u32) -> Permissions {
        Permissions(mode & 0o7777)
    }

    /// The permission, set-id and sticky bits (0o7777 at most).
    pub fn mode(&self) -> u32 {
        self.0
    }

    /// Whether no one may write.
    pub fn readonly(&self) -> bool {
        self.0 & 0o222 == 0
    }
}

/// Attributes of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    attr: Attr,
}

impl From<Attr> for Metadata {
    fn from(attr: Attr) -> Self {
        Metadata { attr }
    }
}

impl Metadata {
    /// The file's type.
    pub fn file_type(&self) -> FileType {
        FileType(self.attr.kind)
    }

    /// Whether the file is a directory.
    pub fn is_dir(&self) -> bool {
        self.file_type().is_dir()
    }

    /// Whether the file is a regular file.
    pub fn is_file(&self) -> bool {
        self.file_type().is_file()
    }

    /// Whether the file is a symbolic link (only from
    /// `symlink_metadata`: `metadata` follows links).
    pub fn is_symlink(&self) -> bool {
        self.file_type().is_symlink()
    }

    /// Size in bytes.
    pub fn len(&self) -> u64 {
        self.attr.size
    }

    /// Whether the size is zero.
    pub fn is_empty(&self) -> bool {
        self.attr.size == 0
    }

    /// Permission, set-id and sticky bits.
    pub fn permissions(&self) -> Permissions {
        Permissions::from_mode(self.attr.perm)
    }

    /// Last data modification time.
    pub fn modified(&self) -> SystemTime {
        to_system(self.attr.mtime)
    }

    /// Last access time.
    pub fn accessed(&self) -> SystemTime {
        to_system(self.attr.atime)
    }

    /// Creation (birth) time.
    pub fn created(&self) -> SystemTime {
        to_system(self.attr.crtime)
    }

    /// Every attribute, as stat reports them (std's `MetadataExt`).
    pub fn attr(&self) -> &Attr {
        &self.attr
    }
}
