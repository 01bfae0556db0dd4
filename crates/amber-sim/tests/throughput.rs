//! How many crash images per second can be built and read, over a 4 MiB
//! base, with the pending-line shape of the cost estimate (20 lines, 4
//! prefixes each). Printed, not asserted: the machine is shared and noisy.
//! Run with `cargo test -p amber-sim --release --test throughput -- --nocapture`.

use amber_pmem::PmDevice;
use amber_sim::{enumerate, EnumConfig, OverlayDevice, RecordingDevice};
use std::time::{Duration, Instant};

#[test]
fn images_built_and_read_per_second() {
    const BASE: u64 = 4 << 20;
    let dev = RecordingDevice::new(BASE);
    for line in 0..20u64 {
        for s in 0..4u8 {
            dev.write(line * 199 * 64 + u64::from(s) * 8, &[s + 1; 8]);
        }
    }
    let point = dev.crash_point();
    let images = enumerate(&point, &EnumConfig::default()).images;
    assert_eq!(images.len(), 3122);

    // Each check reads a 4 KiB superblock area and every pending line, and
    // writes one line, as a small recovery would.
    let mut buf = vec![0u8; 4096];
    let mut checked = 0u64;
    let mut checksum = 0u64;
    let start = Instant::now();
    for _round in 0..1000 {
        for image in &images {
            let overlay = OverlayDevice::from_crash(&point, image);
            overlay.read(0, &mut buf);
            for pending in point.lines() {
                overlay.read(pending.line() * 64, &mut buf[..64]);
                checksum = checksum.wrapping_add(u64::from(buf[0]));
            }
            overlay.write(64, &[1; 64]);
            checked += 1;
        }
        if start.elapsed() > Duration::from_secs(1) {
            break;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "amber-sim: {:.0} crash images built+read per second over a 4 MiB base ({checked} in {secs:.2} s, checksum {checksum})",
        checked as f64 / secs
    );
    assert!(checked >= images.len() as u64);
}
