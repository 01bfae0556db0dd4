//! HUNTER's options (`hunter_*=`; hunter.txt §III-B, §III-D, §III-E):
//! the hunter policies', and amber's engine reads them too.

use crate::data::registry::{bounded, duration, size, store, Knob};
use std::time::Duration;

/// Most HUNTER worker threads.
pub const MAX_HUNTER_WORKERS: usize = 16;
/// Most HUNTER queues.
pub const MAX_HUNTER_QUEUES: usize = 1024;

/// HUNTER's knobs.
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

impl Default for HunterOptions {
    fn default() -> Self {
        HunterOptions {
            workers: 1,
            interval: Some(Duration::from_secs(5)),
            batch: 1 << 18,
            queues: 64,
            queue_max: 1 << 14,
            index_bytes: 2 << 20,
            window: 1,
        }
    }
}

/// The options, in the README's order.
pub const KNOBS: &[Knob<HunterOptions>] = &[
    Knob {
        key: "hunter_workers",
        value: "N",
        default: "1",
        doc: "hunter: threads persisting queued metadata (1 to 16)",
        refused: "hunter_workers= takes 1 to 16",
        set: |o, v| store(&mut o.workers, bounded(v, 1, MAX_HUNTER_WORKERS)),
    },
    Knob {
        key: "hunter_interval",
        value: "DUR|never",
        default: "`5s`",
        doc: "hunter: how often each worker wakes; `never` leaves it to fsync, full queues and \
              unmount",
        refused: "hunter_interval= takes a duration like 5s or 500ms, or never",
        set: |o, v| {
            let every = if v == "never" {
                Some(None)
            } else {
                duration(v).map(Some)
            };
            store(&mut o.interval, every)
        },
    },
    Knob {
        key: "hunter_batch",
        value: "N",
        default: "262144",
        doc: "hunter: most updates a worker persists per wake-up",
        refused: "hunter_batch= takes 1 to 16777216 updates",
        set: |o, v| store(&mut o.batch, bounded(v, 1, 1 << 24)),
    },
    Knob {
        key: "hunter_queues",
        value: "N",
        default: "64",
        doc: "hunter: metadata queues; a file uses queue inode mod N",
        refused: "hunter_queues= takes 1 to 1024",
        set: |o, v| store(&mut o.queues, bounded(v, 1, MAX_HUNTER_QUEUES)),
    },
    Knob {
        key: "hunter_queue",
        value: "N",
        default: "16384",
        doc: "hunter: most updates one queue holds; a writer that would overflow it persists \
              the queue itself. Each update takes 56 bytes (a write's run of consecutive \
              blocks is one update, and a write that continues the queue's last run extends \
              it, up to 2 MiB), so the queues hold at most N × queues × 56 bytes (56 MiB by \
              default; scattered 4 KiB writes fill one queue with 64 MiB of data, sequential \
              ones with 32 GiB) plus one 80-byte snapshot per queued file",
        refused: "hunter_queue= takes 1 to 16777216 updates",
        set: |o, v| store(&mut o.queue_max, bounded(v, 1, 1 << 24)),
    },
    Knob {
        key: "hunter_index",
        value: "SIZE",
        default: "`2M`",
        doc: "hunter: index a file reserves when it is first written, before there is any \
              history of file sizes (loaded, fsync'd or deleted files), and the most it gets \
              from that history; 8 bytes per 4 KiB block, growing with the blocks the file maps",
        refused: "hunter_index= takes a size up to 1G, like 2M",
        set: |o, v| store(&mut o.index_bytes, size(v).filter(|&b| b <= 1 << 30)),
    },
    Knob {
        key: "hunter_window",
        value: "N",
        default: "1",
        doc: "hunter: recent file sizes (fsync'd or deleted) the next index is sized from",
        refused: "hunter_window= takes 1 to 1024",
        set: |o, v| store(&mut o.window, bounded(v, 1, 1024)),
    },
];
