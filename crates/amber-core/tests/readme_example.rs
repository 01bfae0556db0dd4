//! The library example README.md shows, kept compiling and passing.

use amber_core::{Fs, MountOptions, OpenOptions};
use amber_format::FormatParams;
use amber_pmem::{MapOptions, MmapDevice};
use std::io::Write;

#[test]
fn readme_example() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("my.pool");
    let dev = MmapDevice::create(&path, 1 << 30, &MapOptions::default())?;
    Fs::format(&dev, &FormatParams::for_size(1 << 30))?;
    let (fs, report) = Fs::mount(dev, MountOptions::default())?;
    assert!(report.was_clean);
    fs.create_dir_all("/a/b")?;
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .open(&fs, "/a/b/file")?;
    f.write_all(b"hello")?;
    f.sync_all()?;
    drop(f);
    assert_eq!(fs.read("/a/b/file")?, b"hello");
    fs.unmount()?;
    Ok(())
}

/// README's "Per-file durability" library example.
#[test]
fn readme_durability_example() -> Result<(), Box<dyn std::error::Error>> {
    use amber_core::{Atomicity, Durability, FsError};
    let dev = MmapDevice::anonymous(64 << 20, &MapOptions::default())?;
    Fs::format(&dev, &FormatParams::for_size(64 << 20))?;
    let (fs, _) = Fs::mount(dev, MountOptions::default())?;
    fs.create_dir("/journal")?;
    fs.set_durability("/journal", Durability::Sync)?;
    fs.write("/journal/log", b"entry")?; // durable when it returns
    assert_eq!(fs.durability("/journal/log")?, Durability::Sync);
    // Refused unless the pool is mounted with policy=amber, cow, finelog, lawn or nova.
    let atomic = fs.set_atomicity("/journal/log", Atomicity::Write);
    assert!(matches!(atomic, Ok(()) | Err(FsError::Unsupported(_))));
    fs.unmount()?;
    Ok(())
}
