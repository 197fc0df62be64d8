//! The timeline as small multiples: one SVG panel per figure (CPU, context
//! switches, syscalls, lock wait) over the run, each on its own scale, so a
//! spike in one is not flattened by another's units.

use std::fmt::Write;

use super::esc;
use crate::report::Report;

const WIDTH: f64 = 1000.0;
const HEIGHT: f64 = 90.0;
const LEFT: f64 = 70.0;

/// (label, colour, value per bucket)
type Series<'a> = (&'a str, &'a str, Vec<f64>);
/// Each bucket's start and the run's end, in seconds.
type Times<'a> = (&'a [f64], f64);

/// One panel: a caption with its title, a legend (colour, series, unit)
/// and a readout the page's script fills with the values under the
/// pointer; the SVG (as wide as the page) carries each bucket's start and
/// each series' values for it.
fn panel(out: &mut String, id: &str, title: &str, unit: &str, series: &[Series], times: Times) {
    let max = series
        .iter()
        .flat_map(|s| s.2.iter().copied())
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max);
    let n = series.first().map_or(0, |s| s.2.len());
    let (starts_s, t_end_s) = times;
    let _ = write!(
        out,
        r#"<figure class="panel"><figcaption><b>{t}</b> <span class="unit">({u})</span>"#,
        t = esc(title),
        u = esc(unit)
    );
    for (label, colour, _) in series {
        let _ = write!(
            out,
            r#" <span class="key"><i style="background:{}"></i>{} ({})</span>"#,
            esc(colour),
            esc(label),
            esc(unit)
        );
    }
    let times: Vec<String> = starts_s.iter().map(|t| format!("{t:.3}")).collect();
    let _ = write!(
        out,
        r#" <output class="readout" for="{id}"></output></figcaption><svg class="chart" id="{id}" viewBox="0 0 {w} {h}" role="img" data-left="{LEFT}" data-times="{times}"><title>{t}</title>"#,
        id = esc(id),
        w = WIDTH,
        h = HEIGHT + 22.0,
        t = esc(title),
        times = times.join(",")
    );
    let _ = write!(
        out,
        r##"<line x1="{LEFT}" y1="{HEIGHT}" x2="{WIDTH}" y2="{HEIGHT}" stroke="#999"/><text x="0" y="{HEIGHT}">0</text><text x="0" y="12">max {} {}</text><text x="{LEFT}" y="{}">0 s</text><text x="{}" y="{}" text-anchor="end">{:.2} s</text><line class="cursor" x1="0" y1="0" x2="0" y2="{HEIGHT}" stroke="#888" visibility="hidden"/>"##,
        short(max),
        esc(unit),
        HEIGHT + 16.0,
        WIDTH,
        HEIGHT + 16.0,
        t_end_s
    );
    for (label, colour, values) in series {
        let step = if n > 1 {
            (WIDTH - LEFT) / (n - 1) as f64
        } else {
            0.0
        };
        let points: Vec<String> = values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let v = if v.is_finite() { *v } else { 0.0 };
                let y = if max > 0.0 {
                    HEIGHT - v / max * (HEIGHT - 4.0)
                } else {
                    HEIGHT
                };
                format!("{:.1},{:.1}", LEFT + step * i as f64, y)
            })
            .collect();
        let data: Vec<String> = values
            .iter()
            .map(|v| {
                if v.is_finite() {
                    format!("{v:.4}")
                } else {
                    "0".into()
                }
            })
            .collect();
        let _ = write!(
            out,
            r#"<polyline class="series" fill="none" stroke="{}" stroke-width="1.5" vector-effect="non-scaling-stroke" points="{}" data-label="{}" data-unit="{}" data-values="{}"><title>{}</title></polyline>"#,
            esc(colour),
            points.join(" "),
            esc(label),
            esc(unit),
            data.join(","),
            esc(label)
        );
    }
    out.push_str("</svg></figure>\n");
}

fn short(x: f64) -> String {
    if x >= 1e6 {
        format!("{:.2} M", x / 1e6)
    } else if x >= 1e3 {
        format!("{:.1} k", x / 1e3)
    } else {
        format!("{x:.2}")
    }
}

pub fn timeline(r: &Report, out: &mut String) {
    let b = &r.timeline.buckets;
    if b.is_empty() {
        out.push_str("<p class=\"muted\">no timeline (the run was too short)</p>\n");
        return;
    }
    let per = |f: &dyn Fn(&crate::report::TimelineBucket) -> f64| -> Vec<f64> {
        b.iter()
            .map(|x| {
                let d = x.duration_ns.max(1) as f64;
                f(x) / d
            })
            .collect()
    };
    // Each point is a bucket, at its start; the axis ends at the run's end.
    let starts_s: Vec<f64> = b.iter().map(|x| x.t_ns as f64 / 1e9).collect();
    let end_s = (
        &starts_s[..],
        b.last()
            .map_or(0.0, |x| (x.t_ns + x.duration_ns) as f64 / 1e9),
    );
    panel(
        out,
        "chart-cpu",
        "CPU",
        "CPUs busy",
        &[
            ("user CPU", "#2a2", per(&|x| x.user_ns as f64)),
            ("system CPU", "#c22", per(&|x| x.sys_ns as f64)),
        ],
        end_s,
    );
    panel(
        out,
        "chart-switches",
        "context switches",
        "/s",
        &[
            (
                "voluntary",
                "#36c",
                per(&|x| x.voluntary_switches as f64 * 1e9),
            ),
            (
                "involuntary",
                "#c6c",
                per(&|x| x.involuntary_switches as f64 * 1e9),
            ),
        ],
        end_s,
    );
    panel(
        out,
        "chart-syscalls",
        "syscalls",
        "/s",
        &[("syscalls", "#a60", per(&|x| x.syscalls as f64 * 1e9))],
        end_s,
    );
    panel(
        out,
        "chart-lockwait",
        "lock wait (at the wait sites found contended)",
        "threads waiting",
        &[(
            "waiting for a lock",
            "#555",
            per(&|x| x.lock_wait_ns as f64),
        )],
        end_s,
    );
}
