//! `libamberfs_served.so`: the interposer that serves a pool's mount
//! directory in-process, loaded by the shim `libamberfs_preload.so` when
//! a process has a reason to (design.md §17.12). It exports one symbol,
//! its table of hooks; every hook and all the code behind it, with its
//! unsafe blocks, is in amber-ffi (`export_served!`, `preload::hooks`);
//! this package only makes the shared library cargo needs a package for.
#![forbid(unsafe_code)]

amberfs::export_served!();
