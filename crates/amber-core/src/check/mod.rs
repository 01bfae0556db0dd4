//! fsck: an offline consistency check of a pool, and optional repair.
//!
//! The check reads the device directly, never a mounted [`crate::Core`],
//! and trusts nothing it reads: every number from media is validated before
//! it is used as an offset or an index, and every loop is bounded by the
//! pool's geometry, so a corrupt or hostile image yields a report (or, if
//! even the superblock is unreadable, an error), never a panic.
//!
//! Phases, in order (each may depend on the ones before):
//! superblock copies, journals (replayed in repair mode, overlaid in memory
//! otherwise, so the rest is judged as mount would see it), inodes and
//! their block maps, directory entries, the namespace tree and link counts,
//! the small-write zone, the split layout's records and chains, NOVA's
//! per-file logs, and the
//! saved free-space bitmap. Repairs are collected while checking
//! and written at the end, in that order, each flushed and drained.

mod acls;
mod dirs;
mod generations;
mod inodes;
mod journals;
mod media;
mod nova;
mod repair;
mod space;
mod split;
mod superblock;
mod tree;
mod xattrs;
mod zone;

use crate::error::FsError;
use crate::split::SplitMedia;
use amber_format::{Layout, PoolLayout, PoolState};
use amber_pmem::PmDevice;
use media::Media;
use repair::Fixes;

/// What the check may do besides reading.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CheckOptions {
    /// Fix what can be fixed without guessing (see the module docs).
    pub repair: bool,
}

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// An inconsistency that is still on the media.
    Error,
    /// An inconsistency this run fixed.
    Repaired,
    /// Worth knowing but not wrong: mount handles it (journal replay,
    /// orphans, block counts left by a crash).
    Note,
}

impl std::fmt::Display for Severity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Repaired => "repaired",
            Severity::Note => "note",
        })
    }
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// How bad it is, which decides fsck's exit code.
    pub severity: Severity,
    /// What is wrong, where, and what repair did or would do, in words a
    /// user can act on.
    pub what: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.severity, self.what)
    }
}

/// What the check found. Counts describe the pool as it is after this
/// run's repairs (or as mount would see it, for a check without repair).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckReport {
    /// Every finding, in the order the phases made them.
    pub problems: Vec<Problem>,
    /// Inodes in use, the root included.
    pub inodes_in_use: u64,
    /// Directories, the root included.
    pub directories: u64,
    /// Regular files.
    pub files: u64,
    /// Data-area blocks owned by inodes and the small-write zone (metadata
    /// regions not counted).
    pub blocks_in_use: u64,
    /// Data-area blocks no one owns.
    pub blocks_free: u64,
    /// Committed journal transactions found before any replay.
    pub journal_transactions_pending: u64,
    /// The superblock said the pool was cleanly unmounted.
    pub was_clean: bool,
}

impl CheckReport {
    /// No inconsistency was found or repaired (notes do not count: they
    /// describe states mount handles by design).
    pub fn is_clean(&self) -> bool {
        self.problems.iter().all(|p| p.severity == Severity::Note)
    }

    /// e2fsck's convention, so scripts written for it work unchanged:
    /// 0 clean, 1 errors repaired, 4 errors left uncorrected (8, an
    /// operational error, is the caller's for an `Err` from [`check`]).
    pub fn exit_code(&self) -> i32 {
        if self.problems.iter().any(|p| p.severity == Severity::Error) {
            4
        } else if self.is_clean() {
            0
        } else {
            1
        }
    }
}

impl std::fmt::Display for CheckReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for p in &self.problems {
            writeln!(f, "{p}")?;
        }
        write!(
            f,
            "{} inodes in use ({} directories, {} regular files), {} blocks in use, {} free; \
             pool was {}",
            self.inodes_in_use,
            self.directories,
            self.files,
            self.blocks_in_use,
            self.blocks_free,
            if self.was_clean {
                "cleanly unmounted"
            } else {
                "not cleanly unmounted"
            }
        )
    }
}

/// Checks the pool on `dev` (which must not be mounted), repairing it if
/// `opts.repair`. Fails only when the superblock cannot be read (bad magic
/// or version, both copies bad, truncated pool) or a repair write could not
/// be made durable; everything else is a [`Problem`] in the report.
pub fn check<D: PmDevice>(dev: &D, opts: &CheckOptions) -> Result<CheckReport, FsError> {
    let mut fixes = Fixes::default();
    let mut problems = Vec::new();
    let sb = superblock::check(dev, opts.repair, &mut problems, &mut fixes)?;
    // The superblock copy must be whole before the journals are replayed.
    fixes.apply(dev)?;
    let layout = sb.layout;
    let was_clean = sb.state == PoolState::Clean;
    let mut cx = Ctx {
        media: Media::new(dev),
        layout,
        repair: opts.repair,
        problems,
        fixes: Fixes::default(),
        split: SplitMedia::of(&sb),
        nova: sb.pool_layout() == PoolLayout::Nova,
    };
    let pending = journals::check(&mut cx, was_clean)?;
    let mut scan = inodes::scan(&mut cx, was_clean);
    let entries = dirs::scan(&mut cx, &mut scan);
    tree::check(&mut cx, &mut scan, entries);
    let split = cx.split;
    let mut files = split::check(&mut cx, split.as_ref(), &scan, was_clean);
    files.owned.extend(nova::check(&mut cx, &scan));
    let mut claimed = space::inode_blocks(&cx, &scan);
    for &b in &files.owned {
        claimed.set(b);
    }
    let zone_blocks = zone::check(&mut cx, &sb, &scan, &files, &claimed);
    let owned: Vec<u64> = files.owned.into_iter().chain(zone_blocks).collect();
    let counts = space::check(&mut cx, &scan, &owned, was_clean);
    cx.fixes.apply(dev)?;
    Ok(CheckReport {
        problems: cx.problems,
        inodes_in_use: counts.inodes,
        directories: counts.directories,
        files: counts.files,
        blocks_in_use: counts.blocks_in_use,
        blocks_free: counts.blocks_free,
        journal_transactions_pending: pending,
        was_clean,
    })
}

/// State shared by the phases after the superblock.
struct Ctx<'a, D: PmDevice> {
    media: Media<'a, D>,
    layout: Layout,
    repair: bool,
    problems: Vec<Problem>,
    fixes: Fixes,
    /// The split layout, whose regular files keep their blocks outside
    /// block maps.
    split: Option<SplitMedia>,
    /// NOVA's layout, whose regular files keep their blocks in logs.
    nova: bool,
}

impl<D: PmDevice> Ctx<'_, D> {
    fn note(&mut self, what: String) {
        self.problems.push(Problem {
            severity: Severity::Note,
            what,
        });
    }

    /// An inconsistency repair does not touch: fixing it would mean
    /// guessing which of two claims is right.
    fn unfixable(&mut self, what: String) {
        let tail = if self.repair {
            "left uncorrected"
        } else {
            "--repair cannot fix this"
        };
        self.problems.push(Problem {
            severity: Severity::Error,
            what: format!("{what}; {tail}"),
        });
    }

    /// An inconsistency with a safe fix: `fix` says what the fix does and
    /// `writes` records its stores, kept only in repair mode.
    fn fixable(&mut self, what: String, fix: &str, writes: impl FnOnce(&mut Fixes)) {
        let (severity, tail) = if self.repair {
            writes(&mut self.fixes);
            (Severity::Repaired, "fixed")
        } else {
            (Severity::Error, "with --repair")
        };
        self.problems.push(Problem {
            severity,
            what: format!("{what}; {tail}: {fix}"),
        });
    }
}
