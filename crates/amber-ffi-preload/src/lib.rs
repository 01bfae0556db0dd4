//! `libamberfs_preload.so`: run any program with
//! `AMBERFS_POOL=POOL AMBERFS_MOUNT=DIR LD_PRELOAD=libamberfs_preload.so`
//! and its calls on paths under DIR are served in-process from the pool
//! (README, "Running programs in-process"). This is the shim a program
//! loads: it passes calls to libc until the process has a reason to load
//! the interposer itself, `libamberfs_served.so` from the same directory,
//! and calls its hooks from then on (design.md §17.12). Every exported
//! symbol and all the code behind it, with its unsafe blocks, is in
//! amber-ffi (`export_shim!`, `preload::shim`); this package only makes
//! the shared library cargo needs a package for.
#![forbid(unsafe_code)]

amberfs::export_shim!();
