//! The thread that maps a data log's fresh runs ahead of its writer
//! (data/hunter/prefault.rs) and hunter's metadata workers end with their
//! pool: at unmount, and within about a second when the pool is dropped
//! without one (a crash), also where the workers' interval is `never`.
//! Its own test binary, so no other test's pool has such threads.

use amber_core::{Fs, MountOptions};
use amber_format::{FormatParams, PoolLayout};
use amber_pmem::{MapOptions, MmapDevice};
use std::sync::Mutex;
use std::time::{Duration, Instant};

mod common;
use common::rw;

const POOL: u64 = 64 << 20;

/// One test's pool at a time: each counts the process's threads.
static ONE_POOL: Mutex<()> = Mutex::new(());

/// Threads of this process whose names start with `prefix`.
fn threads(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim().starts_with(prefix))
        .count()
}

fn mounted(options: &str) -> Fs<MmapDevice> {
    let dev = MmapDevice::anonymous(POOL, &MapOptions::default()).unwrap();
    let params = FormatParams {
        layout: PoolLayout::Split,
        ..FormatParams::for_size(POOL)
    };
    Fs::format(&dev, &params).unwrap();
    // The wall clock: the thread is not started under the simulated one.
    let o = MountOptions::parse(options).unwrap();
    Fs::mount(dev, o).unwrap().0
}

/// Waits (at most 10 s) until `n` threads named `prefix`... run.
fn wait_for(prefix: &str, n: usize, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while threads(prefix) != n {
        assert!(
            Instant::now() < deadline,
            "{what}: {} {prefix} threads, not {n}",
            threads(prefix)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Mounts with `options`, writes, waits for `n` threads named `prefix`,
/// then unmounts or drops the pool: they end.
fn threads_end_with_the_pool(options: &str, prefix: &str, n: usize) {
    let _one = ONE_POOL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    for unmount in [true, false] {
        let fs = mounted(options);
        let f = rw(&fs, "/f");
        f.write_at(&vec![7u8; 1 << 20], 0).unwrap();
        f.sync_all().unwrap();
        // Started at mount; each names itself once it first runs.
        wait_for(prefix, n, &format!("{options}: a mounted pool"));
        drop(f);
        let when = if unmount {
            fs.unmount().unwrap();
            "after unmount"
        } else {
            drop(fs);
            "after a drop"
        };
        wait_for(prefix, 0, &format!("{options}: {when}"));
    }
}

#[test]
fn the_prefault_thread_ends_with_its_pool() {
    threads_end_with_the_pool("policy=amber,clock=wall", "amber-prefault", 1);
}

#[test]
fn hunters_workers_end_with_their_pool_even_sleeping_forever() {
    for interval in ["never", "3600s"] {
        let options =
            format!("policy=amber,clock=wall,hunter_interval={interval},hunter_workers=2");
        threads_end_with_the_pool(&options, "amber-hunter-", 2);
    }
}
