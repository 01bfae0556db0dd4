//! flock(2) between open file descriptions of one pool. The pool has one
//! process (the one holding its lock), so these are all the holders there
//! can be. POSIX record locks (F_SETLK) belong to the process and never
//! conflict within it, so they need no table at all (see the interposer's
//! fcntl).

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use super::errno::{Errno, PResult};
use super::file::OpenFile;

/// Who holds a file's flock: descriptions, by address.
#[derive(Default)]
struct Holders {
    exclusive: Option<usize>,
    shared: Vec<usize>,
}

impl Holders {
    fn drop_holder(&mut self, id: usize) {
        if self.exclusive == Some(id) {
            self.exclusive = None;
        }
        self.shared.retain(|&h| h != id);
    }

    fn is_empty(&self) -> bool {
        self.exclusive.is_none() && self.shared.is_empty()
    }
}

#[derive(Default)]
pub struct Flocks {
    held: Mutex<HashMap<u64, Holders>>,
    changed: Condvar,
}

fn id(file: &OpenFile) -> usize {
    file as *const OpenFile as usize
}

impl Flocks {
    /// flock(2): LOCK_SH, LOCK_EX or LOCK_UN, optionally | LOCK_NB. As on
    /// Linux, converting a lock drops the old one first.
    pub fn flock(&self, file: &Arc<OpenFile>, op: i32) -> PResult<()> {
        let nonblocking = op & libc::LOCK_NB != 0;
        let op = op & !libc::LOCK_NB;
        if ![libc::LOCK_SH, libc::LOCK_EX, libc::LOCK_UN].contains(&op) {
            return Err(Errno(libc::EINVAL));
        }
        let (me, ino) = (id(file), file.ino());
        let mut held = self.held.lock();
        loop {
            let h = held.entry(ino).or_default();
            h.drop_holder(me);
            let free = match op {
                libc::LOCK_UN => {
                    if h.is_empty() {
                        held.remove(&ino);
                    }
                    self.changed.notify_all();
                    return Ok(());
                }
                libc::LOCK_EX => h.is_empty(),
                _ => h.exclusive.is_none(),
            };
            if free {
                if op == libc::LOCK_EX {
                    h.exclusive = Some(me);
                } else {
                    h.shared.push(me);
                }
                return Ok(());
            }
            if nonblocking {
                return Err(Errno(libc::EWOULDBLOCK));
            }
            self.changed.wait(&mut held);
        }
    }

    /// Drops whatever lock `file` holds: its last descriptor was closed.
    pub fn release(&self, file: &Arc<OpenFile>) {
        if Arc::strong_count(file) > 1 {
            return;
        }
        let mut held = self.held.lock();
        if let Some(h) = held.get_mut(&file.ino()) {
            h.drop_holder(id(file));
            if h.is_empty() {
                held.remove(&file.ino());
            }
            self.changed.notify_all();
        }
    }
}
