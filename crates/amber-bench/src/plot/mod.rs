//! Plots of records in the papers' two styles: grouped bars normalized to a
//! baseline ([`bars`]) and lines over a parameter such as I/O size, thread
//! count or emulated write latency ([`lines`]).
//!
//! A plot is first laid out as a [`Scene`] of a few shape kinds; [`svg`]
//! writes the scene as text and [`png`] rasterizes the same scene, so both
//! files show the same figure and neither needs a plotting library.

pub mod bars;
pub mod lines;
pub mod png;
pub mod svg;

use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Color(pub u8, pub u8, pub u8);

impl Color {
    pub const BLACK: Color = Color(0, 0, 0);
    pub const GRID: Color = Color(220, 220, 220);
    pub const TEXT: Color = Color(40, 40, 40);
    pub const WHITE: Color = Color(255, 255, 255);
}

/// Series colours: Okabe-Ito's palette, distinguishable with the common
/// colour-vision deficiencies and in greyscale print.
pub const PALETTE: [Color; 8] = [
    Color(0, 114, 178),
    Color(230, 159, 0),
    Color(0, 158, 115),
    Color(204, 121, 167),
    Color(86, 180, 233),
    Color(213, 94, 0),
    Color(240, 228, 66),
    Color(0, 0, 0),
];

/// Where a text's reference point is along its run, as SVG's
/// `text-anchor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    Start,
    Middle,
    End,
}

/// The shapes a plot is made of. Coordinates are pixels from the top left;
/// a text's `y` is its baseline.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    Rect {
        x: f32,
        y: f32,
        w: f32,
        h: f32,
        fill: Color,
    },
    Line {
        x1: f32,
        y1: f32,
        x2: f32,
        y2: f32,
        width: f32,
        color: Color,
        dashed: bool,
    },
    Circle {
        cx: f32,
        cy: f32,
        r: f32,
        fill: Color,
    },
    Text {
        x: f32,
        y: f32,
        size: f32,
        anchor: Anchor,
        /// Runs bottom to top (rotated -90°), for the y-axis label.
        vertical: bool,
        color: Color,
        text: String,
    },
}

/// A laid-out figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Scene {
    pub width: u32,
    pub height: u32,
    pub shapes: Vec<Shape>,
}

impl Scene {
    fn new(width: u32, height: u32) -> Scene {
        Scene {
            width,
            height,
            shapes: vec![Shape::Rect {
                x: 0.0,
                y: 0.0,
                w: width as f32,
                h: height as f32,
                fill: Color::WHITE,
            }],
        }
    }

    fn text(&mut self, x: f32, y: f32, size: f32, anchor: Anchor, text: &str) {
        self.shapes.push(Shape::Text {
            x,
            y,
            size,
            anchor,
            vertical: false,
            color: Color::TEXT,
            text: text.to_string(),
        });
    }

    fn line(&mut self, (x1, y1): (f32, f32), (x2, y2): (f32, f32), width: f32, color: Color) {
        self.shapes.push(Shape::Line {
            x1,
            y1,
            x2,
            y2,
            width,
            color,
            dashed: false,
        });
    }
}

/// Layout width of a text, estimated from its length: the same estimate
/// serves the SVG (whose viewer picks the font) and the PNG, so labels are
/// placed alike in both. 0.6 em is a sans-serif's average advance.
pub fn text_width(text: &str, size: f32) -> f32 {
    text.chars().count() as f32 * size * 0.6
}

/// Shortens `text` with an ellipsis to fit `width` at `size`.
fn fit(text: &str, size: f32, width: f32) -> String {
    if text_width(text, size) <= width {
        return text.to_string();
    }
    let keep = ((width / (size * 0.6)) as usize).saturating_sub(3).max(1);
    let mut s: String = text.chars().take(keep).collect();
    s.push_str("...");
    s
}

/// Round tick values from 0 to at least `max`: steps of 1, 2, 2.5 or 5
/// times a power of ten, about five of them.
pub fn ticks(max: f64) -> Vec<f64> {
    let max = if max.is_finite() && max > 0.0 {
        max
    } else {
        1.0
    };
    let raw = max / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let n = (max / step - 1e-9).ceil().max(1.0) as usize;
    (0..=n).map(|i| i as f64 * step).collect()
}

/// A tick or value label: few digits, no trailing zeros.
pub fn number(v: f64) -> String {
    let a = v.abs();
    let s = if a == 0.0 {
        return "0".into();
    } else if !(1e-3..1e6).contains(&a) {
        return format!("{v:.2e}");
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// The plot area inside a figure, in pixels.
struct Frame {
    left: f32,
    top: f32,
    right: f32,
    bottom: f32,
    y_max: f64,
}

impl Frame {
    fn y(&self, v: f64) -> f32 {
        self.bottom - ((v / self.y_max) as f32) * (self.bottom - self.top)
    }
}

const FIG_HEIGHT: u32 = 460;
const PLOT_WIDTH: f32 = 640.0;
const LEGEND_SIZE: f32 = 12.0;

/// Draws the title, the y axis with ticks and grid lines, the x axis line
/// and the legend (right of the plot area), and returns the scene and the
/// plot area for the caller's marks.
fn frame(
    title: &str,
    y_label: &str,
    x_label: &str,
    y_data_max: f64,
    legend: &[(String, Color)],
) -> (Scene, Frame) {
    let legend_w = legend
        .iter()
        .map(|(l, _)| text_width(l, LEGEND_SIZE))
        .fold(0.0, f32::max)
        .min(260.0)
        + 40.0;
    let left = 78.0;
    let right = left + PLOT_WIDTH;
    let width = (right + 16.0 + legend_w).ceil() as u32;
    let mut s = Scene::new(width, FIG_HEIGHT);
    let ts = ticks(y_data_max * 1.08);
    let f = Frame {
        left,
        top: 56.0,
        right,
        bottom: FIG_HEIGHT as f32 - 78.0,
        y_max: *ts.last().expect("at least two ticks"),
    };
    s.text(
        width as f32 / 2.0,
        28.0,
        16.0,
        Anchor::Middle,
        &fit(title, 16.0, width as f32 - 20.0),
    );
    for t in &ts {
        let y = f.y(*t);
        s.line((f.left, y), (f.right, y), 1.0, Color::GRID);
        s.line((f.left - 5.0, y), (f.left, y), 1.0, Color::BLACK);
        s.text(f.left - 8.0, y + 4.0, 11.0, Anchor::End, &number(*t));
    }
    s.line((f.left, f.top), (f.left, f.bottom), 1.0, Color::BLACK);
    s.line((f.left, f.bottom), (f.right, f.bottom), 1.0, Color::BLACK);
    s.shapes.push(Shape::Text {
        x: 22.0,
        y: (f.top + f.bottom) / 2.0,
        size: 13.0,
        anchor: Anchor::Middle,
        vertical: true,
        color: Color::TEXT,
        text: fit(y_label, 13.0, f.bottom - f.top + 40.0),
    });
    s.text(
        (f.left + f.right) / 2.0,
        FIG_HEIGHT as f32 - 16.0,
        13.0,
        Anchor::Middle,
        x_label,
    );
    let lx = f.right + 16.0;
    for (i, (label, color)) in legend.iter().enumerate() {
        let y = f.top + 8.0 + i as f32 * 20.0;
        s.shapes.push(Shape::Rect {
            x: lx,
            y: y - 6.0,
            w: 14.0,
            h: 12.0,
            fill: *color,
        });
        s.text(
            lx + 20.0,
            y + 4.0,
            LEGEND_SIZE,
            Anchor::Start,
            &fit(label, LEGEND_SIZE, 260.0),
        );
    }
    (s, f)
}

/// Writes `PREFIX.svg` and `PREFIX.png` and returns their paths.
pub fn write_files(scene: &Scene, prefix: &Path) -> Result<Vec<PathBuf>, String> {
    let with_ext = |ext: &str| {
        let mut p = prefix.as_os_str().to_owned();
        p.push(ext);
        PathBuf::from(p)
    };
    let (svg_path, png_path) = (with_ext(".svg"), with_ext(".png"));
    std::fs::write(&svg_path, svg::to_svg(scene))
        .map_err(|e| format!("cannot write {}: {e}", svg_path.display()))?;
    std::fs::write(&png_path, png::to_png(scene)?)
        .map_err(|e| format!("cannot write {}: {e}", png_path.display()))?;
    Ok(vec![svg_path, png_path])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_maximum() {
        assert_eq!(
            ticks(1.0),
            vec![0.0, 0.2, 0.4, 0.6000000000000001, 0.8, 1.0]
        );
        let t = ticks(3.7);
        assert_eq!(t.first(), Some(&0.0));
        assert!(*t.last().unwrap() >= 3.7 && t.len() <= 7, "{t:?}");
        let t = ticks(12_345.0);
        assert_eq!(t[1], 2500.0);
        assert_eq!(ticks(0.0).last(), Some(&1.0));
    }

    #[test]
    fn numbers_are_short() {
        assert_eq!(number(1.0), "1");
        assert_eq!(number(1.25), "1.25");
        assert_eq!(number(0.5), "0.5");
        assert_eq!(number(12.34), "12.3");
        assert_eq!(number(2500.0), "2500");
        assert_eq!(number(3.0e7), "3.00e7");
    }

    #[test]
    fn long_text_is_shortened() {
        assert_eq!(fit("short", 10.0, 100.0), "short");
        let f = fit("a very long label indeed", 10.0, 60.0);
        assert!(text_width(&f, 10.0) <= 60.01 && f.ends_with("..."), "{f}");
    }
}

#[cfg(test)]
mod file_tests {
    use super::lines::XParam;
    use super::*;
    use crate::record::Results;

    /// A results file in the shape `bench foundation --json` writes.
    const JSON: &str = r#"{
      "run": {"command": "amberfs bench foundation --quick", "cpu_model": "x",
              "cores": 2, "memory_bytes": 1, "flush": "clwb", "date_unix": 0,
              "version": "0.1.0"},
      "records": [
        {"benchmark": "append", "target": "bare", "policy": "-", "preset": "dram",
         "threads": 1, "metric": "bandwidth", "value": 2.0, "unit": "GiB/s",
         "summary": {"median": 2.0, "min": 2.0, "max": 2.0, "rsd_percent": 0.0, "samples": 1}},
        {"benchmark": "append", "target": "amberfs:direct", "policy": "direct",
         "preset": "dram", "threads": 1, "metric": "bandwidth", "value": 1.5,
         "unit": "GiB/s", "notes": ["75.0% of bare"],
         "summary": {"median": 1.5, "min": 1.4, "max": 1.6, "rsd_percent": 3.0, "samples": 3}},
        {"benchmark": "append", "target": "bare", "policy": "-", "preset": "dram",
         "threads": 2, "metric": "bandwidth", "value": 3.5, "unit": "GiB/s",
         "summary": {"median": 3.5, "min": 3.5, "max": 3.5, "rsd_percent": 0.0, "samples": 1}},
        {"benchmark": "append", "target": "amberfs:direct", "policy": "direct",
         "preset": "dram", "threads": 2, "metric": "bandwidth", "value": 2.9,
         "unit": "GiB/s", "ratio_to_first": 0.83,
         "summary": {"median": 2.9, "min": 2.9, "max": 2.9, "rsd_percent": 0.0, "samples": 1}}
      ]
    }"#;

    #[test]
    fn plots_from_a_results_file_as_valid_svg_and_png() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("r.json");
        std::fs::write(&input, JSON).unwrap();
        let results = Results::read(&input).unwrap();
        assert_eq!(results.records.len(), 4);
        assert_eq!(results.records[1].notes, ["75.0% of bare"]);
        let (b, _) = bars::bars(&results.records, Some("bare"), "bars").unwrap();
        let (l, _) = lines::lines(&results.records, XParam::Threads, "lines").unwrap();
        for (scene, name) in [(b, "bars"), (l, "lines")] {
            let files = write_files(&scene, &dir.path().join(name)).unwrap();
            let svg = std::fs::read_to_string(&files[0]).unwrap();
            let tags = svg::tests::check_well_formed(&svg);
            assert!(tags.iter().filter(|t| *t == "text").count() > 8, "{name}");
            let (w, h, rgb) = png::tests::decode(&std::fs::read(&files[1]).unwrap());
            assert_eq!((w, h), (scene.width, scene.height));
            assert!(
                rgb.chunks(3).any(|p| p == [0, 114, 178]),
                "first series colour"
            );
            assert!(
                std::fs::metadata(&files[1]).unwrap().len() < 100_000,
                "small PNG"
            );
        }
        // Written back out, the file reads the same.
        let again = dir.path().join("again.json");
        results.write_json(&again).unwrap();
        let back = Results::read(&again).unwrap();
        assert_eq!(back.records[3].value, 2.9);
        assert_eq!(back.run.command, results.run.command);
    }
}
