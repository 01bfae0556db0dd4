//! `amberfs fsck`: check a pool offline, and repair it with --repair.
//!
//! Exit codes follow e2fsck (0 clean, 1 repaired, 4 errors left, 8 could
//! not check) so scripts written for it work unchanged; that is why this
//! command, unlike the others, does not fail with status 1.

use std::path::PathBuf;
use std::process::ExitCode;

use amber_core::check::{check, CheckOptions, CheckReport, Severity};
use serde::Serialize;

use crate::common::{open_device, open_for_reading, pool_error, warn, CliError, CliResult, Shown};
use crate::output::outln;

/// e2fsck's "operational error": the pool could not be checked at all.
const EXIT_OPERATIONAL: u8 = 8;

#[derive(clap::Args)]
pub struct Args {
    /// The pool file or device (not in use by another process).
    pool: PathBuf,
    /// Fix what can be fixed without guessing.
    #[arg(long)]
    repair: bool,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Json<'a> {
    pool: String,
    clean: bool,
    exit_code: i32,
    repair: bool,
    problems: Vec<JsonProblem<'a>>,
    inodes_in_use: u64,
    directories: u64,
    files: u64,
    blocks_in_use: u64,
    blocks_free: u64,
    journal_transactions_pending: u64,
    was_clean: bool,
}

#[derive(Serialize)]
struct JsonProblem<'a> {
    severity: &'static str,
    what: &'a str,
}

pub fn run(args: Args) -> CliResult<ExitCode> {
    match check_pool(&args) {
        Ok(code) => Ok(code),
        Err(e) if e.is_closed_output() => Err(e),
        Err(e) => {
            warn(e);
            Ok(ExitCode::from(EXIT_OPERATIONAL))
        }
    }
}

fn check_pool(args: &Args) -> CliResult<ExitCode> {
    // A check alone writes nothing, so it can read a pool on read-only
    // media; a repair needs to write it.
    let dev = match args.repair {
        true => open_device(&args.pool)?,
        false => open_for_reading(&args.pool)?,
    };
    let opts = CheckOptions {
        repair: args.repair,
    };
    let report = check(&dev, &opts).map_err(|e| pool_error(&args.pool, e))?;
    if args.json {
        let text = serde_json::to_string_pretty(&json(args, &report))
            .map_err(|e| CliError::new(format!("could not encode the report as JSON: {e}")))?;
        outln!("{text}")?;
    } else {
        print_text(args, &report)?;
    }
    let code = u8::try_from(report.exit_code()).unwrap_or(EXIT_OPERATIONAL);
    Ok(ExitCode::from(code))
}

fn severity_name(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Repaired => "repaired",
        Severity::Note => "note",
    }
}

fn json<'a>(args: &Args, r: &'a CheckReport) -> Json<'a> {
    Json {
        pool: args.pool.shown().to_string(),
        clean: r.is_clean(),
        exit_code: r.exit_code(),
        repair: args.repair,
        problems: r
            .problems
            .iter()
            .map(|p| JsonProblem {
                severity: severity_name(p.severity),
                what: &p.what,
            })
            .collect(),
        inodes_in_use: r.inodes_in_use,
        directories: r.directories,
        files: r.files,
        blocks_in_use: r.blocks_in_use,
        blocks_free: r.blocks_free,
        journal_transactions_pending: r.journal_transactions_pending,
        was_clean: r.was_clean,
    }
}

fn print_text(args: &Args, r: &CheckReport) -> CliResult<()> {
    let p = args.pool.shown();
    for problem in &r.problems {
        outln!("{problem}")?;
    }
    let count = |s: Severity| r.problems.iter().filter(|p| p.severity == s).count();
    let (errors, repaired) = (count(Severity::Error), count(Severity::Repaired));
    outln!(
        "{} inodes in use ({} directories, {} regular files), {} blocks in use, {} free; \
         {} committed journal transaction(s) pending; pool was {}",
        r.inodes_in_use,
        r.directories,
        r.files,
        r.blocks_in_use,
        r.blocks_free,
        r.journal_transactions_pending,
        if r.was_clean {
            "cleanly unmounted"
        } else {
            "not cleanly unmounted"
        }
    )?;
    if errors > 0 {
        let advice = if args.repair {
            format!(
                "these need a manual decision; copy every file that still reads out with \
                 'amberfs salvage {p} DIR'"
            )
        } else {
            format!("run 'amberfs fsck --repair {p}' to fix what can be fixed")
        };
        outln!("{p}: {errors} error(s) found; {advice}")
    } else if repaired > 0 {
        outln!("{p}: {repaired} problem(s) repaired; the pool is consistent now")
    } else {
        outln!("{p}: clean")
    }
}
