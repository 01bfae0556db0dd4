//! The hinfs policy on a DRAM device: buffered reads and writes against a
//! byte model, truncate over buffered data, what a crash (the `Fs` dropped
//! without unmount) keeps, sync writes, a full buffer, and the background
//! write-back threads.

use amber_core::{Fs, MountOptions, OpenOptions};
use amber_pmem::{MapOptions, MmapDevice};
use std::time::{Duration, Instant};

mod common;
use common::{classic_params, device_of, stat};

const POOL: u64 = 32 << 20;

fn mount_fresh(opts: &str) -> Fs<MmapDevice> {
    let dev = MmapDevice::anonymous(POOL, &MapOptions::default()).unwrap();
    Fs::format(&dev, &classic_params(POOL)).unwrap();
    Fs::mount(dev, options(opts)).unwrap().0
}

/// `opts`, buffering whatever the DRAM device's calibration says (on DRAM
/// it says buffering does not pay; these tests are about the buffer).
fn options(opts: &str) -> MountOptions {
    MountOptions::parse(&format!("{opts},buffering=always")).unwrap()
}

/// Drops `fs` without unmounting (a crash as far as the pool can tell:
/// DRAM is gone) and mounts the same device again.
fn crash(fs: Fs<MmapDevice>, opts: &str) -> Fs<MmapDevice> {
    let dev = device_of(fs, false);
    let (fs, rep) = Fs::mount(dev, options(opts)).unwrap();
    assert!(!rep.was_clean);
    fs
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed) | 1)
        .collect()
}

fn write_model(m: &mut Vec<u8>, off: usize, data: &[u8]) {
    if m.len() < off + data.len() {
        m.resize(off + data.len(), 0);
    }
    m[off..off + data.len()].copy_from_slice(data);
}

#[test]
fn reads_see_partial_line_writes_appends_and_truncates() {
    for policy in ["hinfs", "hinfs-wb", "hinfs-nclfw"] {
        let fs = mount_fresh(&format!("policy={policy}"));
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .open(&fs, "/f")
            .unwrap();
        let mut m = Vec::new();
        // Durable base, then buffered partial-line overwrites over it.
        let base = pattern(10_000, 1);
        f.write_at(&base, 0).unwrap();
        write_model(&mut m, 0, &base);
        f.sync_all().unwrap();
        for (off, len, seed) in [
            (5, 10, 2),
            (60, 10, 3),
            (4090, 20, 4),
            (9_990, 100, 5),
            (20_000, 3, 6),
            (3, 1, 7),
        ] {
            let d = pattern(len, seed);
            f.write_at(&d, off as u64).unwrap();
            write_model(&mut m, off, &d);
        }
        let mut got = vec![0u8; m.len() + 10];
        assert_eq!(f.read_at(&mut got, 0).unwrap(), m.len(), "{policy}");
        assert_eq!(&got[..m.len()], &m[..], "{policy}");
        // Appends.
        let a = OpenOptions::new()
            .write(true)
            .append(true)
            .open(&fs, "/f")
            .unwrap();
        for i in 0..50 {
            let d = pattern(37, i);
            let at = m.len();
            a.write_at(&d, 0).unwrap();
            write_model(&mut m, at, &d);
        }
        assert_eq!(fs.read("/f").unwrap(), m, "{policy}");
        // Truncate over buffered data, then grow: zeros past the cut.
        f.set_len(9_000).unwrap();
        m.truncate(9_000);
        f.set_len(12_000).unwrap();
        m.resize(12_000, 0);
        f.write_at(&pattern(5, 9), 11_000).unwrap();
        write_model(&mut m, 11_000, &pattern(5, 9));
        assert_eq!(fs.read("/f").unwrap(), m, "{policy}");
        assert_eq!(f.metadata().unwrap().len(), m.len() as u64);
        drop((f, a));
        fs.unmount().unwrap();
    }
}

#[test]
fn a_crash_keeps_fsynced_data_and_never_shows_garbage() {
    let opts = "policy=hinfs";
    let fs = mount_fresh(opts);
    let a = fs.create("/a").unwrap();
    let b = fs.create("/b").unwrap();
    let old = pattern(50_000, 1);
    a.write_at(&old, 0).unwrap();
    a.sync_all().unwrap();
    let newer = pattern(30_000, 2);
    a.write_at(&newer, 10_000).unwrap();
    let lost = pattern(20_000, 3);
    b.write_at(&lost, 0).unwrap();
    drop((a, b));
    let fs = crash(fs, opts);
    let got = fs.read("/a").unwrap();
    assert_eq!(got.len(), old.len(), "the fsync'd size");
    for (i, &x) in got.iter().enumerate() {
        let n = if (10_000..40_000).contains(&i) {
            newer[i - 10_000]
        } else {
            old[i]
        };
        assert!(
            x == old[i] || x == n,
            "byte {i} of /a is neither old nor new"
        );
    }
    let got = fs.read("/b").unwrap();
    assert!(got.len() <= lost.len());
    assert!(
        got.iter().zip(&lost).all(|(x, y)| x == y),
        "/b shows bytes never written"
    );
    fs.unmount().unwrap();
}

#[test]
fn sync_writes_are_durable_and_evict_their_blocks() {
    let opts = "policy=hinfs";
    let fs = mount_fresh(opts);
    let capacity = stat(&fs, "buffer_blocks");
    let f = fs.create("/f").unwrap();
    f.write_at(&pattern(8192, 1), 0).unwrap();
    assert_eq!(
        stat(&fs, "buffer_free"),
        capacity - 2,
        "two blocks buffered"
    );
    let s = OpenOptions::new()
        .write(true)
        .sync(true)
        .open(&fs, "/f")
        .unwrap();
    s.write_at(&pattern(100, 2), 4000).unwrap();
    assert_eq!(
        stat(&fs, "buffer_free"),
        capacity,
        "the sync write evicted both"
    );
    let mut m = pattern(8192, 1);
    write_model(&mut m, 4000, &pattern(100, 2));
    drop((f, s));
    let fs = crash(fs, opts);
    assert_eq!(fs.read("/f").unwrap(), m);
    fs.unmount().unwrap();
}

#[test]
fn a_full_buffer_writes_through_and_threads_write_back() {
    // 256 blocks; the threads start below 5% free.
    let opts = "policy=hinfs-wb,buffer=1M,writeback_interval=50ms";
    let fs = mount_fresh(opts);
    let f = fs.create("/f").unwrap();
    let data = pattern(3 << 20, 4);
    for (i, chunk) in data.chunks(4096).enumerate() {
        f.write_at(chunk, i as u64 * 4096).unwrap();
    }
    assert!(stat(&fs, "lazy_writes") > 0);
    let deadline = Instant::now() + Duration::from_secs(10);
    while stat(&fs, "blocks_written_back") == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        stat(&fs, "blocks_written_back") > 0,
        "the threads wrote back"
    );
    assert!(
        stat(&fs, "write_throughs") + stat(&fs, "blocks_written_back") >= 512,
        "3 MiB does not fit in 1 MiB of buffer"
    );
    assert_eq!(fs.read("/f").unwrap(), data);
    f.sync_all().unwrap();
    drop(f);
    let fs = crash(fs, opts);
    assert_eq!(fs.read("/f").unwrap(), data);
    fs.unmount().unwrap();
}

#[test]
fn aged_blocks_are_written_back_without_fsync() {
    let opts = "policy=hinfs,writeback_interval=20ms,writeback_age=0s";
    let fs = mount_fresh(opts);
    let capacity = stat(&fs, "buffer_blocks");
    let f = fs.create("/f").unwrap();
    let data = pattern(40_000, 5);
    f.write_at(&data, 0).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while stat(&fs, "buffer_free") < capacity && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        stat(&fs, "buffer_free"),
        capacity,
        "everything written back"
    );
    drop(f);
    let fs = crash(fs, opts);
    assert_eq!(fs.read("/f").unwrap(), data);
    fs.unmount().unwrap();
}

#[test]
fn buffering_turns_itself_off_where_it_cannot_pay() {
    // On DRAM a PM line costs about two DRAM lines: hinfs writes directly.
    let dev = MmapDevice::anonymous(POOL, &MapOptions::default()).unwrap();
    Fs::format(&dev, &classic_params(POOL)).unwrap();
    let (fs, _) = Fs::mount(dev, MountOptions::parse("policy=hinfs").unwrap()).unwrap();
    if stat(&fs, "l_pm_ps") >= 4 * stat(&fs, "l_dram_ps") {
        // A slow machine can make DRAM look like slow PM; nothing to check.
        return;
    }
    assert_eq!(stat(&fs, "buffer_on"), 0);
    fs.write("/f", &pattern(10_000, 1)).unwrap();
    assert_eq!(stat(&fs, "lazy_writes"), 0);
    assert_eq!(stat(&fs, "buffer_free"), stat(&fs, "buffer_blocks"));
    fs.unmount().unwrap();
}

#[test]
fn unlink_drops_buffered_blocks_and_the_model_decides() {
    let fs = mount_fresh("policy=hinfs");
    let capacity = stat(&fs, "buffer_blocks");
    fs.write("/gone", &pattern(100_000, 6)).unwrap();
    fs.remove_file("/gone").unwrap();
    assert_eq!(stat(&fs, "buffer_free"), capacity);
    assert_eq!(stat(&fs, "blocks_written_back"), 0, "dropped, not written");
    // Repeated small overwrites and fsyncs: the model decides each time.
    let f = fs.create("/log").unwrap();
    for i in 0..20u8 {
        f.write_at(&pattern(64, i), 0).unwrap();
        f.write_at(&pattern(64, i + 1), 0).unwrap();
        f.sync_all().unwrap();
    }
    assert!(stat(&fs, "bbm_decisions") >= 20);
    assert!(
        stat(&fs, "bbm_predictions") >= 19,
        "all but the first checked"
    );
    assert!(
        stat(&fs, "bbm_accurate") >= 18,
        "a steady pattern is predicted"
    );
    assert!(stat(&fs, "l_pm_ps") > 0 && stat(&fs, "l_dram_ps") > 0);
    drop(f);
    fs.unmount().unwrap();
}

/// Writers and readers on several files while the write-back threads
/// evict constantly (tiny buffer, everything aged at once): every read
/// sees the newest data, and a crash afterwards keeps what was synced.
#[test]
fn reads_see_the_newest_data_while_threads_write_back() {
    let opts = "policy=hinfs,buffer=1M,writeback_interval=1ms,writeback_age=0s,writeback_threads=2";
    let fs = mount_fresh(opts);
    let workers: Vec<_> = (0..4u8)
        .map(|t| {
            let fs = fs.clone();
            std::thread::spawn(move || {
                let path = format!("/t{t}");
                let f = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .open(&fs, &path)
                    .unwrap();
                let mut m = Vec::new();
                for i in 0..300u32 {
                    let off = (i as usize * 7919) % 400_000;
                    let d = pattern(100 + (i as usize % 5000), t.wrapping_add(i as u8));
                    f.write_at(&d, off as u64).unwrap();
                    write_model(&mut m, off, &d);
                    let mut got = vec![0u8; d.len()];
                    f.read_at(&mut got, off as u64).unwrap();
                    assert_eq!(got, d, "thread {t} write {i} read back");
                    if i % 50 == 0 {
                        assert_eq!(fs.read(&path).unwrap(), m, "thread {t} after {i}");
                    }
                }
                f.sync_all().unwrap();
                (path, m)
            })
        })
        .collect();
    let files: Vec<(String, Vec<u8>)> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    assert!(
        stat(&fs, "blocks_written_back") > 0,
        "the threads were busy"
    );
    let fs = crash(fs, opts);
    for (path, m) in files {
        assert_eq!(fs.read(&path).unwrap(), m, "{path} after the crash");
    }
    fs.unmount().unwrap();
}
