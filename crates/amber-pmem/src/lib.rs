//! Amber's persistent-memory device layer.
//!
//! This is the only crate in the workspace allowed to contain `unsafe` code:
//! raw pointers into the mapping never leave it. Everything above reaches PM
//! through the [`PmDevice`] trait.
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

mod atomic;
pub mod clock;
mod cpu;
mod device;
mod emulator;
mod error;
mod flush;
mod info;
mod loadstore;
mod lock;
mod mapping;
mod mmap;
mod ntcopy;
mod overlay;
mod region;
mod shared;
mod stats;
mod window;

pub use device::{check_range, PersistError, PersistErrorKind, PmDevice, CACHE_LINE};
pub use emulator::{Emulated, EmulatorSpec, Per, SpecError};
pub use error::MapError;
pub use flush::{FlushKind, FLUSH_ENV};
pub use info::{MapInfo, MapKind};
pub use loadstore::pattern_word;
pub use mmap::{Durability, MapOptions, MmapDevice, MIN_POOL_SIZE};
pub use ntcopy::NtWidth;
pub use overlay::DramOverlay;
pub use shared::SharedCounter;
pub use stats::{lines_covered, StatsCounter, WriteStats};
pub use window::{page_size, PoolPages, Window};
