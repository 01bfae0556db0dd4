//! Amber's persistent-memory device layer.
//!
//! This is the only crate in the workspace allowed to contain `unsafe` code:
//! raw pointers into the mapping never leave it. Everything above reaches PM
//! through the [`PmDevice`] trait.
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

mod device;
mod stats;

pub use device::{check_range, PersistError, PmDevice, CACHE_LINE};
pub use stats::{lines_covered, StatsCounter, WriteStats};
