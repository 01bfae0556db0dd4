//! Amber's crash simulator, device level.
//!
//! The file system runs on a [`RecordingDevice`], which models PM behind a
//! CPU cache the way Vinter does: stores to a line persist in program order,
//! so a crash leaves each line at some prefix of its pending stores. At every
//! fence it hands a [`CrashPoint`] to a hook; [`enumerate`] picks the crash
//! images worth checking there (Chipmunk's small subsets with Vinter's
//! prefixes, capped and seeded), and [`OverlayDevice`] builds each one as a
//! copy-on-write delta over the shared durable image so recovery can be run
//! on thousands of them per second.
#![forbid(unsafe_code)]

mod crash_point;
mod enumerate;
mod overlay;
mod record;
mod recording;
pub mod rng;
pub use rng::SplitMix64;
mod span;

pub use crash_point::{CrashPoint, PendingLine};
pub use enumerate::{enumerate, CrashImage, EnumConfig, Enumeration, LineChoice};
pub use overlay::OverlayDevice;
pub use recording::{FenceHook, RecordingDevice, MAX_PENDING_RECORDS};

/// Bytes in a cache line, as a `usize` for indexing.
pub const LINE_BYTES: usize = amber_pmem::CACHE_LINE as usize;

/// The contents of one cache line.
pub type Line = [u8; LINE_BYTES];
