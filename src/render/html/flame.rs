//! Flame graphs drawn by inferno (the Rust port of FlameGraph), each in its
//! own iframe (srcdoc): inferno's SVG carries its own script and element
//! ids, which would clash with each other inline on one page.

use super::esc;
use crate::frame::short_frames;
use crate::render::folded::{Stacks, lines};

/// One flame graph: (id, title, what a unit of width is, stacks).
pub struct View<'a> {
    pub id: &'a str,
    pub title: &'a str,
    pub count_name: &'a str,
    pub stacks: Stacks,
}

fn svg(view: &View) -> Option<String> {
    // People read short C++ names; the JSON and --folded keep them whole.
    let short: Stacks = view
        .stacks
        .iter()
        .map(|(frames, n)| (short_frames(frames), *n))
        .collect();
    let folded = lines(&short);
    if folded.is_empty() {
        return None;
    }
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = view.title.to_string();
    opts.count_name = view.count_name.to_string();
    opts.hash = true;
    opts.deterministic = true;
    opts.min_width = 0.1;
    opts.image_width = Some(1180);
    let mut out = Vec::new();
    inferno::flamegraph::from_lines(&mut opts, folded.iter().map(String::as_str), &mut out).ok()?;
    String::from_utf8(out).ok()
}

pub fn render(view: &View, out: &mut String) {
    match svg(view) {
        Some(svg) => {
            let doc = format!(
                "<!DOCTYPE html><html><head><meta charset=\"utf-8\"></head>\
                 <body style=\"margin:0\">{svg}</body></html>"
            );
            out.push_str(&format!(
                "<iframe class=\"flamegraph\" id=\"{}\" title=\"{}\" height=\"{}\" srcdoc=\"{}\"></iframe>\n",
                esc(view.id),
                esc(view.title),
                height(&svg),
                esc(&doc)
            ));
        }
        None => out.push_str(&format!(
            "<p class=\"muted\" id=\"{}\">{}: nothing recorded</p>\n",
            esc(view.id),
            esc(view.title)
        )),
    }
}

/// The SVG's own height, so its frame needs no scrolling.
fn height(svg: &str) -> u32 {
    svg.split("height=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .and_then(|s| s.trim_end_matches("px").parse::<f64>().ok())
        .map_or(400, |h| h as u32 + 8)
}
