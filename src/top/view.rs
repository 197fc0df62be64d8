//! What the user chose to see in `kerntax top` and the keys that change it,
//! by the conventions of htop and bpftop: q/Esc/Ctrl-C quit, ? help, s sort,
//! t threads or processes, / filter, p pause, arrows or j/k move, Enter
//! details. Pure state, so the keys are tested without a terminal.

use super::snapshot::{Row, Snapshot};

/// The column rows are sorted by, most first; `s` cycles through them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortBy {
    Cpu,
    RunQueue,
    Lock,
    WaitingForWork,
    Io,
    Poll,
    Syscalls,
    Switches,
}

impl SortBy {
    const ALL: [SortBy; 8] = [
        SortBy::Cpu,
        SortBy::RunQueue,
        SortBy::Lock,
        SortBy::WaitingForWork,
        SortBy::Io,
        SortBy::Poll,
        SortBy::Syscalls,
        SortBy::Switches,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SortBy::Cpu => "cpu",
            SortBy::RunQueue => "runq",
            SortBy::Lock => "lock",
            SortBy::WaitingForWork => "work",
            SortBy::Io => "io",
            SortBy::Poll => "poll",
            SortBy::Syscalls => "syscalls",
            SortBy::Switches => "switches",
        }
    }

    fn next(self) -> SortBy {
        let i = SortBy::ALL.iter().position(|&s| s == self).unwrap_or(0);
        SortBy::ALL[(i + 1) % SortBy::ALL.len()]
    }

    fn value(self, r: &Row) -> f64 {
        let s = &r.shares;
        match self {
            SortBy::Cpu => s.on_cpu,
            SortBy::RunQueue => s.run_queue,
            SortBy::Lock => s.lock,
            SortBy::WaitingForWork => s.waiting_for_work,
            SortBy::Io => s.io,
            SortBy::Poll => s.poll,
            SortBy::Syscalls => r.syscalls_per_s,
            SortBy::Switches => r.voluntary_switches_per_s + r.involuntary_switches_per_s,
        }
    }
}

/// A key, as the view knows it (the terminal's events mapped onto these).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key {
    Char(char),
    Enter,
    Esc,
    Backspace,
    Up,
    Down,
    PageUp,
    PageDown,
    Home,
    End,
    CtrlC,
}

/// What is open over the table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Overlay {
    None,
    Help,
    /// The selected finding's or row's details.
    Detail,
    /// The filter being typed.
    Filter(String),
}

#[derive(Clone, Debug, PartialEq)]
pub struct View {
    /// Thread rows (the default) or process rows.
    pub threads: bool,
    pub sort: SortBy,
    /// Rows whose comm, pid, tid or wait site contain it.
    pub filter: String,
    /// The shown snapshot stays while windows go on being read.
    pub paused: bool,
    pub overlay: Overlay,
    /// Index into the findings, then the rows.
    pub selected: usize,
    pub quit: bool,
}

impl Default for View {
    fn default() -> Self {
        View {
            threads: true,
            sort: SortBy::Cpu,
            filter: String::new(),
            paused: false,
            overlay: Overlay::None,
            selected: 0,
            quit: false,
        }
    }
}

/// What the selection is on.
pub enum Selected<'a> {
    Finding(usize),
    Row(&'a Row),
    Nothing,
}

impl View {
    /// The rows shown: threads or processes, filtered, sorted.
    pub fn rows<'a>(&self, snap: &'a Snapshot) -> Vec<&'a Row> {
        let all = if self.threads {
            &snap.threads
        } else {
            &snap.processes
        };
        let needle = self.filter.to_lowercase();
        let mut rows: Vec<&Row> = all
            .iter()
            .filter(|r| {
                needle.is_empty()
                    || r.comm.to_lowercase().contains(&needle)
                    || r.pid.to_string() == needle
                    || r.tid.is_some_and(|t| t.to_string() == needle)
                    || r.wait_site
                        .as_deref()
                        .is_some_and(|s| s.to_lowercase().contains(&needle))
            })
            .collect();
        rows.sort_by(|a, b| {
            self.sort
                .value(b)
                .total_cmp(&self.sort.value(a))
                .then(a.pid.cmp(&b.pid))
                .then(a.tid.cmp(&b.tid))
        });
        rows
    }

    /// Findings, then rows: what the selection moves over.
    fn items(&self, snap: &Snapshot) -> usize {
        snap.findings.len() + self.rows(snap).len()
    }

    pub fn selected<'a>(&self, snap: &'a Snapshot) -> Selected<'a> {
        if self.selected < snap.findings.len() {
            return Selected::Finding(self.selected);
        }
        match self.rows(snap).get(self.selected - snap.findings.len()) {
            Some(r) => Selected::Row(r),
            None => Selected::Nothing,
        }
    }

    /// Keeps the selection on an item after the snapshot changed.
    pub fn clamp(&mut self, snap: &Snapshot) {
        self.selected = self.selected.min(self.items(snap).saturating_sub(1));
    }

    /// Applies one key; `snap` is what is shown.
    pub fn key(&mut self, key: Key, snap: &Snapshot) {
        if key == Key::CtrlC {
            self.quit = true;
            return;
        }
        if let Overlay::Filter(typed) = &mut self.overlay {
            match key {
                Key::Char(c) => typed.push(c),
                Key::Backspace => {
                    typed.pop();
                }
                Key::Enter => {
                    self.filter = std::mem::take(typed);
                    self.overlay = Overlay::None;
                    self.selected = 0;
                }
                Key::Esc => {
                    self.filter.clear();
                    self.overlay = Overlay::None;
                }
                _ => {}
            }
            return;
        }
        if self.overlay != Overlay::None {
            // Any of these closes what is open; q still quits.
            match key {
                Key::Char('q') => self.quit = true,
                Key::Esc | Key::Enter | Key::Char('?') | Key::Char('h') => {
                    self.overlay = Overlay::None
                }
                _ => {}
            }
            return;
        }
        let last = self.items(snap).saturating_sub(1);
        match key {
            Key::Char('q') | Key::Esc => self.quit = true,
            Key::Char('?') | Key::Char('h') => self.overlay = Overlay::Help,
            Key::Char('s') => self.sort = self.sort.next(),
            Key::Char('t') => {
                self.threads = !self.threads;
                self.selected = self.selected.min(snap.findings.len());
            }
            Key::Char('p') => self.paused = !self.paused,
            Key::Char('/') => self.overlay = Overlay::Filter(String::new()),
            Key::Enter if !matches!(self.selected(snap), Selected::Nothing) => {
                self.overlay = Overlay::Detail
            }
            Key::Up | Key::Char('k') => self.selected = self.selected.saturating_sub(1),
            Key::Down | Key::Char('j') => self.selected = (self.selected + 1).min(last),
            Key::PageUp => self.selected = self.selected.saturating_sub(10),
            Key::PageDown => self.selected = (self.selected + 10).min(last),
            Key::Home => self.selected = 0,
            Key::End => self.selected = last,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::top::fixture::lock_story;

    #[test]
    fn keys_move_sort_toggle_pause_and_quit() {
        let snap = lock_story();
        let mut v = View::default();
        // One finding, then five thread rows.
        v.key(Key::End, &snap);
        assert_eq!(v.selected, 5);
        v.key(Key::Down, &snap);
        assert_eq!(v.selected, 5, "stays on the last row");
        v.key(Key::Home, &snap);
        v.key(Key::Char('j'), &snap);
        assert!(matches!(v.selected(&snap), Selected::Row(r) if r.tid == Some(4243)));
        v.key(Key::Char('k'), &snap);
        assert!(matches!(v.selected(&snap), Selected::Finding(0)));
        for want in [
            "runq", "lock", "work", "io", "poll", "syscalls", "switches", "cpu",
        ] {
            v.key(Key::Char('s'), &snap);
            assert_eq!(v.sort.name(), want);
        }
        v.key(Key::Char('t'), &snap);
        assert_eq!(v.rows(&snap).len(), 1, "one process");
        v.key(Key::Char('p'), &snap);
        assert!(v.paused);
        v.key(Key::Char('?'), &snap);
        assert_eq!(v.overlay, Overlay::Help);
        v.key(Key::Char('s'), &snap);
        assert_eq!(v.sort, SortBy::Cpu, "keys under the help only close it");
        v.key(Key::Esc, &snap);
        assert_eq!(v.overlay, Overlay::None);
        assert!(!v.quit);
        v.key(Key::Esc, &snap);
        assert!(v.quit, "Esc with nothing open quits");
        let mut v = View::default();
        v.key(Key::CtrlC, &snap);
        assert!(v.quit);
    }

    #[test]
    fn sorting_by_work_puts_the_idle_main_thread_first() {
        let snap = lock_story();
        let mut v = View::default();
        assert_eq!(v.rows(&snap)[0].tid, Some(4243));
        while v.sort != SortBy::WaitingForWork {
            v.key(Key::Char('s'), &snap);
        }
        assert_eq!(v.rows(&snap)[0].tid, Some(4242));
    }

    #[test]
    fn a_filter_is_typed_applied_and_cleared() {
        let snap = lock_story();
        let mut v = View::default();
        for k in [
            Key::Char('/'),
            Key::Char('4'),
            Key::Char('2'),
            Key::Char('x'),
        ] {
            v.key(k, &snap);
        }
        v.key(Key::Backspace, &snap);
        assert_eq!(v.overlay, Overlay::Filter("42".into()));
        v.key(Key::Char('q'), &snap);
        assert!(!v.quit, "q is typed into the filter");
        v.key(Key::Backspace, &snap);
        v.key(Key::Char('2'), &snap);
        v.key(Key::Enter, &snap);
        assert_eq!(v.filter, "422");
        assert!(v.rows(&snap).is_empty());
        v.key(Key::Char('/'), &snap);
        for c in "4244".chars() {
            v.key(Key::Char(c), &snap);
        }
        v.key(Key::Enter, &snap);
        let rows = v.rows(&snap);
        assert_eq!(rows.len(), 1, "a tid matches whole");
        assert_eq!(rows[0].tid, Some(4244));
        v.key(Key::Char('/'), &snap);
        v.key(Key::Esc, &snap);
        assert!(v.filter.is_empty());
        assert_eq!(v.rows(&snap).len(), 5);
    }
}
