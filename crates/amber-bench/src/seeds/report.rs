//! `results.md`: the claims table (paper — what we measured — why they
//! differ), the goals for `amber` per workload, what each
//! experiment ran, its plots and raw records, and how long it all took.
//! Written from an [`Outcome`] alone, so tests render it from fabricated
//! records.

use super::claims::{self, CLAIMS};
use super::{Config, Experiment, Goal, Outcome, RunResult, Status, AMBER_POLICY};
use crate::record::Record;
use std::fmt::Write;
use std::path::Path;
use std::time::Duration;

/// The goals for `amber` on every workload: at least this share of
/// the best specialized policy's median ...
pub const GOAL_VS_BEST: f64 = 0.9;
/// ... and of `direct`'s ...
pub const GOAL_VS_DIRECT: f64 = 0.95;
/// ... and strictly ahead of every specialized policy on this many.
pub const GOAL_STRICTLY_BETTER: usize = 3;

/// `amber` against the others on one workload of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct GoalRow {
    pub experiment: Experiment,
    /// The run, and the workload or test inside it.
    pub workload: String,
    pub metric: String,
    pub unit: String,
    pub amber: Option<f64>,
    /// The fastest Amber policy other than `direct` and `amber`.
    pub best: Option<(String, f64)>,
    pub direct: Option<f64>,
}

impl GoalRow {
    pub fn vs_best(&self) -> Option<f64> {
        ratio(self.amber?, self.best.as_ref()?.1)
    }

    pub fn vs_direct(&self) -> Option<f64> {
        ratio(self.amber?, self.direct?)
    }

    /// Strictly ahead of every specialized policy measured beside it.
    pub fn strictly_better(&self) -> Option<bool> {
        Some(self.amber? > self.best.as_ref()?.1)
    }
}

fn ratio(a: f64, b: f64) -> Option<f64> {
    (b > 0.0).then_some(a / b)
}

/// A policy the goals count as specialized: any Amber policy but the
/// plain one and `amber` itself.
fn specialized(r: &Record) -> bool {
    r.target.starts_with("amberfs:") && r.policy != "direct" && r.policy != AMBER_POLICY
}

/// One row per (workload, metric, threads) group of every run the goals
/// cover, in the runs' order.
pub fn goal_rows(runs: &[RunResult]) -> Vec<GoalRow> {
    let mut rows = Vec::new();
    for run in runs {
        let wanted = |r: &Record| match run.goal {
            Goal::None => false,
            Goal::Metric(m) => r.metric == m,
            Goal::EveryMetric => true,
        };
        let mut keys: Vec<(String, String, u32)> = Vec::new();
        for r in run.records.iter().filter(|r| wanted(r)) {
            let k = (r.benchmark.clone(), r.metric.clone(), r.threads);
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        let several = keys.iter().any(|k| k.0 != keys[0].0);
        for (bench, metric, threads) in keys {
            let group: Vec<&Record> = run
                .records
                .iter()
                .filter(|r| r.benchmark == bench && r.metric == metric && r.threads == threads)
                .collect();
            let value = |t: &str| group.iter().find(|r| r.target == t).map(|r| r.value);
            let best = group
                .iter()
                .filter(|r| specialized(r))
                .max_by(|a, b| a.value.total_cmp(&b.value))
                .map(|r| (r.target.clone(), r.value));
            let mut workload = run.name.clone();
            if several {
                workload = format!("{workload} {bench}");
            }
            if threads != 1 {
                workload = format!("{workload}, {threads} threads");
            }
            rows.push(GoalRow {
                experiment: run.experiment,
                workload,
                metric: metric.clone(),
                unit: group.first().map(|r| r.unit.clone()).unwrap_or_default(),
                amber: value(&format!("amberfs:{AMBER_POLICY}")),
                best,
                direct: value("amberfs:direct"),
            });
        }
    }
    rows
}

fn human(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 60 {
        format!("{} min {} s", s / 60, s % 60)
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

fn date(unix: u64) -> String {
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let days = (unix / 86_400) as i64;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// `path` relative to the directory of `out` when it is inside it.
fn link(out: &Path, path: &Path) -> String {
    let base = out.parent().unwrap_or(Path::new(""));
    path.strip_prefix(base)
        .unwrap_or(path)
        .display()
        .to_string()
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn x(v: Option<f64>) -> String {
    v.map_or("—".into(), |v| format!("{v:.2}x"))
}

/// The report, as markdown. `commit` names the build when known.
pub fn render(cfg: &Config, out: &Outcome, commit: Option<&str>) -> String {
    let mut md = String::new();
    header(&mut md, cfg, out, commit);
    claims_table(&mut md, cfg, out);
    goals_table(&mut md, out);
    experiments(&mut md, cfg, out);
    md
}

/// The run's provenance (machine, command, mode, timing) and how to read its figures.
fn header(md: &mut String, cfg: &Config, out: &Outcome, commit: Option<&str>) {
    let info = &cfg.info;
    let _ = writeln!(
        md,
        "# Each paper's headline experiment, reproduced here\n\n\
         Written by `amberfs bench seeds` (issue 8). Command: `{}`; {} on {} ({} cores, \
         {:.0} GiB, flush `{}`), version {}{}.\n",
        info.command,
        date(info.date_unix),
        info.cpu_model,
        info.cores,
        info.memory_bytes as f64 / (1u64 << 30) as f64,
        info.flush,
        info.version,
        commit
            .map(|c| format!(", commit `{c}`"))
            .unwrap_or_default()
    );
    let took = human(out.elapsed);
    let _ =
        match cfg.mode.as_str() {
            "quick" => writeln!(
            md,
            "Mode `--quick`: the whole run took **{took}** (the issue asks for under 5 minutes); \
             the full mode (without `--quick`) is estimated at {} for the same experiments.",
            human(super::estimate(&cfg.experiments, true, cfg.scale.reps, cfg.scale.reps))
        ),
            mode => writeln!(
                md,
                "Mode `{mode}`: the whole run took **{took}** (estimated beforehand: {})",
                human(cfg.estimate)
            ),
        };
    let _ = writeln!(
        md,
        "Every figure is a median of {} interleaved repetitions after {} warm-up, measured in \
         the same run as its baseline; this machine is shared and noisy, so compare ratios \
         within this run, not absolute numbers across runs.\n",
        cfg.scale.reps, cfg.scale.warmup
    );
    if out.amber {
        let _ = writeln!(
            md,
            "`amber`: in this build, measured in every experiment.\n"
        );
    } else {
        let _ = writeln!(
            md,
            "`amber`: **not in this build** (`amber_core::data::POLICIES` has no `amber`); every \
             experiment adds it as a target once it is.\n"
        );
    }
}

/// One row per paper's claim: what we measured and whether the claim holds here.
fn claims_table(md: &mut String, cfg: &Config, out: &Outcome) {
    md.push_str("## The papers' claims and what we measured\n\n");
    md.push_str(
        "| paper | claim in the paper | what we measured here | holds? | why they differ |\n",
    );
    md.push_str("|---|---|---|---|---|\n");
    for c in CLAIMS {
        let (measured, holds) = match out.status(c.experiment) {
            Status::Done => match claims::measure(c, &out.runs, &cfg.scale) {
                Ok(m) => judge(c, &m, claims::bound(c, &out.runs)),
                Err(why) => (format!("not measured: {why}"), "—".into()),
            },
            Status::Skipped(why) => (format!("skipped: {why}"), "—".into()),
            Status::NotSelected => ("not run (not in `--only`)".into(), "—".into()),
            Status::Failed(e) => (format!("failed: {e}"), "—".into()),
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} |",
            c.experiment.paper(),
            cell(c.claim),
            cell(&measured),
            holds,
            cell(c.why)
        );
    }
}

/// A measured claim's figure (with its bound, if it has one) and whether
/// it holds: its goal met, or — where the emulator's accounting puts the
/// goal out of reach — within 10% of that bound.
fn judge(
    c: &claims::Claim,
    m: &claims::Measured,
    bound: Option<Result<(f64, String), String>>,
) -> (String, String) {
    let goal = c.check.describe(m.unit);
    if c.check.holds(m.value) {
        let text = match bound {
            Some(Ok((_, b))) => format!("{}; bound {b}", m.text),
            _ => m.text.clone(),
        };
        return (text, format!("yes ({goal})"));
    }
    match bound {
        Some(Ok((b, words))) if !c.check.holds(b) => {
            let near = m.value >= claims::WITHIN_BOUND * b;
            let yes = if near {
                "within 10% of the bound"
            } else {
                "**no**"
            };
            (
                format!("{}; bound {words}", m.text),
                format!("{yes} ({goal}, beyond the bound)"),
            )
        }
        Some(Ok((_, words))) => (
            format!("{}; bound {words}", m.text),
            format!("**no** ({goal})"),
        ),
        Some(Err(e)) => (
            format!("{}; bound not measured: {e}", m.text),
            format!("**no** ({goal})"),
        ),
        None => (m.text.clone(), format!("**no** ({goal})")),
    }
}

/// Issue 8's goals: `amber` against the best specialized policy and `direct`, per workload.
fn goals_table(md: &mut String, out: &Outcome) {
    md.push_str("\n## `amber` against the specialized policies and `direct` (issue 8's goals)\n\n");
    let rows = goal_rows(&out.runs);
    md.push_str(
        "Per workload, medians of the same run: `amber` should reach at least 0.9x the best \
         specialized policy (any Amber policy but `direct` and `amber`) and at least 0.95x \
         `direct`, and be strictly ahead of every specialized policy on at least three \
         workloads.\n\n",
    );
    md.push_str(
        "| workload | metric | amber | best specialized | amber / best (≥ 0.9x) | amber / direct \
         (≥ 0.95x) | ahead of every specialized |\n|---|---|---|---|---|---|---|\n",
    );
    for r in &rows {
        let amber = match r.amber {
            Some(v) => format!("{} {}", claims::figure(v), r.unit),
            None if out.amber => "missing".into(),
            None => "not in this build".into(),
        };
        let best = r.best.as_ref().map_or("none in this run".into(), |(t, v)| {
            format!("{t} {} {}", claims::figure(*v), r.unit)
        });
        let mark = |v: Option<f64>, goal: f64| match v {
            Some(v) if v >= goal => format!("{} (met)", x(Some(v))),
            Some(v) => format!("{} (**not met**)", x(Some(v))),
            None => "—".into(),
        };
        let ahead = match r.strictly_better() {
            Some(true) => "yes",
            Some(false) => "no",
            None => "—",
        };
        let _ = writeln!(
            md,
            "| {} | {} | {amber} | {best} | {} | {} | {ahead} |",
            cell(&r.workload),
            cell(&r.metric),
            mark(r.vs_best(), GOAL_VS_BEST),
            mark(r.vs_direct(), GOAL_VS_DIRECT),
        );
    }
    if rows.is_empty() {
        md.push_str("| (no workload ran) | | | | | | |\n");
    }
    md.push('\n');
    md.push_str(&goal_summary(&rows, out.amber));
}

/// Per experiment: how long it took, its record files and its plots, or why it did not run.
fn experiments(md: &mut String, cfg: &Config, out: &Outcome) {
    md.push_str("\n## What each experiment ran\n\n");
    for (e, status, took) in &out.status {
        let _ = write!(md, "### {} (`--only {}`)\n\n", e.paper(), e.name());
        match status {
            Status::Done => {
                let _ = writeln!(md, "Took {}.\n", human(*took));
                for r in out.runs.iter().filter(|r| r.experiment == *e) {
                    let json = cfg.records_dir.join(format!("{}.json", r.name));
                    let _ = writeln!(
                        md,
                        "* `{}`: {}. Records: [{}]({}).",
                        r.name,
                        r.what,
                        link(&cfg.out, &json),
                        link(&cfg.out, &json)
                    );
                }
                md.push('\n');
                for (_, p) in out.plots.iter().filter(|(x, _)| x == e) {
                    let l = link(&cfg.out, p);
                    let _ = writeln!(
                        md,
                        "![{}]({l})\n",
                        p.file_stem()
                            .map_or(String::new(), |s| s.to_string_lossy().into_owned())
                    );
                }
            }
            Status::Skipped(why) => {
                let _ = writeln!(md, "Skipped: {why}.\n");
            }
            Status::NotSelected => {
                md.push_str("Not run (not in `--only`).\n\n");
            }
            Status::Failed(err) => {
                let _ = writeln!(md, "**Failed** after {}: {}\n", human(*took), cell(err));
            }
        }
    }
}

/// The goals' verdict in one paragraph.
fn goal_summary(rows: &[GoalRow], amber: bool) -> String {
    if !amber {
        return "The goals cannot be judged until `amber` is in the build.\n".into();
    }
    let judged_best: Vec<f64> = rows.iter().filter_map(GoalRow::vs_best).collect();
    let judged_direct: Vec<f64> = rows.iter().filter_map(GoalRow::vs_direct).collect();
    let met_best = judged_best.iter().filter(|v| **v >= GOAL_VS_BEST).count();
    let met_direct = judged_direct
        .iter()
        .filter(|v| **v >= GOAL_VS_DIRECT)
        .count();
    let ahead = rows
        .iter()
        .filter(|r| r.strictly_better() == Some(true))
        .count();
    let all = met_best == judged_best.len()
        && met_direct == judged_direct.len()
        && ahead >= GOAL_STRICTLY_BETTER
        && !judged_direct.is_empty();
    format!(
        "`amber` reaches 0.9x the best specialized policy on {met_best} of {} workloads, 0.95x \
         `direct` on {met_direct} of {}, and is ahead of every specialized policy on {ahead} \
         (goal: {GOAL_STRICTLY_BETTER}): the goals are **{}**.\n",
        judged_best.len(),
        judged_direct.len(),
        if all { "met" } else { "not met" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::RunInfo;
    use crate::seeds::{Scale, Status};
    use crate::stats::summarize;
    use std::path::PathBuf;

    fn rec(bench: &str, target: &str, metric: &str, value: f64) -> Record {
        let policy = target
            .strip_prefix("amberfs:")
            .map_or("-".to_string(), |p| p.to_string());
        Record {
            benchmark: bench.into(),
            target: target.into(),
            policy,
            preset: "pcm".into(),
            threads: 1,
            metric: metric.into(),
            value,
            unit: "ops/s".into(),
            summary: summarize(&[value]),
            notes: Vec::new(),
        }
    }

    fn run(name: &str, e: Experiment, goal: Goal, records: Vec<Record>) -> RunResult {
        RunResult {
            experiment: e,
            name: name.into(),
            what: "fabricated".into(),
            goal,
            records,
        }
    }

    /// LAWN's 128 B and 1 KiB runs, `amber` included when `amber` is set.
    fn lawn_runs(amber: bool) -> Vec<RunResult> {
        let mut runs = Vec::new();
        // (run, cow, finelog, lawn, amber, lawn's charged lines per write)
        for (name, cow, finelog, lawn, amber_v, lawn_lines) in [
            ("lawn-randwrite-128B", 100.0, 300.0, 800.0, 900.0, 5.0),
            ("lawn-randwrite-1KiB", 100.0, 150.0, 210.0, 200.0, 30.0),
        ] {
            let mut records = vec![
                rec("randwrite", "amberfs:nova", "throughput", cow),
                rec("randwrite", "amberfs:nova", "pm_bytes_per_write", 4232.0),
                rec("randwrite", "amberfs:nova", "charged_lines_per_write", 66.0),
                rec(
                    "randwrite",
                    "amberfs:lawn",
                    "charged_lines_per_write",
                    lawn_lines,
                ),
                rec("randwrite", "amberfs:cow", "charged_lines_per_write", 65.0),
                rec(
                    "randwrite",
                    "amberfs:finelog",
                    "charged_lines_per_write",
                    40.0,
                ),
                rec("randwrite", "amberfs:cow", "throughput", cow),
                rec("randwrite", "amberfs:finelog", "throughput", finelog),
                rec("randwrite", "amberfs:direct", "throughput", 1000.0),
                rec("randwrite", "amberfs:lawn", "throughput", lawn),
                rec("randwrite", "amberfs:cow", "pm_bytes_per_write", 4168.0),
                rec("randwrite", "amberfs:finelog", "pm_bytes_per_write", 2664.0),
                rec("randwrite", "amberfs:lawn", "pm_bytes_per_write", 1288.0),
            ];
            if amber {
                records.push(rec("randwrite", "amberfs:amber", "throughput", amber_v));
            }
            runs.push(run(
                name,
                Experiment::Lawn,
                Goal::Metric("throughput"),
                records,
            ));
        }
        runs
    }

    fn config() -> Config {
        Config {
            experiments: vec![Experiment::Lawn, Experiment::Legacy],
            scale: Scale::quick(),
            mode: "quick".into(),
            pool_dir: PathBuf::from("/dev/shm"),
            out: PathBuf::from("docs/results.md"),
            plots_dir: PathBuf::from("docs/plots"),
            records_dir: PathBuf::from("docs/results/seeds"),
            info: RunInfo::collect("amberfs bench seeds --quick".into(), "clwb".into()),
            estimate: Duration::from_secs(200),
        }
    }

    fn outcome(runs: Vec<RunResult>, amber: bool) -> Outcome {
        Outcome {
            runs,
            status: vec![
                (Experiment::Hinfs, Status::NotSelected, Duration::ZERO),
                (Experiment::Lawn, Status::Done, Duration::from_secs(20)),
                (Experiment::Hunter, Status::NotSelected, Duration::ZERO),
                (
                    Experiment::Legacy,
                    Status::Skipped("needs root to create loop devices".into()),
                    Duration::ZERO,
                ),
                (
                    Experiment::Iozone,
                    Status::Failed("iozone: disk full".into()),
                    Duration::from_secs(3),
                ),
            ],
            plots: vec![(
                Experiment::Lawn,
                PathBuf::from("docs/plots/seeds-lawn-bytes.png"),
            )],
            amber,
            elapsed: Duration::from_secs(150),
        }
    }

    fn row<'a>(md: &'a str, starts: &str, containing: &str) -> &'a str {
        md.lines()
            .find(|l| l.starts_with(starts) && l.contains(containing))
            .unwrap_or_else(|| panic!("no row {starts:?} with {containing:?} in\n{md}"))
    }

    #[test]
    fn goal_rows_put_amber_beside_the_best_specialized_policy_and_direct() {
        let runs = lawn_runs(true);
        let rows = goal_rows(&runs);
        assert_eq!(rows.len(), 2, "one row per run, throughput only");
        assert_eq!(rows[0].workload, "lawn-randwrite-128B");
        assert_eq!(rows[0].best, Some(("amberfs:lawn".into(), 800.0)));
        assert_eq!(rows[0].vs_best(), Some(900.0 / 800.0));
        assert_eq!(rows[0].vs_direct(), Some(0.9));
        assert_eq!(rows[0].strictly_better(), Some(true));
        assert_eq!(rows[1].strictly_better(), Some(false));
        let without = goal_rows(&lawn_runs(false));
        assert_eq!(without[0].amber, None);
        assert_eq!(without[0].vs_best(), None);
        assert_eq!(without[0].strictly_better(), None);
    }

    #[test]
    fn a_run_of_several_workloads_gets_a_row_per_workload_and_recovery_none() {
        let legacy = run(
            "legacy-dram",
            Experiment::Legacy,
            Goal::Metric("throughput"),
            vec![
                rec("fileserver", "amberfs:direct", "throughput", 10.0),
                rec("fileserver", "ext4", "throughput", 30.0),
                rec("webserver", "amberfs:direct", "throughput", 10.0),
            ],
        );
        let recovery = run(
            "hunter-recovery-dram",
            Experiment::Hunter,
            Goal::None,
            vec![rec("recovery", "amberfs:hunter", "mount_crash_ms", 5.0)],
        );
        let rows = goal_rows(&[legacy, recovery]);
        let names: Vec<&str> = rows.iter().map(|r| r.workload.as_str()).collect();
        assert_eq!(names, ["legacy-dram fileserver", "legacy-dram webserver"]);
        assert_eq!(rows[0].best, None, "a kernel file system is not a policy");
        assert_eq!(rows[0].direct, Some(10.0));
    }

    #[test]
    fn report_has_every_claim_and_says_why_some_were_not_measured() {
        let md = render(
            &config(),
            &outcome(lawn_runs(false), false),
            Some("abc1234"),
        );
        assert!(md.contains("commit `abc1234`"));
        assert!(md.contains("the whole run took **2 min 30 s**"));
        assert!(md.contains("`amber`: **not in this build**"));
        for c in CLAIMS {
            assert!(md.contains(&cell(c.claim)), "claim missing: {}", c.claim);
        }
        let r = row(&md, "| LAWN", "12.0x ... that of NOVA");
        assert!(
            r.contains("**8.00x** (amberfs:lawn 800 vs amberfs:nova 100 ops/s"),
            "{r}"
        );
        assert!(r.contains("bound 13.20x (66.0 vs 5.0 lines charged"), "{r}");
        assert!(r.contains("| yes (≥ 8x) |"), "{r}");
        let r = row(&md, "| LAWN", "The same 128 B writes against `cow`");
        assert!(r.contains("**no** (≥ 12x)"), "{r}");
        // 2.10x against a goal of 5.6x that the lines put out of reach
        // (2.20x): within 10% of the bound.
        let r = row(&md, "| LAWN", "5.6x");
        assert!(
            r.contains("within 10% of the bound (≥ 5.6x, beyond the bound)"),
            "{r}"
        );
        let r = row(&md, "| LAWN", "Fine-log\" (0.462x");
        assert!(r.contains("| yes (≤ 0.5x) |"), "{r}");
        let r = row(&md, "| LAWN", "1.9x that of");
        assert!(
            r.contains("**2.67x**") && r.contains("| yes (≥ 1.9x) |"),
            "{r}"
        );
        let r = row(&md, "| LAWN", "75.3%");
        assert!(
            r.contains("**0.30x**") && r.contains("**no** (≤ 0.25x)"),
            "{r}"
        );
        let r = row(&md, "| Legacy", "Webproxy");
        assert!(
            r.contains("skipped: needs root to create loop devices"),
            "{r}"
        );
        let r = row(&md, "| HiNFS", "Varmail");
        assert!(r.contains("not run (not in `--only`)"), "{r}");
        let r = row(&md, "| NVMFS", "msync");
        assert!(r.contains("failed: iozone: disk full"), "{r}");
        let r = row(&md, "| lawn-randwrite-128B", "throughput");
        assert!(
            r.contains("not in this build") && r.contains("amberfs:lawn 800"),
            "{r}"
        );
        assert!(md.contains("cannot be judged until `amber` is in the build"));
        assert!(md.contains("![seeds-lawn-bytes](plots/seeds-lawn-bytes.png)"));
        assert!(md.contains("[results/seeds/lawn-randwrite-1KiB.json]"));
        assert!(md.contains("Skipped: needs root to create loop devices."));
    }

    #[test]
    fn with_amber_the_report_judges_each_goal() {
        let md = render(&config(), &outcome(lawn_runs(true), true), None);
        assert!(md.contains("`amber`: in this build"));
        let r = row(&md, "| lawn-randwrite-128B", "throughput");
        assert!(
            r.contains("| 1.12x (met) | 0.90x (**not met**) | yes |"),
            "{r}"
        );
        let r = row(&md, "| lawn-randwrite-1KiB", "throughput");
        assert!(
            r.contains("| 0.95x (met) | 0.20x (**not met**) | no |"),
            "{r}"
        );
        assert!(md.contains("ahead of every specialized policy on 1 (goal: 3)"));
        assert!(md.contains("the goals are **not met**"));
    }

    #[test]
    fn dates_are_civil() {
        assert_eq!(date(0), "1970-01-01");
        assert_eq!(date(1_700_000_000), "2023-11-14");
        assert_eq!(date(951_782_400), "2000-02-29");
    }
}
