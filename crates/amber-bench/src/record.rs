//! Result records: what every benchmark emits, as JSON and as a table.

use crate::stats::Summary;
use serde::{Deserialize, Serialize};

/// One measured metric of one benchmark on one target.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Record {
    pub benchmark: String,
    pub target: String,
    pub policy: String,
    pub preset: String,
    pub threads: u32,
    pub metric: String,
    /// The median.
    pub value: f64,
    pub unit: String,
    pub summary: Summary,
    /// Extra facts (e.g. write amplification), free-form.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl Record {
    /// The value of `key=value` anywhere in the notes (suites pack several
    /// `key=value` facts into one note, separated by spaces, commas or
    /// semicolons): how plots and `bench seeds` find a record's I/O size,
    /// data path or emulated latency.
    pub fn note(&self, key: &str) -> Option<String> {
        self.notes.iter().find_map(|n| {
            n.split([';', ' ', ','])
                .find_map(|tok| tok.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
                .map(str::to_string)
        })
    }
}

/// What a whole run carries so it can be reproduced.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunInfo {
    pub command: String,
    pub cpu_model: String,
    pub cores: usize,
    pub memory_bytes: u64,
    pub flush: String,
    pub date_unix: u64,
    pub version: String,
}

impl RunInfo {
    /// Facts about this machine and this run.
    pub fn collect(command: String, flush: String) -> RunInfo {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| {
                l.strip_prefix("model name")
                    .map(|r| r.trim_start_matches([' ', '\t', ':']))
            })
            .unwrap_or("unknown")
            .to_string();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let memory_bytes = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|r| r.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kb| kb * 1024)
            .unwrap_or(0);
        RunInfo {
            command,
            cpu_model,
            cores: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            memory_bytes,
            flush,
            date_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            version: env!("CARGO_PKG_VERSION").to_string(),
        }
    }
}

/// A results file: the run's facts and its records, as `--json` writes
/// it and `bench plot` reads it back.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Results {
    pub run: RunInfo,
    pub records: Vec<Record>,
}

impl Results {
    pub fn read(path: &std::path::Path) -> Result<Results, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        serde_json::from_str(&text)
            .map_err(|e| format!("{} is not a results file: {e}", path.display()))
    }

    /// Several results files as one, for a figure drawn from several
    /// runs (a sweep run as one command per point): the records in order,
    /// the first run's machine facts, and every run's command line.
    pub fn merge(parts: Vec<Results>) -> Option<Results> {
        let mut parts = parts.into_iter();
        let mut all = parts.next()?;
        for p in parts {
            if !all.run.command.split(" ; ").any(|c| c == p.run.command) {
                all.run.command = format!("{} ; {}", all.run.command, p.run.command);
            }
            all.records.extend(p.records);
        }
        Some(all)
    }

    pub fn write_json(&self, path: &std::path::Path) -> Result<(), String> {
        let text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())?;
        std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    pub fn write_csv(&self, path: &std::path::Path) -> Result<(), String> {
        std::fs::write(path, crate::csv::to_csv(&self.run, &self.records))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))
    }
}

/// Records as an aligned table (no final newline), for the caller to print.
pub fn table(records: &[Record]) -> String {
    let mut lines = vec![format!(
        "{:<22} {:<18} {:<8} {:<28} {:>14} {:<8} {:>7}",
        "benchmark", "target", "preset", "metric", "median", "unit", "rsd%"
    )];
    for r in records {
        lines.push(format!(
            "{:<22} {:<18} {:<8} {:<28} {:>14.3} {:<8} {:>7.1}",
            r.benchmark, r.target, r.preset, r.metric, r.value, r.unit, r.summary.rsd_percent
        ));
        for n in &r.notes {
            lines.push(format!("{:<22} {}", "", n));
        }
    }
    lines.join("\n")
}

/// A byte count for people: `64.0 MiB`, `4.0 KiB`, `512 B`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::summarize;

    fn results(command: &str, targets: &[&str]) -> Results {
        Results {
            run: RunInfo::collect(command.into(), "clwb".into()),
            records: targets
                .iter()
                .map(|t| Record {
                    benchmark: "randwrite".into(),
                    target: t.to_string(),
                    policy: "direct".into(),
                    preset: "pcm".into(),
                    threads: 1,
                    metric: "bandwidth".into(),
                    value: 1.0,
                    unit: "MiB/s".into(),
                    summary: summarize(&[1.0]),
                    notes: vec![command.into()],
                })
                .collect(),
        }
    }

    #[test]
    fn merge_keeps_every_record_and_every_command_once() {
        assert!(Results::merge(Vec::new()).is_none());
        let m = Results::merge(vec![
            results("amberfs bench compare --io-size 128", &["a", "b"]),
            results("amberfs bench compare --io-size 256", &["a"]),
            results("amberfs bench compare --io-size 128", &["c"]),
        ])
        .unwrap();
        let targets: Vec<&str> = m.records.iter().map(|r| r.target.as_str()).collect();
        assert_eq!(targets, ["a", "b", "a", "c"]);
        assert_eq!(
            m.run.command,
            "amberfs bench compare --io-size 128 ; amberfs bench compare --io-size 256"
        );
    }
}
