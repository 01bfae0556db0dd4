//! `libamberfs_preload.so`: run any program with
//! `AMBERFS_POOL=POOL AMBERFS_MOUNT=DIR LD_PRELOAD=libamberfs_preload.so`
//! and its calls on paths under DIR are served in-process from the pool
//! (README, "Running programs in-process"). Every exported symbol and all
//! the code behind it, with its unsafe blocks, is in amber-ffi
//! (`export_preload!`, `preload::hooks`); this package only makes the
//! second shared library cargo needs a package for.
#![forbid(unsafe_code)]

amberfs::export_preload!();
