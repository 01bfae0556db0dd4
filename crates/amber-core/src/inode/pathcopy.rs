//! Path copy (shadow paging) of a block map: replacing the data blocks of a
//! run of file blocks so that one atomic store switches the file from all
//! its old blocks to all its new ones, whatever the run's length.
//!
//! The planner descends from the root while the run falls under a single
//! child. Where it stops decides the commit:
//!
//! * the run is one block: an 8-byte pointer store into its existing leaf;
//! * the run reaches a missing child (a hole's subtree): a new subtree is
//!   built there and one 8-byte store links it into the existing parent;
//! * the run spans several entries of a node: that node is copied, and so
//!   is every node below it on the run's paths (missing ones are created),
//!   and one 8-byte store replaces the node's pointer in its parent, or one
//!   16-byte (root, height) store replaces the root;
//! * the tree must grow taller (or is empty): the new root is the copy
//!   point, committed by the (root, height) store.
//!
//! Nothing below the commit store is reachable from the old tree, so new
//! nodes and data blocks may be written in any order as long as they are
//! durable before the commit store. Nodes and data blocks the new tree no
//! longer uses are listed in [`PathCopy::replaced`], to be freed once the
//! commit is durable. Planning only reads PM; nothing is written.

use super::blockmap::{node_off, read_ptr, write_nodes, CHUNK};
use crate::error::{FsError, Result};
use amber_format::blockmap::{capacity_blocks, height_for, MAX_HEIGHT, PTRS_PER_NODE};
use amber_format::{Layout, BLOCK_SIZE};
use amber_pmem::PmDevice;

/// The one atomic store that commits a path copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitStore {
    /// An 8-byte store of `value` at byte `offset`, an entry of a node the
    /// old tree keeps.
    Pointer { offset: u64, value: u64 },
    /// The 16-byte (root, height) store into the inode.
    Root { root: u64, height: u8 },
}

/// A planned path copy.
pub struct PathCopy {
    /// New nodes and their full contents; durable before the commit store.
    pub new_nodes: Vec<(u64, Box<[u64; CHUNK as usize]>)>,
    /// The commit.
    pub commit: CommitStore,
    /// Data blocks and nodes of the old tree the new one no longer uses:
    /// free them once the commit is durable.
    pub replaced: Vec<u64>,
}

impl PathCopy {
    /// Writes the new nodes with non-temporal stores (caller drains).
    pub fn write_nodes<D: PmDevice>(&self, dev: &D, layout: &Layout) {
        write_nodes(dev, layout, &self.new_nodes);
    }

    /// Blocks this plan allocated for nodes (to give back if it is dropped).
    pub fn node_blocks(&self) -> Vec<u64> {
        self.new_nodes.iter().map(|(b, _)| *b).collect()
    }
}

/// What a node of the old tree is, as the copy sees it.
#[derive(Clone, Copy)]
enum Old {
    /// Nothing there (a hole).
    Absent,
    /// An existing block (a node, or a data block at level 0).
    Real(u64),
    /// A level the growth of the tree adds above the old root: its only
    /// entry, entry 0, is the level below (ending at the old root).
    Grown(u8),
}

struct Cx<'a, D: PmDevice> {
    dev: &'a D,
    layout: &'a Layout,
    old_root: u64,
    old_height: u8,
    first: u64,
    last: u64,
    new_data: &'a [u64],
    alloc: &'a mut dyn FnMut() -> Option<u64>,
    out: PathCopy,
}

/// Plans replacing file blocks `[first, first + new_data.len())` of the
/// tree (root, height) by the PM blocks `new_data` (in file-block order),
/// taking node blocks from `alloc`. On error the caller frees whatever
/// `alloc` handed out.
pub fn plan_path_copy<D: PmDevice>(
    dev: &D,
    layout: &Layout,
    (root, height): (u64, u8),
    first: u64,
    new_data: &[u64],
    alloc: &mut dyn FnMut() -> Option<u64>,
) -> Result<PathCopy> {
    assert!(!new_data.is_empty(), "path copy of no blocks");
    let last = first + new_data.len() as u64 - 1;
    assert!(
        last < capacity_blocks(MAX_HEIGHT),
        "path copy beyond the largest file"
    );
    if root != 0 && (height > MAX_HEIGHT || !layout.is_data_block(root)) {
        return Err(FsError::Corrupted(format!(
            "block-map root {root} height {height} invalid"
        )));
    }
    let mut cx = Cx {
        dev,
        layout,
        old_root: root,
        old_height: height,
        first,
        last,
        new_data,
        alloc,
        out: PathCopy {
            new_nodes: Vec::new(),
            commit: CommitStore::Root { root: 0, height: 0 },
            replaced: Vec::new(),
        },
    };
    let need = height_for(last);
    cx.out.commit = if root == 0 || need > height {
        // An empty or growing tree: the new root is the copy point.
        let top = if root == 0 {
            Old::Absent
        } else {
            Old::Grown(need)
        };
        let new_root = cx.copy(top, need, 0)?;
        CommitStore::Root {
            root: new_root,
            height: need,
        }
    } else {
        cx.descend()?
    };
    Ok(cx.out)
}

impl<D: PmDevice> Cx<'_, D> {
    /// Walks down the existing tree while the run stays under one child.
    fn descend(&mut self) -> Result<CommitStore> {
        let (root, height) = (self.old_root, self.old_height);
        if height == 0 {
            // The root is the data block of file block 0, the whole run.
            assert!(self.first == 0 && self.last == 0);
            self.out.replaced.push(root);
            return Ok(CommitStore::Root {
                root: self.new_data[0],
                height: 0,
            });
        }
        let mut parent: Option<(u64, u64)> = None;
        let mut node = root;
        let mut base = 0;
        // One step per level: bounded by the height.
        for level in (1..=height).rev() {
            let cap = capacity_blocks(level - 1);
            let i0 = (self.first - base) / cap;
            let i1 = (self.last - base) / cap;
            assert!(i0 <= i1 && i1 < PTRS_PER_NODE, "run outside its node");
            if i0 != i1 {
                let copy = self.copy(Old::Real(node), level, base)?;
                return Ok(match parent {
                    Some((p, idx)) => CommitStore::Pointer {
                        offset: node_off(self.layout, p, idx),
                        value: copy,
                    },
                    None => CommitStore::Root { root: copy, height },
                });
            }
            let child = read_ptr(self.dev, self.layout, node, i0)?;
            let child_base = base + i0 * cap;
            if level == 1 || child == 0 {
                // One data block, or a missing subtree: build it anew and
                // link it into this existing node.
                let old = if child == 0 {
                    Old::Absent
                } else {
                    Old::Real(child)
                };
                let value = self.copy(old, level - 1, child_base)?;
                return Ok(CommitStore::Pointer {
                    offset: node_off(self.layout, node, i0),
                    value,
                });
            }
            parent = Some((node, i0));
            node = child;
            base = child_base;
        }
        unreachable!("the loop returns at level 1 at the latest")
    }

    /// The new version of `old` (at `level`, covering file blocks from
    /// `base`): a new node whose entries over the run are copied
    /// recursively and whose other entries keep the old pointers; at level
    /// 0 the run's new data block. Recursion depth is the level (<= 4).
    fn copy(&mut self, old: Old, level: u8, base: u64) -> Result<u64> {
        if let Old::Real(b) = old {
            self.out.replaced.push(b);
        }
        if level == 0 {
            return Ok(self.new_data[(base - self.first) as usize]);
        }
        let mut contents = match old {
            Old::Real(n) => self.read_node(n)?,
            Old::Absent | Old::Grown(_) => Box::new([0; CHUNK as usize]),
        };
        let cap = capacity_blocks(level - 1);
        let i0 = self.first.saturating_sub(base) / cap;
        let i1 = ((self.last - base) / cap).min(PTRS_PER_NODE - 1);
        for idx in i0..=i1 {
            let child = self.entry(old, &contents, idx);
            contents[idx as usize] = self.copy(child, level - 1, base + idx * cap)?;
        }
        if let Old::Grown(_) = old {
            if i0 > 0 {
                // Entry 0 (the old tree) is outside the run: link it as is.
                let below = self.entry(old, &contents, 0);
                contents[0] = self.materialize(below)?;
            }
        }
        self.new_node(contents)
    }

    /// Entry `idx` of `old`, whose contents (for a real node) are
    /// `contents`.
    fn entry(&self, old: Old, contents: &[u64; CHUNK as usize], idx: u64) -> Old {
        match old {
            Old::Absent => Old::Absent,
            Old::Real(_) => match contents[idx as usize] {
                0 => Old::Absent,
                p => Old::Real(p),
            },
            Old::Grown(_) if idx != 0 => Old::Absent,
            Old::Grown(l) if l - 1 == self.old_height => Old::Real(self.old_root),
            Old::Grown(l) => Old::Grown(l - 1),
        }
    }

    /// A block number for `old` without copying anything in it: the grown
    /// levels between the new root and an untouched old tree become nodes
    /// holding only their entry 0.
    fn materialize(&mut self, old: Old) -> Result<u64> {
        match old {
            Old::Absent => Ok(0),
            Old::Real(b) => Ok(b),
            Old::Grown(_) => {
                let below = self.entry(old, &[0; CHUNK as usize], 0);
                let mut contents = Box::new([0; CHUNK as usize]);
                contents[0] = self.materialize(below)?;
                self.new_node(contents)
            }
        }
    }

    fn new_node(&mut self, contents: Box<[u64; CHUNK as usize]>) -> Result<u64> {
        let b = (self.alloc)().ok_or(FsError::NoSpace)?;
        self.out.new_nodes.push((b, contents));
        Ok(b)
    }

    /// A node's entries, each checked to point into the data area.
    fn read_node(&self, node: u64) -> Result<Box<[u64; CHUNK as usize]>> {
        let mut buf = vec![0u8; BLOCK_SIZE as usize];
        self.dev.read(self.layout.block_offset(node), &mut buf);
        let mut out = Box::new([0; CHUNK as usize]);
        for (idx, (slot, bytes)) in out.iter_mut().zip(buf.chunks_exact(8)).enumerate() {
            let p = u64::from_le_bytes(bytes.try_into().expect("8 bytes"));
            if p != 0 && !self.layout.is_data_block(p) {
                return Err(FsError::Corrupted(format!(
                    "block-map node {node} entry {idx} points at block {p}, outside the data area"
                )));
            }
            *slot = p;
        }
        Ok(out)
    }
}
