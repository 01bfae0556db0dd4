//! How many crash images each crash point yields, that they are distinct,
//! respect per-line prefixes and atomic stores, and replay from the seed.

mod common;

use amber_pmem::PmDevice;
use amber_sim::{enumerate, CrashPoint, EnumConfig, RecordingDevice};
use common::image_bytes;
use std::collections::HashSet;

/// A device with `lines` pending lines, each holding `stores` stores that
/// each leave it with different bytes.
fn point_with(lines: u64, stores: u8) -> CrashPoint {
    let dev = RecordingDevice::new(64 * 1024);
    for line in 0..lines {
        for s in 0..stores {
            dev.write(line * 64 * 3 + u64::from(s), &[s + 1]);
        }
    }
    dev.crash_point()
}

fn distinct_images(point: &CrashPoint, cfg: &EnumConfig) -> usize {
    let e = enumerate(point, cfg);
    let set: HashSet<Vec<u8>> = e.images.iter().map(|i| image_bytes(point, i)).collect();
    assert_eq!(set.len(), e.images.len(), "images are distinct by content");
    set.len()
}

#[test]
fn few_lines_give_every_subset() {
    let point = point_with(3, 1);
    let e = enumerate(&point, &EnumConfig::default());
    assert_eq!(e.images.len(), 8);
    assert_eq!(e.candidates, 8);
    assert!(!e.sampled);
    assert!(e.images[0].is_nothing_persisted());
    assert_eq!(
        e.images[1].choices().len(),
        3,
        "everything persisted comes second"
    );
    assert_eq!(distinct_images(&point, &EnumConfig::default()), 8);
}

#[test]
fn many_lines_give_singles_pairs_none_and_all() {
    let point = point_with(12, 1);
    let e = enumerate(&point, &EnumConfig::default());
    assert_eq!(e.images.len(), 1 + 12 + 66 + 1);
    assert!(!e.sampled);
    assert!(e
        .images
        .iter()
        .all(|i| i.choices().len() <= 2 || i.choices().len() == 12));
}

#[test]
fn prefixes_multiply_with_subsets() {
    // Vinter/Chipmunk's cost estimate: 1 + d*P + C(d,2)*P^2 (+1 for all).
    let point = point_with(20, 4);
    let e = enumerate(&point, &EnumConfig::default());
    assert_eq!(e.images.len(), 1 + 20 * 4 + 190 * 16 + 1);
    assert_eq!(distinct_images(&point, &EnumConfig::default()), 3122);
}

#[test]
fn a_line_persists_only_prefixes_of_its_stores() {
    let dev = RecordingDevice::new(4096);
    dev.write(0, &[1]);
    dev.write(1, &[2]);
    dev.write(2, &[3]);
    let point = dev.crash_point();
    let e = enumerate(&point, &EnumConfig::default());
    let images: Vec<Vec<u8>> = e.images.iter().map(|i| image_bytes(&point, i)).collect();
    let heads: HashSet<[u8; 3]> = images.iter().map(|i| [i[0], i[1], i[2]]).collect();
    let expected: HashSet<[u8; 3]> = [[0, 0, 0], [1, 0, 0], [1, 2, 0], [1, 2, 3]].into();
    assert_eq!(
        heads, expected,
        "never a later store without the earlier ones"
    );
}

#[test]
fn stores_that_change_nothing_add_no_images() {
    let dev = RecordingDevice::from_image(vec![9; 4096]);
    dev.write(0, &[9]);
    assert_eq!(
        enumerate(&dev.crash_point(), &EnumConfig::default())
            .images
            .len(),
        1
    );
    dev.write(64, &[1]);
    dev.write(64, &[9]);
    let e = enumerate(&dev.crash_point(), &EnumConfig::default());
    assert_eq!(e.images.len(), 2, "none (= all) and the intermediate state");
}

#[test]
fn atomic_stores_are_never_torn() {
    let dev = RecordingDevice::new(4096);
    let values = [0x1111_1111_1111_1111u64, 0x2222_2222_2222_2222, u64::MAX];
    for (i, v) in values.iter().enumerate() {
        dev.write(3 + i as u64, &[0xEE]);
        dev.store_u64(8, *v);
        dev.store_u128(16, u128::from(*v) << 64 | u128::from(*v));
        dev.store_u64(64 + 8 * i as u64, *v);
    }
    let point = dev.crash_point();
    let e = enumerate(&point, &EnumConfig::default());
    assert!(e.images.len() > 10);
    for image in &e.images {
        let bytes = image_bytes(&point, image);
        let word = u64::from_le_bytes(bytes[8..16].try_into().unwrap());
        assert!(word == 0 || values.contains(&word), "torn u64 {word:#x}");
        let wide = u128::from_le_bytes(bytes[16..32].try_into().unwrap());
        let (hi, lo) = ((wide >> 64) as u64, wide as u64);
        assert!(
            hi == lo && (lo == 0 || values.contains(&lo)),
            "torn u128 {wide:#x}"
        );
    }
}

#[test]
fn the_cap_samples_full_prefixes_first_and_replays_from_the_seed() {
    let point = point_with(20, 4);
    let cfg = EnumConfig {
        max_images_per_fence: 500,
        seed: 7,
        ..EnumConfig::default()
    };
    let e = enumerate(&point, &cfg);
    assert!(e.sampled);
    assert_eq!(e.candidates, 3122);
    assert_eq!(e.images.len(), 500);
    assert_eq!(distinct_images(&point, &cfg), 500);
    // none, all, then all 20 + 190 full-prefix subsets.
    for image in &e.images[2..212] {
        for c in image.choices() {
            assert_eq!(c.prefix, 4, "full prefixes come first");
        }
    }
    assert_eq!(enumerate(&point, &cfg).images, e.images, "deterministic");
    let other = enumerate(
        &point,
        &EnumConfig {
            seed: 8,
            ..cfg.clone()
        },
    );
    assert_ne!(other.images, e.images, "the seed picks the sample");
    assert_eq!(
        other.images[..212],
        e.images[..212],
        "only the sample differs"
    );
}

#[test]
fn the_cap_also_samples_subsets_when_they_alone_exceed_it() {
    let point = point_with(100, 1);
    let cfg = EnumConfig {
        max_images_per_fence: 300,
        ..EnumConfig::default()
    };
    let e = enumerate(&point, &cfg);
    assert!(e.sampled);
    assert_eq!(e.candidates, 1 + 100 + 4950 + 1);
    assert_eq!(e.images.len(), 300);
    assert_eq!(e.images[1].choices().len(), 100);
    assert!(e.images[2..].iter().all(|i| i.choices().len() <= 2));
}

#[test]
fn exhaustive_mode_keeps_every_subset_when_prefixes_overflow_the_cap() {
    let point = point_with(10, 2);
    let e = enumerate(&point, &EnumConfig::default());
    assert!(e.sampled);
    assert_eq!(e.candidates, 3u128.pow(10));
    assert_eq!(e.images.len(), 4096);
    let full_prefix = e
        .images
        .iter()
        .filter(|i| i.choices().iter().all(|c| c.prefix == 2))
        .count();
    assert_eq!(full_prefix, 1024, "every subset at full prefix, incl. none");
}

#[test]
fn no_pending_lines_give_one_image() {
    let dev = RecordingDevice::new(4096);
    let e = enumerate(&dev.crash_point(), &EnumConfig::default());
    assert_eq!(e.images.len(), 1);
    assert!(e.images[0].is_nothing_persisted());
}
