//! The data policies, one row each: name, pool layout, constructor and
//! the options it reads. The policy list, [`by_name`], [`layout_for`], the
//! mount options each policy adds (their parsing, refusals, `-o` help and
//! the README's table) all come from these rows, so a new policy is one
//! module and one row ([`builtin`]), or one [`register`] call for a policy
//! defined outside the core.

use super::amber::{self, Amber};
use super::hinfs::{self, Hinfs, Variant};
use super::hunter::{self, Hunter};
use super::lawn::{self, Lawn};
use super::{Cow, DataPolicy, Direct, Finelog, Nova};
use crate::error::{FsError, Result};
use crate::fs::MountOptions;
use crate::units;
use amber_format::PoolLayout;
use amber_pmem::{MmapDevice, PmDevice};
use std::any::{Any, TypeId};
use std::collections::BTreeMap;
use std::sync::{LazyLock, OnceLock, RwLock};
use std::time::Duration;

/// One `-o key=value` option: how it reads, what it means, and what a
/// refusal says.
pub struct Knob<T: 'static> {
    /// The key, as in `-o key=value`.
    pub key: &'static str,
    /// What the value looks like in help and the README (`N`, `DUR|never`).
    pub value: &'static str,
    /// The default, as the README's table shows it.
    pub default: &'static str,
    /// What it does: the README table's "meaning".
    pub doc: &'static str,
    /// Why a value was refused, naming the values it takes.
    pub refused: &'static str,
    /// Stores the value; false if it is not one the option takes.
    pub set: fn(&mut T, &str) -> bool,
}

/// A knob without its setter: what help and the README show of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionDoc {
    /// [`Knob::key`].
    pub key: &'static str,
    /// [`Knob::value`].
    pub value: &'static str,
    /// [`Knob::default`].
    pub default: &'static str,
    /// [`Knob::doc`].
    pub doc: &'static str,
}

/// A set of options a policy reads, bound to where they live in
/// [`MountOptions`]: the rows share them (amber reads hunter's, lawn's and
/// the DRAM buffer's).
pub trait OptionSet: Sync {
    /// The options, in the order help shows them.
    fn docs(&self) -> Vec<OptionDoc>;
    /// Sets `key` to `value` in `o`; None if `key` is not one of these.
    fn set(&self, o: &mut MountOptions, key: &str, value: &str) -> Option<Result<()>>;
}

/// The options of one settings struct `T` and where `MountOptions` keeps it.
pub struct Group<T: 'static> {
    /// The options, in the order help shows them.
    pub knobs: &'static [Knob<T>],
    /// Where the settings they write live.
    pub field: fn(&mut MountOptions) -> &mut T,
}

impl<T: 'static> OptionSet for Group<T> {
    fn docs(&self) -> Vec<OptionDoc> {
        let doc = |k: &Knob<T>| OptionDoc {
            key: k.key,
            value: k.value,
            default: k.default,
            doc: k.doc,
        };
        self.knobs.iter().map(doc).collect()
    }

    fn set(&self, o: &mut MountOptions, key: &str, value: &str) -> Option<Result<()>> {
        let knob = self.knobs.iter().find(|k| k.key == key)?;
        let ok = (knob.set)((self.field)(o), value);
        Some(if ok {
            Ok(())
        } else {
            Err(FsError::InvalidArgument(knob.refused))
        })
    }
}

/// The DRAM write buffer's options (hinfs, amber).
pub const BUFFER: Group<hinfs::BufferOptions> = Group {
    knobs: hinfs::options::KNOBS,
    field: |o| &mut o.buffer,
};
/// amber's own option.
pub const AMBER: Group<amber::AmberBuffer> = Group {
    knobs: amber::options::KNOBS,
    field: |o| &mut o.amber_buffer,
};
/// How amber's zone commits (`amber_zone=`).
pub const AMBER_ZONE: Group<amber::AmberZone> = Group {
    knobs: amber::options::ZONE_KNOBS,
    field: |o| &mut o.amber_zone,
};
/// How many slices amber's zone takes (`amber_zone_max=`).
pub const AMBER_ZONE_MAX: Group<amber::AmberZoneMax> = Group {
    knobs: amber::options::ZONE_MAX_KNOBS,
    field: |o| &mut o.amber_zone_max,
};
/// The small-write zone's options (lawn, amber).
pub const ZONE: Group<lawn::ZoneOptions> = Group {
    knobs: lawn::options::KNOBS,
    field: |o| &mut o.zone,
};
/// HUNTER's options (hunter*, amber).
pub const HUNTER: Group<hunter::HunterOptions> = Group {
    knobs: hunter::options::KNOBS,
    field: |o| &mut o.hunter,
};
/// Where the options of [`register`]ed policies live:
/// `MountOptions::registered`, by key, as their knobs accepted them.
pub type Registered = BTreeMap<String, String>;

/// One data policy.
pub struct Policy<D> {
    /// What `-o policy=` selects it by (and `DataPolicy::name` says).
    pub name: &'static str,
    /// The pool layout it keeps regular files in (what
    /// `DataPolicy::pool_layout` says; a test holds the two together).
    pub layout: PoolLayout,
    /// The options it reads.
    pub options: &'static [&'static dyn OptionSet],
    /// Builds it, configured by the mount's options.
    pub build: fn(&MountOptions) -> Box<dyn DataPolicy<D>>,
}

/// The policies of this build, the default (amber) first.
pub fn builtin<D: PmDevice>() -> Vec<Policy<D>> {
    use PoolLayout::{Classic, Lfs, Nova as NovaLogs, Split};
    const HINFS: &[&dyn OptionSet] = &[&BUFFER];
    const HUNTER_ONLY: &[&dyn OptionSet] = &[&HUNTER];
    const NONE: &[&dyn OptionSet] = &[];
    vec![
        Policy::row(
            "amber",
            Split,
            &[
                &BUFFER,
                &AMBER,
                &AMBER_ZONE,
                &AMBER_ZONE_MAX,
                &ZONE,
                &HUNTER,
            ],
            |o| {
                let amber = Amber::new(
                    o.amber_buffer,
                    o.amber_zone,
                    &o.buffer,
                    &o.zone,
                    &o.hunter,
                    o.cpus,
                );
                Box::new(amber.with_zone_max(o.amber_zone_max))
            },
        ),
        Policy::row("direct", Classic, NONE, |_| Box::new(Direct)),
        Policy::row("hinfs", Classic, HINFS, |o| {
            Box::new(Hinfs::new(Variant::Full, &o.buffer))
        }),
        Policy::row("hinfs-wb", Classic, HINFS, |o| {
            Box::new(Hinfs::new(Variant::WriteBuffer, &o.buffer))
        }),
        Policy::row("hinfs-nclfw", Classic, HINFS, |o| {
            Box::new(Hinfs::new(Variant::NoClfw, &o.buffer))
        }),
        Policy::row("cow", Classic, NONE, |_| Box::new(Cow)),
        Policy::row("finelog", Classic, NONE, |_| Box::new(Finelog)),
        Policy::row("nova", NovaLogs, NONE, |_| Box::new(Nova::default())),
        Policy::row("lawn", Classic, &[&ZONE], |o| {
            Box::new(Lawn::new(&o.zone, lawn::mapped_block))
        }),
        Policy::row("hunter", Split, HUNTER_ONLY, |o| {
            Box::new(Hunter::new(&o.hunter, o.cpus, false, false))
        }),
        Policy::row("hunter-sync", Split, HUNTER_ONLY, |o| {
            Box::new(Hunter::new(&o.hunter, o.cpus, true, false))
        }),
        Policy::row("hunter-lfs", Lfs, HUNTER_ONLY, |o| {
            Box::new(Hunter::new(&o.hunter, o.cpus, false, true))
        }),
    ]
}

impl<D> Policy<D> {
    /// A row, its fields in order.
    pub fn row(
        name: &'static str,
        layout: PoolLayout,
        options: &'static [&'static dyn OptionSet],
        build: fn(&MountOptions) -> Box<dyn DataPolicy<D>>,
    ) -> Policy<D> {
        Policy {
            name,
            layout,
            options,
            build,
        }
    }
}

/// What a row says without its constructor, whatever device it builds for.
#[derive(Clone, Copy)]
struct Row {
    name: &'static str,
    layout: PoolLayout,
    options: &'static [&'static dyn OptionSet],
}

impl<D> From<&Policy<D>> for Row {
    fn from(p: &Policy<D>) -> Row {
        Row {
            name: p.name,
            layout: p.layout,
            options: p.options,
        }
    }
}

/// A policy registered at run time: its row and its constructor for one
/// device type.
struct Extra {
    row: Row,
    device: TypeId,
    policy: Box<dyn Any + Send + Sync>,
}

static REGISTERED: RwLock<Vec<Extra>> = RwLock::new(Vec::new());

/// The built-in rows (their names, layouts and options do not depend on
/// the device, so any device type lists them).
static BUILTIN: LazyLock<Vec<Row>> =
    LazyLock::new(|| builtin::<MmapDevice>().iter().map(Row::from).collect());

/// Names of the policies this build offers.
pub static POLICIES: LazyLock<Vec<&'static str>> =
    LazyLock::new(|| BUILTIN.iter().map(|r| r.name).collect());

/// Adds a policy defined outside the core, for mounts of devices of type
/// `D` (register it once for each device type it mounts), for the rest of
/// the process: `-o policy=<its name>` then selects it and its options
/// are accepted. Its options live in `MountOptions::registered` (a
/// [`Group`] of [`Registered`]). Refused if a built-in policy has the
/// name, or one registered for `D`.
pub fn register<D: PmDevice>(policy: Policy<D>) -> Result<()> {
    let mut extra = REGISTERED.write().unwrap_or_else(|e| e.into_inner());
    let device = TypeId::of::<D>();
    let taken = BUILTIN.iter().any(|r| r.name == policy.name)
        || extra
            .iter()
            .any(|e| e.row.name == policy.name && e.device == device);
    if taken {
        return Err(FsError::InvalidArgument(
            "a policy of that name is registered",
        ));
    }
    extra.push(Extra {
        row: Row::from(&policy),
        device,
        policy: Box::new(policy),
    });
    Ok(())
}

/// Every row: the built-in ones, then those registered.
fn rows_in(extra: &[Extra]) -> impl Iterator<Item = Row> + '_ {
    BUILTIN.iter().copied().chain(extra.iter().map(|e| e.row))
}

/// Every row, as things stand.
fn rows() -> Vec<Row> {
    let extra = REGISTERED.read().unwrap_or_else(|e| e.into_inner());
    rows_in(&extra).collect()
}

/// Whether `name` is a policy this process offers.
pub fn is_policy(name: &str) -> bool {
    rows().iter().any(|r| r.name == name)
}

/// The pool layout the policy `opts` names needs, for whoever formats a
/// pool for it.
pub fn layout_for(opts: &MountOptions) -> PoolLayout {
    rows()
        .iter()
        .find(|r| r.name == opts.policy)
        .map_or(PoolLayout::Classic, |r| r.layout)
}

/// The built-in policies that keep files in `layout`, in the rows' order.
pub fn policies_for(layout: PoolLayout) -> Vec<&'static str> {
    BUILTIN
        .iter()
        .filter(|r| r.layout == layout)
        .map(|r| r.name)
        .collect()
}

/// The policy `opts` names, configured by the rest of `opts`.
pub fn by_name<D: PmDevice>(opts: &MountOptions) -> Result<Box<dyn DataPolicy<D>>> {
    if let Some(p) = builtin::<D>().iter().find(|p| p.name == opts.policy) {
        return Ok((p.build)(opts));
    }
    let extra = REGISTERED.read().unwrap_or_else(|e| e.into_inner());
    let found = extra
        .iter()
        .filter(|e| e.device == TypeId::of::<D>())
        .filter_map(|e| e.policy.downcast_ref::<Policy<D>>())
        .find(|p| p.name == opts.policy);
    match found {
        Some(p) => Ok((p.build)(opts)),
        None => Err(FsError::InvalidArgument(unknown_policy())),
    }
}

/// Sets the policy option `key` to `value`, whichever policy reads it.
pub fn set_option(o: &mut MountOptions, key: &str, value: &str) -> Result<()> {
    rows()
        .iter()
        .flat_map(|r| r.options)
        .find_map(|s| s.set(o, key, value))
        .unwrap_or(Err(FsError::InvalidArgument(unknown_option())))
}

/// Every built-in option set once, in the rows' order.
fn builtin_sets() -> Vec<&'static dyn OptionSet> {
    let mut sets: Vec<&'static dyn OptionSet> = Vec::new();
    for &set in BUILTIN.iter().flat_map(|r| r.options) {
        if !sets.iter().any(|s| s.docs() == set.docs()) {
            sets.push(set);
        }
    }
    sets
}

/// Every built-in policy option, in the README's order.
pub fn option_docs() -> Vec<OptionDoc> {
    builtin_sets().iter().flat_map(|s| s.docs()).collect()
}

/// The options every mount takes, whatever its policy (parsed by
/// `MountOptions::parse` itself).
pub const GENERIC_OPTIONS: &str =
    "policy=NAME, sync, async, ro, rw, noatime, relatime, strictatime, nodiratime, diratime, clock=wall|simulated";

/// The refusal of a `policy=` naming no policy this build has.
pub fn unknown_policy() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| format!("unknown policy (known: {})", POLICIES.join(", ")))
}

/// The refusal of an option no policy reads, naming every one.
pub fn unknown_option() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| {
        let keys: Vec<String> = option_docs()
            .iter()
            .map(|d| format!("{}={}", d.key, d.value))
            .collect();
        format!(
            "unknown mount option (known: {GENERIC_OPTIONS}, {})",
            keys.join(", ")
        )
    })
}

/// The policy options as `-o` help lists them, one a line.
pub fn options_help() -> String {
    let line = |d: &OptionDoc| {
        format!(
            "  {}={} (default {}): {}\n",
            d.key, d.value, d.default, d.doc
        )
    };
    option_docs()
        .iter()
        .map(line)
        .collect::<String>()
        .replace('`', "")
}

/// The policy options as rows of the README's option table.
pub fn readme_rows() -> String {
    let row = |d: &OptionDoc| {
        let value = d.value.replace('|', "\\|");
        format!("| `{}={value}` | {} | {} |\n", d.key, d.default, d.doc)
    };
    option_docs().iter().map(row).collect()
}

/// Stores `value` in `slot` if there is one; whether there was.
pub fn store<T>(slot: &mut T, value: Option<T>) -> bool {
    value.map(|v| *slot = v).is_some()
}

/// The value `v` names among `choices`.
pub fn choice<T: Copy>(v: &str, choices: &[(&str, T)]) -> Option<T> {
    choices.iter().find(|(name, _)| *name == v).map(|&(_, t)| t)
}

/// A whole number in `lo..=hi`.
pub fn bounded(v: &str, lo: usize, hi: usize) -> Option<usize> {
    v.parse().ok().filter(|n| (lo..=hi).contains(n))
}

/// A percentage, 0 to 100, with or without its `%`.
pub fn percent(v: &str) -> Option<u8> {
    v.trim_end_matches('%').parse().ok().filter(|p| *p <= 100)
}

/// A size in the one grammar (`crate::units`).
pub fn size(v: &str) -> Option<u64> {
    units::parse_size(v).ok()
}

/// A duration in the one grammar (`crate::units`).
pub fn duration(v: &str) -> Option<Duration> {
    units::parse_duration(v).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The README's option table lists each policy option as its row says
    /// (`readme_rows`), and its `policy=` row names every policy.
    #[test]
    fn readme_option_table_is_the_registry() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md");
        let readme = std::fs::read_to_string(path).unwrap();
        let rows = readme_rows();
        assert!(
            readme.contains(&rows),
            "README.md's option table should hold these rows:\n{rows}"
        );
        let policy_row = readme
            .lines()
            .find(|l| l.starts_with("| `policy=NAME`"))
            .unwrap();
        for name in POLICIES.iter() {
            assert!(policy_row.contains(&format!("`{name}`")), "{name}");
        }
    }

    /// Every message naming policies or options names all of them.
    #[test]
    fn refusals_name_every_policy_and_option() {
        for name in POLICIES.iter() {
            assert!(unknown_policy().contains(name), "{name}");
        }
        for d in option_docs() {
            assert!(unknown_option().contains(&format!("{}={}", d.key, d.value)));
            assert!(options_help().contains(&format!("{}={}", d.key, d.value)));
        }
        for generic in GENERIC_OPTIONS.split(", ") {
            assert!(unknown_option().contains(generic), "{generic}");
            let key = generic.split('=').next().unwrap();
            let value = generic
                .split('=')
                .nth(1)
                .map(|v| v.split('|').next().unwrap());
            let mut o = MountOptions::default();
            let item = match value {
                Some("NAME") => "policy=direct".to_string(),
                Some(v) => format!("{key}={v}"),
                None => key.to_string(),
            };
            assert!(MountOptions::parse(&item).is_ok(), "{item}");
            assert!(
                set_option(&mut o, key, "x").is_err(),
                "{key} is not a policy option"
            );
        }
    }

    /// Each row's layout is what the policy it builds says, and its name.
    #[test]
    fn rows_agree_with_their_policies() {
        for row in builtin::<MmapDevice>() {
            let opts = MountOptions::parse(&format!("policy={}", row.name)).unwrap();
            let p = (row.build)(&opts);
            assert_eq!((p.name(), p.pool_layout()), (row.name, row.layout));
            assert_eq!(layout_for(&opts), row.layout);
        }
    }

    /// Every knob refuses what it does not take and accepts its default.
    #[test]
    fn option_defaults_parse() {
        for d in option_docs() {
            let default = d.default.trim_matches('`');
            if d.key == "lawn_subzones" {
                continue;
            }
            let item = format!("{}={default}", d.key);
            assert!(MountOptions::parse(&item).is_ok(), "{item}");
            let bad = format!("{}=bogus", d.key);
            assert!(MountOptions::parse(&bad).is_err(), "{bad}");
        }
    }
}
