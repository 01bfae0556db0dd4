//! Helpers the policy test files share: the format and mount options of a
//! classic pool, taking a device back from a mount (cleanly, or by
//! dropping it: a crash), a policy counter by name, and fsck's verdict
//! and errors.
// Each test file is its own crate and uses only some of these.
#![allow(dead_code)]

use amber_core::check::{check, CheckOptions, CheckReport, Severity};
use amber_core::{Core, File, Fs, MountOptions, OpenOptions};
use amber_format::{FormatParams, PoolLayout};
use amber_pmem::{MapOptions, MmapDevice, PmDevice};
use std::sync::Arc;
use std::time::Duration;

/// The library's default format for `size` bytes, but in the classic
/// layout: the one the block-map policies (direct, hinfs*, cow, finelog,
/// lawn) mount, which the defaults (split, for amber) no longer make.
pub fn classic_params(size: u64) -> FormatParams {
    FormatParams {
        layout: PoolLayout::Classic,
        ..FormatParams::for_size(size)
    }
}

/// Mount options for a classic pool: `direct`, the block-map policy that
/// writes in place (the default, amber, needs the split layout).
pub fn direct() -> MountOptions {
    MountOptions::parse("policy=direct").unwrap()
}

/// Takes the device back from `fs`, unmounted cleanly or dropped without
/// unmount (a crash: DRAM is gone). A policy's background thread may hold
/// the core for the rest of a pass; this waits for it, at most 10 s.
pub fn device_of(fs: Fs<MmapDevice>, unmount: bool) -> MmapDevice {
    fs.into_device(unmount, Duration::from_secs(10)).unwrap()
}

/// A fresh anonymous device of `size` bytes, formatted in the layout the
/// policy `opts` names needs.
pub fn formatted_for(opts: &MountOptions, size: u64) -> Arc<MmapDevice> {
    let dev = Arc::new(MmapDevice::anonymous(size, &MapOptions::default()).unwrap());
    let params = FormatParams {
        layout: amber_core::data::layout_for(opts),
        ..FormatParams::for_size(size)
    };
    Fs::format(&*dev, &params).unwrap();
    dev
}

/// A fresh 32 MiB classic pool on an anonymous device, mounted under
/// `direct` through the inode-level API.
pub fn fresh_core() -> (Arc<MmapDevice>, Core<MmapDevice>) {
    let size = 32 << 20;
    let dev = Arc::new(MmapDevice::anonymous(size, &MapOptions::default()).unwrap());
    amber_core::fs::format(&*dev, &classic_params(size)).unwrap();
    let (fs, _) = amber_core::fs::mount(dev.clone(), direct()).unwrap();
    (dev, fs)
}

/// The mounted policy's counter `name`.
pub fn stat(fs: &Fs<MmapDevice>, name: &str) -> u64 {
    fs.core()
        .policy_stats()
        .into_iter()
        .find(|(k, _)| k == name)
        .unwrap_or_else(|| panic!("no stat {name}"))
        .1
}

/// What fsck reports as errors, in its words.
pub fn errors(r: &CheckReport) -> Vec<&str> {
    r.problems
        .iter()
        .filter(|p| p.severity == Severity::Error)
        .map(|p| p.what.as_str())
        .collect()
}

pub fn assert_clean(dev: &MmapDevice) {
    let rep = check(dev, &CheckOptions::default()).unwrap();
    assert!(rep.is_clean(), "fsck: {rep}");
}

/// Opens `p` for reading and writing, creating it.
pub fn rw<D: PmDevice>(fs: &Fs<D>, p: &str) -> File<D> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .open(fs, p)
        .unwrap()
}

/// A seeded test's seed: `var` from the environment, else `default`,
/// printed with how to replay it.
pub fn seed(var: &str, default: u64, what: &str) -> u64 {
    let seed = std::env::var(var)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default);
    eprintln!("{what} seed {seed} (replay with {var}={seed})");
    seed
}
