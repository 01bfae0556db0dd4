//! Which descriptors name the newest copy of a slice: the one rule shared
//! by mount's recovery and fsck (format::zone, docs/design.md §11).

use amber_format::zone::{Descriptor, ZoneGeometry};
use amber_format::zone_extent::Extent;
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

/// What an extent head of a one-fence zone means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeadVerdict {
    /// Its checksum matches and its file's floor is below it: its slots
    /// hold copies of its slices (the newest, unless a later head of the
    /// file names them too).
    Valid,
    /// At or under its file's floor: written back (or its file freed)
    /// since; left in place, never valid again, as the floor only grows.
    Dead,
    /// Above the floor but its checksum fails (a write torn by a crash)
    /// or its file was freed before the floor was raised: recovery
    /// clears it, so no later write can complete its bytes.
    Stale,
    /// Its checksum matches, yet no protocol writes it: corruption.
    Corrupt(String),
}

/// Judges head `e`, found in sub-zone `sub`, against its inode as the
/// media holds it (any inode when its number is outside the table).
/// `fits`: its slots stay in their chunk; `checks`: its checksum matches
/// its slots' bytes (read only when the floor does not decide);
/// `mapped`: whether a file block of the inode is mapped.
#[allow(clippy::too_many_arguments)]
pub fn judge_head(
    e: &Extent,
    l: &Layout,
    inode: &Inode,
    geo: &ZoneGeometry,
    sub: u32,
    fits: bool,
    checks: impl FnOnce() -> bool,
    mut mapped: impl FnMut(u64) -> bool,
) -> HeadVerdict {
    let ino = e.ino as u64;
    let known = l.is_valid_ino(ino);
    if known && e.seq <= inode.zone_seq {
        return HeadVerdict::Dead;
    }
    if !fits || !checks() {
        return HeadVerdict::Stale;
    }
    if !known {
        return HeadVerdict::Corrupt(format!("a head names inode {ino}, outside the inode table"));
    }
    if e.ino % geo.subzones != sub {
        return HeadVerdict::Corrupt(format!(
            "sub-zone {sub} holds a head of inode {ino}, which another sub-zone serves"
        ));
    }
    if !inode.in_use() {
        return HeadVerdict::Stale;
    }
    if inode.kind() != Some(FileKind::Regular) {
        return HeadVerdict::Corrupt(format!(
            "a head names inode {ino}, which is not a regular file"
        ));
    }
    let slot = geo.slot_size as u64;
    let last = e.slice as u64 + e.slots as u64 - 1;
    if last > u32::MAX as u64 || last * slot >= inode.size {
        return HeadVerdict::Corrupt(format!(
            "a head names inode {ino} slices {}..={last}, past its size {}",
            e.slice, inode.size
        ));
    }
    let (first_block, last_block) = (e.slice as u64 * slot / BLOCK_SIZE, last * slot / BLOCK_SIZE);
    if let Some(fb) = (first_block..=last_block).find(|&fb| !mapped(fb)) {
        return HeadVerdict::Corrupt(format!(
            "a head names inode {ino} block {fb}, which is unmapped"
        ));
    }
    HeadVerdict::Valid
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
        ZoneGeometry::new(64, 1, 64, false).unwrap()
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
        let two = ZoneGeometry::new(64, 2, 64, false).unwrap();
        assert!(matches!(
            verdict(&desc(1, 1, false), &f, &two, 0, |_| true),
            Verdict::Corrupt(_)
        ));
    }

    fn head(slice: u32, slots: u16, seq: u64) -> Extent {
        Extent {
            seq,
            slice,
            ino: 5,
            slots,
        }
    }

    fn head_verdict(e: &Extent, i: &Inode, fits: bool, checks: bool) -> HeadVerdict {
        let g = ZoneGeometry::new(64, 1, 64, true).unwrap();
        judge_head(e, &layout(), i, &g, 0, fits, || checks, |_| true)
    }

    /// The floor decides first (dead, checksum unread); above it the
    /// checksum (stale: a torn write); then the rules of what a write can
    /// name.
    #[test]
    fn floor_then_checksum_then_file_decide_a_head() {
        let f = file(8192, 10);
        let dead = |seq| head_verdict(&head(1, 2, seq), &f, false, false);
        assert_eq!(dead(10), HeadVerdict::Dead);
        assert_eq!(dead(11), HeadVerdict::Stale);
        assert_eq!(
            head_verdict(&head(1, 2, 11), &f, true, false),
            HeadVerdict::Stale
        );
        assert_eq!(
            head_verdict(&head(1, 2, 11), &f, true, true),
            HeadVerdict::Valid
        );
        assert_eq!(
            head_verdict(&head(1, 2, 11), &Inode::free(), true, true),
            HeadVerdict::Stale
        );
        assert!(matches!(
            head_verdict(&head(127, 2, 11), &f, true, true),
            HeadVerdict::Corrupt(_)
        ));
    }
}
