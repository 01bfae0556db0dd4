//! `amberfs mkfs`: create a pool file, or reformat an existing pool.
//!
//! Every parameter is checked against the format's limits before the pool
//! is created or opened, so a bad flag never costs the user an existing
//! pool or leaves a half-made file behind.

use std::io::ErrorKind;
use std::os::unix::fs::FileTypeExt;
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
    /// log; policy hunter-lfs) or `nova` (NOVA's per-file logs; policy
    /// nova).
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
    Nova,
}

impl From<LayoutArg> for PoolLayout {
    fn from(a: LayoutArg) -> PoolLayout {
        match a {
            LayoutArg::Classic => PoolLayout::Classic,
            LayoutArg::Split => PoolLayout::Split,
            LayoutArg::Lfs => PoolLayout::Lfs,
            LayoutArg::Nova => PoolLayout::Nova,
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
    if exists {
        check_existing(pool)?;
    } else {
        check_new(pool)?;
    }
    let (layout, created) = if exists {
        (reformat(&args, pool, size)?, false)
    } else {
        (create(&args, pool, size)?, true)
    };
    print_geometry(pool, &layout, args.layout.into(), created)?;
    Ok(ExitCode::SUCCESS)
}

/// Formats the existing pool file `pool` whole (`size`, if given, must
/// be its size).
fn reformat(args: &Args, pool: &Path, size: Option<u64>) -> CliResult<Layout> {
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
    let what = format!("{}, {} bytes,", pool.shown(), dev.size());
    let (params, layout) = params(args, dev.size(), &what)?;
    format(&dev, pool, &params)?;
    Ok(layout)
}

/// Creates the pool file `pool` of `size` bytes (required) and formats it;
/// a file that fails to format is removed.
fn create(args: &Args, pool: &Path, size: Option<u64>) -> CliResult<Layout> {
    let Some(size) = size else {
        return Err(CliError::new(format!(
            "--size is required to create pool {}, e.g. 'amberfs mkfs {} --size 64M'",
            pool.shown(),
            pool.shown()
        )));
    };
    let (params, layout) = params(args, size, &format!("--size {}", human_bytes(size)))?;
    let dev = MmapDevice::create(pool, size, &MapOptions::default()).map_err(|e| match e {
        MapError::AlreadyExists { .. } => CliError::new(format!(
            "pool {} appeared while mkfs ran; pass --force to reformat it",
            pool.shown()
        )),
        other => map_error(pool, other),
    })?;
    match format(&dev, pool, &params) {
        Ok(()) => Ok(layout),
        Err(e) => {
            drop(dev);
            // The file is ours and holds no file system: leaving it
            // would make the retry fail with "already exists".
            let _ = std::fs::remove_file(pool);
            Err(e)
        }
    }
}

/// Checks where a new pool file is to be made, before anything is: its
/// directory must exist, and it must not be in /dev (outside /dev/shm),
/// where a mistyped device-DAX name would otherwise become a regular file
/// among the device nodes.
pub fn check_new(pool: &Path) -> CliResult<()> {
    let dir = match pool.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let dir = dir.canonicalize().map_err(|e| {
        CliError::new(format!(
            "cannot create pool {}: its directory {} {}",
            pool.shown(),
            dir.shown(),
            match e.kind() {
                ErrorKind::NotFound => {
                    "does not exist; create it first (mkdir -p) or choose another path".into()
                }
                _ => format!("cannot be used: {e}"),
            }
        ))
    })?;
    if in_device_dir(&dir) {
        return Err(CliError::new(format!(
            "{} is in /dev, where only devices are pools, and {}: a pool file goes on a file \
             system (e.g. /dev/shm or a DAX mount); a device-DAX node (`daxctl list` names \
             them) is formatted with 'amberfs mkfs NODE --force'",
            pool.shown(),
            if pool.symlink_metadata().is_ok() {
                "is no device"
            } else {
                "no such device exists"
            }
        )));
    }
    Ok(())
}

/// Refuses to reformat what is in /dev (outside /dev/shm) but is not a
/// device node: a regular file there is a stray, such as one an earlier
/// mistyped mkfs left.
fn check_existing(pool: &Path) -> CliResult<()> {
    let (Ok(real), Ok(meta)) = (pool.canonicalize(), pool.metadata()) else {
        return Ok(()); // open_device says what is wrong with it
    };
    let device = meta.file_type().is_char_device() || meta.file_type().is_block_device();
    if device || !real.parent().is_some_and(in_device_dir) {
        return Ok(());
    }
    Err(CliError::new(format!(
        "{} is in /dev but is no device (a file left by a mistyped mkfs?); remove it, and give \
         a device-DAX node that exists (`daxctl list` names them)",
        pool.shown()
    )))
}

/// Whether a directory (canonical) is /dev or under it, but not the
/// shared-memory file system /dev/shm, where pool files belong.
fn in_device_dir(dir: &Path) -> bool {
    dir.starts_with("/dev") && !dir.starts_with("/dev/shm")
}

/// The format parameters and geometry for a pool of `size` bytes, or why
/// there is none: each flag out of range named by its flag, and a size too
/// small for what the flags ask with the smallest size that fits them.
/// `what` names the size in the message (`--size`, or the existing pool).
fn params(args: &Args, size: u64, what: &str) -> CliResult<(FormatParams, Layout)> {
    if size > MAX_POOL_SIZE {
        return Err(CliError::new(format!(
            "{what} is above the largest pool format v1 describes, {}; use a smaller size",
            human_bytes(MAX_POOL_SIZE)
        )));
    }
    let p = asked(args, size)?;
    if let Some(layout) = fits(&p) {
        return Ok((p, layout));
    }
    let flags = if args.inodes.is_some() || args.journals.is_some() || args.journal_blocks.is_some()
    {
        ", or fewer --inodes, --journals or --journal-blocks"
    } else {
        " (64M is a good start)"
    };
    Err(CliError::new(match smallest(args)? {
        Some(min) => format!(
            "{what} is below the smallest {} pool mkfs makes with these parameters: {} \
             ({min} bytes); use --size {}K or more{flags}",
            layout_name(args.layout),
            human_bytes(min),
            min / 1024
        ),
        None => format!(
            "no pool up to {} holds what the flags ask; use fewer --inodes, --journals or \
             --journal-blocks",
            human_bytes(MAX_POOL_SIZE)
        ),
    }))
}

/// The parameters for `size` bytes: mkfs's defaults for the size, then
/// the flags, each checked against the format's range.
fn asked(args: &Args, size: u64) -> CliResult<FormatParams> {
    let mut p = FormatParams::for_size(size);
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
    Ok(p)
}

/// The geometry when the pool holds its journals, inode table, bitmap and
/// (split layouts) attribute logs and records with room for data.
fn fits(p: &FormatParams) -> Option<Layout> {
    let layout = Layout::compute(p).ok()?;
    (p.layout == PoolLayout::Classic || Superblock::new(p, [0; 16]).is_ok()).then_some(layout)
}

/// The smallest pool, in whole blocks, that fits what the flags ask (the
/// default inode count grows with the size, so it depends on the size):
/// a binary search, as whatever fits at one size fits at every larger one
/// (metadata grows slower than the pool). None if nothing up to the
/// largest pool does.
fn smallest(args: &Args) -> CliResult<Option<u64>> {
    let fits_at =
        |blocks: u64| -> CliResult<bool> { Ok(fits(&asked(args, blocks * BLOCK_SIZE)?).is_some()) };
    let (mut lo, mut hi) = (MIN_POOL_SIZE / BLOCK_SIZE, MAX_POOL_SIZE / BLOCK_SIZE);
    if !fits_at(hi)? {
        return Ok(None);
    }
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if fits_at(mid)? {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Ok(Some(lo * BLOCK_SIZE))
}

fn layout_name(layout: LayoutArg) -> &'static str {
    match layout {
        LayoutArg::Classic => "classic-layout",
        LayoutArg::Split => "split-layout",
        LayoutArg::Lfs => "lfs-layout",
        LayoutArg::Nova => "nova-layout",
    }
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
    if pool_layout == PoolLayout::Nova {
        outln!("  nova:      each regular file's data is named by a log of its own")?;
    } else if pool_layout != PoolLayout::Classic {
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
