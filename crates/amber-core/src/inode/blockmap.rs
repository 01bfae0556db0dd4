//! A file's block map: the radix tree on PM (format::blockmap) and its DRAM
//! index, so a lookup is one hash-map access instead of a walk over PM.
//!
//! Changes are planned in DRAM first ([`MapPlan`]), so a caller can allocate
//! everything an operation needs — or fail with ENOSPC having changed
//! nothing — and then apply the plan in the order its crash argument needs.

use crate::error::{FsError, Result};
use crate::ordered::in_order;
use amber_format::blockmap::{capacity_blocks, height_for, index_at, MAX_HEIGHT, PTRS_PER_NODE};
use amber_format::{Layout, BLOCK_SIZE};
use amber_pmem::PmDevice;
use rustc_hash::FxHashMap;

pub(super) const CHUNK: u64 = PTRS_PER_NODE;

/// DRAM index: file block -> PM block.
#[derive(Default, Clone)]
pub struct BlockIndex {
    chunks: FxHashMap<u64, Box<[u64; CHUNK as usize]>>,
    mapped: u64,
}

impl BlockIndex {
    pub fn get(&self, fblock: u64) -> Option<u64> {
        let c = self.chunks.get(&(fblock / CHUNK))?;
        let b = c[(fblock % CHUNK) as usize];
        (b != 0).then_some(b)
    }

    pub fn set(&mut self, fblock: u64, b: u64) {
        assert!(b != 0);
        let c = self
            .chunks
            .entry(fblock / CHUNK)
            .or_insert_with(|| Box::new([0; CHUNK as usize]));
        let slot = &mut c[(fblock % CHUNK) as usize];
        if *slot == 0 {
            self.mapped += 1;
        }
        *slot = b;
    }

    /// Forgets one mapping.
    pub fn remove(&mut self, fblock: u64) {
        if let Some(c) = self.chunks.get_mut(&(fblock / CHUNK)) {
            let e = &mut c[(fblock % CHUNK) as usize];
            if *e != 0 {
                *e = 0;
                self.mapped -= 1;
            }
        }
    }

    /// The first file block at or after `fblock` and below `limit` that is
    /// not mapped.
    pub fn next_hole(&self, fblock: u64, limit: u64) -> Option<u64> {
        (fblock..limit).find(|&f| self.get(f).is_none())
    }

    /// Forgets every mapping at or after `fblock`.
    pub fn truncate(&mut self, fblock: u64) {
        let mut removed = 0;
        self.chunks.retain(|&k, c| {
            if (k + 1) * CHUNK <= fblock {
                return true;
            }
            let from = fblock.saturating_sub(k * CHUNK) as usize;
            for e in c[from..].iter_mut() {
                if *e != 0 {
                    removed += 1;
                    *e = 0;
                }
            }
            from > 0
        });
        self.mapped -= removed;
    }

    /// Number of mapped data blocks.
    pub fn mapped(&self) -> u64 {
        self.mapped
    }

    /// The first mapped file block at or after `fblock` and below `limit`.
    pub fn next_mapped(&self, fblock: u64, limit: u64) -> Option<u64> {
        self.mapped_in(fblock, limit).next().map(|(f, _)| f)
    }

    /// The mapped file blocks of `[first, stop)` with their blocks, in
    /// order: bounded by the index, whatever the range.
    pub fn mapped_in(&self, first: u64, stop: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
        let chunks =
            (first < stop).then(|| in_order(&self.chunks, first / CHUNK, (stop - 1) / CHUNK));
        chunks
            .into_iter()
            .flatten()
            .flat_map(|(c, chunk)| {
                chunk
                    .iter()
                    .enumerate()
                    .map(move |(i, &b)| (c * CHUNK + i as u64, b))
            })
            .filter(move |&(f, b)| b != 0 && (first..stop).contains(&f))
    }
}

pub(super) fn node_off(layout: &Layout, node: u64, idx: u64) -> u64 {
    layout.block_offset(node) + idx * 8
}

pub(super) fn read_ptr<D: PmDevice>(dev: &D, layout: &Layout, node: u64, idx: u64) -> Result<u64> {
    let p = dev.load_u64(node_off(layout, node, idx));
    if p != 0 && !layout.is_data_block(p) {
        return Err(FsError::Corrupted(format!(
            "block-map node {node} entry {idx} points at block {p}, outside the data area"
        )));
    }
    Ok(p)
}

/// Every block of a tree, split into data blocks (with their file block)
/// and map nodes. Pointers are validated, so garbage cannot send the walk
/// out of the pool; depth is bounded by the height.
pub struct TreeBlocks {
    pub data: Vec<(u64, u64)>,
    pub nodes: Vec<u64>,
}

/// Walks the tree rooted at `root` of `height`.
pub fn walk<D: PmDevice>(dev: &D, layout: &Layout, root: u64, height: u8) -> Result<TreeBlocks> {
    let mut out = TreeBlocks {
        data: Vec::new(),
        nodes: Vec::new(),
    };
    if root == 0 {
        return Ok(out);
    }
    if height > MAX_HEIGHT || !layout.is_data_block(root) {
        return Err(FsError::Corrupted(format!(
            "block-map root {root} height {height} invalid"
        )));
    }
    walk_node(dev, layout, root, height, 0, &mut out)?;
    Ok(out)
}

fn walk_node<D: PmDevice>(
    dev: &D,
    layout: &Layout,
    node: u64,
    level: u8,
    base: u64,
    out: &mut TreeBlocks,
) -> Result<()> {
    if level == 0 {
        out.data.push((base, node));
        return Ok(());
    }
    out.nodes.push(node);
    let mut buf = vec![0u8; BLOCK_SIZE as usize];
    dev.read(layout.block_offset(node), &mut buf);
    for idx in 0..PTRS_PER_NODE {
        let i = idx as usize * 8;
        let p = u64::from_le_bytes(buf[i..i + 8].try_into().expect("8 bytes"));
        if p == 0 {
            continue;
        }
        if !layout.is_data_block(p) {
            return Err(FsError::Corrupted(format!(
                "block-map node {node} entry {idx} points at block {p}, outside the data area"
            )));
        }
        walk_node(
            dev,
            layout,
            p,
            level - 1,
            base + idx * capacity_blocks(level - 1),
            out,
        )?;
    }
    Ok(())
}

/// Builds the DRAM index of a tree.
pub fn load_index<D: PmDevice>(
    dev: &D,
    layout: &Layout,
    root: u64,
    height: u8,
) -> Result<(BlockIndex, TreeBlocks)> {
    let t = walk(dev, layout, root, height)?;
    let mut idx = BlockIndex::default();
    for &(f, b) in &t.data {
        idx.set(f, b);
    }
    Ok((idx, t))
}

/// Changes to a tree, planned but not yet applied.
pub struct MapPlan {
    /// New nodes and their full contents: written and made durable before
    /// anything links to them.
    pub new_nodes: Vec<(u64, Box<[u64; CHUNK as usize]>)>,
    /// 8-byte pointer stores into existing nodes: (byte offset, value).
    pub stores: Vec<(u64, u64)>,
    /// (root, height) as planned so far.
    pub root: (u64, u8),
    orig_root: (u64, u8),
    overlay: FxHashMap<u64, u64>,
}

impl MapPlan {
    /// A plan over the tree (root, height).
    pub fn new(root: u64, height: u8) -> MapPlan {
        MapPlan {
            new_nodes: Vec::new(),
            stores: Vec::new(),
            root: (root, height),
            orig_root: (root, height),
            overlay: FxHashMap::default(),
        }
    }

    /// The new (root, height) if the plan changes it: stored as one 16-byte
    /// atomic store in the inode.
    pub fn new_root(&self) -> Option<(u64, u8)> {
        (self.root != self.orig_root).then_some(self.root)
    }

    /// Writes the new nodes with non-temporal stores (caller drains).
    pub fn write_nodes<D: PmDevice>(&self, dev: &D, layout: &Layout) {
        write_nodes(dev, layout, &self.new_nodes);
    }
}

/// Writes whole new nodes with non-temporal stores (caller drains).
pub(super) fn write_nodes<D: PmDevice>(
    dev: &D,
    layout: &Layout,
    nodes: &[(u64, Box<[u64; CHUNK as usize]>)],
) {
    for (b, contents) in nodes {
        let bytes: Vec<u8> = contents.iter().flat_map(|p| p.to_le_bytes()).collect();
        dev.write_nt(layout.block_offset(*b), &bytes);
    }
}

/// Plans mapping file block `fblock` (currently a hole) to PM block
/// `pblock`, taking node blocks from `alloc`.
pub fn plan_insert<D: PmDevice>(
    dev: &D,
    layout: &Layout,
    plan: &mut MapPlan,
    fblock: u64,
    pblock: u64,
    alloc: &mut dyn FnMut() -> Option<u64>,
) -> Result<()> {
    let (mut root, mut height) = plan.root;
    let need = height_for(fblock);
    if root == 0 {
        if need == 0 {
            plan.root = (pblock, 0);
            return Ok(());
        }
        height = need;
        root = new_node(plan, alloc)?;
    }
    while height < need {
        let n = new_node(plan, alloc)?;
        set_ptr(layout, plan, n, 0, root);
        root = n;
        height += 1;
    }
    plan.root = (root, height);
    let mut node = root;
    let mut level = height;
    while level > 1 {
        let idx = index_at(fblock, level);
        let mut child = get_ptr(dev, layout, plan, node, idx)?;
        if child == 0 {
            child = new_node(plan, alloc)?;
            set_ptr(layout, plan, node, idx, child);
        }
        node = child;
        level -= 1;
    }
    set_ptr(layout, plan, node, index_at(fblock, 1), pblock);
    Ok(())
}

fn new_node(plan: &mut MapPlan, alloc: &mut dyn FnMut() -> Option<u64>) -> Result<u64> {
    let b = alloc().ok_or(FsError::NoSpace)?;
    plan.new_nodes.push((b, Box::new([0; CHUNK as usize])));
    Ok(b)
}

fn get_ptr<D: PmDevice>(
    dev: &D,
    layout: &Layout,
    plan: &MapPlan,
    node: u64,
    idx: u64,
) -> Result<u64> {
    if let Some((_, c)) = plan.new_nodes.iter().find(|(b, _)| *b == node) {
        return Ok(c[idx as usize]);
    }
    match plan.overlay.get(&node_off(layout, node, idx)) {
        Some(&v) => Ok(v),
        None => read_ptr(dev, layout, node, idx),
    }
}

fn set_ptr(layout: &Layout, plan: &mut MapPlan, node: u64, idx: u64, value: u64) {
    if let Some((_, c)) = plan.new_nodes.iter_mut().find(|(b, _)| *b == node) {
        c[idx as usize] = value;
        return;
    }
    let off = node_off(layout, node, idx);
    plan.overlay.insert(off, value);
    plan.stores.retain(|(o, _)| *o != off);
    plan.stores.push((off, value));
}

/// What truncating a tree to its first `keep` file blocks changes.
#[derive(Default, Debug)]
pub struct TruncatePlan {
    /// Byte ranges of existing nodes to zero: (offset, length).
    pub clears: Vec<(u64, u64)>,
    /// New (root, height) if the root goes away.
    pub root: Option<(u64, u8)>,
    /// Data blocks and nodes to free once the change is durable.
    pub freed: Vec<u64>,
}

/// Plans dropping every file block >= `keep`.
pub fn plan_truncate<D: PmDevice>(
    dev: &D,
    layout: &Layout,
    root: u64,
    height: u8,
    keep: u64,
) -> Result<TruncatePlan> {
    let mut plan = TruncatePlan::default();
    if root == 0 {
        return Ok(plan);
    }
    if keep == 0 {
        let t = walk(dev, layout, root, height)?;
        plan.freed.extend(t.data.iter().map(|(_, b)| *b));
        plan.freed.extend(t.nodes);
        plan.root = Some((0, 0));
        return Ok(plan);
    }
    if keep >= capacity_blocks(height) {
        return Ok(plan);
    }
    trunc_node(dev, layout, root, height, 0, keep, &mut plan)?;
    Ok(plan)
}

fn trunc_node<D: PmDevice>(
    dev: &D,
    layout: &Layout,
    node: u64,
    level: u8,
    base: u64,
    keep: u64,
    plan: &mut TruncatePlan,
) -> Result<()> {
    assert!(level >= 1);
    let cap = capacity_blocks(level - 1);
    // The entry containing `keep` is kept (possibly partly); later ones go.
    let boundary = (keep - base) / cap;
    let first_gone = if (keep - base).is_multiple_of(cap) {
        boundary
    } else {
        boundary + 1
    };
    let mut any = false;
    for idx in first_gone..PTRS_PER_NODE {
        let p = read_ptr(dev, layout, node, idx)?;
        if p == 0 {
            continue;
        }
        any = true;
        let t = walk(dev, layout, p, level - 1)?;
        plan.freed.extend(t.data.iter().map(|(_, b)| *b));
        plan.freed.extend(t.nodes);
    }
    if any {
        plan.clears.push((
            node_off(layout, node, first_gone),
            (PTRS_PER_NODE - first_gone) * 8,
        ));
    }
    if first_gone != boundary && level > 1 {
        let child = read_ptr(dev, layout, node, boundary)?;
        if child != 0 {
            trunc_node(
                dev,
                layout,
                child,
                level - 1,
                base + boundary * cap,
                keep,
                plan,
            )?;
        }
    }
    Ok(())
}

/// One leaf's share of a punched range: zero `len` bytes of pointers at
/// `offset` (or the root, for a height-0 tree) and free `freed`.
#[derive(Debug)]
pub struct PunchStep {
    /// Byte range of pointers to zero; None when the root itself goes.
    pub clear: Option<(u64, u64)>,
    /// File blocks unmapped and the PM blocks they held.
    pub freed: Vec<(u64, u64)>,
}

/// Plans unmapping file blocks `[first, end)`, leaf by leaf, so each step
/// is one small transaction. Map nodes stay (they are reused by later
/// writes and freed with the file).
pub fn plan_punch<D: PmDevice>(
    dev: &D,
    layout: &Layout,
    root: u64,
    height: u8,
    first: u64,
    end: u64,
) -> Result<Vec<PunchStep>> {
    let mut steps = Vec::new();
    if root == 0 || first >= end {
        return Ok(steps);
    }
    if height == 0 {
        if first == 0 {
            steps.push(PunchStep {
                clear: None,
                freed: vec![(0, root)],
            });
        }
        return Ok(steps);
    }
    let end = end.min(capacity_blocks(height));
    let mut fb = first;
    while fb < end {
        // Descend to the leaf holding `fb`, skipping absent subtrees.
        let mut node = root;
        let mut level = height;
        let mut skip_to = None;
        while level > 1 {
            let child = read_ptr(dev, layout, node, index_at(fb, level))?;
            if child == 0 {
                let span = capacity_blocks(level - 1);
                skip_to = Some((fb / span + 1) * span);
                break;
            }
            node = child;
            level -= 1;
        }
        if let Some(next) = skip_to {
            fb = next;
            continue;
        }
        let leaf_end = ((fb / PTRS_PER_NODE + 1) * PTRS_PER_NODE).min(end);
        let i0 = index_at(fb, 1);
        let mut freed = Vec::new();
        for f in fb..leaf_end {
            let p = read_ptr(dev, layout, node, index_at(f, 1))?;
            if p != 0 {
                freed.push((f, p));
            }
        }
        if !freed.is_empty() {
            let len = (leaf_end - fb) * 8;
            steps.push(PunchStep {
                clear: Some((node_off(layout, node, i0), len)),
                freed,
            });
        }
        fb = leaf_end;
    }
    Ok(steps)
}
