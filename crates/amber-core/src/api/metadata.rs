//! `Metadata`, `FileType` and `Permissions`, as in std::fs.

use crate::time::to_system;
use crate::types::Attr;
use amber_format::FileKind;
use std::time::SystemTime;

/// The kind of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileType(pub FileKind);

impl FileType {
    pub fn is_dir(&self) -> bool {
        self.0 == FileKind::Directory
    }

    pub fn is_file(&self) -> bool {
        self.0 == FileKind::Regular
    }

    pub fn is_symlink(&self) -> bool {
        self.0 == FileKind::Symlink
    }
}

/// Permission bits (including set-id and sticky).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Permissions(u32);

impl Permissions {
    pub fn from_mode(mode: u32) -> Permissions {
        Permissions(mode & 0o7777)
    }

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
    pub fn file_type(&self) -> FileType {
        FileType(self.attr.kind)
    }

    pub fn is_dir(&self) -> bool {
        self.file_type().is_dir()
    }

    pub fn is_file(&self) -> bool {
        self.file_type().is_file()
    }

    pub fn is_symlink(&self) -> bool {
        self.file_type().is_symlink()
    }

    pub fn len(&self) -> u64 {
        self.attr.size
    }

    pub fn is_empty(&self) -> bool {
        self.attr.size == 0
    }

    pub fn permissions(&self) -> Permissions {
        Permissions::from_mode(self.attr.perm)
    }

    pub fn modified(&self) -> SystemTime {
        to_system(self.attr.mtime)
    }

    pub fn accessed(&self) -> SystemTime {
        to_system(self.attr.atime)
    }

    pub fn created(&self) -> SystemTime {
        to_system(self.attr.crtime)
    }

    /// Every attribute, as stat reports them (std's `MetadataExt`).
    pub fn attr(&self) -> &Attr {
        &self.attr
    }
}
