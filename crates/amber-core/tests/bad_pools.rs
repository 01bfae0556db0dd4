//! Pools that must not mount: each is refused with a clear error and left
//! byte-for-byte unchanged.

use amber_core::fs::{format, mount};
use amber_core::{FsError, MountOptions};
use amber_format::superblock::{Superblock, SUPERBLOCK_SIZE};
use amber_format::{FormatError, FormatParams};
use amber_pmem::PmDevice;
use amber_sim::OverlayDevice;
use std::sync::Arc;

const SIZE: u64 = 1 << 20;

fn image() -> Vec<u8> {
    let dev = OverlayDevice::new(Arc::new(vec![0u8; SIZE as usize]));
    format(&dev, &FormatParams::for_size(SIZE)).unwrap();
    dev.to_image()
}

fn refuse(img: Vec<u8>) -> FsError {
    let dev = Arc::new(OverlayDevice::new(Arc::new(img.clone())));
    let err = match mount(dev.clone(), MountOptions::default()) {
        Ok(_) => panic!("mounted a bad pool"),
        Err(e) => e,
    };
    assert_eq!(dev.to_image(), img, "a refused pool was changed");
    assert!(!err.to_string().is_empty());
    err
}

fn patch_superblocks(img: &mut [u8], f: impl Fn(&mut Superblock)) {
    for off in Superblock::copy_offsets() {
        let at = off as usize;
        let bytes: [u8; SUPERBLOCK_SIZE] = img[at..at + SUPERBLOCK_SIZE].try_into().unwrap();
        let mut sb = Superblock::decode(&bytes).unwrap();
        f(&mut sb);
        img[at..at + SUPERBLOCK_SIZE].copy_from_slice(&sb.encode());
    }
}

#[test]
fn wrong_magic() {
    let mut img = image();
    img[0] = b'X';
    img[4096] = b'X';
    assert_eq!(refuse(img), FsError::Format(FormatError::BadMagic));
    assert_eq!(
        refuse(vec![0u8; SIZE as usize]),
        FsError::Format(FormatError::BadMagic)
    );
}

#[test]
fn newer_version() {
    let mut img = image();
    patch_superblocks(&mut img, |sb| sb.version = 2);
    assert!(matches!(
        refuse(img),
        FsError::Format(FormatError::UnsupportedVersion {
            found: 2,
            supported: 1
        })
    ));
}

#[test]
fn unknown_incompatible_feature() {
    let mut img = image();
    patch_superblocks(&mut img, |sb| sb.feature_incompat = 1 << 40);
    assert!(matches!(
        refuse(img),
        FsError::Format(FormatError::UnknownIncompatFeatures(_))
    ));
}

#[test]
fn bad_checksums() {
    let mut img = image();
    img[100] ^= 0xff;
    img[4096 + 100] ^= 0xff;
    assert_eq!(refuse(img), FsError::Format(FormatError::BadChecksum));
}

#[test]
fn one_bad_copy_still_mounts() {
    let mut img = image();
    img[100] ^= 0xff;
    let dev = Arc::new(OverlayDevice::new(Arc::new(img)));
    let (fs, _) = mount(dev, MountOptions::default()).unwrap();
    fs.unmount().unwrap();
}

#[test]
fn truncated_pool() {
    let mut img = image();
    img.truncate((SIZE / 2) as usize);
    assert!(matches!(
        refuse(img),
        FsError::Format(FormatError::Truncated { .. })
    ));
    assert!(matches!(
        refuse(vec![0u8; 4096]),
        FsError::Format(FormatError::Truncated { .. })
    ));
}

#[test]
fn garbage_in_a_committed_journal_entry_is_refused_before_any_write() {
    let mut img = image();
    let sb = Superblock::decode(&img[..SUPERBLOCK_SIZE].try_into().unwrap()).unwrap();
    let j = sb.layout.journal_offset(0) as usize;
    let entries = [amber_format::journal::Entry {
        offset: 0,
        data: vec![1, 2, 3],
    }];
    let payload = amber_format::journal::encode_payload(&entries);
    let header = amber_format::journal::encode_header(1, 1, &payload);
    img[j..j + 64].copy_from_slice(&header);
    img[j + 64..j + 64 + payload.len()].copy_from_slice(&payload);
    // A committed transaction in a clean pool is itself corruption; mark
    // the pool dirty so the entry's target is what gets judged.
    patch_superblocks(&mut img, |sb| sb.state = amber_format::PoolState::Dirty);
    assert!(matches!(refuse(img), FsError::Corrupted(_)));
}

#[test]
fn device_smaller_than_two_blocks() {
    let dev = OverlayDevice::new(Arc::new(vec![0u8; 64]));
    assert!(dev.size() < 8192);
    let err = mount(Arc::new(dev), MountOptions::default()).err().unwrap();
    assert!(matches!(
        err,
        FsError::Format(FormatError::Truncated { .. })
    ));
}
