//! Builds libamberfs_preload.so (the shim) and, as the build script of
//! amber-ffi-served too, libamberfs_served.so (the interposer).
//!
//! Exports only the package's own symbols (`--exclude-libs=ALL`): a
//! cdylib exports every `#[no_mangle]` function of the crates it links,
//! and amber-ffi's are the C library's `amberfs_*` calls, which would
//! keep the whole file system in the shim a program loads at every exec
//! (3.5 MB instead of half a megabyte).
//!
//! Links the unwinder statically (libgcc_eh.a, as `gcc -static-libgcc`
//! does) so the interposer no longer needs libgcc_s.so.1. Every program
//! run under `LD_PRELOAD` pays for each library it loads, and libgcc_s's
//! constructor (`__cpu_indicator_init`) runs CPUID a dozen times: on this
//! VM one CPUID traps to the hypervisor for ~5 µs, and loading libgcc_s
//! alone added 100-175 µs to every exec (BENCHMARKS.md, "Per-exec cost
//! of the interposer"). Where the C compiler has no libgcc_eh.a (clang
//! with compiler-rt), the default link stands and libgcc_s is loaded.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CC");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--exclude-libs=ALL");
    let Some(dir) = libgcc_eh_dir() else {
        println!("cargo:warning=no libgcc_eh.a found: the interposer will load libgcc_s.so.1");
        return;
    };
    println!("cargo:rustc-link-search=native={}", dir.display());
    // Whole archive: the unwinder is referenced only by std's rlibs,
    // which the linker reads after this crate's native libraries; pulled
    // in whole, its definitions come first, and `--as-needed` then drops
    // libgcc_s. Only the exported `#[no_mangle]` symbols leave the .so.
    println!("cargo:rustc-link-lib=static:+whole-archive=gcc_eh");
}

/// The directory of the C compiler's libgcc_eh.a, if it has one.
fn libgcc_eh_dir() -> Option<PathBuf> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let out = Command::new(cc)
        .arg("-print-file-name=libgcc_eh.a")
        .output()
        .ok()?;
    let path = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    // Without the file, gcc prints the bare name back.
    path.is_absolute()
        .then_some(path)
        .filter(|p| p.is_file())?
        .parent()
        .map(PathBuf::from)
}
