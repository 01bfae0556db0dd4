//! Amber's core file system: allocation, metadata journals, inodes,
//! directories, data policies, the std::fs-like API, recovery and fsck.
//! Generic over [`amber_pmem::PmDevice`], so the same code runs on a real
//! mapping, the PM emulator and the crash simulator.
#![forbid(unsafe_code)]

pub mod alloc;
pub mod api;
pub mod check;
pub mod data;
pub mod dir;
pub mod durability;
pub mod error;
pub mod escape;
pub mod fs;
pub mod inode;
pub mod journal;
mod ordered;
pub mod split;
pub mod time;
pub mod types;
pub mod units;
pub mod zone;

pub use api::{DirEntry as Entry, File, FileType, Fs, Metadata, OpenOptions, Permissions};
pub use durability::{Atomicity, Durability};
pub use error::{DeviceError, FsError, Result};
pub use escape::Escaped;
pub use fs::{Core, MountOptions, RecoveryReport};
pub use types::{Attr, DirEntry, Owner, RenameMode, SetAttr, StatFs, TimeSet};
