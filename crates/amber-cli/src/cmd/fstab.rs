//! What mount(8), fstab and systemd bring to a mount: their options, and
//! amberfs called as the `mount.fuse.amberfs` and `umount.fuse.amberfs`
//! helpers, which `mount -t fuse.amberfs POOL DIR -o OPTIONS`, an fstab
//! line of type `fuse.amberfs`, and `umount DIR` run.
//!
//! Options: the kernel's mount flags a FUSE mount takes (`nosuid`,
//! `nodev`, `noexec` and their opposites) go to the kernel; options that
//! mean nothing to a pool (`defaults`, `auto`, `nofail`, `_netdev`,
//! `x-systemd.*`, `user`, `lazytime`, ...) are dropped; `atime` is the
//! core's `relatime`, as on Linux; everything else is the core's
//! (`policy=`, `ro`, `rw`, `noatime`, `relatime`, `strictatime`,
//! `nodiratime`, `sync`, `async`, ...), which refuses what it does not
//! know.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use fuser::MountOption;

use crate::common::{CliError, CliResult};

/// Options an fstab line or mount(8) carries that change nothing here
/// (`lazytime`: Amber's times are durable with the change that moved
/// them anyway).
const IGNORED: [&str; 13] = [
    "defaults",
    "auto",
    "noauto",
    "nofail",
    "_netdev",
    "user",
    "users",
    "nouser",
    "owner",
    "group",
    "lazytime",
    // FUSE-level options always in force (amber-fuse): accepted so that
    // `-o allow_other` copied from another FUSE mount works.
    "allow_other",
    "default_permissions",
];

/// Prefixes of options for other programs (systemd, comments).
const IGNORED_PREFIXES: [&str; 3] = ["x-", "comment=", "X-"];

/// Mount options split by who takes them.
#[derive(Debug, Default, PartialEq)]
pub struct Split {
    /// For the core (`MountOptions::parse`), comma-separated.
    pub core: String,
    /// Flags for the kernel's FUSE mount.
    pub kernel: Vec<MountOption>,
}

/// Splits comma-separated `options`.
pub fn split(options: &str) -> Split {
    let mut core = Vec::new();
    let mut kernel = Vec::new();
    for o in options.split(',').map(str::trim).filter(|o| !o.is_empty()) {
        if let Some(flag) = kernel_flag(o) {
            kernel.push(flag);
        } else if o == "atime" {
            // Linux's "atime" is its default, relatime (the core's too).
            core.push("relatime");
        } else if !IGNORED.contains(&o) && !IGNORED_PREFIXES.iter().any(|p| o.starts_with(p)) {
            core.push(o);
        }
    }
    Split {
        core: core.join(","),
        kernel,
    }
}

fn kernel_flag(o: &str) -> Option<MountOption> {
    Some(match o {
        "nosuid" => MountOption::NoSuid,
        "suid" => MountOption::Suid,
        "nodev" => MountOption::NoDev,
        "dev" => MountOption::Dev,
        "noexec" => MountOption::NoExec,
        "exec" => MountOption::Exec,
        _ => return None,
    })
}

/// Runs as mount(8)'s or umount(8)'s helper when called by that name;
/// None otherwise.
pub fn as_helper() -> Option<CliResult<ExitCode>> {
    let mut args = std::env::args_os();
    let name = args.next().map(PathBuf::from)?;
    let name = name.file_name()?.to_str()?.to_owned();
    let rest: Vec<OsString> = args.collect();
    match name.as_str() {
        "mount.fuse.amberfs" => Some(mount_helper(&rest)),
        "umount.fuse.amberfs" => Some(umount_helper(&rest)),
        _ => None,
    }
}

/// `mount.fuse.amberfs POOL DIR [-o OPTIONS]... [-n] [-s] [-f] [-v]`:
/// mounts as `amberfs mount -o OPTIONS POOL DIR` does.
fn mount_helper(args: &[OsString]) -> CliResult<ExitCode> {
    let mut positional = Vec::new();
    let mut options = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.to_str() {
            Some("-o") => {
                let o = it.next().ok_or_else(|| usage("-o takes options"))?;
                options.push(o.to_string_lossy().into_owned());
            }
            // No mtab, sloppy, fake, verbose: nothing to do differently.
            Some("-n" | "-s" | "-f" | "-v") => {}
            Some(flag) if flag.starts_with('-') => {
                return Err(usage(&format!("unknown flag {flag}")));
            }
            _ => positional.push(PathBuf::from(a)),
        }
    }
    let [pool, dir] = <[PathBuf; 2]>::try_from(positional)
        .map_err(|_| usage("takes the pool and the directory"))?;
    super::mount::mount_from_helper(&pool, &dir, &options.join(","))
}

/// `umount.fuse.amberfs DIR [-n] [-l] [-f] [-v] [-r]`: unmounts as
/// `amberfs umount DIR` does, returning once the pool is closed.
fn umount_helper(args: &[OsString]) -> CliResult<ExitCode> {
    let dirs: Vec<&OsString> = args
        .iter()
        .filter(|a| !a.to_string_lossy().starts_with('-'))
        .collect();
    match dirs.as_slice() {
        [dir] => super::umount::unmount_dir(Path::new(dir)),
        _ => Err(usage("umount.fuse.amberfs takes the directory")),
    }
}

fn usage(why: &str) -> CliError {
    CliError::new(format!(
        "mount.fuse.amberfs: {why} (mount -t fuse.amberfs POOL DIR -o OPTIONS)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fstab_options_go_where_they_mean_something() {
        let s = split(
            "rw,noatime,nosuid,nodev,policy=amber,defaults,nofail,_netdev,x-systemd.automount,comment=x,atime",
        );
        assert_eq!(s.core, "rw,noatime,policy=amber,relatime");
        assert_eq!(s.kernel, vec![MountOption::NoSuid, MountOption::NoDev]);
        assert_eq!(split(" ro , allow_other ,noexec").core, "ro");
        assert_eq!(split("allow_other,sync, default_permissions").core, "sync");
        assert_eq!(split("").kernel, vec![]);
        // Unknown options stay the core's, which refuses them.
        assert_eq!(split("bogus=1").core, "bogus=1");
    }
}
