//! Space allocation. Neither allocator is journaled: their state is derived
//! from the inodes and block maps, rebuilt by recovery after a crash and
//! saved as a bitmap only at clean unmount (NOVA's approach), so allocation
//! costs no PM writes and no ordering points.

mod bitset;
mod blocks;
mod inodes;

pub use bitset::BitSet;
pub use blocks::BlockAllocator;
pub use inodes::InodeAllocator;
