//! A scene rasterized to PNG by a small renderer of its own: rectangles,
//! lines and dots with anti-aliased edges, and text from a TrueType font
//! (DejaVu Sans or Liberation Sans where installed, or `AMBER_PLOT_FONT`).
//! Without any such font the text falls back to a built-in 8x8 bitmap
//! font, so a plot never fails for want of fonts on a bare CI machine.

use super::{Anchor, Color, Scene, Shape};
use ab_glyph::{point, Font, FontVec, ScaleFont};
use std::path::PathBuf;
use std::sync::OnceLock;

/// Where common distributions install the fonts the SVG also asks for.
const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation-sans/LiberationSans-Regular.ttf",
];

/// The first usable font, loaded once per process.
pub fn system_font() -> Option<&'static FontVec> {
    static FONT: OnceLock<Option<FontVec>> = OnceLock::new();
    FONT.get_or_init(|| {
        let chosen = std::env::var_os("AMBER_PLOT_FONT").map(PathBuf::from);
        chosen
            .into_iter()
            .chain(FONT_PATHS.iter().map(PathBuf::from))
            .find_map(|p| FontVec::try_from_vec(std::fs::read(p).ok()?).ok())
    })
    .as_ref()
}

/// The scene as PNG bytes, with the system font if there is one.
pub fn to_png(scene: &Scene) -> Result<Vec<u8>, String> {
    encode(&rasterize(scene, system_font()))
}

/// An RGB image.
pub struct Canvas {
    pub width: usize,
    pub height: usize,
    pub rgb: Vec<u8>,
}

/// How much of pixel `[p, p+1)` lies inside `[a, b)`.
fn overlap(p: i64, a: f32, b: f32) -> f32 {
    let (p0, p1) = (p as f32, p as f32 + 1.0);
    (b.min(p1) - a.max(p0)).clamp(0.0, 1.0)
}

impl Canvas {
    fn new(width: usize, height: usize) -> Canvas {
        Canvas {
            width,
            height,
            rgb: vec![255; width * height * 3],
        }
    }

    /// Mixes `c` into a pixel with coverage `a`.
    fn blend(&mut self, x: i64, y: i64, c: Color, a: f32) {
        if x < 0 || y < 0 || x >= self.width as i64 || y >= self.height as i64 || a <= 0.0 {
            return;
        }
        let a = a.min(1.0);
        let i = (y as usize * self.width + x as usize) * 3;
        for (k, v) in [c.0, c.1, c.2].into_iter().enumerate() {
            let old = self.rgb[i + k] as f32;
            self.rgb[i + k] = (old + (v as f32 - old) * a).round() as u8;
        }
    }

    /// Pixel rows or columns from `a` to `b`, clipped to `limit`.
    fn span(a: f32, b: f32, limit: usize) -> std::ops::Range<i64> {
        (a.floor().max(0.0) as i64)..(b.ceil().min(limit as f32).max(0.0) as i64)
    }

    fn rect(&mut self, x: f32, y: f32, w: f32, h: f32, c: Color) {
        for py in Self::span(y, y + h, self.height) {
            let cy = overlap(py, y, y + h);
            for px in Self::span(x, x + w, self.width) {
                self.blend(px, py, c, cy * overlap(px, x, x + w));
            }
        }
    }

    /// A line of `width`; horizontal and vertical ones are snapped to the
    /// pixel grid so axes and grid lines come out crisp, not two grey rows.
    fn line(&mut self, (x1, y1): (f32, f32), (x2, y2): (f32, f32), width: f32, c: Color) {
        let snap = |v: f32| (v - width / 2.0).round();
        if y1 == y2 {
            self.rect(x1.min(x2), snap(y1), (x2 - x1).abs(), width, c);
            return;
        }
        if x1 == x2 {
            self.rect(snap(x1), y1.min(y2), width, (y2 - y1).abs(), c);
            return;
        }
        let (dx, dy) = (x2 - x1, y2 - y1);
        let len2 = dx * dx + dy * dy;
        let pad = width / 2.0 + 1.0;
        for py in Self::span(y1.min(y2) - pad, y1.max(y2) + pad, self.height) {
            for px in Self::span(x1.min(x2) - pad, x1.max(x2) + pad, self.width) {
                let (cx, cy) = (px as f32 + 0.5, py as f32 + 0.5);
                let t = (((cx - x1) * dx + (cy - y1) * dy) / len2).clamp(0.0, 1.0);
                let d = ((cx - x1 - t * dx).powi(2) + (cy - y1 - t * dy).powi(2)).sqrt();
                self.blend(px, py, c, width / 2.0 + 0.5 - d);
            }
        }
    }

    fn dashed(&mut self, from: (f32, f32), to: (f32, f32), width: f32, c: Color) {
        let (dx, dy) = (to.0 - from.0, to.1 - from.1);
        let len = (dx * dx + dy * dy).sqrt();
        let (on, period) = (6.0, 10.0);
        let dashes = (len / period).ceil() as usize;
        for i in 0..dashes {
            let a = i as f32 * period / len;
            let b = ((i as f32 * period + on) / len).min(1.0);
            let at = |t: f32| (from.0 + dx * t, from.1 + dy * t);
            self.line(at(a), at(b), width, c);
        }
    }

    fn circle(&mut self, cx: f32, cy: f32, r: f32, c: Color) {
        for py in Self::span(cy - r - 1.0, cy + r + 1.0, self.height) {
            for px in Self::span(cx - r - 1.0, cx + r + 1.0, self.width) {
                let d = ((px as f32 + 0.5 - cx).powi(2) + (py as f32 + 0.5 - cy).powi(2)).sqrt();
                self.blend(px, py, c, r + 0.5 - d);
            }
        }
    }
}

/// A text's coverage, `ascent` pixels above the baseline to below its
/// descenders; `advance` is the run's length.
struct Mask {
    w: usize,
    h: usize,
    ascent: f32,
    advance: f32,
    a: Vec<f32>,
}

impl Mask {
    fn new(advance: f32, ascent: f32, descent: f32) -> Mask {
        let (w, h) = (
            advance.ceil() as usize + 2,
            (ascent + descent).ceil() as usize + 2,
        );
        Mask {
            w,
            h,
            ascent,
            advance,
            a: vec![0.0; w * h],
        }
    }

    fn add(&mut self, x: i64, y: i64, c: f32) {
        if x >= 0 && y >= 0 && (x as usize) < self.w && (y as usize) < self.h {
            let i = y as usize * self.w + x as usize;
            self.a[i] = (self.a[i] + c).min(1.0);
        }
    }
}

/// `size` is the em size, as in SVG's `font-size`.
fn ttf_mask(font: &FontVec, text: &str, size: f32) -> Mask {
    let scale = size * font.height_unscaled() / font.units_per_em().unwrap_or(1000.0);
    let sf = font.as_scaled(scale);
    let ids: Vec<_> = text.chars().map(|c| font.glyph_id(c)).collect();
    let advance: f32 = ids.iter().map(|g| sf.h_advance(*g)).sum::<f32>()
        + ids.windows(2).map(|w| sf.kern(w[0], w[1])).sum::<f32>();
    let mut m = Mask::new(advance, sf.ascent(), -sf.descent());
    let mut caret = 0.0;
    for (i, id) in ids.iter().enumerate() {
        if i > 0 {
            caret += sf.kern(ids[i - 1], *id);
        }
        let glyph = id.with_scale_and_position(scale, point(caret, sf.ascent()));
        caret += sf.h_advance(*id);
        if let Some(og) = font.outline_glyph(glyph) {
            let b = og.px_bounds();
            og.draw(|gx, gy, c| m.add(b.min.x as i64 + gx as i64, b.min.y as i64 + gy as i64, c));
        }
    }
    m
}

/// The fallback: 8x8 glyphs scaled to about the em size, sampled 3x3 per
/// pixel so scaled edges are smoothed rather than jagged.
fn bitmap_mask(text: &str, size: f32) -> Mask {
    let k = (size / 11.0).max(1.0);
    let n = text.chars().count() as f32;
    let mut m = Mask::new(n * 8.0 * k, 7.0 * k, k);
    for (i, c) in text.chars().enumerate() {
        let rows = font8x8::legacy::BASIC_LEGACY[if c.is_ascii() {
            c as usize
        } else {
            b'?' as usize
        }];
        let x0 = i as f32 * 8.0 * k;
        for py in 0..(8.0 * k).ceil() as i64 {
            for px in 0..(8.0 * k).ceil() as i64 {
                let mut hits = 0;
                for s in 0..9 {
                    let sx = ((px as f32 + (s % 3) as f32 / 3.0 + 1.0 / 6.0) / k) as usize;
                    let sy = ((py as f32 + (s / 3) as f32 / 3.0 + 1.0 / 6.0) / k) as usize;
                    if sx < 8 && sy < 8 && rows[sy] >> sx & 1 == 1 {
                        hits += 1;
                    }
                }
                m.add(x0 as i64 + px, py, hits as f32 / 9.0);
            }
        }
    }
    m
}

/// Draws a text mask at `(x, y)` (a baseline point), horizontally or
/// rotated -90° about that point as SVG's `rotate(-90 x y)` does.
fn draw_text(
    cv: &mut Canvas,
    m: &Mask,
    (x, y): (f32, f32),
    anchor: Anchor,
    vertical: bool,
    c: Color,
) {
    let shift = match anchor {
        Anchor::Start => 0.0,
        Anchor::Middle => -m.advance / 2.0,
        Anchor::End => -m.advance,
    };
    for v in 0..m.h {
        for u in 0..m.w {
            let a = m.a[v * m.w + u];
            if a <= 0.0 {
                continue;
            }
            let (px, py) = if vertical {
                let ox = (x - m.ascent).round() as i64;
                let oy = (y - shift).round() as i64;
                (ox + v as i64, oy - u as i64 - 1)
            } else {
                let ox = (x + shift).round() as i64;
                let oy = (y - m.ascent).round() as i64;
                (ox + u as i64, oy + v as i64)
            };
            cv.blend(px, py, c, a);
        }
    }
}

/// Paints every shape in order, later ones over earlier ones.
pub fn rasterize(scene: &Scene, font: Option<&FontVec>) -> Canvas {
    let mut cv = Canvas::new(scene.width as usize, scene.height as usize);
    for shape in &scene.shapes {
        match shape {
            Shape::Rect { x, y, w, h, fill } => cv.rect(*x, *y, *w, *h, *fill),
            Shape::Line {
                x1,
                y1,
                x2,
                y2,
                width,
                color,
                dashed,
            } => {
                if *dashed {
                    cv.dashed((*x1, *y1), (*x2, *y2), *width, *color);
                } else {
                    cv.line((*x1, *y1), (*x2, *y2), *width, *color);
                }
            }
            Shape::Circle { cx, cy, r, fill } => cv.circle(*cx, *cy, *r, *fill),
            Shape::Text {
                x,
                y,
                size,
                anchor,
                vertical,
                color,
                text,
            } => {
                let m = match font {
                    Some(f) => ttf_mask(f, text, *size),
                    None => bitmap_mask(text, *size),
                };
                draw_text(&mut cv, &m, (*x, *y), *anchor, *vertical, *color);
            }
        }
    }
    cv
}

pub fn encode(cv: &Canvas) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let mut enc = png::Encoder::new(&mut out, cv.width as u32, cv.height as u32);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    // Plots are mostly flat colour: the slower setting pays off in the
    // size of every PNG committed under docs/.
    enc.set_compression(png::Compression::High);
    let mut w = enc.write_header().map_err(|e| e.to_string())?;
    w.write_image_data(&cv.rgb).map_err(|e| e.to_string())?;
    w.finish().map_err(|e| e.to_string())?;
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Decodes PNG bytes; returns (width, height, RGB pixels).
    pub(crate) fn decode(bytes: &[u8]) -> (u32, u32, Vec<u8>) {
        let mut r = png::Decoder::new(std::io::Cursor::new(bytes))
            .read_info()
            .expect("PNG header");
        let mut buf = vec![0; r.output_buffer_size().expect("size")];
        let info = r.next_frame(&mut buf).expect("PNG data");
        assert_eq!(info.color_type, png::ColorType::Rgb);
        buf.truncate(info.buffer_size());
        (info.width, info.height, buf)
    }

    fn px(rgb: &[u8], w: u32, x: u32, y: u32) -> [u8; 3] {
        let i = ((y * w + x) * 3) as usize;
        [rgb[i], rgb[i + 1], rgb[i + 2]]
    }

    fn scene(text: &str) -> Scene {
        Scene {
            width: 120,
            height: 60,
            shapes: vec![
                Shape::Rect {
                    x: 10.0,
                    y: 10.0,
                    w: 20.0,
                    h: 20.0,
                    fill: Color(200, 0, 0),
                },
                Shape::Line {
                    x1: 0.0,
                    y1: 50.0,
                    x2: 120.0,
                    y2: 50.0,
                    width: 1.0,
                    color: Color::BLACK,
                    dashed: false,
                },
                Shape::Text {
                    x: 60.0,
                    y: 30.0,
                    size: 14.0,
                    anchor: Anchor::Start,
                    vertical: false,
                    color: Color::BLACK,
                    text: text.into(),
                },
            ],
        }
    }

    fn inked(rgb: &[u8], w: u32, x: std::ops::Range<u32>, y: std::ops::Range<u32>) -> usize {
        y.flat_map(|yy| x.clone().map(move |xx| (xx, yy)))
            .filter(|&(xx, yy)| px(rgb, w, xx, yy)[0] < 128)
            .count()
    }

    #[test]
    fn shapes_and_text_land_where_placed_with_either_font() {
        let fonts: Vec<Option<&FontVec>> = vec![None, system_font()];
        for font in fonts {
            let bytes = encode(&rasterize(&scene("Ab1"), font)).unwrap();
            let (w, h, rgb) = decode(&bytes);
            assert_eq!((w, h), (120, 60));
            assert_eq!(px(&rgb, w, 20, 20), [200, 0, 0]);
            assert_eq!(px(&rgb, w, 5, 5), [255, 255, 255]);
            // A crisp one-pixel axis: one black row, white around it.
            assert_eq!(px(&rgb, w, 60, 50)[0], 0, "font {:?}", font.is_some());
            assert_eq!(px(&rgb, w, 60, 49), [255, 255, 255]);
            assert_eq!(px(&rgb, w, 60, 51), [255, 255, 255]);
            let ink = inked(&rgb, w, 60..110, 15..34);
            assert!(ink > 20, "text drawn: {ink} dark pixels");
            assert_eq!(inked(&rgb, w, 0..58, 34..48), 0, "nothing stray");
        }
    }

    #[test]
    fn vertical_text_runs_upward_from_its_point() {
        let mut s = scene("");
        s.shapes.push(Shape::Text {
            x: 100.0,
            y: 45.0,
            size: 12.0,
            anchor: Anchor::Start,
            vertical: true,
            color: Color::BLACK,
            text: "HHHH".into(),
        });
        let cv = rasterize(&s, None);
        let (w, _, rgb) = decode(&encode(&cv).unwrap());
        assert!(inked(&rgb, w, 88..101, 12..46) > 30);
        assert_eq!(
            inked(&rgb, w, 88..101, 46..49),
            0,
            "nothing below the start"
        );
    }
}
