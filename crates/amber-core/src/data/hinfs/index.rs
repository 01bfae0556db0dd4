//! Per-file DRAM state: the block index (file block → buffer block) and
//! the file's Buffer Benefit Model, kept in the inode's policy slot so it
//! lives and dies with the in-memory inode and is only touched under the
//! inode lock.

use super::super::cost::bbm::FileModel;
use crate::inode::InodeState;
use std::collections::{BTreeMap, BTreeSet};

/// What hinfs keeps per file.
#[derive(Default)]
pub struct FileBuf {
    /// Buffered blocks by file block; ordered, so write-back can go in
    /// ascending file-block order (the durable-prefix rule).
    pub blocks: BTreeMap<u64, u32>,
    /// The buffered blocks holding dirty lines, so write-back and fsync
    /// visit only those, not every block the file has buffered.
    pub dirty: BTreeSet<u64>,
    pub model: FileModel,
}

/// The file's state, if hinfs has any for it (reads need no more).
pub fn get(st: &InodeState) -> Option<&FileBuf> {
    st.policy.as_ref().map(|p| {
        p.downcast_ref::<FileBuf>()
            .expect("the inode's policy slot holds hinfs state under hinfs")
    })
}

/// Runs `f` with the inode and its file state apart (both mutable),
/// creating the state on first use and putting it back afterwards.
pub fn with<R>(st: &mut InodeState, f: impl FnOnce(&mut InodeState, &mut FileBuf) -> R) -> R {
    let mut file: Box<FileBuf> = match st.policy.take() {
        Some(p) => p
            .downcast()
            .expect("the inode's policy slot holds hinfs state under hinfs"),
        None => Box::default(),
    };
    let r = f(st, &mut file);
    st.policy = Some(file);
    r
}
