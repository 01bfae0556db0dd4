//! `amberfs bench iozone`: IOzone's throughput matrix (file sizes × record
//! sizes × its eight tests), done the way NVMFS-IOzone argues PM needs:
//! mappings persisted by cache flushes as well as by msync, a load/store
//! path and a non-temporal path with no DRAM main buffer, clean-ups between
//! trials, and every result verified against seed-derived data.

pub mod matrix;
pub mod modes;
pub mod run;
pub mod tests;

pub use matrix::{Cell, Matrix};
pub use modes::Mode;
pub use run::{run, Config, Sync, FILE_NAME};
pub use tests::Test;
