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
