//! The served library's hooks as one table (design.md §17.12): what
//! `libamberfs_served.so` hands the shim that loaded it, one C function
//! per libc function the interposer covers, made from the same list as
//! the shim's exports (`with_hook_list!`). `layout` is a hash of that
//! list, so a shim and a served library built from different lists
//! refuse each other instead of calling a hook with another's arguments.
#![allow(clippy::missing_safety_doc)]

use std::ffi::{c_char, c_void};

/// Finds libc's function of a name (NUL-terminated) from the shim's
/// place in the search order: the served library's way to libc.
pub type NextSymbol = extern "C" fn(*const c_char) -> *mut c_void;

/// FNV-1a of `bytes`, at compile time.
pub const fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < bytes.len() {
        h ^= bytes[i] as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
        i += 1;
    }
    h
}

macro_rules! define_table {
    ($($name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {
        /// The hooks, each as a C function; `layout` first.
        #[repr(C)]
        #[allow(non_snake_case)]
        pub struct Hooks {
            /// `LAYOUT` of the list the table was made from.
            pub layout: u64,
            $(pub $name: unsafe extern "C" fn($($ty),*) -> $ret,)*
        }

        /// The hash of the list of hooks, names and signatures.
        pub const LAYOUT: u64 = fnv1a(concat!($(stringify!($name($($arg: $ty),*) -> $ret;)),*).as_bytes());

        /// Each hook with the C calling convention.
        #[allow(non_snake_case)]
        mod c {
            #[allow(unused_imports)]
            use crate::preload::types::*;
            $(
                pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
                    // SAFETY: the C caller's contract is the hook's,
                    // which is libc's for this function.
                    unsafe { crate::preload::hooks::$name($($arg),*) }
                }
            )*
        }

        static TABLE: Hooks = Hooks { layout: LAYOUT, $($name: c::$name,)* };
    };
}

#[allow(unused_imports)]
use crate::preload::types::*;

crate::with_hook_list!(define_table);

/// The table, for the shim that loaded this library; from now on libc's
/// functions are found with `next`.
pub fn hand_over(next: NextSymbol) -> &'static Hooks {
    super::real::set_next(next);
    &TABLE
}
