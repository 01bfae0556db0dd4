//! The persistence model of the recording device: what is pending, what is
//! durable, and that the visible image is always durable plus every pending
//! store.

mod common;
mod rng;

use amber_pmem::{PmDevice, WriteStats};
use amber_sim::{enumerate, CrashImage, EnumConfig, LineChoice, RecordingDevice};
use common::image_bytes;
use rng::TestRng;

#[test]
fn unflushed_store_stays_pending_across_a_fence() {
    let dev = RecordingDevice::new(4096);
    dev.write(10, b"hello");
    dev.drain().unwrap();
    assert_eq!(&dev.durable_image()[10..15], &[0; 5]);
    assert_eq!(&dev.current_image()[10..15], b"hello");
    assert_eq!(dev.pending_lines(), 1);
    let mut buf = [0u8; 5];
    dev.read(10, &mut buf);
    assert_eq!(&buf, b"hello", "reads see the store at once");
}

#[test]
fn flushed_and_drained_store_is_durable() {
    let dev = RecordingDevice::new(4096);
    dev.write(100, b"abc");
    dev.flush(100, 3);
    assert_eq!(
        &dev.durable_image()[100..103],
        &[0; 3],
        "flush alone is not durable"
    );
    dev.drain().unwrap();
    assert_eq!(&dev.durable_image()[100..103], b"abc");
    assert_eq!(dev.pending_lines(), 0);
    assert_eq!(dev.pending_records(), 0);
}

#[test]
fn store_after_the_flush_stays_pending() {
    let dev = RecordingDevice::new(4096);
    dev.write(0, &[1]);
    dev.flush(0, 1);
    dev.write(1, &[2]);
    dev.drain().unwrap();
    assert_eq!(&dev.durable_image()[..2], &[1, 0]);
    assert_eq!(&dev.current_image()[..2], &[1, 2]);
    assert_eq!(dev.pending_records(), 1);
    dev.flush(0, 64);
    dev.drain().unwrap();
    assert_eq!(&dev.durable_image()[..2], &[1, 2]);
}

#[test]
fn non_temporal_stores_are_durable_after_the_drain_without_a_flush() {
    let dev = RecordingDevice::from_image(vec![0xAA; 4096]);
    dev.write_nt(64, &[7; 100]);
    dev.zero_nt(1000, 30);
    assert_eq!(dev.durable_image()[64], 0xAA, "not before the drain");
    dev.drain().unwrap();
    let durable = dev.durable_image();
    assert_eq!(&durable[64..164], &[7; 100][..]);
    assert_eq!(&durable[1000..1030], &[0; 30][..]);
    assert_eq!(durable[1030], 0xAA);
    assert_eq!(dev.pending_lines(), 0);
}

#[test]
fn non_temporal_store_writes_back_the_cached_stores_on_its_line() {
    let dev = RecordingDevice::new(4096);
    dev.write(0, &[1]);
    dev.write_nt(8, &[2; 8]);
    dev.drain().unwrap();
    assert_eq!(dev.durable_image()[0], 1);
    assert_eq!(dev.pending_lines(), 0);
}

#[test]
fn a_store_across_lines_is_one_record_per_line() {
    let dev = RecordingDevice::new(4096);
    dev.write(60, &[5; 8]);
    assert_eq!(dev.pending_lines(), 2);
    dev.flush(0, 64);
    dev.drain().unwrap();
    let durable = dev.durable_image();
    assert_eq!(&durable[60..64], &[5; 4]);
    assert_eq!(&durable[64..68], &[0; 4], "the second line was not flushed");
}

#[test]
fn prefixes_follow_program_order_per_line() {
    let dev = RecordingDevice::new(4096);
    dev.write(0, &[1]);
    dev.write(1, &[2]);
    dev.write(0, &[3]);
    let point = dev.crash_point();
    assert_eq!(point.lines().len(), 1);
    let line = &point.lines()[0];
    assert_eq!(line.stores(), 3);
    assert_eq!(&line.prefix(1)[..2], &[1, 0]);
    assert_eq!(&line.prefix(2)[..2], &[1, 2]);
    assert_eq!(&line.prefix(3)[..2], &[3, 2]);
}

#[test]
fn atomics_round_trip_little_endian() {
    let dev = RecordingDevice::new(4096);
    dev.store_u64(8, 0x0102_0304_0506_0708);
    dev.store_u128(16, u128::MAX - 1);
    assert_eq!(dev.load_u64(8), 0x0102_0304_0506_0708);
    assert_eq!(dev.current_image()[8], 0x08);
    assert_eq!(dev.load_u64(16), u64::MAX - 1);
    assert_eq!(dev.pending_records(), 2, "each atomic store is one record");
}

#[test]
#[should_panic(expected = "out of range")]
fn out_of_range_write_panics() {
    RecordingDevice::new(4096).write(4090, &[0; 8]);
}

#[test]
fn stats_count_every_kind_of_store() {
    let dev = RecordingDevice::new(4096);
    dev.write(0, &[1; 10]);
    dev.store_u64(64, 1);
    dev.write_nt(128, &[1; 5]);
    dev.zero_nt(256, 64);
    dev.flush(0, 128);
    dev.drain().unwrap();
    assert_eq!(
        dev.stats(),
        WriteStats {
            bytes_stored: 18,
            bytes_nt: 69,
            lines_flushed: 2,
            fences: 1,
        }
    );
}

#[test]
fn everything_and_nothing_images_match_current_and_durable_under_random_work() {
    let dev = RecordingDevice::new(64 * 64);
    let mut rng = TestRng::new(42);
    for _ in 0..2000 {
        let off = rng.below(4000);
        let len = 1 + rng.below(90).min(4095 - off);
        let byte = rng.below(256) as u8;
        match rng.below(8) {
            0 => dev.write_nt(off, &vec![byte; len as usize]),
            1 => dev.zero_nt(off, len),
            2 => dev.store_u64(off & !7, u64::from(byte) * 0x0101_0101_0101_0101),
            3 => dev.flush(off, len),
            4 => dev.drain().unwrap(),
            _ => dev.write(off, &vec![byte; len as usize]),
        }
        let point = dev.crash_point();
        let all = CrashImage::new(
            (0..point.lines().len())
                .map(|slot| LineChoice {
                    slot: slot as u32,
                    prefix: point.lines()[slot].stores() as u32,
                })
                .collect(),
        );
        assert_eq!(image_bytes(&point, &all), dev.current_image());
        let none = CrashImage::new(Vec::new());
        assert_eq!(image_bytes(&point, &none), dev.durable_image());
    }
}

#[test]
fn enumerated_everything_image_is_the_current_image() {
    let dev = RecordingDevice::new(4096);
    dev.write(0, &[1]);
    dev.write(0, &[0]);
    dev.write(64, &[2]);
    let point = dev.crash_point();
    let images = enumerate(&point, &EnumConfig::default()).images;
    assert!(images[0].is_nothing_persisted());
    assert_eq!(image_bytes(&point, &images[1]), dev.current_image());
}

#[test]
fn the_device_can_be_shared_between_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<RecordingDevice>();
    let dev = RecordingDevice::new(64 * 64);
    std::thread::scope(|s| {
        for t in 0..2u8 {
            let dev = &dev;
            s.spawn(move || {
                for i in 0..32u64 {
                    let off = (u64::from(t) * 32 + i) * 64;
                    dev.write(off, &[t + 1; 64]);
                    dev.persist(off, 64).unwrap();
                }
            });
        }
    });
    assert_eq!(dev.pending_lines(), 0);
    assert_eq!(dev.durable_image(), dev.current_image());
}
