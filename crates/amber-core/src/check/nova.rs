//! NOVA's per-file logs (format::nova): every live regular file's log
//! replayed as mount replays it, its chain, footers and entries judged,
//! and the blocks it names claimed for the free-space check (which
//! reports any named twice). A log that cannot be replayed whole is
//! repaired by ending it before the first thing wrong: its committed
//! prefix is what the file keeps, and the blocks only later entries named
//! become free. A committed log is never damaged by a crash (entries past
//! the tail are not read), so this is media damage on any pool.

use super::inodes::Scan;
use super::repair::inode_off;
use super::Ctx;
use crate::filelog::FileLog;
use amber_format::nova::{log_word, OFF_LOG_HEAD};
use amber_format::FileKind;
use amber_pmem::PmDevice;

/// Checks each regular file's log in a nova pool; returns the blocks the
/// logs own (log pages and the pages they map).
pub(super) fn check<D: PmDevice>(cx: &mut Ctx<'_, D>, scan: &Scan) -> Vec<u64> {
    if !cx.nova {
        return Vec::new();
    }
    let l = cx.layout;
    let mut owned = Vec::new();
    for (&ino, rec) in &scan.recs {
        if rec.live_kind() != Some(FileKind::Regular) {
            continue;
        }
        let media = &cx.media;
        let read = |off: u64, buf: &mut [u8]| media.read(off, buf);
        let (log, cut) = FileLog::replay_prefix(&read, &l, ino, &rec.disk);
        // The blocks of the log as repair leaves it: none if it goes whole.
        if cut.as_ref().is_none_or(|c| c.head != 0) {
            owned.extend(log.blocks());
        }
        let Some(cut) = cut else {
            continue;
        };
        let what = format!("file inode {ino}'s log: {}", cut.why);
        let fix = if cut.head == 0 {
            "the log is dropped and the file is empty".to_string()
        } else {
            format!("the log ends at byte {} (its sound prefix)", cut.tail)
        };
        let at = inode_off(&l, ino) + OFF_LOG_HEAD as u64;
        let word = log_word(cut.head, cut.tail).to_le_bytes();
        cx.fixable(what, &fix, |f| f.write(at, &word));
    }
    owned
}
