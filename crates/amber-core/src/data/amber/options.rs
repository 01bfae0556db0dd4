//! amber's own options: when it buffers a write in DRAM (`amber_buffer=`,
//! docs/design.md §13.4) and how its zone commits (`amber_zone=`, §11.7). Its buffer's size and write-back come from the
//! hinfs buffer options, its zone from lawn's, its engine from hunter's.

use crate::data::registry::{bounded, choice, store, Knob};

/// When `amber` buffers a write in DRAM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AmberBuffer {
    /// Where the mount-time calibration finds PM slow enough for buffering
    /// to pay and the Buffer Benefit Model predicts the block lazy.
    #[default]
    Auto,
    /// Every write that may persist lazily: the tests and the crash
    /// harness, whose simulated clock measures nothing, use it to
    /// exercise the buffer on any device.
    Always,
    /// Never: every write takes the zone or the data log.
    Never,
    /// As `Auto` where buffering pays, whatever the calibration measured:
    /// the Buffer Benefit Model decides every block. The default path on
    /// slow PM, made reachable on any device (and under the simulated
    /// clock) for the tests, the crash harness and comparisons.
    Model,
}

/// The option.
pub const KNOBS: &[Knob<AmberBuffer>] = &[Knob {
    key: "amber_buffer",
    value: "auto|always|never|model",
    default: "auto",
    doc: "amber holds writes that may persist lazily in DRAM: `auto` where a mount-time \
          calibration finds PM at least 4x slower than DRAM per line and HiNFS's model predicts \
          the block lazy, and elsewhere (and under `clock=simulated`, where nothing is \
          measured) only overwrites straddling a block boundary with more slices than the zone \
          takes (a WAL's pages) and writes into blocks the buffer holds, \
          `always` for every such write, `never` for none, `model` as `auto` where \
          buffering pays, whatever the calibration measured; a file's buffered blocks go to PM \
          together, atomically, at fsync, syncfs, unmount, after `writeback_age`, or before any \
          other change to the file",
    refused: "amber_buffer= takes auto, always, never or model",
    set: |o, v| {
        let modes = [
            ("auto", AmberBuffer::Auto),
            ("always", AmberBuffer::Always),
            ("never", AmberBuffer::Never),
            ("model", AmberBuffer::Model),
        ];
        store(o, choice(v, &modes))
    },
}];

/// How `amber`'s small-write zone commits a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AmberZone {
    /// Checksummed extent heads, one fence per write (zone version 2).
    #[default]
    Extents,
    /// LAWN's Algorithm 1 and commit number (zone version 1), as `lawn`
    /// commits: for comparing the two on amber's own path.
    Lawn,
}

/// The zone option.
pub const ZONE_KNOBS: &[Knob<AmberZone>] = &[Knob {
    key: "amber_zone",
    value: "extents|lawn",
    default: "extents",
    doc: "how amber's small-write zone commits a write: `extents` writes the slices to new \
          slots with one checksummed extent head and makes both durable with one fence \
          (recovery ignores a head whose checksum fails); `lawn` uses LAWN's Algorithm 1 and \
          commit number, two fences, as policy=lawn does. A pool's zone of the other kind is \
          folded back into the files at mount",
    refused: "amber_zone= takes extents or lawn",
    set: |o, v| {
        store(
            o,
            choice(
                v,
                &[("extents", AmberZone::Extents), ("lawn", AmberZone::Lawn)],
            ),
        )
    },
}];

/// The most slices a small overwrite may have and still go through
/// amber's zone (`amber_zone_max=`): what the mount-time calibration
/// finds pays (`None`, design.md §13.5), or a cap on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AmberZoneMax(pub Option<u64>);

/// Largest cap: a zone write covers at most two partial blocks of the
/// smallest slot's 64 slices.
const MAX_ZONE_CAP: usize = 128;

/// The cap option.
pub const ZONE_MAX_KNOBS: &[Knob<AmberZoneMax>] = &[Knob {
    key: "amber_zone_max",
    value: "auto|N",
    default: "auto",
    doc: "most slices a small overwrite of amber may have and still go through its zone: \
          `auto` as the mount-time calibration finds pays (every partial write under \
          `clock=simulated`), or at most N (0 to 128; 0 sends every write to the data log, \
          where a write inside one block commits with its own record and one fence, but for \
          the overwrites straddling a block boundary that `amber_buffer=auto` coalesces), for \
          comparing the two paths",
    refused: "amber_zone_max= takes auto or a number of slices, 0 to 128",
    set: |o, v| {
        let cap = match v {
            "auto" => Some(AmberZoneMax(None)),
            n => bounded(n, 0, MAX_ZONE_CAP).map(|n| AmberZoneMax(Some(n as u64))),
        };
        store(o, cap)
    },
}];
