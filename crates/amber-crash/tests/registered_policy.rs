//! A data policy defined outside the core, as ARCHITECTURE's "How to add a
//! data policy" says: one module (`Tally`, below) and one registry row
//! (`row`). Nothing else in the core changes: `-o policy=tally` mounts it,
//! its own option `tally_large=SIZE` is parsed, checked and refused by
//! name like the built-in ones, and the crash harness judges it by what it
//! declares.

use amber_core::data::registry::{self, Group, Knob, Policy, Registered};
use amber_core::data::{Context, DataPolicy, Direct};
use amber_core::units::parse_size;
use amber_core::{Fs, FsError, InodeState, MountOptions, Result};
use amber_crash::{run, CrashConfig};
use amber_format::{FormatParams, PoolLayout};
use amber_pmem::{MapOptions, MmapDevice, PmDevice};
use amber_sim::{OverlayDevice, RecordingDevice};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Once;

const NAME: &str = "tally";

/// `direct`, counting the writes of at least `large` bytes (its option):
/// every call goes to `direct` whole, so it promises what `direct` does.
struct Tally {
    large: u64,
    large_writes: AtomicU64,
}

impl<D: PmDevice> DataPolicy<D> for Tally {
    fn name(&self) -> &'static str {
        NAME
    }

    fn write(
        &self,
        fs: Context<'_, D>,
        st: &mut InodeState,
        off: u64,
        data: &[u8],
        sync: bool,
    ) -> Result<usize> {
        if data.len() as u64 >= self.large {
            self.large_writes.fetch_add(1, Relaxed);
        }
        Direct.write(fs, st, off, data, sync)
    }

    fn stats(&self) -> Vec<(String, u64)> {
        vec![("large_writes".into(), self.large_writes.load(Relaxed))]
    }
}

/// The policy's one option, kept (once accepted) in
/// `MountOptions::registered`.
const OPTIONS: Group<Registered> = Group {
    knobs: &[Knob {
        key: "tally_large",
        value: "SIZE",
        default: "`4K`",
        doc: "tally: writes of at least this many bytes count as large",
        refused: "tally_large= takes a size from 1 to 1M",
        set: |kept, v| {
            let ok = parse_size(v).is_ok_and(|n| (1..=1 << 20).contains(&n));
            if ok {
                kept.insert("tally_large".into(), v.into());
            }
            ok
        },
    }],
    field: |o| &mut o.registered,
};

/// The registry row.
fn row<D: PmDevice>() -> Policy<D> {
    Policy {
        name: NAME,
        layout: PoolLayout::Classic,
        options: &[&OPTIONS],
        build: |o| {
            let large = o
                .registered
                .get("tally_large")
                .map_or(Ok(4096), |v| parse_size(v));
            Box::new(Tally {
                large: large.expect("tally_large= was checked when parsed"),
                large_writes: AtomicU64::new(0),
            })
        },
    }
}

/// Registers the policy for every device type this test mounts: the
/// plain mapping, and the crash harness's recording and overlay devices.
fn register() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        registry::register(row::<MmapDevice>()).unwrap();
        registry::register(row::<RecordingDevice>()).unwrap();
        registry::register(row::<OverlayDevice>()).unwrap();
    });
}

#[test]
fn a_registered_policy_mounts_by_name_with_its_own_option() {
    register();
    let opts = MountOptions::parse("policy=tally,tally_large=1K").unwrap();
    assert_eq!(amber_core::data::layout_for(&opts), PoolLayout::Classic);
    let size = 16 << 20;
    let dev = MmapDevice::anonymous(size, &MapOptions::default()).unwrap();
    let mut params = FormatParams::for_size(size);
    params.layout = PoolLayout::Classic;
    Fs::format(&dev, &params).unwrap();
    let (fs, _) = Fs::mount(dev, opts).unwrap();
    fs.write("/small", &[7u8; 1023]).unwrap();
    fs.write("/large", &[8u8; 1024]).unwrap();
    assert_eq!(fs.read("/large").unwrap(), vec![8u8; 1024]);
    let counted = fs.core().policy_stats();
    assert_eq!(counted, vec![("large_writes".to_string(), 1)]);
    fs.unmount().unwrap();
    for bad in ["tally_large=0", "tally_large=2M", "tally_large=lots"] {
        match MountOptions::parse(&format!("policy=tally,{bad}")) {
            Err(FsError::InvalidArgument(why)) => assert!(why.contains("tally_large="), "{why}"),
            other => panic!("{bad}: {other:?}"),
        }
    }
    assert!(
        registry::register(row::<MmapDevice>()).is_err(),
        "the name is taken"
    );
}

/// The crash harness runs it like any policy: every image of the writing
/// and truncating workloads recovers to a state the oracle accepts (as
/// `direct`'s would: a policy that cut writes into pieces would not, the
/// size of a torn append being neither before nor after).
#[test]
fn a_registered_policy_is_crash_consistent() {
    register();
    for workload in ["writes", "truncate"] {
        let mut cfg = CrashConfig::new(workload, 1);
        cfg.policy = NAME.into();
        cfg.mount_options = "tally_large=512".into();
        let rep = run(&cfg).unwrap_or_else(|e| panic!("{e}"));
        println!("{workload}: {rep}");
        assert!(rep.images_checked > 0, "{workload}: no image checked");
        assert!(
            rep.is_clean(),
            "{workload} under {NAME} has crash-consistency violations; replay with seed 1:\n{rep}"
        );
    }
}
