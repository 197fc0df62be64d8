//! `kerntax top`'s full screen, drawn from a `Snapshot` and the `View`
//! into a ratatui frame: a summary line, the findings that hold over the
//! window (red), the table of threads or processes, a footer of keys, and
//! the help, detail or filter over them. Nothing here reads the kernel: the
//! golden tests draw fixture snapshots on ratatui's test backend.

use ratatui::Frame;
use ratatui::layout::{Alignment, Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Clear, Paragraph, Row as TableRow, Table, Wrap};

use super::snapshot::{Row, Snapshot};
use super::view::{Overlay, Selected, View};
use crate::render::text::{duration, short};

/// At least this many columns show the wide table (PID, both switch
/// rates, the wait site); narrower screens show the selected row's wait
/// site under the table instead.
pub const WIDE_COLUMNS: u16 = 100;
/// Findings listed at most in the header (the rest: "+N more").
pub const HEADER_FINDINGS: usize = 4;

fn state_style(state: &str) -> Style {
    match state {
        "lock" => Style::default().fg(Color::Red).add_modifier(Modifier::BOLD),
        "runq" => Style::default().fg(Color::Yellow),
        "cpu" => Style::default().fg(Color::Green),
        "io" | "poll" => Style::default().fg(Color::Magenta),
        _ => Style::default().fg(Color::Blue),
    }
}

fn summary_line(snap: &Snapshot, view: &View) -> Line<'static> {
    let mut spans = vec![Span::styled(
        "kerntax top ",
        Style::default().add_modifier(Modifier::BOLD),
    )];
    if view.paused {
        spans.push(Span::styled(
            "[paused] ",
            Style::default()
                .fg(Color::Yellow)
                .add_modifier(Modifier::BOLD),
        ));
    }
    spans.push(Span::raw(format!(
        "{:.0} s | CPU {:.2} of {} | {} syscalls/s | {} vol {} invol switches/s | lost {} | {}",
        snap.at_s,
        snap.cpus_used,
        snap.cpus,
        short(snap.syscalls_per_s),
        short(snap.voluntary_switches_per_s),
        short(snap.involuntary_switches_per_s),
        snap.lost,
        snap.target,
    )));
    Line::from(spans)
}

fn finding_lines(snap: &Snapshot, view: &View) -> Vec<Line<'static>> {
    if snap.findings.is_empty() {
        return vec![Line::styled(
            format!("no finding holds over the last {:.1} s", snap.window_s),
            Style::default().fg(Color::Green),
        )];
    }
    let mut lines: Vec<Line> = snap
        .findings
        .iter()
        .take(HEADER_FINDINGS)
        .enumerate()
        .map(|(i, f)| {
            let mut style = Style::default().fg(Color::Red).add_modifier(Modifier::BOLD);
            if view.selected == i {
                style = style.add_modifier(Modifier::REVERSED);
            }
            Line::styled(
                format!(
                    "! {:.0}% {}",
                    f.severity * 100.0,
                    super::snapshot::finding_line(f)
                ),
                style,
            )
        })
        .collect();
    if snap.findings.len() > HEADER_FINDINGS {
        lines.push(Line::raw(format!(
            "  +{} more (Enter on a finding for its culprit and remedy)",
            snap.findings.len() - HEADER_FINDINGS
        )));
    }
    lines
}

/// The table's columns: (title, width) for this screen width and view
/// (a thread's process is in the process view, `t`).
fn columns(wide: bool, threads: bool) -> Vec<(&'static str, u16)> {
    let mut c = vec![];
    if !threads {
        c.push(("PID", 7));
    }
    if threads {
        c.push(("TID", 7));
    } else {
        c.push(("THR", 4));
    }
    c.extend([
        ("COMM", 13),
        ("STATE", 5),
        ("CPU%", 5),
        ("RUNQ%", 5),
        ("LOCK%", 5),
        ("WORK%", 5),
        ("IO%", 5),
        ("POLL%", 5),
        ("SYSC/s", 7),
    ]);
    if wide {
        c.extend([("VCSW/s", 6), ("ICSW/s", 6), ("WAIT SITE", 0)]);
    } else {
        c.push(("CSW/s", 6));
    }
    c
}

/// A number, right-aligned in its column.
fn num(s: String) -> Cell<'static> {
    Cell::from(Line::from(s).alignment(Alignment::Right))
}

fn cells(r: &Row, wide: bool, threads: bool) -> Vec<Cell<'static>> {
    let mut c: Vec<Cell> = vec![];
    if !threads {
        c.push(num(r.pid.to_string()));
    }
    if threads {
        c.push(num(r.tid.map_or_else(String::new, |t| t.to_string())));
    } else {
        c.push(num(r.threads.to_string()));
    }
    c.push(Cell::from(r.comm.clone()));
    c.push(Cell::from(r.state.clone()).style(state_style(&r.state)));
    c.extend(r.shares.percents().map(num));
    c.push(num(short(r.syscalls_per_s)));
    if wide {
        c.push(num(short(r.voluntary_switches_per_s)));
        c.push(num(short(r.involuntary_switches_per_s)));
        c.push(Cell::from(r.wait_site.clone().unwrap_or_default()));
    } else {
        c.push(num(short(
            r.voluntary_switches_per_s + r.involuntary_switches_per_s,
        )));
    }
    c
}

fn table(frame: &mut Frame, area: Rect, snap: &Snapshot, view: &View, wide: bool) {
    let cols = columns(wide, view.threads);
    let rows = view.rows(snap);
    let visible = area.height.saturating_sub(1) as usize;
    let chosen = view.selected.checked_sub(snap.findings.len());
    // Scrolls so the selected row stays in sight.
    let first = match chosen {
        Some(i) if i >= visible => i + 1 - visible,
        _ => 0,
    };
    let body: Vec<TableRow> = rows
        .iter()
        .enumerate()
        .skip(first)
        .take(visible)
        .map(|(i, r)| {
            let row = TableRow::new(cells(r, wide, view.threads));
            if Some(i) == chosen {
                row.style(Style::default().add_modifier(Modifier::REVERSED))
            } else {
                row
            }
        })
        .collect();
    let widths: Vec<Constraint> = cols
        .iter()
        .map(|&(_, w)| {
            if w == 0 {
                Constraint::Min(10)
            } else {
                Constraint::Length(w)
            }
        })
        .collect();
    let header = TableRow::new(cols.iter().map(|&(t, w)| {
        if w == 0 || t == "COMM" || t == "STATE" {
            Cell::from(t)
        } else {
            num(t.to_string())
        }
    }))
    .style(Style::default().add_modifier(Modifier::BOLD | Modifier::UNDERLINED));
    frame.render_widget(
        Table::new(body, widths).header(header).column_spacing(1),
        area,
    );
}

fn footer(snap: &Snapshot, view: &View) -> Line<'static> {
    if let Overlay::Filter(typed) = &view.overlay {
        return Line::raw(format!("filter: {typed}_   Enter apply, Esc clear"));
    }
    let mut s = format!(
        "q quit  ? help  s sort:{}  t {}  / filter  p pause  Enter details",
        view.sort.name(),
        if view.threads { "processes" } else { "threads" }
    );
    if !view.filter.is_empty() {
        s += &format!("  [filter: {}]", view.filter);
    }
    if let Some(why) = &snap.ended {
        s = format!("{why}: q to leave  {s}");
    }
    Line::styled(s, Style::default().fg(Color::Black).bg(Color::Cyan))
}

/// A box centred in `area`, `w` x `h` at most.
fn centred(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    )
}

const HELP: &[(&str, &str)] = &[
    (
        "q Esc Ctrl-C",
        "quit (the report of the whole run is written if asked)",
    ),
    ("? h", "this help"),
    ("Up Down j k", "move over the findings and rows"),
    ("PgUp PgDn Home End", "move faster"),
    (
        "Enter",
        "details: a finding's culprit, stack and remedy; a row's time",
    ),
    ("s", "sort by the next column"),
    ("t", "threads or processes"),
    ("/", "filter rows by name, pid, tid or wait site"),
    ("p", "pause the screen (profiling goes on)"),
];

fn detail_lines(snap: &Snapshot, view: &View) -> (String, Vec<Line<'static>>) {
    match view.selected(snap) {
        Selected::Finding(i) => {
            let f = &snap.findings[i];
            let mut l = vec![
                Line::styled(
                    f.title.clone(),
                    Style::default().add_modifier(Modifier::BOLD),
                ),
                Line::raw(format!(
                    "{}  severity {:.0}%  {}",
                    f.id,
                    f.severity * 100.0,
                    f.gain
                )),
                Line::raw(format!("culprit: {}", f.culprit)),
            ];
            l.extend(f.frames.iter().map(|fr| Line::raw(format!("    {fr}"))));
            l.push(Line::raw("evidence:"));
            l.extend(f.evidence.iter().map(|e| Line::raw(format!("    {e}"))));
            l.push(Line::styled(
                "remedy:",
                Style::default().add_modifier(Modifier::BOLD),
            ));
            l.extend(f.remedy.lines().map(|x| Line::raw(x.to_string())));
            (format!(" finding {} ", i + 1), l)
        }
        Selected::Row(r) => {
            let s = &r.shares;
            let who = match r.tid {
                Some(t) => format!("thread {t} ({}) of pid {}", r.comm, r.pid),
                None => format!("process {} ({}), {} threads", r.pid, r.comm, r.threads),
            };
            let window_ns = (snap.window_s * 1e9) as u64;
            let part = |x: f64| {
                format!(
                    "{:5.1}%  {}",
                    x * 100.0,
                    duration((x * window_ns as f64) as u64)
                )
            };
            let l = vec![
                Line::styled(who, Style::default().add_modifier(Modifier::BOLD)),
                Line::raw(format!("state: {}", r.state)),
                Line::raw(format!("on a CPU          {}", part(s.on_cpu))),
                Line::raw(format!("on a run queue    {}", part(s.run_queue))),
                Line::raw(format!("in a lock wait    {}", part(s.lock))),
                Line::raw(format!("waiting for work  {}", part(s.waiting_for_work))),
                Line::raw(format!("in I/O            {}", part(s.io))),
                Line::raw(format!("in poll           {}", part(s.poll))),
                Line::raw(format!("asleep            {}", part(s.sleep))),
                Line::raw(format!(
                    "syscalls {}/s  switches {}/s voluntary, {}/s involuntary",
                    short(r.syscalls_per_s),
                    short(r.voluntary_switches_per_s),
                    short(r.involuntary_switches_per_s)
                )),
                Line::raw(format!(
                    "waits most at: {}",
                    r.wait_site
                        .as_deref()
                        .unwrap_or("(no sampled wait in this window)")
                )),
            ];
            (" details ".to_string(), l)
        }
        Selected::Nothing => (" details ".to_string(), vec![]),
    }
}

fn overlay(frame: &mut Frame, snap: &Snapshot, view: &View) {
    let area = frame.area();
    let (title, lines) = match view.overlay {
        Overlay::Help => (
            " kerntax top: keys ".to_string(),
            HELP.iter()
                .map(|(k, what)| Line::raw(format!("{k:<20} {what}")))
                .collect(),
        ),
        Overlay::Detail => detail_lines(snap, view),
        _ => return,
    };
    let rect = centred(
        area,
        area.width.saturating_sub(4),
        area.height.saturating_sub(2),
    );
    frame.render_widget(Clear, rect);
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(Block::default().borders(Borders::ALL).title(title)),
        rect,
    );
}

/// Draws the whole screen.
pub fn draw(frame: &mut Frame, snap: &Snapshot, view: &View) {
    let area = frame.area();
    let wide = area.width >= WIDE_COLUMNS;
    let findings = finding_lines(snap, view);
    let footer_lines: u16 = if wide { 1 } else { 2 };
    let [top, head, body, foot] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(findings.len() as u16),
        Constraint::Min(2),
        Constraint::Length(footer_lines),
    ])
    .areas(area);
    frame.render_widget(Paragraph::new(summary_line(snap, view)), top);
    frame.render_widget(Paragraph::new(findings), head);
    table(frame, body, snap, view, wide);
    let mut foot_lines = vec![];
    if !wide {
        let site = match view.selected(snap) {
            Selected::Row(r) => r.wait_site.clone().unwrap_or_default(),
            _ => String::new(),
        };
        foot_lines.push(Line::raw(format!("wait site: {site}")));
    }
    foot_lines.push(footer(snap, view));
    frame.render_widget(Paragraph::new(foot_lines), foot);
    overlay(frame, snap, view);
}

#[cfg(test)]
#[path = "screen_tests.rs"]
mod tests;
