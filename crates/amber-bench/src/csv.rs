//! Records as CSV, for spreadsheets and plotting tools that do not read
//! JSON. The run's facts go first as `#` comment lines so a CSV file alone
//! still says how to reproduce it; most CSV readers skip such lines (pandas
//! with `comment='#'`, R with `comment.char`).

use crate::record::{Record, RunInfo};
use std::fmt::Write as _;

/// The columns, in order: every field of [`Record`] with the summary
/// flattened and the notes joined by "; ".
pub const HEADER: [&str; 14] = [
    "benchmark",
    "target",
    "policy",
    "preset",
    "threads",
    "metric",
    "value",
    "unit",
    "median",
    "min",
    "max",
    "rsd_percent",
    "samples",
    "notes",
];

/// Quotes a field only when it must be (RFC 4180): a comma, quote or line
/// break inside, or spaces at either end that a reader would trim.
pub fn field(s: &str) -> String {
    let needs = s.contains([',', '"', '\n', '\r'])
        || s.starts_with([' ', '\t'])
        || s.ends_with([' ', '\t'])
        || s.starts_with('#');
    if needs {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn row(fields: &[String]) -> String {
    let cells: Vec<String> = fields.iter().map(|f| field(f)).collect();
    cells.join(",")
}

/// One comment line; line breaks inside a value would end the comment and
/// start a bogus data row, so they become spaces.
fn comment(out: &mut String, key: &str, value: &str) {
    let value = value.replace(['\n', '\r'], " ");
    let _ = writeln!(out, "# {key}: {value}");
}

/// The whole file: run facts as comments, the header, one row per record.
pub fn to_csv(run: &RunInfo, records: &[Record]) -> String {
    let mut out = String::new();
    comment(&mut out, "command", &run.command);
    comment(&mut out, "cpu_model", &run.cpu_model);
    comment(&mut out, "cores", &run.cores.to_string());
    comment(&mut out, "memory_bytes", &run.memory_bytes.to_string());
    comment(&mut out, "flush", &run.flush);
    comment(&mut out, "date_unix", &run.date_unix.to_string());
    comment(&mut out, "version", &run.version);
    out.push_str(&HEADER.join(","));
    out.push('\n');
    for r in records {
        let s = &r.summary;
        out.push_str(&row(&[
            r.benchmark.clone(),
            r.target.clone(),
            r.policy.clone(),
            r.preset.clone(),
            r.threads.to_string(),
            r.metric.clone(),
            r.value.to_string(),
            r.unit.clone(),
            s.median.to_string(),
            s.min.to_string(),
            s.max.to_string(),
            s.rsd_percent.to_string(),
            s.samples.to_string(),
            r.notes.join("; "),
        ]));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::summarize;

    /// A strict RFC 4180 reader for the test: splits the data rows (after
    /// the comments) into fields.
    fn parse(text: &str) -> Vec<Vec<String>> {
        let body: String = text
            .split_inclusive('\n')
            .skip_while(|l| l.starts_with('#'))
            .collect();
        let (mut rows, mut row, mut cur) = (Vec::new(), Vec::new(), String::new());
        let mut chars = body.chars().peekable();
        let mut quoted = false;
        while let Some(c) = chars.next() {
            match (quoted, c) {
                (true, '"') if chars.peek() == Some(&'"') => {
                    chars.next();
                    cur.push('"');
                }
                (true, '"') => quoted = false,
                (true, c) => cur.push(c),
                (false, '"') if cur.is_empty() => quoted = true,
                (false, ',') => row.push(std::mem::take(&mut cur)),
                (false, '\n') => {
                    row.push(std::mem::take(&mut cur));
                    rows.push(std::mem::take(&mut row));
                }
                (false, c) => cur.push(c),
            }
        }
        assert!(!quoted, "unterminated quote");
        rows
    }

    fn run() -> RunInfo {
        RunInfo {
            command: "amberfs bench x\n--evil".into(),
            cpu_model: "Test CPU, 2 GHz".into(),
            cores: 2,
            memory_bytes: 1 << 30,
            flush: "clwb".into(),
            date_unix: 1,
            version: "0.1.0".into(),
        }
    }

    fn rec(target: &str, notes: Vec<String>) -> Record {
        Record {
            benchmark: "seq, \"quoted\"".into(),
            target: target.into(),
            policy: "direct".into(),
            preset: "pcm".into(),
            threads: 2,
            metric: "bandwidth".into(),
            value: 1.25,
            unit: "GiB/s".into(),
            summary: summarize(&[1.0, 1.25, 3.5]),
            notes,
        }
    }

    #[test]
    fn quoting_only_when_needed() {
        assert_eq!(field("plain"), "plain");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(field("two\nlines"), "\"two\nlines\"");
        assert_eq!(field(" padded"), "\" padded\"");
        assert_eq!(field("#not a comment"), "\"#not a comment\"");
    }

    #[test]
    fn fields_round_trip() {
        let records = vec![
            rec(
                "amberfs:direct",
                vec!["a=1".into(), "two, with comma".into()],
            ),
            rec("posix:/mnt/\"x\"\ny", vec![]),
        ];
        let text = to_csv(&run(), &records);
        let comments: Vec<&str> = text.lines().take_while(|l| l.starts_with('#')).collect();
        assert_eq!(comments.len(), 7);
        assert!(comments[0].contains("--evil"), "command kept on one line");
        let rows = parse(&text);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0], HEADER);
        for (r, row) in records.iter().zip(&rows[1..]) {
            assert_eq!(row.len(), HEADER.len());
            assert_eq!(row[0], r.benchmark);
            assert_eq!(row[1], r.target);
            assert_eq!(row[4].parse::<u32>().unwrap(), r.threads);
            assert_eq!(row[6].parse::<f64>().unwrap(), r.value);
            assert_eq!(row[9].parse::<f64>().unwrap(), r.summary.min);
            assert_eq!(row[11].parse::<f64>().unwrap(), r.summary.rsd_percent);
            assert_eq!(row[12].parse::<usize>().unwrap(), 3);
            assert_eq!(row[13], r.notes.join("; "));
        }
    }
}
