//! The small-write zone's options (`lawn_*=`; lawn.txt §4.1): lawn's, and
//! amber's zone reads them too.

use crate::data::registry::{bounded, duration, percent, store, Knob};
use amber_format::zone::{MAX_SUBZONES, SLOT_SIZES};
use std::time::Duration;

/// The zone's knobs: slot size, initial size, growth trigger, sub-zone
/// count, and how far the idle-time write-back empties it.
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
    /// The zone's commit: checksummed extent heads and one fence (zone
    /// version 2, amber's default), or LAWN's descriptors and Algorithm 1
    /// (version 1). Set by mount from the policy (`amber_zone=`), not a
    /// knob of its own.
    pub extents: bool,
}

impl ZoneOptions {
    /// The defaults on a machine of `cpus` CPUs.
    pub fn for_cpus(cpus: usize) -> ZoneOptions {
        ZoneOptions {
            slot: 64,
            initial_pct: 3,
            grow_pct: 10,
            subzones: subzones_for(cpus),
            idle_free_pct: 100,
            idle: Duration::from_millis(50),
            extents: false,
        }
    }

    /// Checks the values that depend on each other.
    pub fn validate(&self) -> Result<(), &'static str> {
        if self.grow_pct >= 100 || self.idle.is_zero() {
            return Err("lawn_grow must be under 100 and lawn_idle positive");
        }
        Ok(())
    }
}

/// The zone's default sub-zone count for `cpus` CPUs: one each, at most
/// 16.
fn subzones_for(cpus: usize) -> u32 {
    cpus.clamp(1, MAX_SUBZONES as usize) as u32
}

const PERCENT: &str = "lawn_grow and lawn_idle_free take a percentage, 0 to 100";

/// The options, in the README's order.
pub const KNOBS: &[Knob<ZoneOptions>] = &[
    Knob {
        key: "lawn_slot",
        value: "BYTES",
        default: "64",
        doc: "lawn's zone slot size: 64, 128, 256 or 512",
        refused: "lawn_slot= takes 64, 128, 256 or 512 (bytes)",
        set: |o, v| {
            let slot = v.parse().ok().filter(|s| SLOT_SIZES.contains(s));
            store(&mut o.slot, slot)
        },
    },
    Knob {
        key: "lawn_zone",
        value: "PCT",
        default: "3",
        doc: "lawn's zone starts at this percent of the pool",
        refused: "lawn_zone= takes the initial zone size in percent of the pool, 1 to 50",
        set: |o, v| {
            store(
                &mut o.initial_pct,
                percent(v).filter(|p| (1..=50).contains(p)),
            )
        },
    },
    Knob {
        key: "lawn_grow",
        value: "PCT",
        default: "10",
        doc: "a sub-zone grows when its free slots fall under this percent",
        refused: PERCENT,
        set: |o, v| store(&mut o.grow_pct, percent(v)),
    },
    Knob {
        key: "lawn_subzones",
        value: "N",
        default: "CPUs (≤ 16; 2 under `clock=simulated`)",
        doc: "sub-zones; a file's slices live in sub-zone inode mod N",
        refused: "lawn_subzones= takes 1 to 16",
        set: |o, v| {
            let n = bounded(v, 1, MAX_SUBZONES as usize).map(|n| n as u32);
            store(&mut o.subzones, n)
        },
    },
    Knob {
        key: "lawn_idle",
        value: "DUR",
        default: "`50ms`",
        doc: "no small write for this long counts as idle",
        refused: "lawn_idle= takes a duration like 50ms or 1s",
        set: |o, v| store(&mut o.idle, duration(v)),
    },
    Knob {
        key: "lawn_idle_free",
        value: "PCT",
        default: "100",
        doc: "when idle, least recently written slices go back until this percent of a \
              sub-zone is free, and so at a clean unmount",
        refused: PERCENT,
        set: |o, v| store(&mut o.idle_free_pct, percent(v)),
    },
];
