//! `amberfs info`: what a pool is and how this machine maps it.
//!
//! Reads the superblock without mounting, so it writes nothing and works on
//! a pool that needs recovery. The mapping facts (DAX or page cache, flush
//! instruction) are printed beside it because the same pool performs and
//! persists very differently depending on them.

use std::path::PathBuf;
use std::process::ExitCode;

use amber_format::split::FEATURE_OWN_RECORDS;
use amber_format::superblock::INCOMPAT_NAMES;
use amber_format::{PoolLayout, PoolState, Superblock, BLOCK_SIZE};
use amber_pmem::MapInfo;
use serde::Serialize;

use crate::common::{
    format_time, human_bytes, open_for_reading, pool_error, CliError, CliResult, Shown,
};
use crate::output::outln;

#[derive(clap::Args)]
pub struct Args {
    /// The pool file or device.
    pool: PathBuf,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Info {
    pool: String,
    version: u32,
    features: Features,
    /// The layout mkfs made, as `--layout` names it (which policies mount
    /// it follows from it).
    layout: &'static str,
    uuid: String,
    state: &'static str,
    generation: u64,
    mount_count: u64,
    /// Seconds since the epoch; 0 if never.
    last_mount_secs: u64,
    /// Seconds since the epoch; 0 if never.
    last_clean_unmount_secs: u64,
    pool_size: u64,
    geometry: Geometry,
    /// LAWN's small-write zone, if the pool has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    zone: Option<Zone>,
    /// HUNTER's split layout, if the pool has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    split: Option<Split>,
    device: Device,
}

#[derive(Serialize)]
struct Split {
    attr_start: u64,
    attr_blocks: u64,
    li_start: u64,
    li_blocks: u64,
    /// The records sit in summary blocks inside the data log (li_start is
    /// the first, li_blocks how many blocks apart they are).
    records_in_log: bool,
    /// A record may commit its own write (`FEATURE_OWN_RECORDS`, amber's
    /// one-fence block write); false on pools made before it existed.
    own_records: bool,
}

#[derive(Serialize)]
struct Zone {
    header_block: u64,
    slot_size: u32,
    subzones: u32,
    chunk_blocks: u32,
    /// Chunks per sub-zone.
    chunks: Vec<usize>,
    slots: u64,
    /// Descriptors not zero: valid ones, and stale ones the next mount
    /// clears (`amberfs fsck` tells them apart).
    descriptors_in_use: u64,
}

#[derive(Serialize)]
struct Features {
    compat: u64,
    incompat: u64,
    ro_compat: u64,
}

#[derive(Serialize)]
struct Geometry {
    block_size: u64,
    total_blocks: u64,
    inode_count: u64,
    journal_count: u32,
    journal_blocks: u32,
    journal_start: u64,
    inode_table_start: u64,
    bitmap_start: u64,
    bitmap_blocks: u64,
    data_start: u64,
    data_blocks: u64,
}

#[derive(Serialize)]
struct Device {
    kind: String,
    size: u64,
    map_sync: bool,
    huge_page_aligned: bool,
    /// Opened read-only (its media or permissions allow nothing else).
    read_only: bool,
    flush: String,
    nt_store: String,
    nt_store_bytes: usize,
    cpu_model: String,
}

pub fn run(args: Args) -> CliResult<ExitCode> {
    let dev = open_for_reading(&args.pool)?;
    let sb = amber_core::fs::read_superblock(&dev).map_err(|e| pool_error(&args.pool, e))?;
    let mut info = describe(&args, &sb, dev.info());
    info.zone = amber_core::zone::ZoneMedia::read(&dev, &sb.layout, &sb)
        .map_err(|e| pool_error(&args.pool, e))?
        .map(|m| zone(&dev, &m));
    if args.json {
        let text = serde_json::to_string_pretty(&info)
            .map_err(|e| CliError::new(format!("could not encode the report as JSON: {e}")))?;
        outln!("{text}")?;
    } else {
        print_text(&info, dev.info())?;
    }
    Ok(ExitCode::SUCCESS)
}

fn describe(args: &Args, sb: &Superblock, map: &MapInfo) -> Info {
    let l = &sb.layout;
    Info {
        pool: args.pool.shown().to_string(),
        version: sb.version,
        features: Features {
            compat: sb.feature_compat,
            incompat: sb.feature_incompat,
            ro_compat: sb.feature_ro_compat,
        },
        layout: match sb.pool_layout() {
            PoolLayout::Classic => "classic",
            PoolLayout::Split => "split",
            PoolLayout::Lfs => "lfs",
            PoolLayout::Nova => "nova",
        },
        uuid: uuid_text(&sb.uuid),
        state: match sb.state {
            PoolState::Clean => "clean",
            PoolState::Dirty => "dirty",
        },
        generation: sb.generation,
        mount_count: sb.mount_count,
        last_mount_secs: sb.last_mount_secs,
        last_clean_unmount_secs: sb.last_clean_secs,
        pool_size: sb.pool_size,
        zone: None,
        split: sb.split_regions().map(|r| Split {
            attr_start: r.attr_start,
            attr_blocks: r.attr_blocks,
            li_start: r.li_start,
            li_blocks: r.li_blocks,
            records_in_log: r.in_log,
            own_records: sb.feature_incompat & FEATURE_OWN_RECORDS != 0,
        }),
        geometry: Geometry {
            block_size: BLOCK_SIZE,
            total_blocks: l.total_blocks,
            inode_count: l.inode_count,
            journal_count: l.journal_count,
            journal_blocks: l.journal_blocks,
            journal_start: l.journal_start,
            inode_table_start: l.itable_start,
            bitmap_start: l.bitmap_start,
            bitmap_blocks: l.bitmap_blocks,
            data_start: l.data_start,
            data_blocks: l.data_blocks(),
        },
        device: Device {
            kind: map.kind.to_string(),
            size: map.size,
            map_sync: map.map_sync,
            huge_page_aligned: map.huge_page_aligned,
            read_only: map.read_only,
            flush: map.flush.name().to_string(),
            nt_store: map.nt_store.to_string(),
            nt_store_bytes: map.nt_store.bytes(),
            cpu_model: map.cpu_model.clone(),
        },
    }
}

/// The zone's shape and how many of its descriptors are in use.
fn zone<D: amber_pmem::PmDevice>(dev: &D, m: &amber_core::zone::ZoneMedia) -> Zone {
    let mut in_use = 0u64;
    // Bytes that decode to no descriptor are fsck's to report; info only
    // counts what decodes (in a one-fence zone, entries naming an inode:
    // heads, live or under their file's floor).
    let _ = match m.geo.extents {
        true => m.scan_heads(dev, |_, _| {
            in_use += 1;
            Ok(())
        }),
        false => m.scan(dev, |_, d| {
            in_use += u64::from(d.is_ok());
            Ok(())
        }),
    };
    let chunks: Vec<usize> = m.chunks.iter().map(Vec::len).collect();
    Zone {
        header_block: m.header,
        slot_size: m.geo.slot_size,
        subzones: m.geo.subzones,
        chunk_blocks: m.geo.chunk_blocks,
        slots: chunks.iter().sum::<usize>() as u64 * m.geo.slots_per_chunk as u64,
        chunks,
        descriptors_in_use: in_use,
    }
}

/// The usual 8-4-4-4-12 hex form, so the uuid can be compared with what
/// other tools print.
fn uuid_text(u: &[u8; 16]) -> String {
    let hex: String = u.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

fn when(secs: u64) -> String {
    match i64::try_from(secs) {
        Ok(0) => "never".to_string(),
        Ok(s) => format!(
            "{} UTC",
            format_time(amber_format::Timespec { secs: s, nsecs: 0 })
        ),
        Err(_) => format!("{secs} (out of range)"),
    }
}

/// One `label: value` line, values aligned.
fn row(label: &str, value: String) -> CliResult<()> {
    outln!("{:<20}{value}", format!("{label}:"))
}

fn print_text(i: &Info, map: &MapInfo) -> CliResult<()> {
    print_identity(i)?;
    print_geometry(i)?;
    print_layouts(i)?;
    outln!("device:")?;
    for line in map.to_string().lines() {
        outln!("  {line}")?;
    }
    Ok(())
}

/// Which pool this is: format, features, state and mount history.
fn print_identity(i: &Info) -> CliResult<()> {
    let f = &i.features;
    row("pool", i.pool.clone())?;
    row("format version", i.version.to_string())?;
    let named: Vec<&str> = INCOMPAT_NAMES
        .iter()
        .filter(|(bit, _)| f.incompat & bit != 0)
        .map(|(_, name)| *name)
        .collect();
    row(
        "features",
        format!(
            "compat {:#x}, incompat {:#x} ({}), ro_compat {:#x}",
            f.compat,
            f.incompat,
            named.join(", "),
            f.ro_compat
        ),
    )?;
    row("layout", i.layout.to_string())?;
    row("uuid", i.uuid.clone())?;
    row("state", i.state.to_string())?;
    row("generation", i.generation.to_string())?;
    row("mount count", i.mount_count.to_string())?;
    row("last mount", when(i.last_mount_secs))?;
    row("last clean unmount", when(i.last_clean_unmount_secs))
}

/// Where the fixed areas lie: blocks, inodes, journals, bitmap, data.
fn print_geometry(i: &Info) -> CliResult<()> {
    let g = &i.geometry;
    row(
        "pool size",
        format!("{} bytes ({})", i.pool_size, human_bytes(i.pool_size)),
    )?;
    row(
        "blocks",
        format!("{} of {} bytes", g.total_blocks, g.block_size),
    )?;
    row("inodes", g.inode_count.to_string())?;
    row(
        "journals",
        format!(
            "{} of {} blocks, from block {}",
            g.journal_count, g.journal_blocks, g.journal_start
        ),
    )?;
    row("inode table", format!("from block {}", g.inode_table_start))?;
    row(
        "bitmap",
        format!("{} block(s) from block {}", g.bitmap_blocks, g.bitmap_start),
    )?;
    row(
        "data area",
        format!(
            "{} blocks ({}) from block {}",
            g.data_blocks,
            human_bytes(g.data_blocks * g.block_size),
            g.data_start
        ),
    )
}

/// The optional layouts: the split layout's areas and the small-write zone.
fn print_layouts(i: &Info) -> CliResult<()> {
    if let Some(s) = &i.split {
        let records = if s.records_in_log {
            format!(
                "in a summary block every {} blocks from block {}",
                s.li_blocks, s.li_start
            )
        } else {
            format!("{} block(s) from block {}", s.li_blocks, s.li_start)
        };
        let own = if s.own_records {
            ", own-commit records"
        } else {
            ""
        };
        row(
            "split layout",
            format!(
                "attribute logs {} block(s) from block {}, logical information {records}{own}",
                s.attr_blocks, s.attr_start
            ),
        )?;
    }
    if let Some(z) = &i.zone {
        row(
            "small-write zone",
            format!(
                "{} slots of {} bytes in {} sub-zone(s) (chunks of {} blocks: {:?}), header at \
                 block {}; {} descriptor(s) in use",
                z.slots,
                z.slot_size,
                z.subzones,
                z.chunk_blocks,
                z.chunks,
                z.header_block,
                z.descriptors_in_use
            ),
        )?;
    }
    Ok(())
}
