//! Map leases (design.md §17.14): a client that maps a file on the mount
//! `MAP_SHARED` shows the pool's own blocks in its mapping, pinned by the
//! daemon for as long as the lease holds — so two clients mapping one
//! file share its pages, as on a DAX file system. Each is primed and
//! recalled by a kernel read of the data as a write lease is (its holder
//! sees and may store into the file behind the kernel, whose cached
//! pages must not diverge from the pool's); map leases and read leases
//! share a file, and a write lease excludes both.

use std::io;

use super::{Kind, Leases, Peer, Prepared};
use crate::wire::{Refusal, MAX_MAP_BLOCKS, MAX_MAP_RUNS};

impl Leases {
    /// Answers client `peer`'s request `seq` for a map lease on blocks
    /// `[first, first + blocks)` of `ino` (one whose holder stores if
    /// `writable`): the owner pins them and lists those below the end of
    /// file, which the grant carries; or a refusal. A range longer than
    /// `MAX_MAP_BLOCKS`, or pinned in more runs than `MAX_MAP_RUNS`, is
    /// the kernel's.
    pub(crate) fn grant_map(
        &self,
        peer: &Peer,
        (seq, ino): (u64, u64),
        (first, blocks): (u64, u64),
        writable: bool,
    ) -> io::Result<()> {
        if blocks == 0 || blocks > MAX_MAP_BLOCKS {
            return self.refuse(peer, seq, ino, Refusal::Unleasable);
        }
        let kind = Kind::Map;
        if let Err(why) = self.start_grant(peer.id, ino, kind) {
            return self.refuse(peer, seq, ino, why);
        }
        let prepared = match self.owner.map(ino, (first, blocks), writable) {
            Some((id, view)) if view.runs.len() <= MAX_MAP_RUNS => {
                Some(Prepared::Map(id, view.runs))
            }
            Some((id, _)) => {
                self.owner.unmap(ino, id);
                None
            }
            None => None,
        };
        self.answer(peer, (seq, ino), kind, prepared)
    }
}
