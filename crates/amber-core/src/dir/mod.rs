//! Directories: entries live in 64-byte slots of the directory's blocks
//! (format::dirent); a DRAM hash index per directory, built when the
//! directory is first used, makes lookup, create and unlink O(1) however
//! many entries there are (the legacy-file-system study's hashed
//! directories).

mod index;

pub use index::{DirIndex, DirSlot};
