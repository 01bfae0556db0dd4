//! The thread that maps a data log's fresh runs ahead of its writer
//! (data/hunter/prefault.rs) ends with its pool: at unmount, and within
//! about a second when the pool is dropped without one (a crash). Its own
//! test binary, so no other test's pool has such a thread.

use amber_core::{Fs, MountOptions};
use amber_format::{FormatParams, PoolLayout};
use amber_pmem::{MapOptions, MmapDevice};
use std::time::{Duration, Instant};

mod common;
use common::rw;

const POOL: u64 = 64 << 20;

/// Threads of this process named like the prefault thread.
fn prefault_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim() == "amber-prefault")
        .count()
}

fn mounted() -> Fs<MmapDevice> {
    let dev = MmapDevice::anonymous(POOL, &MapOptions::default()).unwrap();
    let params = FormatParams {
        layout: PoolLayout::Split,
        ..FormatParams::for_size(POOL)
    };
    Fs::format(&dev, &params).unwrap();
    // The wall clock: the thread is not started under the simulated one.
    let o = MountOptions::parse("policy=amber,clock=wall").unwrap();
    Fs::mount(dev, o).unwrap().0
}

/// Waits (at most 10 s) until `n` such threads run.
fn wait_for(n: usize, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while prefault_threads() != n {
        assert!(
            Instant::now() < deadline,
            "{what}: {} prefault threads, not {n}",
            prefault_threads()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_thread_ends_with_its_pool() {
    for unmount in [true, false] {
        let fs = mounted();
        let f = rw(&fs, "/f");
        f.write_at(&vec![7u8; 1 << 20], 0).unwrap();
        f.sync_all().unwrap();
        // Started at mount; it names itself once it first runs.
        wait_for(1, "a mounted pool");
        drop(f);
        if unmount {
            fs.unmount().unwrap();
        } else {
            drop(fs);
        }
        wait_for(
            0,
            if unmount {
                "after unmount"
            } else {
                "after a drop"
            },
        );
    }
}
