//! Which descriptors name the newest copy of a slice: the one rule shared
//! by mount's recovery and fsck (format::zone, docs/design.md §11).

use amber_format::zone::{Descriptor, ZoneGeometry};
use amber_format::{FileKind, Inode, Layout, BLOCK_SIZE};

/// What a descriptor in use means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The slot holds the slice's newest copy.
    Valid,
    /// Left by an interrupted or superseded write, or by a freed file:
    /// recovery clears it.
    Stale,
    /// Committed, yet no protocol leaves it so: the pool is corrupt.
    Corrupt(String),
}

/// Judges `d`, found in sub-zone `sub` of a pool of layout `l`, against
/// its inode as the media holds it (any inode when its number is outside
/// the table: it is not read); `mapped` says whether a file block of that
/// inode is mapped.
pub fn judge(
    d: &Descriptor,
    l: &Layout,
    inode: &Inode,
    geo: &ZoneGeometry,
    sub: u32,
    mapped: impl FnOnce(u64) -> bool,
) -> Verdict {
    if !l.is_valid_ino(d.ino as u64) {
        return Verdict::Corrupt(format!(
            "a descriptor names inode {}, outside the inode table",
            d.ino
        ));
    }
    if d.ino % geo.subzones != sub {
        return Verdict::Corrupt(format!(
            "sub-zone {sub} holds a descriptor of inode {}, which another sub-zone serves",
            d.ino
        ));
    }
    if !inode.in_use() {
        return Verdict::Stale;
    }
    if !d.committed(inode.zone_seq) {
        return Verdict::Stale;
    }
    if inode.kind() != Some(FileKind::Regular) {
        return Verdict::Corrupt(format!(
            "a committed descriptor names inode {}, which is not a regular file",
            d.ino
        ));
    }
    let start = d.slice as u64 * geo.slot_size as u64;
    if start >= inode.size {
        return Verdict::Corrupt(format!(
            "a committed descriptor names inode {} offset {start}, at or past its size {}",
            d.ino, inode.size
        ));
    }
    if !mapped(start / BLOCK_SIZE) {
        return Verdict::Corrupt(format!(
            "a committed descriptor names inode {} offset {start}, in an unmapped block",
            d.ino
        ));
    }
    Verdict::Valid
}

#[cfg(test)]
mod tests {
    use super::*;
    use amber_format::inode::mode;
    use amber_format::FormatParams;

    fn layout() -> Layout {
        Layout::compute(&FormatParams::for_size(1 << 20)).unwrap()
    }

    fn file(size: u64, seq: u64) -> Inode {
        let mut i = Inode::free();
        i.mode = mode::S_IFREG | 0o644;
        i.nlink = 1;
        i.size = size;
        i.zone_seq = seq;
        i
    }

    fn geo() -> ZoneGeometry {
        ZoneGeometry::new(64, 1, 64).unwrap()
    }

    fn desc(slice: u32, seq: u64, doomed: bool) -> Descriptor {
        Descriptor {
            ino: 5,
            slice,
            seq,
            doomed,
        }
    }

    fn verdict(
        d: &Descriptor,
        i: &Inode,
        g: &ZoneGeometry,
        sub: u32,
        mapped: impl FnOnce(u64) -> bool,
    ) -> Verdict {
        judge(d, &layout(), i, g, sub, mapped)
    }

    #[test]
    fn sequence_rule_decides_between_valid_and_stale() {
        let f = file(8192, 10);
        assert_eq!(
            verdict(&desc(1, 10, false), &f, &geo(), 0, |_| true),
            Verdict::Valid
        );
        assert_eq!(
            verdict(&desc(1, 11, false), &f, &geo(), 0, |_| true),
            Verdict::Stale
        );
        assert_eq!(
            verdict(&desc(1, 11, true), &f, &geo(), 0, |_| true),
            Verdict::Valid
        );
        assert_eq!(
            verdict(&desc(1, 10, true), &f, &geo(), 0, |_| true),
            Verdict::Stale
        );
        assert_eq!(
            verdict(&desc(1, 1, false), &Inode::free(), &geo(), 0, |_| true),
            Verdict::Stale
        );
    }

    #[test]
    fn committed_descriptors_outside_the_file_are_corruption() {
        let f = file(8192, 10);
        assert!(matches!(
            verdict(&desc(128, 1, false), &f, &geo(), 0, |_| true),
            Verdict::Corrupt(_)
        ));
        assert!(matches!(
            verdict(&desc(1, 1, false), &f, &geo(), 0, |_| false),
            Verdict::Corrupt(_)
        ));
        let mut dir = file(8192, 10);
        dir.mode = mode::S_IFDIR | 0o755;
        dir.nlink = 2;
        assert!(matches!(
            verdict(&desc(1, 1, false), &dir, &geo(), 0, |_| true),
            Verdict::Corrupt(_)
        ));
        let far = Descriptor {
            ino: u32::MAX,
            ..desc(1, 1, false)
        };
        assert!(matches!(
            verdict(&far, &Inode::free(), &geo(), 0, |_| true),
            Verdict::Corrupt(_)
        ));
        let two = ZoneGeometry::new(64, 2, 64).unwrap();
        assert!(matches!(
            verdict(&desc(1, 1, false), &f, &two, 0, |_| true),
            Verdict::Corrupt(_)
        ));
    }
}
