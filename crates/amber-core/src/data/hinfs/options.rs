//! The DRAM write buffer's options (`buffer=`, `writeback_*=`,
//! `lazy_after=`, `buffering=`): hinfs's, and amber's buffer reads them too.

use crate::data::registry::{bounded, choice, duration, percent, size, store, Knob};
use std::time::Duration;

/// Smallest DRAM write buffer: 256 blocks, enough for the write-back
/// marks (percentages of it) to be whole blocks.
pub const MIN_BUFFER: u64 = 1 << 20;
/// Most write-back threads; more only contend on the buffer lock.
pub const MAX_WRITEBACK_THREADS: usize = 16;

/// How the DRAM write buffer is sized and drained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferOptions {
    /// Bytes of DRAM write buffer, whole 4 KiB blocks (`buffer=`).
    pub bytes: u64,
    /// Write-back starts when free buffer blocks fall below this percent
    /// (`writeback_low=`).
    pub low: u8,
    /// ... and runs until free blocks reach this percent (`writeback_high=`).
    pub high: u8,
    /// How often the write-back threads look for old dirty blocks
    /// (`writeback_interval=`).
    pub interval: Duration,
    /// Blocks dirty for longer than this are written back periodically
    /// (`writeback_age=`).
    pub age: Duration,
    /// A file not fsync'd for this long has its writes buffered whatever
    /// the Buffer Benefit Model last decided (`lazy_after=`, the paper's 5 s).
    pub lazy_after: Duration,
    /// Background write-back threads (`writeback_threads=`).
    pub threads: usize,
    /// hinfs buffers only if the mount-time calibration finds PM slow
    /// enough for buffering to pay (`false`, `buffering=auto`), or
    /// whenever its model says so (`true`, `buffering=always`; tests use
    /// it to exercise the buffer on any device).
    pub always: bool,
}

impl Default for BufferOptions {
    fn default() -> Self {
        BufferOptions {
            bytes: 256 << 20,
            low: 5,
            high: 20,
            interval: Duration::from_secs(5),
            age: Duration::from_secs(30),
            lazy_after: Duration::from_secs(5),
            threads: 1,
            always: false,
        }
    }
}

impl BufferOptions {
    /// Checks the values that depend on each other or on the machine.
    pub fn validate(&self) -> Result<(), &'static str> {
        if self.bytes < MIN_BUFFER {
            return Err("buffer= must be at least 1M");
        }
        if physical_memory().is_some_and(|m| self.bytes > m / 2) {
            return Err("buffer= must be at most half of physical memory");
        }
        if self.low > self.high {
            return Err("writeback_low must not exceed writeback_high");
        }
        if self.interval.is_zero() {
            return Err("writeback_interval must be positive");
        }
        Ok(())
    }
}

/// Physical memory in bytes, from /proc/meminfo (None where unreadable:
/// then only the lower bound of `buffer=` is checked).
fn physical_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

const PERCENT: &str = "writeback_low/high take a percentage, 0 to 100";
const DURATION: &str = "writeback_interval, writeback_age and lazy_after take a duration like \
                        5s or 500ms";

/// The options, in the README's order.
pub const KNOBS: &[Knob<BufferOptions>] = &[
    Knob {
        key: "buffer",
        value: "SIZE",
        default: "`256M`",
        doc:
            "hinfs's (and amber's) DRAM write buffer; at least 1M, at most half of physical memory",
        refused: "buffer= takes a size like 256M or 1G",
        set: |o, v| store(&mut o.bytes, size(v)),
    },
    Knob {
        key: "writeback_low",
        value: "PCT",
        default: "5",
        doc: "write-back threads start when free buffer blocks fall below this",
        refused: PERCENT,
        set: |o, v| store(&mut o.low, percent(v)),
    },
    Knob {
        key: "writeback_high",
        value: "PCT",
        default: "20",
        doc: "... and stop when free blocks reach this",
        refused: PERCENT,
        set: |o, v| store(&mut o.high, percent(v)),
    },
    Knob {
        key: "writeback_interval",
        value: "DUR",
        default: "`5s`",
        doc: "how often the threads look for old dirty blocks (`500ms` works too)",
        refused: DURATION,
        set: |o, v| store(&mut o.interval, duration(v)),
    },
    Knob {
        key: "writeback_age",
        value: "DUR",
        default: "`30s`",
        doc: "blocks last written longer ago are written back",
        refused: DURATION,
        set: |o, v| store(&mut o.age, duration(v)),
    },
    Knob {
        key: "lazy_after",
        value: "DUR",
        default: "`5s`",
        doc: "a file not fsync'd for this long has every write buffered",
        refused: DURATION,
        set: |o, v| store(&mut o.lazy_after, duration(v)),
    },
    Knob {
        key: "writeback_threads",
        value: "N",
        default: "1",
        doc: "background write-back threads (1 to 16)",
        refused: "writeback_threads= takes 1 to 16",
        set: |o, v| store(&mut o.threads, bounded(v, 1, MAX_WRITEBACK_THREADS)),
    },
    Knob {
        key: "buffering",
        value: "auto|always",
        default: "auto",
        doc: "hinfs buffers only if a mount-time calibration finds PM at least 4x slower than \
              DRAM per line (nothing is measured under `clock=simulated`: it buffers, with \
              PCM-like costs for its model)",
        refused: "buffering= takes auto or always",
        set: |o, v| {
            store(
                &mut o.always,
                choice(v, &[("auto", false), ("always", true)]),
            )
        },
    },
];
