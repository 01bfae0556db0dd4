//! POSIX semantics over a mounted pool, in safe Rust with errno results:
//! what the C library and the interposer both are, before their ABI.

pub mod dir;
pub mod errno;
pub mod fdtable;
pub mod file;
pub mod gate;
pub mod locks;
pub mod mapping;
pub mod ops;
pub mod pool;
pub mod reserve;
pub mod resolve;
pub mod stat;
pub mod vectored;
pub mod xattr;

pub use errno::{Errno, PResult};
pub use pool::{detach_descriptors_but, Dev, Pool};
