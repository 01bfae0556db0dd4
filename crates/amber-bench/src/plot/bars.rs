//! Grouped bars normalized to a baseline, as the papers draw their
//! workload figures: one group per benchmark (or workload), one bar per
//! target, height = the target's value / the baseline's value in that
//! group, with a dashed line at 1.0 so "faster than the baseline" reads
//! at a glance.

use super::{
    fit, frame, number, text_width, Anchor, Color, Frame, Scene, Shape, PALETTE, PLOT_WIDTH,
};
use crate::record::Record;

/// One group: its label and each target's normalized value.
struct Group {
    label: String,
    baseline: String,
    bars: Vec<(usize, f64)>,
}

/// Groups by (benchmark, metric, threads) in order of first appearance;
/// the label names the metric and thread count only where a benchmark has
/// several, so the common case stays short.
fn group_keys(records: &[Record]) -> Vec<((String, String, u32), String)> {
    let mut keys: Vec<((String, String, u32), String)> = Vec::new();
    for r in records {
        let key = (r.benchmark.clone(), r.metric.clone(), r.threads);
        if keys.iter().any(|(k, _)| *k == key) {
            continue;
        }
        let same_bench = records.iter().filter(|o| o.benchmark == r.benchmark);
        let metrics = same_bench.clone().any(|o| o.metric != r.metric);
        let threads = same_bench.clone().any(|o| o.threads != r.threads) || r.threads != 1;
        let mut label = r.benchmark.clone();
        if metrics {
            label = format!("{label} {}", r.metric);
        }
        if threads {
            label = format!("{label} {}thr", r.threads);
        }
        keys.push((key, label));
    }
    keys
}

/// Lays out the figure. `baseline` names the target every group is divided
/// by (groups without it are left out and named in the returned notes);
/// `None` takes each group's first record, the convention of every suite
/// that measures its baseline first. Fails when no group is left.
pub fn bars(
    records: &[Record],
    baseline: Option<&str>,
    title: &str,
) -> Result<(Scene, Vec<String>), String> {
    let mut targets: Vec<String> = Vec::new();
    for r in records {
        if !targets.contains(&r.target) {
            targets.push(r.target.clone());
        }
    }
    let (groups, notes) = normalize(records, baseline, &targets);
    if groups.is_empty() {
        return Err(match baseline {
            Some(b) => format!("no benchmark has a record for the baseline target {b:?}"),
            None => "no records to plot".into(),
        });
    }
    // Targets that only appear in left-out groups get no legend entry.
    let used: Vec<usize> = (0..targets.len())
        .filter(|t| groups.iter().any(|g| g.bars.iter().any(|(i, _)| i == t)))
        .collect();
    let legend: Vec<(String, Color)> = used
        .iter()
        .map(|t| (targets[*t].clone(), PALETTE[*t % PALETTE.len()]))
        .collect();
    let base_name = if groups.iter().all(|g| g.baseline == groups[0].baseline) {
        groups[0].baseline.clone()
    } else {
        "each group's first target".into()
    };
    let metric = if records.iter().all(|r| r.metric == records[0].metric) {
        records[0].metric.clone()
    } else {
        "value".into()
    };
    let y_max = groups
        .iter()
        .flat_map(|g| g.bars.iter().map(|(_, v)| *v))
        .fold(1.0, f64::max);
    let (mut s, f) = frame(
        title,
        &format!("{metric} relative to {base_name}"),
        "benchmark",
        y_max,
        &legend,
    );
    let group_w = PLOT_WIDTH / groups.len() as f32;
    let per_group = used.len().max(1) as f32;
    let bar_w = (group_w * 0.8 / per_group).min(56.0);
    for (gi, g) in groups.iter().enumerate() {
        let center = f.left + (gi as f32 + 0.5) * group_w;
        draw_group(&mut s, &f, g, center, group_w, bar_w);
    }
    s.shapes.push(Shape::Line {
        x1: f.left,
        y1: f.y(1.0),
        x2: f.right,
        y2: f.y(1.0),
        width: 1.0,
        color: Color::BLACK,
        dashed: true,
    });
    Ok((s, notes))
}

/// Each group's values divided by its baseline's, and a note for each
/// group left out for want of a usable baseline value.
fn normalize(
    records: &[Record],
    baseline: Option<&str>,
    targets: &[String],
) -> (Vec<Group>, Vec<String>) {
    let mut groups = Vec::new();
    let mut notes = Vec::new();
    for (key, label) in group_keys(records) {
        let members: Vec<&Record> = records
            .iter()
            .filter(|r| {
                (r.benchmark.as_str(), r.metric.as_str(), r.threads) == (&key.0, &key.1, key.2)
            })
            .collect();
        let base = match baseline {
            Some(b) => members.iter().find(|r| r.target == b),
            None => members.first(),
        };
        let Some(base) = base.filter(|b| b.value != 0.0 && b.value.is_finite()) else {
            notes.push(format!(
                "{label}: no nonzero value for the baseline, left out"
            ));
            continue;
        };
        let mut bars: Vec<(usize, f64)> = Vec::new();
        for r in &members {
            let t = targets.iter().position(|t| *t == r.target).expect("listed");
            if !bars.iter().any(|(i, _)| *i == t) {
                bars.push((t, r.value / base.value));
            }
        }
        bars.sort_by_key(|(t, _)| *t);
        groups.push(Group {
            label,
            baseline: base.target.clone(),
            bars,
        });
    }
    (groups, notes)
}

/// One group's bars, each labelled with its value, and the group's label
/// under them, centred at `center`.
fn draw_group(s: &mut Scene, f: &Frame, g: &Group, center: f32, group_w: f32, bar_w: f32) {
    let first = center - bar_w * g.bars.len() as f32 / 2.0;
    for (bi, (t, v)) in g.bars.iter().enumerate() {
        let x = first + bi as f32 * bar_w;
        let top = f.y(*v);
        s.shapes.push(Shape::Rect {
            x: x + 1.0,
            y: top,
            w: bar_w - 2.0,
            h: f.bottom - top,
            fill: PALETTE[*t % PALETTE.len()],
        });
        let label = number(*v);
        let vertical = text_width(&label, 10.0) > bar_w;
        s.shapes.push(Shape::Text {
            x: x + bar_w / 2.0 + if vertical { 3.5 } else { 0.0 },
            y: top - 4.0,
            size: 10.0,
            anchor: if vertical {
                Anchor::Start
            } else {
                Anchor::Middle
            },
            vertical,
            color: Color::TEXT,
            text: label,
        });
    }
    for (i, line) in wrap(&g.label, 11.0, group_w - 4.0).iter().enumerate() {
        s.text(
            center,
            f.bottom + 18.0 + 14.0 * i as f32,
            11.0,
            Anchor::Middle,
            line,
        );
    }
}

/// A group label on at most two lines: split at the space or dash nearest
/// the middle when one line is too wide, then shortened to fit.
fn wrap(label: &str, size: f32, width: f32) -> Vec<String> {
    if text_width(label, size) <= width {
        return vec![label.to_string()];
    }
    let mid = label.len() / 2;
    let split = label
        .char_indices()
        .filter(|(_, c)| *c == ' ' || *c == '-')
        .min_by_key(|(i, _)| i.abs_diff(mid));
    match split {
        Some((i, c)) => {
            let head = if c == '-' { &label[..=i] } else { &label[..i] };
            vec![fit(head, size, width), fit(&label[i + 1..], size, width)]
        }
        None => vec![fit(label, size, width)],
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::stats::summarize;

    pub(crate) fn rec(bench: &str, target: &str, threads: u32, value: f64) -> Record {
        Record {
            benchmark: bench.into(),
            target: target.into(),
            policy: "-".into(),
            preset: "dram".into(),
            threads,
            metric: "ops".into(),
            value,
            unit: "ops/s".into(),
            summary: summarize(&[value]),
            notes: vec![],
        }
    }

    fn rect_heights(s: &Scene) -> Vec<f32> {
        s.shapes
            .iter()
            .filter_map(|sh| match sh {
                Shape::Rect { h, w, .. } if *w < 100.0 && *h > 12.0 => Some(*h),
                _ => None,
            })
            .collect()
    }

    fn texts(s: &Scene) -> Vec<String> {
        s.shapes
            .iter()
            .filter_map(|sh| match sh {
                Shape::Text { text, .. } => Some(text.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn bars_are_normalized_to_the_named_baseline() {
        let records = vec![
            rec("fileserver", "ext4", 1, 100.0),
            rec("fileserver", "amberfs:direct", 1, 250.0),
            rec("varmail", "amberfs:direct", 1, 30.0),
            rec("varmail", "ext4", 1, 10.0),
            rec("webserver", "xfs", 1, 5.0),
        ];
        let (s, notes) = bars(&records, Some("ext4"), "t").unwrap();
        assert_eq!(notes.len(), 1, "webserver has no ext4: {notes:?}");
        let t = texts(&s);
        for want in ["2.5", "3", "fileserver", "varmail", "ops relative to ext4"] {
            assert!(t.iter().any(|x| x == want), "{want} missing from {t:?}");
        }
        assert!(!t.iter().any(|x| x == "xfs"), "unused target in legend");
        let h = rect_heights(&s);
        assert_eq!(h.len(), 4, "four bars (legend swatches are shorter): {h:?}");
        // ext4 (1.0) is drawn before amberfs in both groups: target order.
        assert!((h[0] * 2.5 - h[1]).abs() < 0.5, "{h:?}");
        assert!(s
            .shapes
            .iter()
            .any(|sh| matches!(sh, Shape::Line { dashed: true, .. })));
    }

    #[test]
    fn default_baseline_is_each_groups_first_and_threads_are_labelled() {
        let records = vec![
            rec("append", "bare", 1, 2.0),
            rec("append", "amber", 1, 1.0),
            rec("append", "bare", 2, 4.0),
            rec("append", "amber", 2, 3.0),
        ];
        let (s, _) = bars(&records, None, "t").unwrap();
        let t = texts(&s);
        assert!(t.contains(&"append 1thr".to_string()), "{t:?}");
        assert!(t.contains(&"append 2thr".to_string()));
        assert!(t.contains(&"0.75".to_string()));
        assert!(t.contains(&"ops relative to bare".to_string()));
        assert!(bars(&records, Some("nope"), "t").is_err());
        assert!(bars(&[], None, "t").is_err());
    }

    #[test]
    fn long_labels_wrap_onto_two_lines() {
        let w = wrap("rand-overwrite-128b-fsync", 11.0, 80.0);
        assert_eq!(w.len(), 2);
        assert!(w.iter().all(|l| text_width(l, 11.0) <= 80.0), "{w:?}");
    }
}
