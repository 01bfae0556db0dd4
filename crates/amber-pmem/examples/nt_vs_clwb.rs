//! Is a non-temporal copy faster than memcpy + flush for 4 KiB blocks?
//!
//! The data path writes file blocks with `write_nt`; this measures whether
//! that beats a cached `write` followed by a flush of every line, per flush
//! kind this CPU has, on anonymous memory (DRAM). Run with
//! `cargo run --release -p amber-pmem --example nt_vs_clwb [MiB]`.
//! Prints numbers only: timings depend on the machine, nothing is asserted.

use std::time::Instant;

use amber_pmem::{FlushKind, MapOptions, MmapDevice, PmDevice};

const CHUNK: usize = 4096;

fn main() {
    let mib: u64 = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("size in MiB"))
        .unwrap_or(256);
    let size = mib << 20;
    let data: Vec<u8> = (0..CHUNK).map(|i| i as u8).collect();
    println!("{mib} MiB in {CHUNK} B chunks, each made durable before the next");
    for kind in FlushKind::ALL.into_iter().filter(|k| k.is_supported()) {
        if kind == FlushKind::Msync {
            continue;
        }
        let options = MapOptions {
            flush_override: Some(kind),
            ..MapOptions::default()
        };
        let dev = MmapDevice::anonymous(size, &options).expect("anonymous pool");
        // Fault every page in first so neither method pays for page faults.
        dev.zero_nt(0, size);
        dev.drain().unwrap();
        if kind == FlushKind::Clwb {
            println!("{}", dev.info());
        }
        for round in 0..3 {
            let nt = run(&dev, size, |off| dev.write_nt(off, &data));
            let cached = run(&dev, size, |off| {
                dev.write(off, &data);
                dev.flush(off, CHUNK as u64);
            });
            println!(
                "flush={kind:<10} round {round}: write_nt+drain {nt:6.2} GB/s   write+{kind}+drain {cached:6.2} GB/s",
            );
        }
    }
}

/// GB/s for storing the whole pool chunk by chunk with `store`, each chunk
/// drained before the next.
fn run(dev: &MmapDevice, size: u64, store: impl Fn(u64)) -> f64 {
    let start = Instant::now();
    for off in (0..size).step_by(CHUNK) {
        store(off);
        dev.drain().unwrap();
    }
    size as f64 / start.elapsed().as_secs_f64() / 1e9
}
