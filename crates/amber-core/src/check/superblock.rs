//! The superblock pair: which copy to trust, whether the other is whole,
//! and whether reserved bytes the decoder does not look at are zero.

use super::repair::Fixes;
use super::{Problem, Severity};
use crate::error::FsError;
use crate::fs::read_superblock;
use amber_format::superblock::SUPERBLOCK_SIZE;
use amber_format::{FormatError, PoolState, Superblock};
use amber_pmem::PmDevice;

/// Reserved bytes of a v1 superblock (after the state word, and after the
/// region descriptors), which `Superblock::decode` does not check.
const RESERVED: [(usize, usize); 2] = [(148, 152), (240, 252)];

const NAMES: [&str; 2] = ["A (block 0)", "B (block 1)"];

/// Returns the superblock to trust; Err when there is none (exit code 8).
pub(super) fn check<D: PmDevice>(
    dev: &D,
    repair: bool,
    problems: &mut Vec<Problem>,
    fixes: &mut Fixes,
) -> Result<Superblock, FsError> {
    let sb = read_superblock(dev)?;
    let good = sb.encode();
    let offsets = Superblock::copy_offsets();
    let mut raw = [[0u8; SUPERBLOCK_SIZE]; 2];
    for (buf, off) in raw.iter_mut().zip(offsets) {
        dev.read(off, buf);
    }
    let mut push = |what: String, fixed: bool| {
        let (severity, tail) = match (fixed, repair) {
            (false, _) => (Severity::Note, ""),
            (true, true) => (Severity::Repaired, "; fixed: rewritten from the good copy"),
            (true, false) => (
                Severity::Error,
                "; with --repair: rewritten from the good copy",
            ),
        };
        problems.push(Problem {
            severity,
            what: format!("{what}{tail}"),
        });
    };
    for (i, bytes) in raw.iter().enumerate() {
        if let Some((what, rewrite)) = judge_copy(i, bytes, &sb) {
            push(what, rewrite);
            if rewrite && repair {
                fixes.write(offsets[i], &good);
            }
        }
    }
    Ok(sb)
}

/// What is wrong with copy `i` (`bytes`) against the superblock in use,
/// and whether it is rewritten from that one; None when the copy is whole.
fn judge_copy(i: usize, bytes: &[u8; SUPERBLOCK_SIZE], sb: &Superblock) -> Option<(String, bool)> {
    let other = NAMES[1 - i];
    match Superblock::decode(bytes) {
        // A crash while the pool was in use can tear the copy being
        // rewritten (A then B, each made durable before the next):
        // the other one is whole, and the next mount rewrites both.
        Err(FormatError::BadChecksum) if sb.state != PoolState::Clean => Some((
            format!(
                "superblock copy {} fails its checksum: an update was interrupted while the \
                 pool was in use; the pool is read through copy {other}, and the next mount \
                 rewrites both copies",
                NAMES[i]
            ),
            false,
        )),
        Err(e) => {
            let why = match e {
                FormatError::BadMagic => "bad magic".to_string(),
                FormatError::BadChecksum => "checksum mismatch".to_string(),
                e => e.to_string(),
            };
            Some((
                format!(
                    "superblock copy {} is unusable ({why}); the pool is read through copy {other}",
                    NAMES[i]
                ),
                true,
            ))
        }
        Ok(copy) if copy.generation != sb.generation => Some((
            format!(
                "superblock copy {} is older (generation {}) than the one in use ({}): \
                 an update was interrupted; the next mount rewrites both copies",
                NAMES[i], copy.generation, sb.generation
            ),
            false,
        )),
        Ok(copy) if copy != *sb => Some((
            format!(
                "superblock copies disagree at the same generation {}; copy {} differs \
                 from the one in use",
                sb.generation, NAMES[i]
            ),
            true,
        )),
        Ok(_) => {
            let dirty: Vec<String> = RESERVED
                .iter()
                .filter(|(s, e)| bytes[*s..*e].iter().any(|&b| b != 0))
                .map(|(s, e)| format!("{s}..{e}"))
                .collect();
            (!dirty.is_empty()).then(|| {
                (
                    format!(
                        "superblock copy {} has non-zero reserved bytes {}",
                        NAMES[i],
                        dirty.join(", ")
                    ),
                    true,
                )
            })
        }
    }
}
