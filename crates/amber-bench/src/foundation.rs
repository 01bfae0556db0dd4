//! The foundation issue's measurements, each beside its baseline in the
//! same run:
//! * 4 KiB sequential writes into a 1 GiB file (append and overwrite)
//!   against a bare non-temporal copy of the same bytes, 4 KiB at a time,
//!   each made durable (the same promise an Amber write keeps);
//! * 128 B random overwrites, each followed by fsync, against a bare
//!   128 B store + flush + fence at the same offsets;
//! * mount time of a pool holding N files (clean and after a crash).

use crate::record::Record;
use crate::stats::summarize;
use crate::target::{open_pool, BenchDevice};
use amber_core::fs::{format, mount};
use amber_core::{Core, MountOptions, Owner};
use amber_format::{FileKind, FormatParams, PoolLayout, ROOT_INO};
use amber_pmem::{PmDevice, WriteStats};
use amber_sim::SplitMix64 as Rng;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What to measure and how big.
#[derive(Debug, Clone)]
pub struct Config {
    pub pool: PathBuf,
    pub preset: String,
    pub reps: usize,
    pub seq_file_bytes: u64,
    pub rand_file_bytes: u64,
    pub rand_ops: u64,
    pub mount_files: u64,
    pub seed: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            pool: PathBuf::from("/dev/shm/amber-bench.pool"),
            preset: "dram".into(),
            reps: 5,
            seq_file_bytes: 1 << 30,
            rand_file_bytes: 64 << 20,
            rand_ops: 200_000,
            mount_files: 1_000_000,
            seed: 42,
        }
    }
}

const CHUNK: usize = 4096;
const SMALL: u64 = 128;

fn record(cfg: &Config, bench: &str, target: &str, metric: &str, unit: &str, xs: &[f64]) -> Record {
    let summary = summarize(xs);
    Record {
        benchmark: bench.into(),
        target: target.into(),
        policy: if target.starts_with("amberfs") {
            "direct".into()
        } else {
            "-".into()
        },
        preset: cfg.preset.clone(),
        threads: 1,
        metric: metric.into(),
        value: summary.median,
        unit: unit.into(),
        summary,
        notes: Vec::new(),
    }
}

/// The policy these measurements are of (their records say
/// `amberfs:direct`): the foundation's in-place writes, not the default.
fn direct() -> MountOptions {
    MountOptions {
        policy: "direct".into(),
        ..MountOptions::default()
    }
}

/// The default format for `size` bytes in the classic layout `direct`
/// mounts.
fn classic(size: u64) -> FormatParams {
    FormatParams {
        layout: PoolLayout::Classic,
        ..FormatParams::for_size(size)
    }
}

fn fresh_fs(dev: &Arc<BenchDevice>, params: &FormatParams) -> Result<Core<BenchDevice>, String> {
    format(&**dev, params).map_err(|e| e.to_string())?;
    let (fs, _) = mount(dev.clone(), direct()).map_err(|e| e.to_string())?;
    Ok(fs)
}

fn gib_per_s(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64() / (1u64 << 30) as f64
}

fn per_op(s: &WriteStats, ops: u64) -> String {
    format!(
        "per op: {:.0} B written to PM, {:.2} lines flushed, {:.2} fences",
        s.bytes_written() as f64 / ops as f64,
        s.lines_flushed as f64 / ops as f64,
        s.fences as f64 / ops as f64
    )
}

/// Writes `buf` over the file's first `chunks` chunks in order: how long
/// it took and what it cost the device.
fn write_pass(
    fs: &Core<BenchDevice>,
    ino: u64,
    chunks: u64,
    buf: &[u8],
) -> Result<(Duration, WriteStats), String> {
    let before = fs.device().stats();
    let t = Instant::now();
    for i in 0..chunks {
        fs.write(ino, Some(i * CHUNK as u64), buf, false)
            .map_err(|e| e.to_string())?;
    }
    let took = t.elapsed();
    Ok((took, fs.device().stats().since(&before)))
}

/// `r` with a note of its share of the bare copy's bandwidth and its
/// device cost per op.
fn against_bare(mut r: Record, bare: &Record, stats: &WriteStats, ops: u64) -> Record {
    r.notes.push(format!(
        "{:.1}% of bare; {}",
        100.0 * r.value / bare.value,
        per_op(stats, ops)
    ));
    r
}

/// Sequential 4 KiB writes: bare NT copy vs Amber append vs Amber overwrite.
pub fn seq_write(cfg: &Config) -> Result<Vec<Record>, String> {
    let size = cfg.seq_file_bytes + (256 << 20);
    let dev = Arc::new(open_pool(&cfg.pool, size, &cfg.preset)?);
    let params = classic(size);
    let data_off = amber_format::Layout::compute(&params)
        .map_err(|e| e.to_string())?
        .data_start
        * amber_format::BLOCK_SIZE;
    let mut buf = vec![0u8; CHUNK];
    Rng::new(cfg.seed).fill(&mut buf);
    let chunks = cfg.seq_file_bytes / CHUNK as u64;
    let (mut bare, mut append, mut over) = (Vec::new(), Vec::new(), Vec::new());
    let (mut append_stats, mut over_stats) = (WriteStats::default(), WriteStats::default());
    for _ in 0..cfg.reps {
        let t = Instant::now();
        for i in 0..chunks {
            dev.write_nt(data_off + i * CHUNK as u64, &buf);
            dev.drain().map_err(|e| e.to_string())?;
        }
        bare.push(gib_per_s(cfg.seq_file_bytes, t.elapsed()));

        let fs = fresh_fs(&dev, &params)?;
        let owner = Owner::new(0, 0);
        let f = fs
            .mknod(ROOT_INO, b"seq", FileKind::Regular, 0o644, 0, owner)
            .map_err(|e| e.to_string())?;
        // The first pass appends (allocates), the second overwrites.
        let (d, stats) = write_pass(&fs, f.ino, chunks, &buf)?;
        append.push(gib_per_s(cfg.seq_file_bytes, d));
        append_stats = stats;
        let (d, stats) = write_pass(&fs, f.ino, chunks, &buf)?;
        over.push(gib_per_s(cfg.seq_file_bytes, d));
        over_stats = stats;
        fs.unmount().map_err(|e| e.to_string())?;
    }
    let bench = "seq-write-4k";
    let mut out = vec![record(
        cfg,
        bench,
        "bare-nt-copy",
        "bandwidth",
        "GiB/s",
        &bare,
    )];
    let a = against_bare(
        record(
            cfg,
            bench,
            "amberfs:direct append",
            "bandwidth",
            "GiB/s",
            &append,
        ),
        &out[0],
        &append_stats,
        chunks,
    );
    let o = against_bare(
        record(
            cfg,
            bench,
            "amberfs:direct overwrite",
            "bandwidth",
            "GiB/s",
            &over,
        ),
        &out[0],
        &over_stats,
        chunks,
    );
    out.push(a);
    out.push(o);
    Ok(out)
}

/// 128 B random overwrites + fsync vs bare store + flush + fence.
pub fn rand_write(cfg: &Config) -> Result<Vec<Record>, String> {
    let size = cfg.rand_file_bytes * 2 + (64 << 20);
    let dev = Arc::new(open_pool(&cfg.pool, size, &cfg.preset)?);
    let params = classic(size);
    let fs = fresh_fs(&dev, &params)?;
    let owner = Owner::new(0, 0);
    let f = fs
        .mknod(ROOT_INO, b"rand", FileKind::Regular, 0o644, 0, owner)
        .map_err(|e| e.to_string())?;
    let mut fill = vec![0u8; 1 << 20];
    Rng::new(cfg.seed).fill(&mut fill);
    for i in 0..cfg.rand_file_bytes / fill.len() as u64 {
        fs.write(f.ino, Some(i * fill.len() as u64), &fill, false)
            .map_err(|e| e.to_string())?;
    }
    // The bare baseline writes into blocks past everything the file uses.
    let bare_off = size - cfg.rand_file_bytes;
    let slots = cfg.rand_file_bytes / SMALL;
    let rec = [7u8; SMALL as usize];
    let (mut bare, mut amber) = (Vec::new(), Vec::new());
    let mut amber_stats = WriteStats::default();
    for rep in 0..cfg.reps {
        let mut rng = Rng::new(cfg.seed ^ rep as u64);
        let t = Instant::now();
        for _ in 0..cfg.rand_ops {
            let off = bare_off + rng.below(slots) * SMALL;
            dev.write(off, &rec);
            dev.flush(off, SMALL);
            dev.drain().map_err(|e| e.to_string())?;
        }
        bare.push(cfg.rand_ops as f64 / t.elapsed().as_secs_f64());
        let mut rng = Rng::new(cfg.seed ^ rep as u64);
        let before = dev.stats();
        let t = Instant::now();
        for _ in 0..cfg.rand_ops {
            let off = rng.below(slots) * SMALL;
            fs.write(f.ino, Some(off), &rec, false)
                .map_err(|e| e.to_string())?;
            fs.fsync(f.ino).map_err(|e| e.to_string())?;
        }
        amber.push(cfg.rand_ops as f64 / t.elapsed().as_secs_f64());
        amber_stats = dev.stats().since(&before);
    }
    fs.unmount().map_err(|e| e.to_string())?;
    let bench = "rand-overwrite-128b-fsync";
    let b = record(cfg, bench, "bare-store-clwb-fence", "ops", "ops/s", &bare);
    let a = against_bare(
        record(cfg, bench, "amberfs:direct", "ops", "ops/s", &amber),
        &b,
        &amber_stats,
        cfg.rand_ops,
    );
    Ok(vec![b, a])
}

/// Mount time of a pool holding `mount_files` files in one directory.
pub fn mount_time(cfg: &Config) -> Result<Vec<Record>, String> {
    let n = cfg.mount_files;
    let inode_count = n + 1024;
    // Inode table, about 1.2 directory slots per name, and slack.
    let size = (inode_count * 256 + n * 80 + (128 << 20)).next_multiple_of(1 << 21);
    let dev = Arc::new(open_pool(&cfg.pool, size, &cfg.preset)?);
    let params = FormatParams {
        pool_size: size,
        inode_count,
        journal_count: 8,
        journal_blocks: 16,
        layout: PoolLayout::Classic,
    };
    let fs = fresh_fs(&dev, &params)?;
    let owner = Owner::new(0, 0);
    let d = fs
        .mkdir(ROOT_INO, b"many", 0o755, owner)
        .map_err(|e| e.to_string())?;
    let t = Instant::now();
    for i in 0..n {
        let name = format!("f{i:08}");
        fs.mknod(d.ino, name.as_bytes(), FileKind::Regular, 0o644, 0, owner)
            .map_err(|e| e.to_string())?;
    }
    let create_rate = n as f64 / t.elapsed().as_secs_f64();
    fs.unmount().map_err(|e| e.to_string())?;
    drop(fs);
    let (mut clean, mut first_lookup, mut crashed) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..cfg.reps.min(3) {
        let t = Instant::now();
        let (fs, rep) = mount(dev.clone(), direct()).map_err(|e| e.to_string())?;
        clean.push(t.elapsed().as_secs_f64() * 1e3);
        assert!(rep.was_clean);
        let t = Instant::now();
        fs.lookup(d.ino, b"f00000000").map_err(|e| e.to_string())?;
        first_lookup.push(t.elapsed().as_secs_f64() * 1e3);
        drop(fs); // a crash: no unmount
        let t = Instant::now();
        let (fs, rep) = mount(dev.clone(), direct()).map_err(|e| e.to_string())?;
        crashed.push(t.elapsed().as_secs_f64() * 1e3);
        assert!(!rep.was_clean);
        fs.unmount().map_err(|e| e.to_string())?;
    }
    let bench = "mount";
    let target = format!("amberfs:direct {n} files");
    let mut c = record(cfg, bench, &target, "clean mount", "ms", &clean);
    c.notes.push(format!(
        "files created at {create_rate:.0}/s in one directory"
    ));
    Ok(vec![
        c,
        record(cfg, bench, &target, "mount after crash", "ms", &crashed),
        record(
            cfg,
            bench,
            &target,
            "first lookup (loads dir)",
            "ms",
            &first_lookup,
        ),
    ])
}

/// Appends `bytes` in 4 KiB writes to a new file per thread, `threads`
/// threads at once; returns aggregate GiB/s.
fn parallel_append(
    dev: &Arc<BenchDevice>,
    params: &FormatParams,
    threads: u32,
    bytes: u64,
) -> Result<f64, String> {
    let fs = Arc::new(fresh_fs(dev, params)?);
    let owner = Owner::new(0, 0);
    let mut inos = Vec::new();
    for t in 0..threads {
        let name = format!("t{t}");
        let a = fs.mknod(
            ROOT_INO,
            name.as_bytes(),
            FileKind::Regular,
            0o644,
            0,
            owner,
        );
        inos.push(a.map_err(|e| e.to_string())?.ino);
    }
    let per_thread = bytes / threads as u64 / CHUNK as u64;
    let barrier = Arc::new(std::sync::Barrier::new(threads as usize + 1));
    let handles: Vec<_> = inos
        .into_iter()
        .map(|ino| {
            let (fs, barrier) = (fs.clone(), barrier.clone());
            std::thread::spawn(move || {
                let buf = vec![0x5au8; CHUNK];
                barrier.wait();
                for i in 0..per_thread {
                    fs.write(ino, Some(i * CHUNK as u64), &buf, false)
                        .map_err(|e| e.to_string())?;
                }
                Ok::<(), String>(())
            })
        })
        .collect();
    barrier.wait();
    let t = Instant::now();
    for h in handles {
        h.join()
            .map_err(|_| "writer thread panicked".to_string())??;
    }
    let rate = gib_per_s(per_thread * threads as u64 * CHUNK as u64, t.elapsed());
    Arc::try_unwrap(fs)
        .map_err(|_| "file system still shared".to_string())?
        .unmount()
        .map_err(|e| e.to_string())?;
    Ok(rate)
}

/// The bare baseline of `parallel_append`: each thread NT-copies its
/// share 4 KiB at a time into its own region, fencing after each.
fn parallel_bare(
    dev: &Arc<BenchDevice>,
    base: u64,
    threads: u32,
    bytes: u64,
) -> Result<f64, String> {
    let per_thread = bytes / threads as u64 / CHUNK as u64;
    let t = Instant::now();
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads as u64)
            .map(|k| {
                s.spawn(move || {
                    let buf = vec![0x5au8; CHUNK];
                    let start = base + k * per_thread * CHUNK as u64;
                    for i in 0..per_thread {
                        dev.write_nt(start + i * CHUNK as u64, &buf);
                        dev.drain().map_err(|e| e.to_string())?;
                    }
                    Ok::<(), String>(())
                })
            })
            .collect();
        hs.into_iter()
            .try_for_each(|h| h.join().map_err(|_| "copy thread panicked".to_string())?)
    })?;
    Ok(gib_per_s(
        per_thread * threads as u64 * CHUNK as u64,
        t.elapsed(),
    ))
}

/// Two threads appending to two files against one thread, and the same
/// for the bare copy: does per-CPU allocation let Amber scale as far as
/// the memory system does?
pub fn scaling(cfg: &Config) -> Result<Vec<Record>, String> {
    let bytes = cfg.seq_file_bytes / 2;
    let size = bytes + (256 << 20);
    let dev = Arc::new(open_pool(&cfg.pool, size, &cfg.preset)?);
    let params = classic(size);
    let base = amber_format::Layout::compute(&params)
        .map_err(|e| e.to_string())?
        .data_start
        * amber_format::BLOCK_SIZE;
    let (mut one, mut two, mut bare1, mut bare2) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..cfg.reps {
        bare1.push(parallel_bare(&dev, base, 1, bytes)?);
        one.push(parallel_append(&dev, &params, 1, bytes)?);
        bare2.push(parallel_bare(&dev, base, 2, bytes)?);
        two.push(parallel_append(&dev, &params, 2, bytes)?);
    }
    let bench = "append-4k-own-file";
    let b1 = record(cfg, bench, "bare-nt-copy", "bandwidth", "GiB/s", &bare1);
    let mut b2 = record(cfg, bench, "bare-nt-copy", "bandwidth", "GiB/s", &bare2);
    b2.threads = 2;
    b2.notes
        .push(format!("{:.2}x one thread", b2.value / b1.value));
    let a = record(cfg, bench, "amberfs:direct", "bandwidth", "GiB/s", &one);
    let mut b = record(cfg, bench, "amberfs:direct", "bandwidth", "GiB/s", &two);
    b.threads = 2;
    b.notes
        .push(format!("{:.2}x one thread", b.value / a.value));
    Ok(vec![b1, b2, a, b])
}

/// Every foundation measurement.
pub fn run(cfg: &Config) -> Result<Vec<Record>, String> {
    let mut out = seq_write(cfg)?;
    out.extend(scaling(cfg)?);
    out.extend(rand_write(cfg)?);
    out.extend(mount_time(cfg)?);
    let _ = std::fs::remove_file(&cfg.pool);
    Ok(out)
}
