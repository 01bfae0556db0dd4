//! A nova file's log as the media holds it (format::nova): reading it from
//! head to tail and replaying its entries into the file's pages, size and
//! times, with every number validated first. Mount claims the blocks a
//! replay names, fsck judges them, and the `nova` policy keeps the replay
//! as the file's DRAM index and updates it as it appends (docs/design.md
//! §15).
//!
//! Besides the map, a replay knows which entries are still live — a write
//! entry while some page maps to it, an entry that unmaps pages (a
//! truncating or punching one) until thorough GC rewrites the log, and the
//! newest entry, which carries the size and times — and how many live
//! entries each log page holds: what NOVA's garbage collection decides by.

mod live;

pub(crate) use live::Liveness;

use crate::error::{FsError, Result};
use crate::inode::BlockIndex;
use amber_format::blockmap::MAX_FILE_SIZE;
use amber_format::nova::{
    log_of, Entry, EntryKind, Footer, ENTRIES_PER_PAGE, ENTRY_SIZE, FOOTER_OFFSET,
};
use amber_format::{Inode, Layout, Timespec, BLOCK_SIZE};
use rustc_hash::FxHashSet;

/// How a replay reads the media: the device, or fsck's overlaid view.
pub(crate) type Read<'a> = &'a dyn Fn(u64, &mut [u8]);

/// One regular file's log, replayed.
#[derive(Default)]
pub(crate) struct FileLog {
    /// The first log page (0: no log).
    pub head: u64,
    /// The pool byte offset of the next free entry slot (0: no log).
    pub tail: u64,
    /// The log pages, head first.
    pub pages: Vec<u64>,
    /// File page -> PM block, as the live entries say.
    pub map: BlockIndex,
    /// Entry liveness, for garbage collection.
    pub live: Liveness,
    /// Entries between head and tail.
    pub entries: u64,
    /// Size and times of the newest entry (None: an empty log).
    pub attrs: Option<(u64, Timespec, Timespec)>,
    /// Thorough GC is not tried again before the log has this many
    /// entries (it found too little to gain at half as many).
    pub gc_floor: u64,
}

/// Where a damaged log must end to keep only its sound prefix.
pub(crate) struct Cut {
    /// The head to store (0: the log is dropped whole).
    pub head: u64,
    /// The tail to store.
    pub tail: u64,
    /// What was wrong.
    pub why: String,
}

impl Cut {
    /// The whole log goes: nothing before the damage can be kept.
    fn empty(why: String) -> Cut {
        Cut {
            head: 0,
            tail: 0,
            why,
        }
    }
}

/// The page (block) an entry or tail offset lies in.
pub(crate) fn page_of(off: u64) -> u64 {
    off / BLOCK_SIZE
}

/// The slot index of an entry or tail offset in its page.
pub(crate) fn slot_of(off: u64) -> u64 {
    (off % BLOCK_SIZE) / ENTRY_SIZE
}

/// The largest number of file pages.
const MAX_PAGES: u64 = MAX_FILE_SIZE / BLOCK_SIZE;

impl FileLog {
    /// Reads and replays the log of inode `ino` (`disk`, a regular file of
    /// a nova pool). Fails on anything a committed log cannot hold: a
    /// chain that leaves the data area, loops or ends before the tail, a
    /// page of another inode, an entry that fails its checksum or names
    /// pages or blocks out of bounds.
    pub fn replay(read: Read<'_>, l: &Layout, ino: u64, disk: &Inode) -> Result<FileLog> {
        match FileLog::replay_prefix(read, l, ino, disk) {
            (log, None) => Ok(log),
            (_, Some(cut)) => Err(FsError::Corrupted(format!(
                "nova log of inode {ino}: {}",
                cut.why
            ))),
        }
    }

    /// Replays as much of the log as is sound: the whole log, or the
    /// prefix before the first thing wrong with it and where the log
    /// would have to end to hold only that prefix (fsck's repair).
    pub fn replay_prefix(
        read: Read<'_>,
        l: &Layout,
        ino: u64,
        disk: &Inode,
    ) -> (FileLog, Option<Cut>) {
        let (head, tail) = log_of(&disk.inline);
        let mut log = FileLog {
            head,
            tail,
            ..FileLog::default()
        };
        if head == 0 && tail == 0 {
            return (log, None);
        }
        if let Err(why) = check_tail(l, head, tail) {
            return (FileLog::default(), Some(Cut::empty(why)));
        }
        let mut seen = FxHashSet::default();
        let mut page = head;
        // Bounded: every page is new to `seen`, and the pool is finite.
        loop {
            match log.replay_page(read, l, (ino, disk), page, &mut seen) {
                Ok(Some(next)) => page = next,
                Ok(None) => return (log, None),
                Err(cut) => return (log, Some(cut)),
            }
        }
    }

    /// Replays page `page`; returns the next page, or None after the tail
    /// page. On damage, the cut that keeps what came before.
    fn replay_page(
        &mut self,
        read: Read<'_>,
        l: &Layout,
        (ino, disk): (u64, &Inode),
        page: u64,
        seen: &mut FxHashSet<u64>,
    ) -> std::result::Result<Option<u64>, Cut> {
        // Where the log ends if this page cannot be kept.
        let head = self.head;
        let before = self
            .pages
            .last()
            .map(|&p| l.block_offset(p) + FOOTER_OFFSET);
        let cut = |why: String| match before {
            Some(tail) => Cut { head, tail, why },
            None => Cut::empty(why),
        };
        if !l.is_data_block(page) || !seen.insert(page) {
            return Err(cut(format!(
                "page {page} is outside the data area or repeats"
            )));
        }
        let footer = match read_footer(read, l, page) {
            Ok(f) if f.ino == ino && f.generation == disk.generation => f,
            Ok(f) => return Err(cut(format!("page {page} belongs to inode {}", f.ino))),
            Err(why) => return Err(cut(why)),
        };
        self.pages.push(page);
        let last = page == page_of(self.tail);
        let end = if last {
            slot_of(self.tail)
        } else {
            ENTRIES_PER_PAGE
        };
        for slot in 0..end {
            let off = l.block_offset(page) + slot * ENTRY_SIZE;
            match read_entry(read, l, disk, off) {
                Ok(e) => {
                    self.apply(off, &e);
                }
                Err(w) => {
                    let why = format!("entry at byte {off}: {w}");
                    return Err(if off == l.block_offset(head) {
                        Cut::empty(why)
                    } else {
                        Cut {
                            head,
                            tail: off,
                            why,
                        }
                    });
                }
            }
        }
        Ok((!last).then_some(footer.next))
    }

    /// Applies entry `e`, at pool offset `off`, to the DRAM state: the
    /// replay of one entry, and what an append does once it committed.
    /// Returns the blocks it unmapped (freed once it is durable).
    pub fn apply(&mut self, off: u64, e: &Entry) -> Vec<u64> {
        self.entries += 1;
        self.live.begin(off);
        let mut dropped = Vec::new();
        match e.kind {
            EntryKind::Write => {
                for i in 0..u64::from(e.pages) {
                    let fb = e.pgoff + i;
                    dropped.extend(self.unmap(fb));
                    self.map.set(fb, e.block + i);
                }
                self.live.mapped(off, e.pgoff, e.pages);
            }
            EntryKind::Punch => {
                let end = e.pgoff + u64::from(e.pages);
                dropped.extend(self.unmap_range(e.pgoff, end));
                self.live.pin(off);
            }
            EntryKind::Attr => {}
        }
        if e.truncates() {
            dropped.extend(self.unmap_range(e.size.div_ceil(BLOCK_SIZE), MAX_PAGES));
            self.live.pin(off);
        }
        self.attrs = Some((e.size, e.mtime, e.ctime));
        dropped
    }

    fn unmap(&mut self, fb: u64) -> Option<u64> {
        let b = self.map.get(fb)?;
        self.map.remove(fb);
        self.live.unmapped(fb);
        Some(b)
    }

    fn unmap_range(&mut self, first: u64, stop: u64) -> Vec<u64> {
        let gone: Vec<u64> = self.map.mapped_in(first, stop).map(|(f, _)| f).collect();
        gone.into_iter().filter_map(|f| self.unmap(f)).collect()
    }

    /// Blocks the file owns: its log pages and its mapped data blocks.
    pub fn blocks(&self) -> impl Iterator<Item = u64> + '_ {
        let data = self.map.mapped_in(0, MAX_PAGES).map(|(_, b)| b);
        self.pages.iter().copied().chain(data)
    }
}

/// A tail is a slot boundary inside a data block, and a log has both ends
/// or neither.
fn check_tail(l: &Layout, head: u64, tail: u64) -> std::result::Result<(), String> {
    let in_page = tail % BLOCK_SIZE;
    let ok = head != 0
        && tail != 0
        && in_page.is_multiple_of(ENTRY_SIZE)
        && in_page <= FOOTER_OFFSET
        && tail / BLOCK_SIZE < l.total_blocks
        && l.is_data_block(page_of(tail));
    if ok {
        Ok(())
    } else {
        Err(format!("head {head} and tail {tail} do not make a log"))
    }
}

fn read_footer(read: Read<'_>, l: &Layout, page: u64) -> std::result::Result<Footer, String> {
    let mut b = [0u8; ENTRY_SIZE as usize];
    read(l.block_offset(page) + FOOTER_OFFSET, &mut b);
    Footer::decode(&b).map_err(|e| format!("page {page}'s footer: {e}"))
}

/// Reads and validates one entry: its checksum and kind, its generation,
/// and every page and block it names inside the file's and the pool's
/// bounds.
fn read_entry(
    read: Read<'_>,
    l: &Layout,
    disk: &Inode,
    off: u64,
) -> std::result::Result<Entry, String> {
    let mut b = [0u8; ENTRY_SIZE as usize];
    read(off, &mut b);
    let e = Entry::decode(&b).map_err(|e| e.to_string())?;
    let pages = u64::from(e.pages);
    let in_file = e.pgoff < MAX_PAGES && pages <= MAX_PAGES - e.pgoff;
    let shape = match e.kind {
        EntryKind::Write => {
            pages > 0
                && in_file
                && l.is_data_block(e.block)
                && e.block
                    .checked_add(pages - 1)
                    .is_some_and(|b| l.is_data_block(b))
        }
        EntryKind::Punch => pages > 0 && in_file && e.block == 0,
        EntryKind::Attr => pages == 0 && e.pgoff == 0 && e.block == 0,
    };
    if !shape || e.size > MAX_FILE_SIZE {
        return Err(format!("{e:?} is out of bounds"));
    }
    if e.generation != disk.generation {
        return Err(format!("generation {} is not the inode's", e.generation));
    }
    Ok(e)
}
