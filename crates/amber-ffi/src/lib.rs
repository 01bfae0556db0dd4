//! Amber for C and for unmodified programs.
//!
//! * `libamberfs` (this crate as a cdylib or staticlib, with
//!   `include/amberfs.h`): a pool handle and POSIX-shaped calls on it
//!   (`capi/`).
//! * The LD_PRELOAD interposer's code (`preload/`): the package
//!   `amber-ffi-preload` builds the shim `libamberfs_preload.so` by
//!   expanding [`export_shim!`], and `amber-ffi-served` the interposer it
//!   loads, `libamberfs_served.so`, by expanding [`export_served!`], so
//!   their exported symbols are defined here, with every unsafe block of
//!   all three.
//!
//! Both sit on `posix/`: POSIX semantics over a mounted pool in safe Rust
//! (descriptors, open file descriptions, path resolution as the kernel
//! does it, errno values). This and amber-pmem are the only crates with
//! unsafe code; every unsafe block says why it is sound.
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod abi;
pub mod capi;
pub mod posix;
pub mod preload;

/// Calls macro `$m` with the list of libc functions the interposer
/// covers, each with libc's signature: the one list the served library's
/// table of hooks ([`preload::table`]) and the shim's exports
/// ([`export_shim!`]) are both made from, so the two cannot disagree.
#[doc(hidden)]
#[macro_export]
macro_rules! with_hook_list {
    ($($m:tt)+) => {
        $($m)+! {
            open(p: *const c_char, fl: c_int, m: mode_t) -> c_int;
            open64(p: *const c_char, fl: c_int, m: mode_t) -> c_int;
            openat(d: c_int, p: *const c_char, fl: c_int, m: mode_t) -> c_int;
            openat64(d: c_int, p: *const c_char, fl: c_int, m: mode_t) -> c_int;
            creat(p: *const c_char, m: mode_t) -> c_int;
            creat64(p: *const c_char, m: mode_t) -> c_int;
            __open_2(p: *const c_char, fl: c_int) -> c_int;
            __open64_2(p: *const c_char, fl: c_int) -> c_int;
            __openat_2(d: c_int, p: *const c_char, fl: c_int) -> c_int;
            __openat64_2(d: c_int, p: *const c_char, fl: c_int) -> c_int;
            close(fd: c_int) -> c_int;
            close_range(a: c_uint, b: c_uint, fl: c_int) -> c_int;
            closefrom(fd: c_int) -> ();
            read(fd: c_int, b: *mut c_void, n: size_t) -> ssize_t;
            write(fd: c_int, b: *const c_void, n: size_t) -> ssize_t;
            pread(fd: c_int, b: *mut c_void, n: size_t, o: off64_t) -> ssize_t;
            pread64(fd: c_int, b: *mut c_void, n: size_t, o: off64_t) -> ssize_t;
            pwrite(fd: c_int, b: *const c_void, n: size_t, o: off64_t) -> ssize_t;
            pwrite64(fd: c_int, b: *const c_void, n: size_t, o: off64_t) -> ssize_t;
            readv(fd: c_int, v: *const iovec, n: c_int) -> ssize_t;
            writev(fd: c_int, v: *const iovec, n: c_int) -> ssize_t;
            preadv(fd: c_int, v: *const iovec, n: c_int, o: off64_t) -> ssize_t;
            preadv64(fd: c_int, v: *const iovec, n: c_int, o: off64_t) -> ssize_t;
            pwritev(fd: c_int, v: *const iovec, n: c_int, o: off64_t) -> ssize_t;
            pwritev64(fd: c_int, v: *const iovec, n: c_int, o: off64_t) -> ssize_t;
            preadv2(fd: c_int, v: *const iovec, n: c_int, o: off64_t, f: c_int) -> ssize_t;
            preadv64v2(fd: c_int, v: *const iovec, n: c_int, o: off64_t, f: c_int) -> ssize_t;
            pwritev2(fd: c_int, v: *const iovec, n: c_int, o: off64_t, f: c_int) -> ssize_t;
            pwritev64v2(fd: c_int, v: *const iovec, n: c_int, o: off64_t, f: c_int) -> ssize_t;
            __read_chk(fd: c_int, b: *mut c_void, n: size_t, l: size_t) -> ssize_t;
            __pread_chk(fd: c_int, b: *mut c_void, n: size_t, o: off64_t, l: size_t) -> ssize_t;
            __pread64_chk(fd: c_int, b: *mut c_void, n: size_t, o: off64_t, l: size_t) -> ssize_t;
            lseek(fd: c_int, o: off64_t, w: c_int) -> off64_t;
            lseek64(fd: c_int, o: off64_t, w: c_int) -> off64_t;
            fsync(fd: c_int) -> c_int;
            fdatasync(fd: c_int) -> c_int;
            syncfs(fd: c_int) -> c_int;
            sync_file_range(fd: c_int, o: off64_t, n: off64_t, f: c_uint) -> c_int;
            ftruncate(fd: c_int, l: off64_t) -> c_int;
            ftruncate64(fd: c_int, l: off64_t) -> c_int;
            truncate(p: *const c_char, l: off64_t) -> c_int;
            truncate64(p: *const c_char, l: off64_t) -> c_int;
            fallocate(fd: c_int, m: c_int, o: off64_t, l: off64_t) -> c_int;
            fallocate64(fd: c_int, m: c_int, o: off64_t, l: off64_t) -> c_int;
            posix_fallocate(fd: c_int, o: off64_t, l: off64_t) -> c_int;
            posix_fallocate64(fd: c_int, o: off64_t, l: off64_t) -> c_int;
            posix_fadvise(fd: c_int, o: off64_t, l: off64_t, a: c_int) -> c_int;
            posix_fadvise64(fd: c_int, o: off64_t, l: off64_t, a: c_int) -> c_int;
            stat(p: *const c_char, s: *mut stat64) -> c_int;
            stat64(p: *const c_char, s: *mut stat64) -> c_int;
            lstat(p: *const c_char, s: *mut stat64) -> c_int;
            lstat64(p: *const c_char, s: *mut stat64) -> c_int;
            fstat(fd: c_int, s: *mut stat64) -> c_int;
            fstat64(fd: c_int, s: *mut stat64) -> c_int;
            fstatat(d: c_int, p: *const c_char, s: *mut stat64, f: c_int) -> c_int;
            fstatat64(d: c_int, p: *const c_char, s: *mut stat64, f: c_int) -> c_int;
            statx(d: c_int, p: *const c_char, f: c_int, m: c_uint, s: *mut statx) -> c_int;
            statfs(p: *const c_char, s: *mut statfs64) -> c_int;
            statfs64(p: *const c_char, s: *mut statfs64) -> c_int;
            fstatfs(fd: c_int, s: *mut statfs64) -> c_int;
            fstatfs64(fd: c_int, s: *mut statfs64) -> c_int;
            statvfs(p: *const c_char, s: *mut statvfs64) -> c_int;
            statvfs64(p: *const c_char, s: *mut statvfs64) -> c_int;
            fstatvfs(fd: c_int, s: *mut statvfs64) -> c_int;
            fstatvfs64(fd: c_int, s: *mut statvfs64) -> c_int;
            unlink(p: *const c_char) -> c_int;
            unlinkat(d: c_int, p: *const c_char, f: c_int) -> c_int;
            rmdir(p: *const c_char) -> c_int;
            mkdir(p: *const c_char, m: mode_t) -> c_int;
            mkdirat(d: c_int, p: *const c_char, m: mode_t) -> c_int;
            rename(a: *const c_char, b: *const c_char) -> c_int;
            renameat(da: c_int, a: *const c_char, db: c_int, b: *const c_char) -> c_int;
            renameat2(da: c_int, a: *const c_char, db: c_int, b: *const c_char, f: c_uint) -> c_int;
            link(a: *const c_char, b: *const c_char) -> c_int;
            linkat(da: c_int, a: *const c_char, db: c_int, b: *const c_char, f: c_int) -> c_int;
            symlink(t: *const c_char, p: *const c_char) -> c_int;
            symlinkat(t: *const c_char, d: c_int, p: *const c_char) -> c_int;
            readlink(p: *const c_char, b: *mut c_char, n: size_t) -> ssize_t;
            readlinkat(d: c_int, p: *const c_char, b: *mut c_char, n: size_t) -> ssize_t;
            __readlink_chk(p: *const c_char, b: *mut c_char, n: size_t, l: size_t) -> ssize_t;
            __readlinkat_chk(d: c_int, p: *const c_char, b: *mut c_char, n: size_t, l: size_t) -> ssize_t;
            access(p: *const c_char, m: c_int) -> c_int;
            faccessat(d: c_int, p: *const c_char, m: c_int, f: c_int) -> c_int;
            euidaccess(p: *const c_char, m: c_int) -> c_int;
            eaccess(p: *const c_char, m: c_int) -> c_int;
            chmod(p: *const c_char, m: mode_t) -> c_int;
            fchmod(fd: c_int, m: mode_t) -> c_int;
            fchmodat(d: c_int, p: *const c_char, m: mode_t, f: c_int) -> c_int;
            chown(p: *const c_char, u: uid_t, g: gid_t) -> c_int;
            lchown(p: *const c_char, u: uid_t, g: gid_t) -> c_int;
            fchown(fd: c_int, u: uid_t, g: gid_t) -> c_int;
            fchownat(d: c_int, p: *const c_char, u: uid_t, g: gid_t, f: c_int) -> c_int;
            utimensat(d: c_int, p: *const c_char, t: *const timespec, f: c_int) -> c_int;
            futimens(fd: c_int, t: *const timespec) -> c_int;
            dup(fd: c_int) -> c_int;
            dup2(a: c_int, b: c_int) -> c_int;
            dup3(a: c_int, b: c_int, f: c_int) -> c_int;
            fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int;
            fcntl64(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int;
            flock(fd: c_int, op: c_int) -> c_int;
            chdir(p: *const c_char) -> c_int;
            fchdir(fd: c_int) -> c_int;
            getcwd(b: *mut c_char, n: size_t) -> *mut c_char;
            __getcwd_chk(b: *mut c_char, n: size_t, l: size_t) -> *mut c_char;
            umask(m: mode_t) -> mode_t;
            opendir(p: *const c_char) -> *mut DIR;
            fdopendir(fd: c_int) -> *mut DIR;
            readdir(d: *mut DIR) -> *mut dirent64;
            readdir64(d: *mut DIR) -> *mut dirent64;
            closedir(d: *mut DIR) -> c_int;
            rewinddir(d: *mut DIR) -> ();
            telldir(d: *mut DIR) -> c_long;
            seekdir(d: *mut DIR, p: c_long) -> ();
            dirfd(d: *mut DIR) -> c_int;
            fopen(p: *const c_char, m: *const c_char) -> *mut FILE;
            fopen64(p: *const c_char, m: *const c_char) -> *mut FILE;
            fdopen(fd: c_int, m: *const c_char) -> *mut FILE;
            freopen(p: *const c_char, m: *const c_char, s: *mut FILE) -> *mut FILE;
            freopen64(p: *const c_char, m: *const c_char, s: *mut FILE) -> *mut FILE;
            fileno(s: *mut FILE) -> c_int;
            fileno_unlocked(s: *mut FILE) -> c_int;
            mmap(a: *mut c_void, l: size_t, p: c_int, f: c_int, fd: c_int, o: off64_t) -> *mut c_void;
            mmap64(a: *mut c_void, l: size_t, p: c_int, f: c_int, fd: c_int, o: off64_t) -> *mut c_void;
            munmap(a: *mut c_void, l: size_t) -> c_int;
            mprotect(a: *mut c_void, l: size_t, p: c_int) -> c_int;
            msync(a: *mut c_void, l: size_t, f: c_int) -> c_int;
            madvise(a: *mut c_void, l: size_t, v: c_int) -> c_int;
            mremap(a: *mut c_void, o: size_t, n: size_t, f: c_int, to: *mut c_void) -> *mut c_void;
            getxattr(p: *const c_char, n: *const c_char, v: *mut c_void, s: size_t) -> ssize_t;
            lgetxattr(p: *const c_char, n: *const c_char, v: *mut c_void, s: size_t) -> ssize_t;
            fgetxattr(fd: c_int, n: *const c_char, v: *mut c_void, s: size_t) -> ssize_t;
            setxattr(p: *const c_char, n: *const c_char, v: *const c_void, s: size_t, f: c_int) -> c_int;
            lsetxattr(p: *const c_char, n: *const c_char, v: *const c_void, s: size_t, f: c_int) -> c_int;
            fsetxattr(fd: c_int, n: *const c_char, v: *const c_void, s: size_t, f: c_int) -> c_int;
            listxattr(p: *const c_char, l: *mut c_char, s: size_t) -> ssize_t;
            llistxattr(p: *const c_char, l: *mut c_char, s: size_t) -> ssize_t;
            flistxattr(fd: c_int, l: *mut c_char, s: size_t) -> ssize_t;
            removexattr(p: *const c_char, n: *const c_char) -> c_int;
            lremovexattr(p: *const c_char, n: *const c_char) -> c_int;
            fremovexattr(fd: c_int, n: *const c_char) -> c_int;
            execve(p: *const c_char, a: *const *const c_char, e: *const *const c_char) -> c_int;
            execv(p: *const c_char, a: *const *const c_char) -> c_int;
            execvp(p: *const c_char, a: *const *const c_char) -> c_int;
            execvpe(p: *const c_char, a: *const *const c_char, e: *const *const c_char) -> c_int;
            fexecve(fd: c_int, a: *const *const c_char, e: *const *const c_char) -> c_int;
            _exit(s: c_int) -> !;
            _Exit(s: c_int) -> !;
        }
    };
}

/// Defines `libamberfs_preload.so`'s exports (the package
/// amber-ffi-preload): each libc function the interposer covers, under
/// libc's name, passed to libc until the process has a reason to load
/// the served library, and to the served library's hook after
/// ([`preload::shim`], design.md §17.12).
#[macro_export]
macro_rules! export_shim {
    () => {
        $crate::with_hook_list!($crate::__export_shim);
    };
}

/// Defines `libamberfs_served.so`'s one export (the package
/// amber-ffi-served): the table of the interposer's hooks, which the
/// shim loads with dlopen and calls through ([`preload::table`]).
#[macro_export]
macro_rules! export_served {
    () => {
        /// The served library's hooks, for the shim that loaded it;
        /// `next` finds libc's own functions for it.
        #[no_mangle]
        pub extern "C" fn amberfs_served_hooks(
            next: $crate::preload::table::NextSymbol,
        ) -> &'static $crate::preload::table::Hooks {
            $crate::preload::table::hand_over(next)
        }
    };
}

/// The shim's exports (`export_shim!`; not for direct use): each passes
/// its call to the served library's hook once that is loaded, and to
/// libc's function of its name before ([`preload::shim::served`] says
/// which, and notes what it must).
#[doc(hidden)]
#[macro_export]
macro_rules! __export_shim {
    ($($name:ident($a0:ident: $t0:ty $(, $arg:ident: $ty:ty)*) -> $ret:ty;)*) => {
        /// libc's names, exported: each calls the served library's hook
        /// or libc's function.
        #[doc(hidden)]
        // `unreachable_code` and `diverging_sub_expression`: for _exit
        // and _Exit, which return `!`.
        #[allow(
            non_snake_case,
            clippy::missing_safety_doc,
            clippy::diverging_sub_expression,
            unreachable_code
        )]
        pub mod amberfs_preload_exports {
            #[allow(unused_imports)]
            use $crate::preload::types::*;
            use $crate::preload::shim::{self, Call};
            $(
                #[no_mangle]
                #[link_section = ".text.amberfs_shim"]
                pub unsafe extern "C" fn $name($a0: $t0 $(, $arg: $ty)*) -> $ret {
                    const CALL: Call = Call::of(stringify!($name));
                    if let Some(h) = shim::served(CALL, shim::fds(CALL, &($a0, $($arg,)*))) {
                        // SAFETY: the C caller's contract is the hook's,
                        // which is libc's for this function.
                        return unsafe { (h.$name)($a0 $(, $arg)*) };
                    }
                    static NEXT: ::std::sync::atomic::AtomicUsize =
                        ::std::sync::atomic::AtomicUsize::new(0);
                    let f = $crate::preload::real::lookup(&NEXT, concat!(stringify!($name), "\0"));
                    // SAFETY: `f` is libc's function of this name, whose C
                    // signature this is.
                    let f: unsafe extern "C" fn($t0 $(, $ty)*) -> $ret =
                        unsafe { ::std::mem::transmute(f) };
                    // SAFETY: the caller's contract.
                    unsafe { f($a0 $(, $arg)*) }
                }
            )*
        }
    };
}
