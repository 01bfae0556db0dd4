//! Amber's on-media format, version 1. Every structure is fixed-size and
//! little-endian: a `#[repr(C)]` struct of zerocopy's little-endian field
//! types is its layout, and compile-time assertions pin its size and every
//! field's offset to docs/design.md's tables. docs/design.md is the prose
//! description and must change in the same commit as this crate.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

/// Asserts at compile time that an on-media struct has `size` bytes and
/// each named field the offset docs/design.md gives it, so no field can
/// move unnoticed.
macro_rules! assert_layout {
    ($t:ty, $size:expr, { $($field:ident: $off:expr),* $(,)? }) => {
        const _: () = {
            assert!(::core::mem::size_of::<$t>() == $size, stringify!($t));
            $(assert!(
                ::core::mem::offset_of!($t, $field) == $off,
                concat!(stringify!($t), ".", stringify!($field))
            );)*
        };
    };
}

pub mod acl;
pub mod blockmap;
mod crc;
pub mod dirent;
mod error;
pub mod inode;
pub mod journal;
pub mod layout;
pub mod nova;
pub mod split;
pub mod superblock;
pub mod xattr;
pub mod zone;
pub mod zone_extent;

pub use error::FormatError;
pub use inode::{FileKind, Inode, Timespec, INODE_SIZE, ROOT_INO};
pub use layout::{FormatParams, Layout, PoolLayout, BLOCK_SIZE};
pub use superblock::{PoolState, Superblock, SUPERBLOCK_SIZE};
