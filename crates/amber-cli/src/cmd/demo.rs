//! `amberfs demo`: the main job on an embedded default. It makes a pool
//! in /dev/shm, mounts it behind the PM emulator, uses it the way an
//! application would (a tree of small files, a large sequential file,
//! fsync'd small overwrites), verifies every byte, reports throughput and
//! the device's write accounting, unmounts, checks the pool with fsck, and
//! runs a short crash test. It exits non-zero if anything is off.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use amber_core::check::{check, CheckOptions};
use amber_core::{Fs, MountOptions, OpenOptions};
use amber_format::FormatParams;
use amber_pmem::{Emulated, EmulatorSpec, MapOptions, MmapDevice, PmDevice, WriteStats};

use crate::common::{human_bytes, CliError, CliResult, Shown};
use crate::output::outln;

#[derive(clap::Args)]
pub struct Args {
    /// Pool file to create (replaced if it exists, removed at the end).
    #[arg(long, default_value = "/dev/shm/amber-demo.pool")]
    pool: PathBuf,
    /// Keep the pool file afterwards.
    #[arg(long)]
    keep: bool,
}

const POOL_SIZE: u64 = 256 << 20;
const SMALL_FILES: u64 = 2_000;
const BIG: u64 = 64 << 20;
const OVERWRITES: u64 = 20_000;

fn err(what: &str) -> impl Fn(amber_core::FsError) -> CliError + '_ {
    move |e| CliError::new(format!("demo: {what}: {e}"))
}

fn line(label: &str, bytes: u64, secs: f64, s: &WriteStats, ops: u64) -> CliResult<()> {
    outln!(
        "  {label:<40} {:>9.1} MiB/s {:>10.0} ops/s   PM: {:>6.2} B written per B asked, {:.2} fences/op",
        bytes as f64 / secs / (1 << 20) as f64,
        ops as f64 / secs,
        s.bytes_written() as f64 / bytes.max(1) as f64,
        s.fences as f64 / ops.max(1) as f64,
    )
}

/// The demo's file system: the emulated device behind the defaults a user gets.
type DemoFs = Fs<Emulated<MmapDevice>>;

pub fn run(args: Args, emulate: Option<&str>) -> CliResult<ExitCode> {
    let fs = create(&args, emulate)?;
    small_files(&fs)?;
    let chunk: Vec<u8> = (0..4096u32).map(|i| (i * 7 % 251) as u8).collect();
    sequential(&fs, &chunk)?;
    overwrites(&fs, &chunk)?;
    verify(&fs, &chunk)?;
    fs.unmount().map_err(err("unmount"))?;

    let clean = fsck(&args)?;
    let mut crash = amber_crash::CrashConfig::new("files", 1);
    crash.max_images = Some(2_000);
    let r = amber_crash::run(&crash).map_err(|e| CliError::new(format!("crash test: {e}")))?;
    outln!(
        "  crash test (workload files, seed 1): {} images checked at {:.0}/s, {} violations",
        r.images_checked,
        r.images_per_sec,
        r.violation_count
    )?;
    let ok = clean && r.is_clean();
    outln!("demo {}", if ok { "passed" } else { "FAILED" })?;
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Makes a fresh pool, formats it with the defaults (split layout, policy
/// amber) and mounts it behind the emulator preset `emulate` names.
fn create(args: &Args, emulate: Option<&str>) -> CliResult<DemoFs> {
    let preset = emulate.unwrap_or("pcm");
    let spec = EmulatorSpec::parse(preset).map_err(|e| CliError::new(format!("--emulate: {e}")))?;
    super::mkfs::check_new(&args.pool)?;
    if args.pool.exists() {
        std::fs::remove_file(&args.pool)
            .map_err(|e| CliError::new(format!("cannot replace {}: {e}", args.pool.shown())))?;
    }
    let dev = MmapDevice::create(&args.pool, POOL_SIZE, &MapOptions::default())
        .map_err(|e| CliError::new(format!("cannot create {}: {e}", args.pool.shown())))?;
    outln!(
        "amberfs demo: pool {} ({}), emulating {preset} ({spec})",
        args.pool.shown(),
        human_bytes(POOL_SIZE)
    )?;
    outln!("{}", dev.info())?;
    // The defaults a user gets: the split layout and policy amber.
    Fs::format(&dev, &FormatParams::for_size(POOL_SIZE)).map_err(err("mkfs"))?;
    let opts = MountOptions::default();
    outln!("  policy {} (the default)", opts.policy)?;
    let (fs, _) = Fs::mount(Emulated::new(dev, spec), opts).map_err(err("mount"))?;
    Ok(fs)
}

fn stats(fs: &DemoFs) -> WriteStats {
    fs.core().device().stats()
}

/// A tree of small files.
fn small_files(fs: &DemoFs) -> CliResult<()> {
    let before = stats(fs);
    let t = Instant::now();
    for i in 0..SMALL_FILES {
        let dir = format!("/tree/d{:02}", i % 20);
        fs.create_dir_all(&dir).map_err(err("mkdir"))?;
        fs.write(&format!("{dir}/f{i}"), format!("file {i}\n").as_bytes())
            .map_err(err("write"))?;
    }
    line(
        "create + write 2,000 small files",
        SMALL_FILES * 8,
        t.elapsed().as_secs_f64(),
        &stats(fs).since(&before),
        SMALL_FILES,
    )
}

/// One large file, 4 KiB at a time.
fn sequential(fs: &DemoFs, chunk: &[u8]) -> CliResult<()> {
    let f = fs.create("/big").map_err(err("create"))?;
    let before = stats(fs);
    let t = Instant::now();
    for i in 0..BIG / 4096 {
        f.write_at(chunk, i * 4096).map_err(err("write"))?;
    }
    // Inside the timing: on slow PM the writes above sit in amber's DRAM
    // buffer, and without it their cost would show up in the first fsync
    // of the next phase instead.
    f.sync_all().map_err(err("fsync"))?;
    drop(f);
    line(
        "sequential 4 KiB writes + fsync, 64 MiB",
        BIG,
        t.elapsed().as_secs_f64(),
        &stats(fs).since(&before),
        BIG / 4096,
    )
}

/// Small fsync'd overwrites at pseudo-random 128 B slots of the large file.
fn overwrites(fs: &DemoFs, chunk: &[u8]) -> CliResult<()> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(fs, "/big")
        .map_err(err("open"))?;
    let before = stats(fs);
    let t = Instant::now();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..OVERWRITES {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let off = (x % (BIG / 128)) * 128;
        f.write_at(&chunk[..128], off).map_err(err("overwrite"))?;
        f.sync_all().map_err(err("fsync"))?;
    }
    line(
        "random 128 B overwrite + fsync",
        OVERWRITES * 128,
        t.elapsed().as_secs_f64(),
        &stats(fs).since(&before),
        OVERWRITES,
    )
}

/// Reads everything back and checks every byte.
fn verify(fs: &DemoFs, chunk: &[u8]) -> CliResult<()> {
    for i in 0..SMALL_FILES {
        let got = fs
            .read(&format!("/tree/d{:02}/f{i}", i % 20))
            .map_err(err("read"))?;
        if got != format!("file {i}\n").as_bytes() {
            return Err(CliError::new(format!("demo: file {i} read back wrong")));
        }
    }
    let big = fs.read("/big").map_err(err("read"))?;
    // Each 128 B piece holds what the sequential pass wrote there, or the
    // overwrite record.
    let intact = big.chunks(128).enumerate().all(|(i, piece)| {
        let at = (i * 128) % 4096;
        piece == &chunk[at..at + 128] || piece == &chunk[..128]
    });
    if big.len() as u64 != BIG || !intact {
        return Err(CliError::new("demo: /big read back wrong"));
    }
    outln!("  read back and verified every byte")?;
    let s = fs.statfs();
    outln!(
        "  pool: {} of {} blocks free, {} of {} inodes free",
        s.blocks_free,
        s.blocks,
        s.inodes_free,
        s.inodes
    )
}

/// Checks the unmounted pool with fsck (and removes it unless kept); true when clean.
fn fsck(args: &Args) -> CliResult<bool> {
    let dev = MmapDevice::open(&args.pool, &MapOptions::default())
        .map_err(|e| CliError::new(format!("cannot reopen {}: {e}", args.pool.shown())))?;
    let report = check(&dev, &CheckOptions { repair: false }).map_err(err("fsck"))?;
    outln!(
        "  fsck: {}",
        if report.is_clean() {
            "clean"
        } else {
            "PROBLEMS"
        }
    )?;
    drop(dev);
    if !args.keep {
        let _ = std::fs::remove_file(&args.pool);
    }
    Ok(report.is_clean())
}
