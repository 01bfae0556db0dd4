//! `amberfs mkfs`: create a pool file, or reformat an existing pool.
//!
//! Every parameter is checked against the format's limits before the pool
//! is created or opened, so a bad flag never costs the user an existing
//! pool or leaves a half-made file behind.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use amber_core::Fs;
use amber_format::layout::{
    Layout, MAX_INODES, MAX_JOURNALS, MAX_JOURNAL_BLOCKS, MAX_POOL_SIZE, MIN_JOURNAL_BLOCKS,
    MIN_POOL_SIZE,
};
use amber_format::split::SplitRegions;
use amber_format::{FormatParams, PoolLayout, Superblock, BLOCK_SIZE};
use amber_pmem::{MapError, MapOptions, MmapDevice, PmDevice};

use crate::common::{human_bytes, map_error, open_device, parse_size, CliError, CliResult, Shown};
use crate::output::outln;

#[derive(clap::Args)]
pub struct Args {
    /// Pool file to create (or, with --force, a pool file or /dev/daxX.Y to
    /// reformat).
    pool: PathBuf,
    /// Pool size: bytes, or with a K, M, G or T suffix (binary), e.g. 64M.
    /// Required for a new pool; for --force it defaults to the existing size.
    #[arg(long)]
    size: Option<String>,
    /// Number of inodes (default: one per 16 KiB, at least 64).
    #[arg(long)]
    inodes: Option<u64>,
    /// Number of metadata journals, one per concurrently writing CPU (default 8).
    #[arg(long)]
    journals: Option<u32>,
    /// Blocks of 4 KiB per journal (default 16).
    #[arg(long)]
    journal_blocks: Option<u32>,
    /// On-media layout: `split` (attribute logs and logical information;
    /// policies amber, the default, hunter and hunter-sync), `classic`
    /// (block maps; policies direct, hinfs*, cow, finelog and lawn) or
    /// `lfs` (the split layout's records in summary blocks inside the data
    /// log; policy hunter-lfs).
    #[arg(long, value_enum, default_value = "split")]
    layout: LayoutArg,
    /// Reformat an existing pool, destroying everything in it.
    #[arg(long)]
    force: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LayoutArg {
    Classic,
    Split,
    Lfs,
}

impl From<LayoutArg> for PoolLayout {
    fn from(a: LayoutArg) -> PoolLayout {
        match a {
            LayoutArg::Classic => PoolLayout::Classic,
            LayoutArg::Split => PoolLayout::Split,
            LayoutArg::Lfs => PoolLayout::Lfs,
        }
    }
}

pub fn run(args: Args) -> CliResult<ExitCode> {
    let size = args
        .size
        .as_deref()
        .map(|s| parse_size(s).map_err(|e| CliError::new(format!("--size: {e}"))))
        .transpose()?;
    let pool = args.pool.as_path();
    let exists = pool.symlink_metadata().is_ok();
    if exists && !args.force {
        return Err(CliError::new(format!(
            "pool {} already exists; refusing to overwrite it — pass --force to reformat it \
             (destroying its contents) or choose another path",
            pool.shown()
        )));
    }
    let (layout, created) = if exists {
        let dev = open_device(pool)?;
        if let Some(size) = size.filter(|&s| s != dev.size()) {
            return Err(CliError::new(format!(
                "--size {} does not match {}, which is {} bytes; drop --size to format all of \
                 it, or remove the file to create a pool of another size",
                size,
                pool.shown(),
                dev.size()
            )));
        }
        let (params, layout) = params(&args, dev.size())?;
        format(&dev, pool, &params)?;
        (layout, false)
    } else {
        let Some(size) = size else {
            return Err(CliError::new(format!(
                "--size is required to create pool {}, e.g. 'amberfs mkfs {} --size 64M'",
                pool.shown(),
                pool.shown()
            )));
        };
        let (params, layout) = params(&args, size)?;
        let dev = MmapDevice::create(pool, size, &MapOptions::default()).map_err(|e| match e {
            MapError::AlreadyExists { .. } => CliError::new(format!(
                "pool {} appeared while mkfs ran; pass --force to reformat it",
                pool.shown()
            )),
            other => map_error(pool, other),
        })?;
        match format(&dev, pool, &params) {
            Ok(()) => (layout, true),
            Err(e) => {
                drop(dev);
                // The file is ours and holds no file system: leaving it
                // would make the retry fail with "already exists".
                let _ = std::fs::remove_file(pool);
                return Err(e);
            }
        }
    };
    print_geometry(pool, &layout, args.layout.into(), created)?;
    Ok(ExitCode::SUCCESS)
}

/// The format parameters the flags ask for, checked so each mistake is
/// named by its flag rather than reported as an impossible layout.
fn params(args: &Args, size: u64) -> CliResult<(FormatParams, Layout)> {
    let mut p = FormatParams::for_size(size);
    if size < MIN_POOL_SIZE {
        return Err(CliError::new(format!(
            "--size {size} is below the smallest pool, {}; use at least 256K (64M is a good start)",
            human_bytes(MIN_POOL_SIZE)
        )));
    }
    if size > MAX_POOL_SIZE {
        return Err(CliError::new(format!(
            "--size {size} is above the largest pool format v1 describes, {}; use a smaller size",
            human_bytes(MAX_POOL_SIZE)
        )));
    }
    if let Some(n) = args.inodes {
        if !(2..=MAX_INODES).contains(&n) {
            return Err(CliError::new(format!(
                "--inodes {n} is out of range; use 2 to {MAX_INODES}"
            )));
        }
        p.inode_count = n;
    }
    if let Some(n) = args.journals {
        if !(1..=MAX_JOURNALS).contains(&n) {
            return Err(CliError::new(format!(
                "--journals {n} is out of range; use 1 to {MAX_JOURNALS}"
            )));
        }
        p.journal_count = n;
    }
    if let Some(n) = args.journal_blocks {
        if !(MIN_JOURNAL_BLOCKS..=MAX_JOURNAL_BLOCKS).contains(&n) {
            return Err(CliError::new(format!(
                "--journal-blocks {n} is out of range; use {MIN_JOURNAL_BLOCKS} to \
                 {MAX_JOURNAL_BLOCKS} (blocks of 4 KiB; a journal must hold the largest transaction)"
            )));
        }
        p.journal_blocks = n;
    }
    p.layout = args.layout.into();
    let layout = Layout::compute(&p).map_err(|_| {
        CliError::new(format!(
            "a {} pool cannot hold {} inodes and {} journals of {} blocks with room left for \
             data; use a larger --size, or fewer --inodes or --journals",
            human_bytes(size),
            p.inode_count,
            p.journal_count,
            p.journal_blocks
        ))
    })?;
    if p.layout != PoolLayout::Classic && Superblock::new(&p, [0; 16]).is_err() {
        let r = SplitRegions::for_layout(&layout, p.layout == PoolLayout::Lfs);
        return Err(CliError::new(format!(
            "a {} pool has no room left for data after the split layout's {} of attribute logs \
             and logical information; use a larger --size or fewer --inodes",
            human_bytes(size),
            human_bytes((r.end() - r.attr_start) * BLOCK_SIZE)
        )));
    }
    Ok((p, layout))
}

fn format(dev: &MmapDevice, pool: &Path, params: &FormatParams) -> CliResult<()> {
    Fs::format(dev, params)
        .map_err(|e| CliError::new(format!("could not format pool {}: {e}", pool.shown())))
}

fn print_geometry(
    pool: &Path,
    l: &Layout,
    pool_layout: PoolLayout,
    created: bool,
) -> CliResult<()> {
    let verb = if created { "created" } else { "reformatted" };
    let bytes = |blocks: u64| human_bytes(blocks * BLOCK_SIZE);
    outln!(
        "{verb} pool {}: {}",
        pool.shown(),
        human_bytes(l.total_blocks * BLOCK_SIZE)
    )?;
    outln!("  blocks:    {} of {} bytes", l.total_blocks, BLOCK_SIZE)?;
    outln!(
        "  inodes:    {} (table of {})",
        l.inode_count - 1,
        bytes(l.bitmap_start - l.itable_start)
    )?;
    outln!(
        "  journals:  {} of {} blocks ({} each)",
        l.journal_count,
        l.journal_blocks,
        human_bytes(l.journal_bytes())
    )?;
    let mut data_start = l.data_start;
    if pool_layout != PoolLayout::Classic {
        let r = SplitRegions::for_layout(l, pool_layout == PoolLayout::Lfs);
        let records = if r.in_log {
            format!("in a summary block every {} blocks", r.li_blocks)
        } else {
            bytes(r.li_blocks)
        };
        outln!(
            "  split:     attribute logs {} from block {}, logical information {records}",
            bytes(r.attr_blocks),
            r.attr_start,
        )?;
        data_start = r.end();
    }
    outln!(
        "  data area: blocks {}..{}, {} blocks ({}){}",
        data_start,
        l.total_blocks,
        l.total_blocks - data_start,
        bytes(l.total_blocks - data_start),
        if pool_layout == PoolLayout::Lfs {
            ", one in 64 a summary block"
        } else {
            ""
        }
    )
}
