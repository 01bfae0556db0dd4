//! A scene as SVG text: one element per shape, so the file stays small,
//! diffs readably when a figure in docs/ changes, and scales for papers.

use super::{Anchor, Color, Scene, Shape};
use std::fmt::Write as _;

/// The fonts the PNG renderer looks for come first, so both files look
/// alike where they are installed.
const FONTS: &str = "DejaVu Sans, Liberation Sans, Arial, Helvetica, sans-serif";

fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

fn rgb(c: Color) -> String {
    format!("#{:02x}{:02x}{:02x}", c.0, c.1, c.2)
}

pub fn to_svg(scene: &Scene) -> String {
    let mut out = String::new();
    let (w, h) = (scene.width, scene.height);
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
         viewBox=\"0 0 {w} {h}\" font-family=\"{FONTS}\">"
    );
    for shape in &scene.shapes {
        match shape {
            Shape::Rect { x, y, w, h, fill } => {
                let _ = writeln!(
                    out,
                    "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{h:.1}\" fill=\"{}\"/>",
                    rgb(*fill)
                );
            }
            Shape::Line {
                x1,
                y1,
                x2,
                y2,
                width,
                color,
                dashed,
            } => {
                let dash = if *dashed {
                    " stroke-dasharray=\"6 4\""
                } else {
                    ""
                };
                let _ = writeln!(
                    out,
                    "<line x1=\"{x1:.1}\" y1=\"{y1:.1}\" x2=\"{x2:.1}\" y2=\"{y2:.1}\" \
                     stroke=\"{}\" stroke-width=\"{width}\"{dash}/>",
                    rgb(*color)
                );
            }
            Shape::Circle { cx, cy, r, fill } => {
                let _ = writeln!(
                    out,
                    "<circle cx=\"{cx:.1}\" cy=\"{cy:.1}\" r=\"{r}\" fill=\"{}\"/>",
                    rgb(*fill)
                );
            }
            Shape::Text {
                x,
                y,
                size,
                anchor,
                vertical,
                color,
                text,
            } => {
                let anchor = match anchor {
                    Anchor::Start => "start",
                    Anchor::Middle => "middle",
                    Anchor::End => "end",
                };
                let rotate = if *vertical {
                    format!(" transform=\"rotate(-90 {x:.1} {y:.1})\"")
                } else {
                    String::new()
                };
                let _ = writeln!(
                    out,
                    "<text x=\"{x:.1}\" y=\"{y:.1}\" font-size=\"{size}\" text-anchor=\"{anchor}\" \
                     fill=\"{}\"{rotate}>{}</text>",
                    rgb(*color),
                    esc(text)
                );
            }
        }
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A small well-formedness check: every tag closes in order, attribute
    /// values are quoted, and text holds no raw `<` or `&` outside an
    /// entity. Returns the element names seen.
    pub(crate) fn check_well_formed(svg: &str) -> Vec<String> {
        let (mut stack, mut seen): (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
        let mut rest = svg;
        for _ in 0..svg.len() {
            let Some(open) = rest.find('<') else {
                check_text(rest);
                break;
            };
            check_text(&rest[..open]);
            let close = rest[open..].find('>').expect("unclosed tag") + open;
            let tag = &rest[open + 1..close];
            assert_eq!(
                tag.matches('"').count() % 2,
                0,
                "unbalanced quotes in <{tag}>"
            );
            if let Some(name) = tag.strip_prefix('/') {
                assert_eq!(stack.pop().as_deref(), Some(name), "mismatched </{name}>");
            } else {
                let name = tag
                    .trim_end_matches('/')
                    .split_whitespace()
                    .next()
                    .expect("tag name")
                    .to_string();
                seen.push(name.clone());
                if !tag.ends_with('/') {
                    stack.push(name);
                }
            }
            rest = &rest[close + 1..];
        }
        assert!(stack.is_empty(), "unclosed elements {stack:?}");
        seen
    }

    fn check_text(t: &str) {
        for (i, _) in t.match_indices('&') {
            let ent = &t[i..];
            assert!(
                ["&amp;", "&lt;", "&gt;", "&quot;"]
                    .iter()
                    .any(|e| ent.starts_with(e)),
                "raw & in {t:?}"
            );
        }
    }

    #[test]
    fn every_shape_kind_is_well_formed_and_escaped() {
        let scene = Scene {
            width: 100,
            height: 50,
            shapes: vec![
                Shape::Rect {
                    x: 0.0,
                    y: 0.0,
                    w: 10.0,
                    h: 5.0,
                    fill: Color::WHITE,
                },
                Shape::Line {
                    x1: 0.0,
                    y1: 0.0,
                    x2: 9.0,
                    y2: 9.0,
                    width: 1.5,
                    color: Color::BLACK,
                    dashed: true,
                },
                Shape::Circle {
                    cx: 5.0,
                    cy: 5.0,
                    r: 3.0,
                    fill: Color(1, 2, 3),
                },
                Shape::Text {
                    x: 1.0,
                    y: 2.0,
                    size: 10.0,
                    anchor: Anchor::End,
                    vertical: true,
                    color: Color::TEXT,
                    text: "a<b & \"c\"".into(),
                },
            ],
        };
        let svg = to_svg(&scene);
        assert_eq!(
            check_well_formed(&svg),
            ["svg", "rect", "line", "circle", "text"]
        );
        assert!(svg.contains("a&lt;b &amp; &quot;c&quot;"));
        assert!(svg.contains("rotate(-90 1.0 2.0)"));
        assert!(svg.contains("#010203"));
    }
}
