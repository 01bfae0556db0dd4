//! Pools mapped by several threads at once stay whole. A pool file on a
//! disk file system first tries `MAP_SYNC`, which ext4 refuses only after
//! the kernel has cleared the range it was to be mapped over; mapping
//! over a reservation then let one thread's clean-up unmap another
//! thread's fresh pool (a SIGSEGV in the workbench's tests). Each thread
//! here maps pools of several sizes, in a directory on the disk when
//! there is one, and touches every page of each.

use amber_pmem::{MapOptions, MmapDevice, PmDevice};

const THREADS: u64 = 4;
const ROUNDS: u64 = 100;
const MIB: u64 = 1 << 20;

/// Creates, fills and checks pools of 1-8 MiB, `ROUNDS` times.
fn map_and_touch(dir: &std::path::Path, thread: u64) {
    for round in 0..ROUNDS {
        let size = MIB << ((thread + round) % 4);
        let path = dir.join(format!("pool-{thread}"));
        let _ = std::fs::remove_file(&path);
        let dev = MmapDevice::create(&path, size, &MapOptions::default())
            .unwrap_or_else(|e| panic!("thread {thread} round {round}: {e}"));
        dev.zero_nt(0, size);
        let stamp = (thread << 32 | round).to_le_bytes();
        for off in (0..size).step_by(4096) {
            dev.write(off, &stamp);
        }
        dev.drain().unwrap();
        let mut back = [0u8; 8];
        for off in (0..size).step_by(4096) {
            dev.read(off, &mut back);
            assert_eq!(back, stamp, "thread {thread} round {round} offset {off}");
        }
    }
}

#[test]
fn pools_mapped_by_many_threads_at_once_stay_whole() {
    // The default temporary directory: a disk file system here (the case
    // that refuses MAP_SYNC late), tmpfs on some machines.
    let dir = tempfile::tempdir().unwrap();
    std::thread::scope(|s| {
        for thread in 0..THREADS {
            let dir = dir.path();
            s.spawn(move || map_and_touch(dir, thread));
        }
    });
    // And anonymous devices beside file pools, whose maps fill the holes.
    std::thread::scope(|s| {
        for thread in 0..THREADS {
            let dir = dir.path();
            s.spawn(move || {
                if thread % 2 == 0 {
                    map_and_touch(dir, thread);
                } else {
                    for round in 0..ROUNDS {
                        let size = MIB << ((thread + round) % 4);
                        let dev = MmapDevice::anonymous(size, &MapOptions::default()).unwrap();
                        dev.zero_nt(0, size);
                    }
                }
            });
        }
    });
}
