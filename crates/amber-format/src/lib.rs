//! Amber's on-media format, version 1. Every structure is fixed-size and
//! little-endian, encoded field by field at documented offsets; compile-time
//! assertions pin the sizes. docs/design.md is the prose description and must
//! change in the same commit as this crate.
#![forbid(unsafe_code)]

pub mod blockmap;
pub mod dirent;
mod error;
pub mod inode;
pub mod journal;
pub mod layout;
pub mod le;
pub mod split;
pub mod superblock;
pub mod xattr;
pub mod zone;

pub use error::FormatError;
pub use inode::{FileKind, Inode, Timespec, INODE_SIZE, ROOT_INO};
pub use layout::{FormatParams, Layout, PoolLayout, BLOCK_SIZE};
pub use superblock::{PoolState, Superblock, SUPERBLOCK_SIZE};
