//! Copy-on-write crash images: built without copying the base, written
//! without changing it, and equal to a plain byte model under random use.

mod rng;

use amber_pmem::PmDevice;
use amber_sim::{enumerate, EnumConfig, OverlayDevice, RecordingDevice};
use rng::TestRng;
use std::sync::Arc;

#[test]
fn overlay_matches_a_byte_model_and_never_touches_the_base() {
    let base: Vec<u8> = (0..64 * 64).map(|i| (i % 251) as u8).collect();
    let shared = Arc::new(base.clone());
    let dev = OverlayDevice::new(Arc::clone(&shared));
    let mut model = base.clone();
    let mut rng = TestRng::new(3);
    for _ in 0..3000 {
        let off = rng.below(4000);
        let len = 1 + rng.below(95);
        let byte = rng.below(256) as u8;
        let range = off as usize..(off + len) as usize;
        match rng.below(6) {
            0 => {
                dev.write_nt(off, &vec![byte; len as usize]);
                model[range].fill(byte);
            }
            1 => {
                dev.zero_nt(off, len);
                model[range].fill(0);
            }
            2 => {
                let value = u64::from(byte) << 8 | 3;
                dev.store_u64(off & !7, value);
                model[(off & !7) as usize..][..8].copy_from_slice(&value.to_le_bytes());
                assert_eq!(dev.load_u64(off & !7), value);
            }
            3 => {
                let mut buf = vec![0u8; len as usize];
                dev.read(off, &mut buf);
                assert_eq!(buf, model[range]);
            }
            _ => {
                dev.write(off, &vec![byte; len as usize]);
                model[range].fill(byte);
            }
        }
    }
    dev.persist(0, 4096).unwrap();
    assert_eq!(dev.to_image(), model);
    assert_eq!(*shared, base, "the shared base is unchanged");
    assert!(Arc::ptr_eq(dev.base(), &shared), "and was never copied");
}

#[test]
fn crash_images_share_the_durable_image() {
    let dev = RecordingDevice::new(4096);
    dev.write(0, &[1; 10]);
    dev.write(5, &[2; 70]);
    let point = dev.crash_point();
    let images = enumerate(&point, &EnumConfig::default()).images;
    assert!(images.len() >= 3);
    for image in &images {
        let overlay = OverlayDevice::from_crash(&point, image);
        assert!(Arc::ptr_eq(overlay.base(), point.durable()));
        assert_eq!(overlay.delta_lines(), image.choices().len());
        for (line, content) in image.lines(&point) {
            let mut got = [0u8; 64];
            overlay.read(line * 64, &mut got);
            assert_eq!(&got, content);
        }
        overlay.write(0, &[9; 128]);
    }
    assert_eq!(
        *point.durable().as_ref(),
        vec![0u8; 4096],
        "recovery writes stay in deltas"
    );
}

#[test]
fn a_saved_image_replays_on_a_recording_device() {
    let base = Arc::new(vec![4u8; 4096]);
    let overlay = OverlayDevice::with_lines(Arc::clone(&base), [(3, [7u8; 64])]);
    overlay.write(200, &[8; 3]);
    let replay = RecordingDevice::from_image(overlay.to_image());
    let mut buf = [0u8; 64];
    replay.read(192, &mut buf);
    assert_eq!(&buf[..8], &[7, 7, 7, 7, 7, 7, 7, 7]);
    replay.read(200, &mut buf[..4]);
    assert_eq!(&buf[..4], &[8, 8, 8, 7]);
    assert_eq!(replay.durable_image(), overlay.to_image());
}

#[test]
fn flush_and_drain_only_count() {
    let dev = OverlayDevice::new(Arc::new(vec![0u8; 4096]));
    dev.write_persist(60, &[1; 8]).unwrap();
    let stats = dev.stats();
    assert_eq!(
        (stats.bytes_stored, stats.lines_flushed, stats.fences),
        (8, 2, 1)
    );
}
