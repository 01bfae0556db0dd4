//! Mount options: parsed from the `-o a=b,c` form the CLI and FUSE adapter
//! pass through, and checked so a typo is an error, not a silent default.
//! The options every mount takes are parsed here; each policy's own come
//! from its row in `data::registry`.

use crate::data::registry::{self, Registered};
use crate::data::{
    AmberBuffer, AmberZone, AmberZoneMax, BufferOptions, HunterOptions, ZoneOptions,
};
use crate::error::{FsError, Result};
use crate::time::ClockSource;

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
    /// When a read (of a file's data, or of a directory's entries) moves
    /// the atime: `relatime`, the default, as Linux does (older than the
    /// last change, or a day old); `strictatime` always; `noatime` never.
    pub atime: AtimeRule,
    /// Directories' atimes never move (`nodiratime`; `diratime` undoes).
    pub nodiratime: bool,
    /// The DRAM write buffer (hinfs policies, amber): `buffer=`,
    /// `writeback_*=`, `lazy_after=`, `buffering=`.
    pub buffer: BufferOptions,
    /// Whether `amber` buffers lazy writes in DRAM (`amber_buffer=`).
    pub amber_buffer: AmberBuffer,
    /// How `amber`'s small-write zone commits (`amber_zone=`).
    pub amber_zone: AmberZone,
    /// A cap on the slices an `amber` zone write may have
    /// (`amber_zone_max=`).
    pub amber_zone_max: AmberZoneMax,
    /// LAWN's small-write zone (policies lawn, amber).
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
    /// The options of policies registered at run time
    /// (`data::registry::register`), by key.
    pub registered: Registered,
}

/// The CPU count `clock=simulated` sizes per-CPU structures for.
pub const SIMULATED_CPUS: usize = 2;

/// This machine's CPUs (those this process may run on).
fn machine_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// When reads move atimes, as Linux's mount options say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtimeRule {
    /// `relatime`: when the atime is not newer than the mtime or ctime,
    /// or is a day old.
    Relative,
    /// `strictatime`: on every read.
    Strict,
    /// `noatime`: never.
    Never,
}

impl Default for MountOptions {
    fn default() -> Self {
        MountOptions {
            policy: "amber".into(),
            sync: false,
            read_only: false,
            atime: AtimeRule::Relative,
            nodiratime: false,
            buffer: BufferOptions::default(),
            amber_buffer: AmberBuffer::default(),
            amber_zone: AmberZone::default(),
            amber_zone_max: AmberZoneMax::default(),
            zone: ZoneOptions::for_cpus(machine_cpus()),
            clock: ClockSource::Wall,
            hunter: HunterOptions::default(),
            cpus: machine_cpus(),
            registered: Registered::new(),
        }
    }
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
            o.set(key, value)?;
            subzones_given |= key == "lawn_subzones";
        }
        if o.clock == ClockSource::Simulated {
            o.cpus = SIMULATED_CPUS;
            if !subzones_given {
                o.zone.subzones = ZoneOptions::for_cpus(SIMULATED_CPUS).subzones;
            }
        }
        o.validate()?;
        Ok(o)
    }

    /// Sets one option: those every mount takes here, a policy's through
    /// its row.
    fn set(&mut self, key: &str, value: Option<&str>) -> Result<()> {
        match (key, value) {
            ("policy", Some(v)) if registry::is_policy(v) => self.policy = v.to_string(),
            ("policy", _) => return Err(FsError::InvalidArgument(registry::unknown_policy())),
            ("sync", None) => self.sync = true,
            ("async", None) => self.sync = false,
            ("ro", None) => self.read_only = true,
            ("rw", None) => self.read_only = false,
            ("noatime", None) => self.atime = AtimeRule::Never,
            ("relatime", None) => self.atime = AtimeRule::Relative,
            ("strictatime", None) => self.atime = AtimeRule::Strict,
            ("nodiratime", None) => self.nodiratime = true,
            ("diratime", None) => self.nodiratime = false,
            ("clock", Some("wall")) => self.clock = ClockSource::Wall,
            ("clock", Some("simulated")) => self.clock = ClockSource::Simulated,
            ("clock", _) => return Err(FsError::InvalidArgument("clock= takes wall or simulated")),
            (key, Some(v)) => registry::set_option(self, key, v)?,
            (_, None) => return Err(FsError::InvalidArgument(registry::unknown_option())),
        }
        Ok(())
    }

    /// Checks values that depend on each other or on the machine.
    pub fn validate(&self) -> Result<()> {
        self.buffer
            .validate()
            .and_then(|()| self.zone.validate())
            .map_err(FsError::InvalidArgument)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn parses_known_and_rejects_unknown() {
        assert_eq!(MountOptions::parse("").unwrap(), MountOptions::default());
        let o = MountOptions::parse("policy=direct, sync").unwrap();
        assert!(o.sync);
        assert!(!o.read_only);
        assert!(MountOptions::parse("ro").unwrap().read_only);
        let atime = |o: &str| MountOptions::parse(o).unwrap().atime;
        assert_eq!(atime("noatime"), AtimeRule::Never);
        assert_eq!(atime("noatime,relatime"), AtimeRule::Relative);
        assert_eq!(atime("strictatime"), AtimeRule::Strict);
        assert_eq!(atime("strictatime,noatime"), AtimeRule::Never);
        assert!(MountOptions::parse("nodiratime").unwrap().nodiratime);
        assert!(
            !MountOptions::parse("nodiratime,diratime")
                .unwrap()
                .nodiratime
        );
        assert!(MountOptions::parse("noatime=1").is_err());
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
        let cap =
            |v: &str| MountOptions::parse(&format!("amber_zone_max={v}")).map(|o| o.amber_zone_max);
        assert_eq!(cap("auto").unwrap(), AmberZoneMax(None));
        assert_eq!(cap("0").unwrap(), AmberZoneMax(Some(0)));
        assert_eq!(cap("128").unwrap(), AmberZoneMax(Some(128)));
        for bad in ["129", "-1", "some"] {
            assert!(cap(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn parses_and_bounds_buffer_options() {
        let o = MountOptions::parse(
            "policy=hinfs,buffer=4M,writeback_low=10,writeback_high=30,\
             writeback_interval=500ms,writeback_age=2s,lazy_after=1,writeback_threads=2,\
             buffering=always",
        )
        .unwrap();
        let b = o.buffer;
        assert_eq!(b.bytes, 4 << 20);
        assert_eq!((b.low, b.high), (10, 30));
        assert_eq!(b.interval, Duration::from_millis(500));
        assert_eq!(b.age, Duration::from_secs(2));
        assert_eq!(b.lazy_after, Duration::from_secs(1));
        assert_eq!(b.threads, 2);
        assert!(b.always);
        assert!(MountOptions::parse("buffering=sometimes").is_err());
        assert_eq!(o.amber_buffer, AmberBuffer::Auto);
        for (v, want) in [
            ("auto", AmberBuffer::Auto),
            ("always", AmberBuffer::Always),
            ("never", AmberBuffer::Never),
            ("model", AmberBuffer::Model),
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
