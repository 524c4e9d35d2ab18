//! A layout drawn as standalone SVG: boxes, then edges, then steps on top; colours by status
//! through classes (`status-completed`, ...), so a page embedding it may restyle them, and a
//! dark scheme when the viewer prefers one. Numbers are written with one decimal, so the same
//! layout always gives the same bytes.

use std::fmt::Write as _;

use crate::layout::{Layout, PlacedBox};
use crate::Shape;

const STYLE: &str = "
.bg{fill:#ffffff}
text{font-family:ui-sans-serif,system-ui,-apple-system,'Segoe UI',Roboto,Helvetica,Arial,sans-serif;fill:#1f2933}
.label{font-size:12px;font-weight:600}
.detail,.edge-label{font-size:10.5px;fill:#52606d}
.header{font-size:12px;font-weight:600;fill:#3e4c59}
.node{fill:#ffffff;stroke:#52606d;stroke-width:1.4}
.block{fill:#f5f7fa;fill-opacity:.55;stroke:#9aa5b1;stroke-width:1.2;stroke-dasharray:5 3}
.edge{fill:none;stroke:#7b8794;stroke-width:1.4}
.arrow{fill:#7b8794}
.terminal .node{fill:#3e4c59;stroke:#3e4c59}
.terminal text{fill:#ffffff}
.point .node{fill:#7b8794;stroke:#7b8794}
.status-completed .node{fill:#e3f9e5;stroke:#2f8132}
.status-running .node{fill:#e6f6ff;stroke:#0967d2;stroke-width:2.2}
.status-failed .node{fill:#ffe3e3;stroke:#cf1124;stroke-width:2}
.status-pending .node{fill:#ffffff;stroke:#9aa5b1;stroke-dasharray:4 3}
.status-skipped .node{fill:#f5f7fa;stroke:#cbd2d9;stroke-dasharray:2 3}
.status-skipped text{fill:#9aa5b1}
.terminal.status-completed .node{fill:#2f8132;stroke:#2f8132}
.terminal.status-failed .node{fill:#cf1124;stroke:#cf1124}
.terminal.status-running .node{fill:#0967d2;stroke:#0967d2}
.terminal.status-pending .node,.terminal.status-skipped .node{fill:#ffffff;stroke:#9aa5b1}
.terminal.status-pending text,.terminal.status-skipped text{fill:#52606d}
.block.status-completed{stroke:#2f8132}
.block.status-running{stroke:#0967d2}
.block.status-failed{stroke:#cf1124}
@media (prefers-color-scheme:dark){
.bg{fill:#1f2933}
text{fill:#e4e7eb}
.detail,.edge-label,.header{fill:#9aa5b1}
.node{fill:#323f4b;stroke:#9aa5b1}
.block{fill:#323f4b;stroke:#616e7c}
.edge{stroke:#9aa5b1}
.arrow{fill:#9aa5b1}
.status-completed .node{fill:#05400a;stroke:#57ae5b}
.status-running .node{fill:#03449e;stroke:#47a3f3}
.status-failed .node{fill:#610316;stroke:#ef4e4e}
.status-pending .node,.status-skipped .node{fill:#1f2933;stroke:#616e7c}
}
";

/// Draws a layout as a standalone SVG document.
pub fn svg(layout: &Layout) -> String {
    let mut out = String::with_capacity(512 + layout.boxes.len() * 320);
    let (w, h) = (num(layout.width), num(layout.height));
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"ratchet-graph\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\">\n<style>{STYLE}</style>\n<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\"><path class=\"arrow\" d=\"M0,0L10,5L0,10z\"/></marker></defs>\n<rect class=\"bg\" width=\"{w}\" height=\"{h}\"/>\n"
    );
    for b in layout.boxes.iter().filter(|b| b.compound) {
        open_group(&mut out, b, "block-group");
        let _ = writeln!(
            out,
            "<rect class=\"block status-{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"8\"/>",
            b.status.name(),
            num(b.x),
            num(b.y),
            num(b.width),
            num(b.height)
        );
        let _ = writeln!(
            out,
            "<text class=\"header\" x=\"{}\" y=\"{}\">{}</text>",
            num(b.x + 10.0),
            num(b.y + 17.0),
            escape(&b.label)
        );
        if let Some(detail) = &b.detail {
            let _ = writeln!(
                out,
                "<text class=\"detail\" x=\"{}\" y=\"{}\">{}</text>",
                num(b.x + 10.0),
                num(b.y + 30.0),
                escape(detail)
            );
        }
        close_group(&mut out, b);
    }
    for e in &layout.edges {
        let mut d = String::new();
        for (i, (x, y)) in e.points.iter().enumerate() {
            let _ = write!(
                d,
                "{}{},{}",
                if i == 0 { 'M' } else { 'L' },
                num(*x),
                num(*y)
            );
        }
        let _ = writeln!(
            out,
            "<path class=\"edge\" d=\"{d}\" marker-end=\"url(#arrow)\"/>"
        );
        if let Some((text, x, y)) = &e.label {
            let _ = writeln!(
                out,
                "<text class=\"edge-label\" x=\"{}\" y=\"{}\">{}</text>",
                num(*x),
                num(*y),
                escape(text)
            );
        }
    }
    for b in layout.boxes.iter().filter(|b| !b.compound) {
        let kind = match b.shape {
            Shape::Terminal => "terminal",
            Shape::Point => "point",
            Shape::Decision => "decision",
            Shape::Workflow => "workflow",
            Shape::Step => "step",
        };
        open_group(&mut out, b, kind);
        let (x, y, w, h) = (b.x, b.y, b.width, b.height);
        match b.shape {
            Shape::Decision => {
                let p = 12.0;
                let _ = writeln!(
                    out,
                    "<path class=\"node\" d=\"M{},{}L{},{}L{},{}L{},{}L{},{}L{},{}z\"/>",
                    num(x + p),
                    num(y),
                    num(x + w - p),
                    num(y),
                    num(x + w),
                    num(y + h / 2.0),
                    num(x + w - p),
                    num(y + h),
                    num(x + p),
                    num(y + h),
                    num(x),
                    num(y + h / 2.0)
                );
            }
            Shape::Workflow => {
                rect(&mut out, x, y, w, h, 6.0);
                rect(&mut out, x + 3.0, y + 3.0, w - 6.0, h - 6.0, 4.0);
            }
            Shape::Terminal => rect(&mut out, x, y, w, h, h / 2.0),
            Shape::Point => rect(&mut out, x, y, w, h, w / 2.0),
            Shape::Step => rect(&mut out, x, y, w, h, 6.0),
        }
        if b.shape != Shape::Point {
            let cx = num(x + w / 2.0);
            let label_y = if b.detail.is_some() {
                y + 19.0
            } else {
                y + h / 2.0 + 4.0
            };
            let _ = writeln!(
                out,
                "<text class=\"label\" x=\"{cx}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                num(label_y),
                escape(&b.label)
            );
            if let Some(detail) = &b.detail {
                let _ = writeln!(
                    out,
                    "<text class=\"detail\" x=\"{cx}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                    num(y + 35.0),
                    escape(detail)
                );
            }
        }
        close_group(&mut out, b);
    }
    out.push_str("</svg>\n");
    out
}

fn rect(out: &mut String, x: f64, y: f64, w: f64, h: f64, r: f64) {
    let _ = writeln!(
        out,
        "<rect class=\"node\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"{}\"/>",
        num(x),
        num(y),
        num(w),
        num(h),
        num(r)
    );
}

fn open_group(out: &mut String, b: &PlacedBox, kind: &str) {
    if let Some(link) = &b.link {
        let _ = write!(out, "<a href=\"{}\">", escape(link));
    }
    let _ = writeln!(
        out,
        "<g id=\"{}\" class=\"{kind} status-{}\"><title>{}</title>",
        escape(&b.id),
        b.status.name(),
        escape(&b.tooltip)
    );
}

fn close_group(out: &mut String, b: &PlacedBox) {
    out.push_str("</g>");
    if b.link.is_some() {
        out.push_str("</a>");
    }
    out.push('\n');
}

/// A coordinate with one decimal, without a trailing `.0`.
fn num(v: f64) -> String {
    let rounded = (v * 10.0).round() / 10.0;
    if rounded == rounded.trunc() {
        format!("{}", rounded as i64)
    } else {
        format!("{rounded:.1}")
    }
}

/// Text and attribute values with XML's special characters escaped.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}
