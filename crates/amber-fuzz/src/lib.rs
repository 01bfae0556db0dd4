//! The bodies of Amber's fuzz targets, in a crate of their own so that
//! cargo-fuzz (`fuzz/`, nightly, outside the workspace) and the seeded
//! tests CI runs on stable (`tests/`) call the same functions:
//!
//! * [`decode::decode_all`]: every decoder of the on-media format over
//!   arbitrary bytes — none may panic, and whatever one accepts must
//!   survive an encode and a decode unchanged;
//! * [`image::check_case`]: a small pool of either layout, damaged as the
//!   input says, through fsck, repair, mount and a walk of every file —
//!   nothing may panic, a pool fsck calls clean must mount and read, and a
//!   repair that exits 0 or 1 must leave such a pool (docs/design.md
//!   §7.1).
#![forbid(unsafe_code)]

pub mod decode;
pub mod image;
pub mod pools;
mod walk;

pub use image::{check_case, check_image};
