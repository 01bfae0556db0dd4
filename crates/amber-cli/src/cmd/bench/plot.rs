//! `amberfs bench plot`: a results file as the papers' figures (grouped
//! bars normalized to a baseline, or lines over a parameter), as SVG and
//! PNG, plus the records as CSV beside them.

use std::path::PathBuf;
use std::process::ExitCode;

use amber_bench::plot::{self, bars::bars, lines::lines, lines::XParam};
use amber_bench::record::Results;

use crate::common::{warn, CliError, CliResult};
use crate::output::outln;

#[derive(Clone, Copy, clap::ValueEnum)]
enum Kind {
    /// One group per benchmark, one bar per target, divided by the baseline.
    Bars,
    /// One line per target over --x.
    Lines,
}

#[derive(clap::Args)]
pub struct Args {
    /// A results file written by a suite's --json; repeat it to draw
    /// several runs (a sweep, one run per point) in one figure.
    #[arg(long, required = true)]
    input: Vec<PathBuf>,
    #[arg(long, value_enum, default_value = "bars")]
    kind: Kind,
    /// Target every bar is divided by (default: each group's first
    /// target, which every suite measures first).
    #[arg(long)]
    baseline: Option<String>,
    /// The x axis of a lines plot: threads, io_size, file_size or latency.
    #[arg(long, default_value = "threads")]
    x: String,
    /// Only these benchmarks (comma-separated).
    #[arg(long, value_delimiter = ',')]
    benchmark: Vec<String>,
    /// Only this metric (e.g. throughput, bandwidth).
    #[arg(long)]
    metric: Option<String>,
    /// Only these thread counts (comma-separated).
    #[arg(long, value_delimiter = ',')]
    threads: Vec<u32>,
    /// Figure title (default: the suite and preset).
    #[arg(long)]
    title: Option<String>,
    /// Writes PREFIX.svg, PREFIX.png and PREFIX.csv.
    #[arg(long)]
    out: PathBuf,
}

pub fn run(a: Args) -> CliResult<ExitCode> {
    let parts = a
        .input
        .iter()
        .map(|p| Results::read(p))
        .collect::<Result<Vec<_>, _>>()
        .map_err(CliError::new)?;
    let mut results = Results::merge(parts).expect("clap requires an --input");
    results.records.retain(|r| {
        (a.benchmark.is_empty() || a.benchmark.contains(&r.benchmark))
            && a.metric.iter().all(|m| *m == r.metric)
            && (a.threads.is_empty() || a.threads.contains(&r.threads))
    });
    if results.records.is_empty() {
        let inputs: Vec<String> = a.input.iter().map(|p| p.display().to_string()).collect();
        return Err(CliError::new(format!(
            "no records in {} match --benchmark/--metric/--threads",
            inputs.join(", ")
        )));
    }
    let title = a.title.unwrap_or_else(|| default_title(&results));
    let (scene, notes) = match a.kind {
        Kind::Bars => bars(&results.records, a.baseline.as_deref(), &title),
        Kind::Lines => {
            let x: XParam =
                a.x.parse()
                    .map_err(|e| CliError::new(format!("--x: {e}")))?;
            lines(&results.records, x, &title)
        }
    }
    .map_err(CliError::new)?;
    for n in notes {
        warn(n);
    }
    let mut csv = a.out.as_os_str().to_owned();
    csv.push(".csv");
    let csv = PathBuf::from(csv);
    results.write_csv(&csv).map_err(CliError::new)?;
    for p in plot::write_files(&scene, &a.out).map_err(CliError::new)? {
        outln!("wrote {}", p.display())?;
    }
    outln!("wrote {}", csv.display())?;
    Ok(ExitCode::SUCCESS)
}

/// "bench foundation, preset dram": the suite from the recorded command
/// and the presets the records ran under.
fn default_title(r: &Results) -> String {
    let words: Vec<&str> = r.run.command.split_whitespace().collect();
    let suite = words
        .iter()
        .position(|w| *w == "bench")
        .and_then(|i| words.get(i + 1))
        .map(|s| format!("bench {s}"))
        .unwrap_or_else(|| "results".into());
    let mut presets: Vec<&str> = r
        .records
        .iter()
        .map(|x| x.preset.as_str())
        .filter(|p| *p != "-")
        .collect();
    presets.sort();
    presets.dedup();
    if presets.is_empty() {
        suite
    } else {
        format!("{suite}, preset {}", presets.join("/"))
    }
}
