//! Core file system.
#![forbid(unsafe_code)]
