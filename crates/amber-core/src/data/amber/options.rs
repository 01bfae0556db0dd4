//! amber's own option (`amber_buffer=`): when it buffers a write in DRAM
//! (docs/design.md §13.4). Its buffer's size and write-back come from the
//! hinfs buffer options, its zone from lawn's, its engine from hunter's.

use crate::data::registry::{choice, store, Knob};

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
          the block lazy (nothing is measured under `clock=simulated`, so nothing is buffered), \
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
