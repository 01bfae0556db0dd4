//! `amberfs stats`: a running mount's counters, read from its daemon
//! (`control.rs`) without stopping it — PM bytes, lines flushed and
//! fences since the mount, space, and the policy's own counters (queue
//! depths, buffer and zone use, write-backs, recoveries) — as text, as
//! JSON, again every few seconds, and as a Prometheus textfile.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use amber_core::Core;
use amber_pmem::PmDevice;
use serde_json::{json, Value};

use super::mount::{absolute, mount_of_pool, mounted_at};
use crate::common::{CliError, CliResult, Shown};
use crate::control;
use crate::output::outln;

/// The longest `--watch` interval (a day).
const MAX_WATCH_SECONDS: f64 = 86_400.0;

#[derive(clap::Args)]
pub struct Args {
    /// The directory a pool is mounted at, or the pool file or device of
    /// a running `amberfs mount`.
    target: PathBuf,
    /// Print the counters as one JSON object.
    #[arg(long)]
    json: bool,
    /// Print them again every SECONDS (until interrupted).
    #[arg(long, value_name = "SECONDS", value_parser = parse_watch)]
    watch: Option<f64>,
    /// Also write them to FILE in Prometheus' text format (node_exporter's
    /// textfile collector), replaced whole each time.
    #[arg(long, value_name = "FILE")]
    prometheus: Option<PathBuf>,
}

fn parse_watch(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s > 0.0 && s <= MAX_WATCH_SECONDS => Ok(s),
        _ => Err(format!(
            "takes seconds, more than 0 and at most {MAX_WATCH_SECONDS}"
        )),
    }
}

pub fn run(args: Args) -> CliResult<ExitCode> {
    let dir = mount_dir(&args.target)?;
    loop {
        let stats = control::query(&dir, "stats")?;
        if let Some(file) = &args.prometheus {
            write_prometheus(file, &stats)?;
        }
        if args.json {
            outln!("{stats}")?;
        } else {
            outln!("{}", text(&stats))?;
        }
        let Some(every) = args.watch else {
            return Ok(ExitCode::SUCCESS);
        };
        std::thread::sleep(Duration::from_secs_f64(every));
    }
}

/// The mount directory `target` names: itself, or where its pool is
/// mounted.
fn mount_dir(target: &Path) -> CliResult<PathBuf> {
    let abs = absolute(target)?;
    if mounted_at(&abs)?.is_some_and(|m| m.is_amberfs()) {
        return Ok(abs);
    }
    match mount_of_pool(&abs) {
        Some(dir) => Ok(PathBuf::from(dir)),
        None => Err(CliError::new(format!(
            "{} is neither an amberfs mount nor the pool of one",
            target.shown()
        ))),
    }
}

/// Where a mount is, what its opening found (a clean mount, or what
/// recovery did) and since when: the fixed part of every answer.
pub struct Session {
    pub pool: PathBuf,
    pub dir: PathBuf,
    pub opened: String,
    pub since: Instant,
    /// The read leases the mount grants, if it does.
    pub leases: Option<Arc<amber_lease::Leases>>,
}

/// What the daemon answers a `stats` request with: the session and the
/// counters.
pub fn snapshot<D: PmDevice>(core: &Arc<Core<D>>, session: &Session) -> Value {
    let pm = core.device().stats();
    let space = core.statfs();
    let (zone_slots, zone_used) = core
        .zone()
        .map_or((0, 0), amber_core::zone::Zone::occupancy);
    let policy: serde_json::Map<String, Value> = core
        .policy_stats()
        .into_iter()
        .map(|(k, v)| (k, json!(v)))
        .collect();
    json!({
        "pool": session.pool.to_string_lossy(),
        "mount": session.dir.to_string_lossy(),
        "policy": core.options().policy,
        "opened": session.opened,
        "uptime_seconds": session.since.elapsed().as_secs_f64(),
        "pm": {
            "bytes_written": pm.bytes_written(),
            "bytes_stored": pm.bytes_stored,
            "bytes_nt": pm.bytes_nt,
            "lines_flushed": pm.lines_flushed,
            "fences": pm.fences,
        },
        "space": {
            "block_size": space.block_size,
            "blocks": space.blocks,
            "blocks_free": space.blocks_free,
            "inodes": space.inodes,
            "inodes_free": space.inodes_free,
            "zone_slots": zone_slots,
            "zone_slots_used": zone_used,
        },
        "policy_counters": policy,
        "leases": session.leases.as_deref().map_or(json!({}), leases),
    })
}

/// The leases' counters since the mount (`granted` counts read, write
/// and map leases, `granted_write` and `granted_map` the write and map
/// leases among them), and how many are held now.
fn leases(l: &amber_lease::Leases) -> Value {
    use std::sync::atomic::Ordering::Relaxed;
    let c = &l.counters;
    json!({
        "granted": c.granted.load(Relaxed),
        "granted_write": c.written.load(Relaxed),
        "granted_map": c.mapped.load(Relaxed),
        "refused": c.refused.load(Relaxed),
        "refused_contended": c.contended.load(Relaxed),
        "refused_mapped": c.refused_mapped.load(Relaxed),
        "recalled": c.recalled.load(Relaxed),
        "cut_off": c.cut_off.load(Relaxed),
        "held": l.held(),
    })
}

/// Counters as `section.name value` lines under a header.
fn text(stats: &Value) -> String {
    let s = |k: &str| stats[k].as_str().unwrap_or("?").to_string();
    let mut out = format!(
        "{} at {}, policy {}, mounted {:.1} s ago ({})",
        s("pool"),
        s("mount"),
        s("policy"),
        stats["uptime_seconds"].as_f64().unwrap_or(0.0),
        s("opened")
    );
    for section in ["pm", "space", "policy_counters", "leases"] {
        if let Some(map) = stats[section].as_object() {
            for (k, v) in map {
                let _ = write!(out, "\n{section}.{k} {v}");
            }
        }
    }
    out
}

/// The counters in Prometheus' text exposition format, labelled with
/// the pool and mount.
fn prometheus(stats: &Value) -> String {
    let label = |k: &str| escape_label(stats[k].as_str().unwrap_or(""));
    let labels = format!("pool=\"{}\",mount=\"{}\"", label("pool"), label("mount"));
    let mut out = String::new();
    for (section, kind, suffix) in [
        ("pm", "counter", "_total"),
        ("space", "gauge", ""),
        ("leases", "untyped", ""),
    ] {
        for (k, v) in stats[section].as_object().into_iter().flatten() {
            let name = format!("amberfs_{section}_{k}{suffix}");
            let _ = writeln!(out, "# TYPE {name} {kind}\n{name}{{{labels}}} {v}");
        }
    }
    let _ = writeln!(out, "# TYPE amberfs_policy_counter untyped");
    for (k, v) in stats["policy_counters"].as_object().into_iter().flatten() {
        let _ = writeln!(
            out,
            "amberfs_policy_counter{{{labels},counter=\"{}\"}} {v}",
            escape_label(k)
        );
    }
    out
}

/// A label value as Prometheus reads it: backslash, quote and newline
/// escaped.
fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Writes `file` whole: a temporary beside it, renamed over it, so the
/// collector never reads half a file.
fn write_prometheus(file: &Path, stats: &Value) -> CliResult<()> {
    let tmp = file.with_extension("tmp");
    std::fs::write(&tmp, prometheus(stats))
        .and_then(|()| std::fs::rename(&tmp, file))
        .map_err(|e| CliError::new(format!("cannot write {}: {e}", file.shown())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Value {
        json!({
            "pool": "/p\"q", "mount": "/m", "policy": "amber", "uptime_seconds": 1.5,
            "opened": "clean mount",
            "pm": {"fences": 3}, "space": {"blocks": 10},
            "policy_counters": {"zone_writes": 2},
        })
    }

    #[test]
    fn prometheus_lines_are_labelled_and_escaped() {
        let p = prometheus(&sample());
        assert!(p.contains("# TYPE amberfs_pm_fences_total counter\namberfs_pm_fences_total{pool=\"/p\\\"q\",mount=\"/m\"} 3\n"), "{p}");
        assert!(
            p.contains("amberfs_space_blocks{pool=\"/p\\\"q\",mount=\"/m\"} 10\n"),
            "{p}"
        );
        assert!(
            p.contains(
                "amberfs_policy_counter{pool=\"/p\\\"q\",mount=\"/m\",counter=\"zone_writes\"} 2\n"
            ),
            "{p}"
        );
    }

    #[test]
    fn text_lists_every_counter() {
        let t = text(&sample());
        assert!(
            t.starts_with("/p\"q at /m, policy amber, mounted 1.5 s ago (clean mount)"),
            "{t}"
        );
        assert!(
            t.contains("\npm.fences 3") && t.contains("\npolicy_counters.zone_writes 2"),
            "{t}"
        );
    }

    #[test]
    fn watch_intervals_are_bounded() {
        assert!(parse_watch("0").is_err() && parse_watch("-1").is_err());
        assert!(parse_watch("1e9").is_err() && parse_watch("x").is_err());
        assert_eq!(parse_watch("0.5"), Ok(0.5));
    }
}
