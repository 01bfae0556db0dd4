//! Runs one workload on several targets, interleaved: every round runs
//! each target once, in the same order (A, B, A, B, ...), after that
//! target's clean-up. A machine that slows down for a while then slows
//! both alike, and the ratio of medians holds where the raw numbers
//! drift. One target is the plain `bench workload` case.

use crate::record::Record;
use crate::spec::{SpecOptions, TargetSpec};
use crate::stats::summarize;
use crate::target::Target;
use crate::workload::{self, Outcome, Params, Session, Verified};
use serde::Serialize;

/// A cache line, the unit the emulator charges.
const LINE: u64 = amber_pmem::CACHE_LINE;

/// What to run and how often.
#[derive(Debug, Clone)]
pub struct Plan {
    pub workload: String,
    /// `params.threads` is replaced by each entry of `threads`.
    pub params: Params,
    /// A sweep: the whole comparison runs once per entry.
    pub threads: Vec<usize>,
    /// Timed repetitions per target.
    pub reps: usize,
    /// Untimed runs per target before the timed ones.
    pub warmup: usize,
}

/// A record and its median's ratio to the first target's, for the same
/// metric and thread count.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    #[serde(flatten)]
    pub record: Record,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio_to_first: Option<f64>,
}

/// The samples of one target at one thread count.
#[derive(Default)]
struct Samples {
    ops_per_s: Vec<f64>,
    mib_per_s: Vec<f64>,
    /// PM bytes per byte the workload wrote.
    write_amp: Vec<f64>,
    /// PM bytes per write call (lawn.txt's bytes per I/O request).
    pm_per_write: Vec<f64>,
    /// Cache lines flushed and fences per write call: what the emulator's
    /// per-line latency and a fence's drain are charged on, so two
    /// policies writing the same bytes can still differ.
    lines_per_write: Vec<f64>,
    fences_per_write: Vec<f64>,
    /// Lines the emulator charges its per-line latency on, per write call:
    /// flushed lines and lines stored non-temporally (`Emulated::write_nt`).
    charged_per_write: Vec<f64>,
    last: Outcome,
    verified: Verified,
    /// The policy's counters, summed over the timed runs (each run starts
    /// on a fresh mount, so each run's counters are its own).
    policy: Vec<(String, u64)>,
}

/// Whether a policy stat is a level (buffer size and occupancy, a
/// calibrated latency in ps), kept as last seen, not summed.
fn is_level(name: &str) -> bool {
    name.starts_with("buffer_") || name.ends_with("_ps")
}

/// Adds one run's counters to the running sums.
fn add_counters(sum: &mut Vec<(String, u64)>, run: Vec<(String, u64)>) {
    for (k, v) in run {
        match sum.iter_mut().find(|(n, _)| *n == k) {
            Some((n, total)) if is_level(n) => *total = v,
            Some((_, total)) => *total += v,
            None => sum.push((k, v)),
        }
    }
}

/// Notes for a policy's counters, with the Buffer Benefit Model's
/// prediction accuracy (of the fsync-time decisions for blocks decided
/// before, the share equal to that previous decision) when it made any.
fn counter_notes(c: &[(String, u64)]) -> Vec<String> {
    if c.is_empty() {
        return Vec::new();
    }
    let get = |k: &str| c.iter().find(|(n, _)| n == k).map_or(0, |(_, v)| *v);
    let mut out = vec![format!(
        "policy counters over the timed runs: {}",
        c.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    )];
    let predictions = get("bbm_predictions");
    if predictions > 0 {
        out.push(format!(
            "BBM prediction accuracy {:.1}% ({} of {predictions} predictions held; {} \
             blocks decided at fsync)",
            100.0 * get("bbm_accurate") as f64 / predictions as f64,
            get("bbm_accurate"),
            get("bbm_decisions")
        ));
    }
    out
}

/// Runs the plan on `targets` (the first is the reference of the ratios);
/// `progress` hears one line per finished repetition.
pub fn run(
    plan: &Plan,
    targets: &[&dyn Target],
    progress: &mut dyn FnMut(String),
) -> Result<Vec<Row>, String> {
    if targets.is_empty() || plan.reps == 0 || plan.threads.is_empty() {
        return Err("need at least one target, one repetition and one thread count".into());
    }
    let mut rows = Vec::new();
    for &threads in &plan.threads {
        let params = Params {
            threads,
            ..plan.params.clone()
        };
        let mut sessions = Vec::with_capacity(targets.len());
        for t in targets {
            sessions.push(workload::session(&plan.workload, *t, &params)?);
        }
        let measured = measure(plan, targets, &mut sessions, threads, progress);
        let cleaned: Result<(), String> = sessions.iter().zip(targets).try_for_each(|(s, t)| {
            s.cleanup()
                .map_err(|e| format!("{}: clean-up: {e}", t.name()))
        });
        let samples = measured?;
        cleaned?;
        rows.extend(records(plan, &params, targets, &samples));
    }
    Ok(rows)
}

/// Setup, warm-up, interleaved timed rounds, verification.
fn measure(
    plan: &Plan,
    targets: &[&dyn Target],
    sessions: &mut [Box<dyn Session + '_>],
    threads: usize,
    progress: &mut dyn FnMut(String),
) -> Result<Vec<Samples>, String> {
    let ctx = |t: &dyn Target, what: &str, e: std::io::Error| {
        format!("{} on {} ({what}): {e}", plan.workload, t.name())
    };
    for (s, t) in sessions.iter_mut().zip(targets) {
        s.setup().map_err(|e| ctx(*t, "setup", e))?;
    }
    let mut samples: Vec<Samples> = targets.iter().map(|_| Samples::default()).collect();
    for round in 0..plan.warmup + plan.reps {
        let timed = round >= plan.warmup;
        for ((s, t), out) in sessions.iter_mut().zip(targets).zip(&mut samples) {
            s.prepare().map_err(|e| ctx(*t, "prepare", e))?;
            t.reset().map_err(|e| ctx(*t, "clean-up between runs", e))?;
            let before = t.pm_stats();
            let o = s.run_once().map_err(|e| ctx(*t, "run", e))?;
            if !timed {
                continue;
            }
            let secs = o.elapsed.as_secs_f64().max(1e-9);
            out.ops_per_s.push(o.ops as f64 / secs);
            out.mib_per_s
                .push((o.bytes_read + o.bytes_written) as f64 / secs / (1 << 20) as f64);
            if let (Some(b), Some(a)) = (before, t.pm_stats()) {
                // Everything the file system stored to PM while the run
                // was timed: data, logs, journal, metadata.
                let d = a.since(&b);
                let pm = d.bytes_written() as f64;
                if o.bytes_written > 0 {
                    out.write_amp.push(pm / o.bytes_written as f64);
                }
                if o.writes > 0 {
                    let w = o.writes as f64;
                    out.pm_per_write.push(pm / w);
                    out.lines_per_write.push(d.lines_flushed as f64 / w);
                    out.fences_per_write.push(d.fences as f64 / w);
                    let charged = d.lines_flushed + d.bytes_nt.div_ceil(LINE);
                    out.charged_per_write.push(charged as f64 / w);
                }
            }
            out.last = o;
            add_counters(&mut out.policy, t.policy_stats());
            progress(format!(
                "{} {} threads={threads} rep {}/{}: {:.0} ops/s",
                plan.workload,
                t.name(),
                round - plan.warmup + 1,
                plan.reps,
                o.ops as f64 / secs
            ));
        }
    }
    for ((s, t), out) in sessions.iter().zip(targets).zip(&mut samples) {
        out.verified = s.verify().map_err(|e| ctx(*t, "verification", e))?;
    }
    Ok(samples)
}

fn records(plan: &Plan, params: &Params, targets: &[&dyn Target], samples: &[Samples]) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut first: Vec<(String, f64)> = Vec::new();
    for (i, (t, s)) in targets.iter().zip(samples).enumerate() {
        let notes = vec![
            params.describe(),
            format!(
                "per repetition: {} ops ({} write calls), {:.1} MiB read, {:.1} MiB written; \
                 {} warm-up run(s)",
                s.last.ops,
                s.last.writes,
                s.last.bytes_read as f64 / (1 << 20) as f64,
                s.last.bytes_written as f64 / (1 << 20) as f64,
                plan.warmup
            ),
            format!(
                "verified after the runs: {} files, {} bytes",
                s.verified.files, s.verified.bytes
            ),
        ]
        .into_iter()
        .chain(counter_notes(&s.policy))
        .collect::<Vec<_>>();
        let metrics = [
            ("throughput", "ops/s", &s.ops_per_s),
            ("bandwidth", "MiB/s", &s.mib_per_s),
            ("write_amplification", "PM B/B", &s.write_amp),
            ("pm_bytes_per_write", "PM B/op", &s.pm_per_write),
            ("flushed_lines_per_write", "lines/op", &s.lines_per_write),
            ("fences_per_write", "fences/op", &s.fences_per_write),
            ("charged_lines_per_write", "lines/op", &s.charged_per_write),
        ];
        for (metric, unit, xs) in metrics {
            if xs.is_empty() {
                continue;
            }
            let summary = summarize(xs);
            if i == 0 {
                first.push((metric.to_string(), summary.median));
            }
            let ratio_to_first = first
                .iter()
                .find(|(m, _)| m == metric)
                .filter(|(_, v)| *v > 0.0)
                .map(|(_, v)| summary.median / v);
            let mut notes = notes.clone();
            if let (Some(r), true) = (ratio_to_first, targets.len() > 1) {
                notes.push(format!("{r:.3}x {}", targets[0].name()));
            }
            rows.push(Row {
                record: Record {
                    benchmark: plan.workload.clone(),
                    target: t.name(),
                    policy: t.policy(),
                    preset: t.preset(),
                    threads: params.threads as u32,
                    metric: metric.into(),
                    value: summary.median,
                    unit: unit.into(),
                    summary,
                    notes,
                },
                ratio_to_first: (targets.len() > 1).then_some(ratio_to_first).flatten(),
            });
        }
    }
    rows
}

/// Makes every target `specs` names (fresh pools under `opts`), runs the
/// plan on them as [`run`] does, and removes the pools again, on failure
/// too: the one place `bench compare` and `bench seeds` open, measure and
/// close targets. A pool that cannot be removed is reported on stderr
/// and does not discard the measurements.
pub fn run_specs(
    plan: &Plan,
    specs: &[TargetSpec],
    opts: &SpecOptions,
    progress: &mut dyn FnMut(String),
) -> Result<Vec<Row>, String> {
    let mut opened = Vec::with_capacity(specs.len());
    let mut result = Ok(Vec::new());
    for (i, s) in specs.iter().enumerate() {
        match s.open(opts, i) {
            Ok(t) => opened.push(t),
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    if result.is_ok() {
        let targets: Vec<_> = opened.iter().map(|t| t.target()).collect();
        result = run(plan, &targets, progress);
    }
    for t in opened {
        if let Err(e) = t.close() {
            crate::progress::note(format_args!("warning: clean-up: {e}"));
        }
    }
    result
}

/// One workload on one target: what the legacy study calls per file
/// system. Records carry the medians; `reps` timed runs after `warmup`.
pub fn run_one(
    workload: &str,
    target: &dyn Target,
    params: &Params,
    reps: usize,
    warmup: usize,
) -> Result<Vec<Record>, String> {
    let plan = Plan {
        workload: workload.to_string(),
        params: params.clone(),
        threads: vec![params.threads],
        reps,
        warmup,
    };
    Ok(run(&plan, &[target], &mut |_| {})?
        .into_iter()
        .map(|r| r.record)
        .collect())
}

/// Rows as a table with the ratio column, one line each after the
/// header (no final newline), for the caller to print.
pub fn rows_table(rows: &[Row]) -> String {
    let mut lines = vec![format!(
        "{:<11} {:<26} {:<7} {:>3} {:<20} {:>13} {:<7} {:>6} {:>8}",
        "workload", "target", "preset", "thr", "metric", "median", "unit", "rsd%", "ratio"
    )];
    for r in rows {
        let c = &r.record;
        let ratio = r
            .ratio_to_first
            .map(|x| format!("{x:.3}"))
            .unwrap_or_else(|| "-".into());
        lines.push(format!(
            "{:<11} {:<26} {:<7} {:>3} {:<20} {:>13.2} {:<7} {:>6.1} {:>8}",
            c.benchmark,
            c.target,
            c.preset,
            c.threads,
            c.metric,
            c.value,
            c.unit,
            c.summary.rsd_percent,
            ratio
        ));
    }
    lines.join("\n")
}
