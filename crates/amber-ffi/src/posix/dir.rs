//! Directory streams: "." and "..", then the directory's entries read
//! from the core a batch at a time. A position (telldir) is 0 before ".",
//! 1 before "..", and a core entry's cookie + 2 after it.

use std::collections::VecDeque;
use std::sync::Arc;

use amber_core::Core;
use amber_format::FileKind;

use super::errno::{Errno, PResult};
use super::file::OpenFile;
use super::pool::Dev;

/// Entries read from the core at once.
const BATCH: usize = 128;
const DOTDOT: u64 = 2;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub ino: u64,
    pub kind: FileKind,
    pub name: Vec<u8>,
    /// The stream's position after this entry.
    pub next: u64,
}

pub struct DirStream {
    dir: Arc<OpenFile>,
    pos: u64,
    buf: VecDeque<Entry>,
    end: bool,
}

impl DirStream {
    /// A stream over the open directory `dir`.
    pub fn new(dir: Arc<OpenFile>) -> PResult<DirStream> {
        if dir.kind() != FileKind::Directory {
            return Err(Errno(libc::ENOTDIR));
        }
        Ok(DirStream {
            dir,
            pos: 0,
            buf: VecDeque::new(),
            end: false,
        })
    }

    pub fn dir(&self) -> &Arc<OpenFile> {
        &self.dir
    }

    /// The next entry, or None at the end.
    pub fn next(&mut self, core: &Core<Dev>) -> PResult<Option<Entry>> {
        let ino = self.dir.ino();
        let e = match self.pos {
            0 => Some(Entry {
                ino,
                kind: FileKind::Directory,
                name: b".".to_vec(),
                next: 1,
            }),
            1 => {
                // A directory removed while open may have lost its parent.
                let up = core.lookup(ino, b"..").map_or(ino, |a| a.ino);
                Some(Entry {
                    ino: up,
                    kind: FileKind::Directory,
                    name: b"..".to_vec(),
                    next: DOTDOT,
                })
            }
            _ => {
                if self.buf.is_empty() && !self.end {
                    self.fill(core)?;
                }
                self.buf.pop_front()
            }
        };
        if let Some(e) = &e {
            self.pos = e.next;
        }
        Ok(e)
    }

    fn fill(&mut self, core: &Core<Dev>) -> PResult<()> {
        let mut got = 0;
        let buf = &mut self.buf;
        core.readdir(self.dir.ino(), self.pos - DOTDOT, |e| {
            got += 1;
            let next = e.cookie + DOTDOT;
            buf.push_back(Entry {
                ino: e.ino,
                kind: e.kind,
                name: e.name,
                next,
            });
            got < BATCH
        })?;
        self.end = got < BATCH;
        Ok(())
    }

    pub fn tell(&self) -> u64 {
        self.pos
    }

    /// seekdir / rewinddir (position 0).
    pub fn seek(&mut self, pos: u64) {
        self.pos = pos;
        self.buf.clear();
        self.end = false;
    }
}

/// The d_type of a kind.
pub fn d_type(kind: FileKind) -> u8 {
    match kind {
        FileKind::Regular => libc::DT_REG,
        FileKind::Directory => libc::DT_DIR,
        FileKind::Symlink => libc::DT_LNK,
        FileKind::Fifo => libc::DT_FIFO,
        FileKind::Socket => libc::DT_SOCK,
        FileKind::CharDevice => libc::DT_CHR,
        FileKind::BlockDevice => libc::DT_BLK,
    }
}
