//! Lines over a parameter, one per target, as the papers draw scaling with
//! I/O size, thread count or emulated write latency. The x values are
//! placed evenly in sorted order (not to scale): the papers' sweeps double
//! (64 B ... 16 MiB, 1 ... 16 threads), so even spacing is a log scale
//! without gaps where the sweep skips a value.

use super::{frame, number, Anchor, Color, Shape, PALETTE, PLOT_WIDTH};
use crate::plot::Scene;
use crate::record::Record;
use std::str::FromStr;

/// Which record fact is the x value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XParam {
    /// `Record::threads`.
    Threads,
    /// A note `io_size=BYTES` or `record_bytes=BYTES` (a plain number or
    /// with a K, M or G suffix,
    /// binary), which the suites that sweep I/O sizes attach.
    IoSize,
    /// A note `file_size=BYTES` (the workload suites attach it), as
    /// HUNTER draws populate bandwidth over the file size.
    FileSize,
    /// A note `write_latency_ns=NS`, or else the write latency of the
    /// record's emulator preset.
    Latency,
}

impl FromStr for XParam {
    type Err = String;
    fn from_str(s: &str) -> Result<XParam, String> {
        match s {
            "threads" => Ok(XParam::Threads),
            "io_size" | "io-size" => Ok(XParam::IoSize),
            "file_size" | "file-size" => Ok(XParam::FileSize),
            "latency" => Ok(XParam::Latency),
            _ => Err(format!(
                "unknown x {s:?}: expected threads, io_size, file_size or latency"
            )),
        }
    }
}

/// A note's byte count, in the one size grammar (`amber_core::units`).
fn bytes(text: &str) -> Option<f64> {
    amber_core::units::parse_size(text).ok().map(|b| b as f64)
}

impl XParam {
    /// The record's x value, if it has one.
    pub fn of(self, r: &Record) -> Option<f64> {
        match self {
            XParam::Threads => Some(r.threads as f64),
            // The iozone suite names its record size `record_bytes`.
            XParam::IoSize => r
                .note("io_size")
                .or_else(|| r.note("record_bytes"))
                .and_then(|v| bytes(&v)),
            XParam::FileSize => r.note("file_size").and_then(|v| bytes(&v)),
            XParam::Latency => r
                .note("write_latency_ns")
                .and_then(|v| v.parse().ok())
                .or_else(|| {
                    let spec = amber_pmem::EmulatorSpec::parse(&r.preset).ok()?;
                    Some(spec.latency_ns as f64)
                }),
        }
    }

    fn axis(self) -> &'static str {
        match self {
            XParam::Threads => "threads",
            XParam::IoSize => "I/O size (bytes)",
            XParam::FileSize => "file size (bytes)",
            XParam::Latency => "emulated write latency (ns)",
        }
    }

    fn tick(self, v: f64) -> String {
        if !matches!(self, XParam::IoSize | XParam::FileSize) {
            return number(v);
        }
        let units = [(1u64 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")];
        for (m, s) in units {
            if v >= m as f64 {
                return format!("{}{s}", number(v / m as f64));
            }
        }
        number(v)
    }
}

/// A series' label: only the parts (benchmark, metric, target) that tell
/// it apart from the others.
fn labels(keys: &[(String, String, String)]) -> Vec<String> {
    let differs =
        |f: fn(&(String, String, String)) -> &String| keys.iter().any(|k| f(k) != f(&keys[0]));
    let (b, m) = (differs(|k| &k.0), differs(|k| &k.1));
    keys.iter()
        .map(|k| {
            let mut parts = Vec::new();
            if b {
                parts.push(k.0.clone());
            }
            if m {
                parts.push(k.1.clone());
            }
            parts.push(k.2.clone());
            parts.join(" ")
        })
        .collect()
}

/// What tells one line from another: (benchmark, metric, target).
type SeriesKey = (String, String, String);

/// The series, one per (benchmark, metric, target) in order of first
/// appearance, each with its points as (index into `xs`, value); the
/// first record at an x wins.
fn series(with_x: &[(f64, &Record)], xs: &[f64]) -> (Vec<SeriesKey>, Vec<Vec<(usize, f64)>>) {
    let mut keys: Vec<SeriesKey> = Vec::new();
    let mut points: Vec<Vec<(usize, f64)>> = Vec::new();
    for (v, r) in with_x {
        let key = (r.benchmark.clone(), r.metric.clone(), r.target.clone());
        let si = keys.iter().position(|k| *k == key).unwrap_or_else(|| {
            keys.push(key);
            points.push(Vec::new());
            keys.len() - 1
        });
        let xi = xs.iter().position(|x| x == v).expect("listed");
        if !points[si].iter().any(|(i, _)| *i == xi) {
            points[si].push((xi, r.value));
        }
    }
    (keys, points)
}

/// Lays out the figure: one line per (benchmark, metric, target), over
/// `x`. Records without an x value are left out and counted in the
/// returned notes; fails when none has one.
pub fn lines(records: &[Record], x: XParam, title: &str) -> Result<(Scene, Vec<String>), String> {
    let with_x: Vec<(f64, &Record)> = records
        .iter()
        .filter_map(|r| x.of(r).map(|v| (v, r)))
        .collect();
    let mut notes = Vec::new();
    if with_x.len() < records.len() {
        notes.push(format!(
            "{} of {} records have no {} value, left out",
            records.len() - with_x.len(),
            records.len(),
            x.axis()
        ));
    }
    if with_x.is_empty() {
        return Err(format!("no record has a value for x = {}", x.axis()));
    }
    let mut xs: Vec<f64> = with_x.iter().map(|(v, _)| *v).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let (keys, mut points) = series(&with_x, &xs);
    let legend: Vec<(String, Color)> = labels(&keys)
        .into_iter()
        .enumerate()
        .map(|(i, l)| (l, PALETTE[i % PALETTE.len()]))
        .collect();
    let (_, first) = with_x[0];
    let same = |f: fn(&Record) -> &String| with_x.iter().all(|(_, r)| f(r) == f(first));
    let y_label = match (same(|r| &r.metric), same(|r| &r.unit)) {
        (true, true) => format!("{} ({})", first.metric, first.unit),
        (false, true) => format!("value ({})", first.unit),
        _ => "value".into(),
    };
    let y_max = with_x.iter().map(|(_, r)| r.value).fold(0.0, f64::max);
    let (mut s, f) = frame(title, &y_label, x.axis(), y_max, &legend);
    let step = PLOT_WIDTH / xs.len() as f32;
    let px = |i: usize| f.left + (i as f32 + 0.5) * step;
    for (i, v) in xs.iter().enumerate() {
        s.line(
            (px(i), f.bottom),
            (px(i), f.bottom + 5.0),
            1.0,
            Color::BLACK,
        );
        s.text(px(i), f.bottom + 19.0, 11.0, Anchor::Middle, &x.tick(*v));
    }
    for (si, pts) in points.iter_mut().enumerate() {
        pts.sort_by_key(|(i, _)| *i);
        let color = PALETTE[si % PALETTE.len()];
        for w in pts.windows(2) {
            s.line(
                (px(w[0].0), f.y(w[0].1)),
                (px(w[1].0), f.y(w[1].1)),
                2.0,
                color,
            );
        }
        for (i, v) in pts.iter() {
            s.shapes.push(Shape::Circle {
                cx: px(*i),
                cy: f.y(*v),
                r: 3.5,
                fill: color,
            });
        }
    }
    Ok((s, notes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plot::bars::tests::rec;

    #[test]
    fn x_values_come_from_threads_notes_or_preset() {
        let mut r = rec("b", "t", 4, 1.0);
        assert_eq!(XParam::Threads.of(&r), Some(4.0));
        assert_eq!(XParam::IoSize.of(&r), None);
        r.notes.push("io_size=4K".into());
        assert_eq!(XParam::IoSize.of(&r), Some(4096.0));
        r.notes = vec!["io_size=64; other".into()];
        assert_eq!(XParam::IoSize.of(&r), Some(64.0));
        r.preset = "pcm".into();
        let pcm = amber_pmem::EmulatorSpec::parse("pcm").unwrap().latency_ns as f64;
        assert_eq!(XParam::Latency.of(&r), Some(pcm));
        r.notes.push("write_latency_ns=700".into());
        assert_eq!(XParam::Latency.of(&r), Some(700.0));
        r.preset = "-".into();
        r.notes.clear();
        assert_eq!(XParam::Latency.of(&r), None);
        assert_eq!(XParam::IoSize.tick(1048576.0), "1M");
        assert_eq!(XParam::IoSize.tick(128.0), "128");
        assert_eq!("io_size".parse::<XParam>(), Ok(XParam::IoSize));
        assert_eq!("file_size".parse::<XParam>(), Ok(XParam::FileSize));
        r.notes = vec!["files=1 file_size=67108864 io_size=4096".into()];
        assert_eq!(XParam::FileSize.of(&r), Some(67108864.0));
        assert_eq!(XParam::FileSize.tick(67108864.0), "64M");
        assert!("size".parse::<XParam>().is_err());
    }

    #[test]
    fn one_line_per_target_in_x_order() {
        let records = vec![
            rec("append", "amber", 2, 3.0),
            rec("append", "amber", 1, 2.0),
            rec("append", "bare", 1, 4.0),
            rec("append", "bare", 2, 7.5),
        ];
        let (s, notes) = lines(&records, XParam::Threads, "scaling").unwrap();
        assert!(notes.is_empty());
        let segs = s
            .shapes
            .iter()
            .filter(|sh| matches!(sh, Shape::Line { width, .. } if *width == 2.0))
            .count();
        assert_eq!(segs, 2, "one segment per series");
        let dots: Vec<(f32, f32)> = s
            .shapes
            .iter()
            .filter_map(|sh| match sh {
                Shape::Circle { cx, cy, .. } => Some((*cx, *cy)),
                _ => None,
            })
            .collect();
        assert_eq!(dots.len(), 4);
        assert!(dots[0].0 < dots[1].0, "sorted by x");
        assert!(dots[0].1 > dots[1].1, "2.0 lower on screen than 3.0");
        let texts: Vec<&str> = s
            .shapes
            .iter()
            .filter_map(|sh| match sh {
                Shape::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        for want in ["amber", "bare", "ops (ops/s)", "threads", "1", "2"] {
            assert!(texts.contains(&want), "{want} missing: {texts:?}");
        }
        assert!(lines(&records, XParam::IoSize, "t").is_err());
    }
}
