use ratatui::Terminal;
use ratatui::backend::TestBackend;

use super::*;
use crate::render::assert_golden;
use crate::top::fixture::lock_story;
use crate::top::view::Key;

/// The screen as text, one line per row of cells.
fn drawn(snap: &Snapshot, view: &View, w: u16, h: u16) -> String {
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    term.draw(|f| draw(f, snap, view)).unwrap();
    let buf = term.backend().buffer();
    let mut out = String::new();
    for y in 0..h {
        let line: String = (0..w).map(|x| buf[(x, y)].symbol().to_string()).collect();
        out += line.trim_end();
        out.push('\n');
    }
    out
}

#[test]
fn golden_top_screen_at_120x40_and_80x24() {
    let snap = lock_story();
    let view = View::default();
    assert_golden("top_120x40.txt", &drawn(&snap, &view, 120, 40));
    assert_golden("top_80x24.txt", &drawn(&snap, &view, 80, 24));
}

#[test]
fn golden_top_finding_detail_and_help() {
    let snap = lock_story();
    let mut view = View::default();
    view.key(Key::Enter, &snap);
    assert_golden("top_finding_120x40.txt", &drawn(&snap, &view, 120, 40));
    view.key(Key::Esc, &snap);
    view.key(Key::Char('?'), &snap);
    assert_golden("top_help_80x24.txt", &drawn(&snap, &view, 80, 24));
}

#[test]
fn golden_top_processes_sorted_by_lock_and_filtered() {
    let snap = lock_story();
    let mut view = View::default();
    view.key(Key::Char('t'), &snap);
    view.key(Key::Char('s'), &snap);
    view.key(Key::Char('s'), &snap);
    let processes = drawn(&snap, &view, 120, 40);
    assert!(processes.contains("s sort:lock  t threads"), "{processes}");
    assert_golden("top_processes_120x40.txt", &processes);
    view.key(Key::Char('t'), &snap);
    for k in ['/', 'm', 'a', 'i', 'n'] {
        view.key(Key::Char(k), &snap);
    }
    view.key(Key::Enter, &snap);
    let filtered = drawn(&snap, &view, 120, 40);
    assert!(filtered.contains("[filter: main]"));
    assert!(!filtered.contains(" worker "), "{filtered}");
    assert!(filtered.contains("namespace_bad"));
}

#[test]
fn no_finding_and_an_ended_target_say_so() {
    let mut snap = lock_story();
    snap.findings.clear();
    snap.ended = Some("the target exited".into());
    let view = View {
        paused: true,
        ..View::default()
    };
    let s = drawn(&snap, &view, 120, 40);
    assert!(s.contains("no finding holds over the last 1.0 s"), "{s}");
    assert!(s.contains("the target exited: q to leave"), "{s}");
    assert!(s.contains("[paused]"), "{s}");
}
