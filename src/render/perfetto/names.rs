//! What a sleep of a target thread is called on its track, in kerntax's
//! words: the report's verdicts, not a second analysis. A lock key is named
//! as the report names it (`LockReport::display_name`); the wait site is the
//! report's site where that thread waited on that lock or in that syscall,
//! and its class (contention, waiting for work, I/O or peer, ...) says
//! which kind of slice it is.

use std::collections::HashMap;

use super::proto::{DebugAnnotation, Value};
use crate::model::LockKey;
use crate::report::{Report, WaitClass, WaitSite};
use crate::sched_trace::Left;

/// A slice's name, category and arguments.
pub struct Named {
    pub name: String,
    pub category: &'static str,
    pub args: Vec<DebugAnnotation>,
}

pub fn arg(name: &str, value: Value) -> DebugAnnotation {
    DebugAnnotation {
        name: Some(name.to_string()),
        value: Some(value),
    }
}

pub fn text(name: &str, value: impl Into<String>) -> DebugAnnotation {
    arg(name, Value::String(value.into()))
}

pub struct Namer<'a> {
    report: &'a Report,
    locks: HashMap<LockKey, &'a str>,
}

impl<'a> Namer<'a> {
    pub fn new(report: &'a Report, lock_names: &'a [(LockKey, String)]) -> Namer<'a> {
        Namer {
            report,
            locks: lock_names.iter().map(|(k, n)| (*k, n.as_str())).collect(),
        }
    }

    /// The report's site for a wait of `tid`: among the sites `fits`,
    /// one where `tid` waited if any, the one with most waiting.
    fn site(&self, tid: u32, fits: impl Fn(&WaitSite) -> bool) -> Option<&'a WaitSite> {
        let fitting = self.report.waits.iter().filter(|s| fits(s));
        fitting.max_by_key(|s| (s.waiter_tids.contains(&tid), s.wait_ns))
    }

    /// The slice for `tid`'s sleep that began when it left for `left`
    /// (never `Left::Preempted`: the run queue is the state track's).
    pub fn sleep(&self, tid: u32, left: Left) -> Named {
        let Left::Syscall { nr, lock } = left else {
            return Named {
                name: "off CPU outside a syscall".into(),
                category: "wait",
                args: vec![],
            };
        };
        let syscall = crate::names::syscall_name(nr);
        let mut args = vec![text("syscall", syscall.as_str())];
        let lock_name = lock.map(|k| self.locks.get(&k).copied().unwrap_or("unnamed lock"));
        let site = match lock_name {
            Some(l) => self.site(tid, |s| s.locks.iter().any(|n| n == l)),
            None => self.site(tid, |s| s.syscalls.contains_key(&syscall)),
        };
        if let Some(l) = lock_name {
            args.push(text("lock", l));
        }
        if let Some(s) = site {
            args.push(text("wait site", s.function.as_str()));
            args.push(text("class", s.class.name()));
        }
        let class = site.map(|s| s.class);
        // `at SITE` where the report has the site, else `(SYSCALL)`.
        let at = site.map_or_else(|| format!("({syscall})"), |s| format!("at {}", s.function));
        let (name, category) = match (lock_name, class) {
            (_, Some(WaitClass::WaitingForWork)) => (format!("waiting for work {at}"), "idle"),
            (Some(l), Some(WaitClass::Contention) | None) => (format!("lock wait {l}"), "lock"),
            (Some(l), Some(c)) => (format!("{} {l}", c.name()), "lock"),
            // A sleep in the poll family is "poll".
            (None, _) if crate::names::is_poll(&syscall) => (format!("poll {at}"), "poll"),
            (None, Some(WaitClass::Timer)) => (format!("sleep {at}"), "timer"),
            (None, Some(WaitClass::IoOrPeer)) => (format!("I/O {at}"), "io"),
            (None, _) if crate::names::moves_data(&syscall) => (format!("I/O {at}"), "io"),
            (None, Some(c)) => (format!("{} {at}", c.name()), "wait"),
            (None, None) => (format!("wait {at}"), "wait"),
        };
        Named {
            name,
            category,
            args,
        }
    }
}
