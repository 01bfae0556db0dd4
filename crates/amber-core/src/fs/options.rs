//! Mount options: parsed from the `-o a=b,c` form the CLI and FUSE adapter
//! pass through, and checked so a typo is an error, not a silent default.

use crate::data::POLICIES;
use crate::error::{FsError, Result};
use crate::time::ClockSource;
use std::time::Duration;

/// Smallest DRAM write buffer: 256 blocks, enough for the write-back
/// marks (percentages of it) to be whole blocks.
pub const MIN_BUFFER: u64 = 1 << 20;
/// Most write-back threads; more only contend on the buffer lock.
pub const MAX_WRITEBACK_THREADS: usize = 16;

/// Options of one mount. The emulator preset is not here: it wraps the
/// device before the core sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountOptions {
    /// Data policy name (see `data::POLICIES`). Defaults to amber, the
    /// policy Amber is named for: every write atomic, small overwrites
    /// durable on return; it needs a split-layout pool, which is what
    /// `FormatParams::for_size` and `amberfs mkfs` make by default.
    pub policy: String,
    /// Every write durable on return, as if opened O_SYNC.
    pub sync: bool,
    /// Mounted read-only (`ro`): nothing is stored to the pool, not even
    /// the mark that it is mounted; every change fails with
    /// `FsError::ReadOnly` (docs/design.md §6.1).
    pub read_only: bool,
    /// Bytes of DRAM write buffer (hinfs policies), whole 4 KiB blocks.
    pub buffer: u64,
    /// Write-back starts when free buffer blocks fall below this percent.
    pub writeback_low: u8,
    /// ... and runs until free blocks reach this percent.
    pub writeback_high: u8,
    /// How often the write-back threads look for old dirty blocks.
    pub writeback_interval: Duration,
    /// Blocks dirty for longer than this are written back periodically.
    pub writeback_age: Duration,
    /// A file not fsync'd for this long has its writes buffered whatever
    /// the Buffer Benefit Model last decided (the paper's 5 s).
    pub lazy_after: Duration,
    /// Background write-back threads.
    pub writeback_threads: usize,
    /// hinfs buffers only if the mount-time calibration finds PM slow
    /// enough for buffering to pay (`false`, `buffering=auto`), or
    /// whenever its model says so (`true`, `buffering=always`; tests use
    /// it to exercise the buffer on any device).
    pub always_buffer: bool,
    /// Whether `amber` buffers lazy writes in DRAM (`amber_buffer=`).
    pub amber_buffer: AmberBuffer,
    /// LAWN's small-write zone (policy lawn).
    pub zone: ZoneOptions,
    /// Where file timestamps come from (`clock=wall|simulated`).
    pub clock: ClockSource,
    /// HUNTER's metadata queues and workers (policies hunter*).
    pub hunter: HunterOptions,
    /// CPUs the per-CPU structures a mount sizes are sized for: hunter's
    /// data logs (at most 16) and, unless `lawn_subzones=` says, the
    /// zone's sub-zones. This machine's, except that `parse` makes it
    /// [`SIMULATED_CPUS`] under `clock=simulated`, so a crash run lays
    /// out the same images on any machine.
    pub cpus: usize,
}

/// The CPU count `clock=simulated` sizes per-CPU structures for.
pub const SIMULATED_CPUS: usize = 2;

/// This machine's CPUs (those this process may run on).
fn machine_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The zone's default sub-zone count for `cpus` CPUs: one each, at most
/// 16.
fn subzones_for(cpus: usize) -> u32 {
    cpus.clamp(1, amber_format::zone::MAX_SUBZONES as usize) as u32
}

/// When `amber` buffers a write in DRAM (docs/design.md §13.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AmberBuffer {
    /// Where the mount-time calibration finds PM slow enough for buffering
    /// to pay and the Buffer Benefit Model predicts the block lazy.
    Auto,
    /// Every write that may persist lazily: the tests and the crash
    /// harness, whose simulated clock measures nothing, use it to
    /// exercise the buffer on any device.
    Always,
    /// Never: every write takes the zone or the data log.
    Never,
}

/// HUNTER's knobs (hunter.txt §III-B, §III-D, §III-E).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HunterOptions {
    /// Worker threads persisting queued metadata (`hunter_workers=`).
    pub workers: usize,
    /// How often each worker wakes (`hunter_interval=`, the paper's 5 s);
    /// None never wakes them (`hunter_interval=never`, Figure 7's INFTY).
    pub interval: Option<Duration>,
    /// Most updates a worker persists per wake-up (`hunter_batch=`, 2^18).
    pub batch: usize,
    /// File-associated queues; a file uses queue `ino mod queues`
    /// (`hunter_queues=`, 64).
    pub queues: usize,
    /// Most updates one queue holds before its writer persists it
    /// (`hunter_queue=`).
    pub queue_max: usize,
    /// Bytes of index a new file gets before there is any history of file
    /// sizes (`hunter_index=`, the paper's 2 MiB: 1 GiB of file).
    pub index_bytes: u64,
    /// Recent file sizes the next index is sized from
    /// (`hunter_window=`, the paper's 1).
    pub window: usize,
}

/// Most HUNTER worker threads.
pub const MAX_HUNTER_WORKERS: usize = 16;
/// Most HUNTER queues.
pub const MAX_HUNTER_QUEUES: usize = 1024;

impl Default for HunterOptions {
    fn default() -> Self {
        HunterOptions {
            workers: 1,
            interval: Some(Duration::from_secs(5)),
            batch: 1 << 18,
            queues: 64,
            queue_max: 1 << 16,
            index_bytes: 2 << 20,
            window: 1,
        }
    }
}

/// The small-write zone's knobs (lawn.txt §4.1): slot size, initial size,
/// growth trigger, sub-zone count, and how far the idle-time write-back
/// empties it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZoneOptions {
    /// Bytes per slot: 64, 128, 256 or 512 (`lawn_slot=`).
    pub slot: u32,
    /// Initial zone size, percent of the pool (`lawn_zone=`, the paper's 3%).
    pub initial_pct: u8,
    /// A sub-zone grows when its free slots fall under this percent
    /// (`lawn_grow=`, the paper's 10%).
    pub grow_pct: u8,
    /// Sub-zones (`lawn_subzones=`; default one per CPU of
    /// `MountOptions::cpus`, at most 16).
    pub subzones: u32,
    /// When the file system is idle, the background thread writes the
    /// least recently used slices back until this percent of a sub-zone's
    /// slots is free (`lawn_idle_free=`; by default all of them: an idle
    /// file reads as one contiguous copy again, and a burst finds every
    /// slot free).
    pub idle_free_pct: u8,
    /// How long without a small write counts as idle (`lawn_idle=`).
    pub idle: Duration,
}

impl Default for ZoneOptions {
    fn default() -> Self {
        ZoneOptions {
            slot: 64,
            initial_pct: 3,
            grow_pct: 10,
            subzones: subzones_for(machine_cpus()),
            idle_free_pct: 100,
            idle: Duration::from_millis(50),
        }
    }
}

impl Default for MountOptions {
    fn default() -> Self {
        MountOptions {
            policy: "amber".into(),
            sync: false,
            read_only: false,
            buffer: 256 << 20,
            writeback_low: 5,
            writeback_high: 20,
            writeback_interval: Duration::from_secs(5),
            writeback_age: Duration::from_secs(30),
            lazy_after: Duration::from_secs(5),
            writeback_threads: 1,
            always_buffer: false,
            amber_buffer: AmberBuffer::Auto,
            zone: ZoneOptions::default(),
            clock: ClockSource::Wall,
            hunter: HunterOptions::default(),
            cpus: machine_cpus(),
        }
    }
}

/// A whole number in `lo..=hi`.
fn bounded(v: &str, lo: usize, hi: usize) -> Option<usize> {
    v.parse().ok().filter(|n| (lo..=hi).contains(n))
}

/// `256M`, `1G`, `4096K`, or plain bytes.
fn parse_size(v: &str) -> Option<u64> {
    let (num, mult) = match v.char_indices().last()? {
        (i, 'k' | 'K') => (&v[..i], 1u64 << 10),
        (i, 'm' | 'M') => (&v[..i], 1 << 20),
        (i, 'g' | 'G') => (&v[..i], 1 << 30),
        _ => (v, 1),
    };
    num.parse::<u64>().ok()?.checked_mul(mult)
}

/// `5s`, `500ms`, or plain seconds.
fn parse_duration(v: &str) -> Option<Duration> {
    if let Some(ms) = v.strip_suffix("ms") {
        return ms.parse().ok().map(Duration::from_millis);
    }
    v.strip_suffix('s')
        .unwrap_or(v)
        .parse()
        .ok()
        .map(Duration::from_secs)
}

/// Physical memory in bytes, from /proc/meminfo (None where unreadable:
/// then only the lower bound of `buffer=` is checked).
fn physical_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

fn percent(v: &str) -> Result<u8> {
    v.trim_end_matches('%')
        .parse::<u8>()
        .ok()
        .filter(|p| *p <= 100)
        .ok_or(FsError::InvalidArgument(
            "writeback_low/high, lawn_grow and lawn_idle_free take a percentage, 0 to 100",
        ))
}

impl MountOptions {
    /// Parses `policy=direct,sync,buffer=64M`; unknown options are
    /// rejected by name, values are checked.
    pub fn parse(s: &str) -> Result<MountOptions> {
        let mut o = MountOptions::default();
        let mut subzones_given = false;
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (key, value) = match item.split_once('=') {
                Some((k, v)) => (k, Some(v)),
                None => (item, None),
            };
            let dur = |v: &str| {
                parse_duration(v).ok_or(FsError::InvalidArgument("durations are like 5s or 500ms"))
            };
            match (key, value) {
                ("policy", Some(v)) if POLICIES.contains(&v) => o.policy = v.to_string(),
                ("policy", _) => {
                    return Err(FsError::InvalidArgument(
                        "policy= takes one of the known policies (amber, direct, hinfs, \
                         hinfs-wb, hinfs-nclfw, cow, finelog, lawn, hunter, hunter-sync, \
                         hunter-lfs)",
                    ))
                }
                ("sync", None) => o.sync = true,
                ("async", None) => o.sync = false,
                ("ro", None) => o.read_only = true,
                ("rw", None) => o.read_only = false,
                ("buffer", Some(v)) => {
                    o.buffer = parse_size(v).ok_or(FsError::InvalidArgument(
                        "buffer= takes a size like 256M or 1G",
                    ))?
                }
                ("writeback_low", Some(v)) => o.writeback_low = percent(v)?,
                ("writeback_high", Some(v)) => o.writeback_high = percent(v)?,
                ("writeback_interval", Some(v)) => o.writeback_interval = dur(v)?,
                ("writeback_age", Some(v)) => o.writeback_age = dur(v)?,
                ("lazy_after", Some(v)) => o.lazy_after = dur(v)?,
                ("buffering", Some("auto")) => o.always_buffer = false,
                ("buffering", Some("always")) => o.always_buffer = true,
                ("buffering", _) => {
                    return Err(FsError::InvalidArgument("buffering= takes auto or always"))
                }
                ("amber_buffer", Some("auto")) => o.amber_buffer = AmberBuffer::Auto,
                ("amber_buffer", Some("always")) => o.amber_buffer = AmberBuffer::Always,
                ("amber_buffer", Some("never")) => o.amber_buffer = AmberBuffer::Never,
                ("amber_buffer", _) => {
                    return Err(FsError::InvalidArgument(
                        "amber_buffer= takes auto, always or never",
                    ))
                }
                ("writeback_threads", Some(v)) => {
                    o.writeback_threads = v
                        .parse()
                        .ok()
                        .filter(|n| (1..=MAX_WRITEBACK_THREADS).contains(n))
                        .ok_or(FsError::InvalidArgument("writeback_threads= takes 1 to 16"))?
                }
                ("lawn_slot", Some(v)) => {
                    o.zone.slot = v
                        .parse()
                        .ok()
                        .filter(|s| amber_format::zone::SLOT_SIZES.contains(s))
                        .ok_or(FsError::InvalidArgument(
                            "lawn_slot= takes 64, 128, 256 or 512 (bytes)",
                        ))?
                }
                ("lawn_zone", Some(v)) => {
                    o.zone.initial_pct = percent(v)
                        .ok()
                        .filter(|p| (1..=50).contains(p))
                        .ok_or(FsError::InvalidArgument(
                        "lawn_zone= takes the initial zone size in percent of the pool, 1 to 50",
                    ))?
                }
                ("lawn_grow", Some(v)) => o.zone.grow_pct = percent(v)?,
                ("lawn_idle_free", Some(v)) => o.zone.idle_free_pct = percent(v)?,
                ("lawn_idle", Some(v)) => o.zone.idle = dur(v)?,
                ("hunter_workers", Some(v)) => {
                    o.hunter.workers = bounded(v, 1, MAX_HUNTER_WORKERS)
                        .ok_or(FsError::InvalidArgument("hunter_workers= takes 1 to 16"))?
                }
                ("hunter_interval", Some("never")) => o.hunter.interval = None,
                ("hunter_interval", Some(v)) => o.hunter.interval = Some(dur(v)?),
                ("hunter_batch", Some(v)) => {
                    o.hunter.batch = bounded(v, 1, 1 << 24).ok_or(FsError::InvalidArgument(
                        "hunter_batch= takes 1 to 16777216 updates",
                    ))?
                }
                ("hunter_queues", Some(v)) => {
                    o.hunter.queues = bounded(v, 1, MAX_HUNTER_QUEUES)
                        .ok_or(FsError::InvalidArgument("hunter_queues= takes 1 to 1024"))?
                }
                ("hunter_queue", Some(v)) => {
                    o.hunter.queue_max = bounded(v, 1, 1 << 24).ok_or(FsError::InvalidArgument(
                        "hunter_queue= takes 1 to 16777216 updates",
                    ))?
                }
                ("hunter_index", Some(v)) => {
                    o.hunter.index_bytes =
                        parse_size(v)
                            .filter(|&b| b <= 1 << 30)
                            .ok_or(FsError::InvalidArgument(
                                "hunter_index= takes a size up to 1G, like 2M",
                            ))?
                }
                ("hunter_window", Some(v)) => {
                    o.hunter.window = bounded(v, 1, 1024)
                        .ok_or(FsError::InvalidArgument("hunter_window= takes 1 to 1024"))?
                }
                ("clock", Some("wall")) => o.clock = ClockSource::Wall,
                ("clock", Some("simulated")) => o.clock = ClockSource::Simulated,
                ("clock", _) => {
                    return Err(FsError::InvalidArgument("clock= takes wall or simulated"))
                }
                ("lawn_subzones", Some(v)) => {
                    subzones_given = true;
                    o.zone.subzones = v
                        .parse()
                        .ok()
                        .filter(|n| (1..=amber_format::zone::MAX_SUBZONES).contains(n))
                        .ok_or(FsError::InvalidArgument("lawn_subzones= takes 1 to 16"))?
                }
                _ => {
                    return Err(FsError::InvalidArgument(
                        "unknown mount option (known: policy=NAME, sync, async, ro, rw, buffer=SIZE, \
                         writeback_low=PCT, writeback_high=PCT, writeback_interval=DUR, \
                         writeback_age=DUR, lazy_after=DUR, writeback_threads=N, \
                         buffering=auto|always, amber_buffer=auto|always|never, lawn_slot=BYTES, lawn_zone=PCT, lawn_grow=PCT, \
                         lawn_subzones=N, lawn_idle=DUR, lawn_idle_free=PCT, \
                         hunter_workers=N, hunter_interval=DUR|never, hunter_batch=N, \
                         hunter_queues=N, hunter_queue=N, hunter_index=SIZE, hunter_window=N, \
                         clock=wall|simulated)",
                    ))
                }
            }
        }
        if o.clock == ClockSource::Simulated {
            o.cpus = SIMULATED_CPUS;
            if !subzones_given {
                o.zone.subzones = subzones_for(SIMULATED_CPUS);
            }
        }
        o.validate()?;
        Ok(o)
    }

    /// Checks values that depend on each other or on the machine.
    pub fn validate(&self) -> Result<()> {
        if self.buffer < MIN_BUFFER {
            return Err(FsError::InvalidArgument("buffer= must be at least 1M"));
        }
        if physical_memory().is_some_and(|m| self.buffer > m / 2) {
            return Err(FsError::InvalidArgument(
                "buffer= must be at most half of physical memory",
            ));
        }
        if self.writeback_low > self.writeback_high {
            return Err(FsError::InvalidArgument(
                "writeback_low must not exceed writeback_high",
            ));
        }
        if self.zone.grow_pct >= 100 || self.zone.idle.is_zero() {
            return Err(FsError::InvalidArgument(
                "lawn_grow must be under 100 and lawn_idle positive",
            ));
        }
        if self.writeback_interval.is_zero() {
            return Err(FsError::InvalidArgument(
                "writeback_interval must be positive",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_known_and_rejects_unknown() {
        assert_eq!(MountOptions::parse("").unwrap(), MountOptions::default());
        let o = MountOptions::parse("policy=direct, sync").unwrap();
        assert!(o.sync);
        assert!(!o.read_only);
        assert!(MountOptions::parse("ro").unwrap().read_only);
        assert!(!MountOptions::parse("ro,rw").unwrap().read_only);
        assert!(MountOptions::parse("ro=1").is_err());
        assert!(MountOptions::parse("policy=nope").is_err());
        assert!(MountOptions::parse("bogus").is_err());
        assert!(MountOptions::parse("sync=1").is_err());
        let o = MountOptions::parse(
            "hunter_workers=2,hunter_interval=never,hunter_queue=8,hunter_index=4K,hunter_window=3",
        )
        .unwrap();
        assert_eq!(
            (o.hunter.workers, o.hunter.interval, o.hunter.queue_max),
            (2, None, 8)
        );
        assert_eq!((o.hunter.index_bytes, o.hunter.window), (4096, 3));
        for bad in [
            "hunter_workers=0",
            "hunter_queues=5000",
            "hunter_interval=soon",
        ] {
            assert!(MountOptions::parse(bad).is_err(), "{bad}");
        }
        let o = MountOptions::parse("clock=simulated").unwrap();
        assert_eq!(o.clock, ClockSource::Simulated);
        // Per-CPU counts do not follow the machine under the simulated
        // clock; an explicit sub-zone count still wins.
        assert_eq!((o.cpus, o.zone.subzones), (SIMULATED_CPUS, 2));
        let o = MountOptions::parse("lawn_subzones=5,clock=simulated").unwrap();
        assert_eq!((o.cpus, o.zone.subzones), (SIMULATED_CPUS, 5));
        assert!(MountOptions::parse("clock=fast").is_err());
    }

    #[test]
    fn parses_and_bounds_buffer_options() {
        let o = MountOptions::parse(
            "policy=hinfs,buffer=4M,writeback_low=10,writeback_high=30,\
             writeback_interval=500ms,writeback_age=2s,lazy_after=1,writeback_threads=2,\
             buffering=always",
        )
        .unwrap();
        assert_eq!(o.buffer, 4 << 20);
        assert_eq!((o.writeback_low, o.writeback_high), (10, 30));
        assert_eq!(o.writeback_interval, Duration::from_millis(500));
        assert_eq!(o.writeback_age, Duration::from_secs(2));
        assert_eq!(o.lazy_after, Duration::from_secs(1));
        assert_eq!(o.writeback_threads, 2);
        assert!(o.always_buffer);
        assert!(MountOptions::parse("buffering=sometimes").is_err());
        assert_eq!(o.amber_buffer, AmberBuffer::Auto);
        for (v, want) in [
            ("auto", AmberBuffer::Auto),
            ("always", AmberBuffer::Always),
            ("never", AmberBuffer::Never),
        ] {
            let o = MountOptions::parse(&format!("amber_buffer={v}")).unwrap();
            assert_eq!(o.amber_buffer, want);
        }
        assert!(MountOptions::parse("amber_buffer=sometimes").is_err());
        assert!(MountOptions::parse("buffer=512K").is_err());
        assert!(MountOptions::parse("buffer=100000G").is_err());
        assert!(MountOptions::parse("buffer=lots").is_err());
        assert!(MountOptions::parse("writeback_low=30,writeback_high=10").is_err());
        assert!(MountOptions::parse("writeback_high=101").is_err());
        assert!(MountOptions::parse("writeback_threads=0").is_err());
        assert!(MountOptions::parse("writeback_interval=0s").is_err());
    }

    #[test]
    fn parses_and_bounds_zone_options() {
        let o = MountOptions::parse(
            "lawn_slot=256,lawn_zone=5,lawn_grow=20,lawn_subzones=3,lawn_idle=10ms,\
             lawn_idle_free=30",
        )
        .unwrap();
        assert_eq!(o.zone.slot, 256);
        assert_eq!((o.zone.initial_pct, o.zone.grow_pct), (5, 20));
        assert_eq!(o.zone.subzones, 3);
        assert_eq!(o.zone.idle, Duration::from_millis(10));
        assert_eq!(o.zone.idle_free_pct, 30);
        for bad in [
            "lawn_slot=96",
            "lawn_slot=1024",
            "lawn_zone=0",
            "lawn_zone=60",
            "lawn_grow=100",
            "lawn_subzones=0",
            "lawn_subzones=17",
            "lawn_idle=0ms",
        ] {
            assert!(MountOptions::parse(bad).is_err(), "{bad}");
        }
    }
}
