//! Files that preloaded processes map `MAP_SHARED` (`Msg::Maps`, design.md
//! §17.14): no write lease is granted on one while such a process lives.
//! The kernel faults a mapping's page past the end of file it knows with
//! SIGBUS, without asking the daemon, and a lessee's write that grows the
//! file tells the kernel nothing; a write through the kernel does.

use std::collections::{HashMap, HashSet};

use crate::wire::ALL_FILES;

/// Most files one client is told apart as mapping; past them, it counts
/// as mapping every file.
const MAX_NOTED_PER_CLIENT: usize = 1024;

/// Who maps what, until each client's connection ends.
#[derive(Default)]
pub(super) struct Mappers {
    /// Each client's files, `ALL_FILES` among them for one that maps
    /// every file.
    by_client: HashMap<u64, HashSet<u64>>,
    /// How many clients map each file.
    files: HashMap<u64, u32>,
    /// How many clients map every file.
    all: u32,
}

impl Mappers {
    /// Client `id` maps `ino` (or every file: `ALL_FILES`) from now.
    pub(super) fn note(&mut self, id: u64, ino: u64) {
        let mine = self.by_client.entry(id).or_default();
        let ino = if mine.len() >= MAX_NOTED_PER_CLIENT {
            ALL_FILES
        } else {
            ino
        };
        if !mine.insert(ino) {
            return;
        }
        if ino == ALL_FILES {
            self.all += 1;
        } else {
            *self.files.entry(ino).or_default() += 1;
        }
    }

    /// Client `id` is gone, with its mappings.
    pub(super) fn forget(&mut self, id: u64) {
        for ino in self.by_client.remove(&id).unwrap_or_default() {
            if ino == ALL_FILES {
                self.all -= 1;
                continue;
            }
            let n = self.files.get_mut(&ino).expect("a noted file is counted");
            *n -= 1;
            if *n == 0 {
                self.files.remove(&ino);
            }
        }
    }

    /// Whether some client maps `ino`.
    pub(super) fn maps(&self, ino: u64) -> bool {
        self.all > 0 || self.files.contains_key(&ino)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_mapped_until_its_last_mapper_goes() {
        let mut m = Mappers::default();
        m.note(1, 7);
        m.note(2, 7);
        m.note(1, 7);
        assert!(m.maps(7) && !m.maps(8));
        m.forget(1);
        assert!(m.maps(7));
        m.forget(2);
        assert!(!m.maps(7));
        assert!(m.files.is_empty() && m.by_client.is_empty());
    }

    #[test]
    fn a_client_past_the_bound_maps_every_file_until_it_goes() {
        let mut m = Mappers::default();
        for ino in 0..=MAX_NOTED_PER_CLIENT as u64 {
            m.note(3, ino + 10);
        }
        assert!(m.maps(1) && m.by_client[&3].len() == MAX_NOTED_PER_CLIENT + 1);
        m.note(4, ALL_FILES);
        m.forget(3);
        assert!(m.maps(1));
        m.forget(4);
        assert!(!m.maps(1) && !m.maps(10));
        assert_eq!(m.all, 0);
    }
}
