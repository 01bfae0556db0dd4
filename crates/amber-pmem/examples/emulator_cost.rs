//! What the emulator itself costs beyond the latency and bandwidth it
//! models: a small persist shaped like a zone write (a 128-byte
//! non-temporal copy, a 32-byte head in two 16-byte stores, its line
//! flushed, one fence), timed on DRAM with and without `pcm`'s costs.
//! The modelled cost is 3 lines of latency after 160 bytes of bandwidth;
//! what the loop takes beyond DRAM's time and that is the emulator's own.
//!
//! `cargo run --release -p amber-pmem --example emulator_cost [spec] [iters]`

use amber_pmem::{Emulated, EmulatorSpec, MapOptions, MmapDevice, PmDevice};
use std::time::Instant;

const SIZE: u64 = 64 << 20;

/// Nanoseconds per persist over `iters` of them, spread over the device.
fn per_persist(dev: &impl PmDevice, iters: u64) -> f64 {
    let data = [7u8; 128];
    let start = Instant::now();
    for i in 0..iters {
        let at = (i * 4096) % (SIZE - 4096);
        dev.write_nt(at, &data);
        dev.store_u128(at + 1024, u128::from(i));
        dev.store_u128(at + 1040, u128::from(i));
        dev.flush(at + 1024, 32);
        dev.drain().expect("drain");
    }
    start.elapsed().as_nanos() as f64 / iters as f64
}

fn main() {
    let mut args = std::env::args().skip(1);
    let spec = EmulatorSpec::parse(&args.next().unwrap_or_else(|| "pcm".into())).expect("spec");
    let iters: u64 = args
        .next()
        .map_or(200_000, |s| s.parse().expect("iterations"));
    let map = || MmapDevice::anonymous(SIZE, &MapOptions::default()).expect("map");
    let bare = map();
    let emulated = Emulated::new(map(), spec);
    // Warm both mappings (page faults) before timing.
    per_persist(&bare, SIZE / 4096);
    per_persist(&emulated, SIZE / 4096);
    let modelled = 3.0 * spec.latency_ns as f64
        + spec
            .bandwidth_bytes_per_sec
            .map_or(0.0, |bw| 160.0 * 1e9 / bw as f64);
    let mut rounds: Vec<(f64, f64)> = (0..5)
        .map(|_| (per_persist(&bare, iters), per_persist(&emulated, iters)))
        .collect();
    rounds.sort_by(|a, b| (a.1 - a.0).total_cmp(&(b.1 - b.0)));
    let (d, e) = rounds[2];
    println!(
        "spec {spec}: dram {d:.0} ns, emulated {e:.0} ns, modelled {modelled:.0} ns, \
         emulator's own {:.0} ns per persist (median of 5 rounds of {iters})",
        e - d - modelled
    );
}
