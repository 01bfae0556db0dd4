//! Amber's core file system: allocation, metadata journals, inodes,
//! directories, data policies, the std::fs-like API, recovery and fsck.
//! Generic over [`amber_pmem::PmDevice`], so the same code runs on a real
//! mapping, the PM emulator and the crash simulator.
//!
//! The public API is what the front ends and tools use: the types
//! re-exported here, and five modules — [`fs`] (format, mount, salvage),
//! [`data`] (the data policies and their registry), [`check`] (fsck and
//! repair), [`zone`] (the small-write zone, for `info` and its tests) and
//! [`units`] (the one grammar of sizes and durations). Every other module
//! is internal, so it can change without touching another crate.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod acl;
mod alloc;
mod api;
pub mod check;
pub mod data;
mod dir;
mod durability;
mod error;
mod escape;
mod filelog;
pub mod fs;
mod inode;
mod journal;
mod mapped;
mod ordered;
mod split;
mod time;
mod types;
pub mod units;
pub mod zone;

pub use api::{
    DirEntry as Entry, File, FileType, Fs, IntoDeviceError, MapOptions, Mapping, Metadata,
    OpenOptions, Permissions,
};
pub use durability::{Atomicity, Durability};
pub use error::{DeviceError, FsError, Result};
pub use escape::Escaped;
pub use fs::{Core, MountOptions, RecoveryReport};
pub use inode::InodeState;
pub use journal::Tx;
pub use mapped::{LeaseView, MapId, MapInfo, MapRequest, Run, WriteLease, MAX_MAPS};
pub use time::{wall, ClockSource};
pub use types::{Attr, DirEntry, Owner, RenameMode, SetAttr, StatFs, TimeSet};
