//! The table of loaded inodes, sharded so that lookups on different
//! inodes do not contend on one lock.

use super::InodeState;
use crate::alloc::Padded;
use crate::error::Result;
use parking_lot::{Mutex, RwLock};
use rustc_hash::FxHashMap;
use std::sync::Arc;

/// A shared, lockable in-memory inode.
pub type InodeRef = Arc<RwLock<InodeState>>;

const SHARDS: usize = 64;

/// Loaded inodes by number.
pub struct InodeCache {
    shards: Vec<Padded<Mutex<FxHashMap<u64, InodeRef>>>>,
}

impl Default for InodeCache {
    fn default() -> Self {
        InodeCache {
            shards: (0..SHARDS)
                .map(|_| Padded(Mutex::new(FxHashMap::default())))
                .collect(),
        }
    }
}

impl InodeCache {
    fn shard(&self, ino: u64) -> &Mutex<FxHashMap<u64, InodeRef>> {
        &self.shards[(ino as usize) % SHARDS]
    }

    /// The loaded inode, loading it with `load` if needed.
    pub fn get(&self, ino: u64, load: impl FnOnce() -> Result<InodeState>) -> Result<InodeRef> {
        let mut shard = self.shard(ino).lock();
        if let Some(r) = shard.get(&ino) {
            return Ok(r.clone());
        }
        let r = Arc::new(RwLock::new(load()?));
        shard.insert(ino, r.clone());
        Ok(r)
    }

    /// Installs a freshly created inode.
    pub fn insert(&self, ino: u64, state: InodeState) -> InodeRef {
        let r = Arc::new(RwLock::new(state));
        self.shard(ino).lock().insert(ino, r.clone());
        r
    }

    /// Forgets a freed inode.
    pub fn remove(&self, ino: u64) {
        self.shard(ino).lock().remove(&ino);
    }

    /// Every loaded inode (for unmount).
    pub fn all(&self) -> Vec<InodeRef> {
        self.shards
            .iter()
            .flat_map(|s| s.lock().values().cloned().collect::<Vec<_>>())
            .collect()
    }
}
