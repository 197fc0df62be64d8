//! A wait site's name as people read it, and the name of the code that
//! released it. Why a module of its own: a stripped runtime's own wait code
//! (libruby's static `gvl_acquire_common`, CPython's `take_gil`) has no
//! name, and `libruby-3.1.so.3.1.2+0x20f772` tells a reader nothing. What
//! the run knows about it does: the runtime lock its stacks are (`Ruby's
//! GVL`), the primitive it waits in (a timed condition wait, a mutex), and
//! the program's code that called it, in the program's own language when
//! the interpreter's frames were read (`work ← block in <main>`, not the
//! VM's `rb_threadptr_execute_interrupts`).

use crate::analyze::runtime_locks::unnamed;
use crate::frame::jit::JitKind;
use crate::frame::{Frame, short_function};
use crate::report::{Release, WaitSite};

/// Named callers shown beside an unnamed site.
const NAMED_CALLERS: usize = 2;

/// A site's name as people read it: its short function, and the wrapper it
/// calls to wait (`LRUCacheShard::Lookup via port::Mutex::Lock`, `ProcSleep
/// via WaitLatch`). A function a stripped binary does not name is shown
/// with the nearest named functions that called it
/// (`mariadbd+0xd5b023 in handler::ha_index_read_map ← mysql_update`), and
/// by the runtime lock it is when its stacks are one (`Ruby's GVL (condvar)
/// in work ← block in <main>`).
pub fn display(site: &WaitSite) -> String {
    display_with(site, false)
}

/// The names of `sites` as one table shows them: a runtime lock's unnamed
/// sites that would read alike (its wait and its hand-over, both condition
/// waits called from `work`) are told apart by their offsets.
pub fn displays(sites: &[&WaitSite]) -> Vec<String> {
    let names: Vec<String> = sites.iter().map(|s| display(s)).collect();
    let alike = |n: &String| names.iter().filter(|m| *m == n).count() > 1;
    sites
        .iter()
        .zip(&names)
        .map(|(s, n)| {
            if alike(n) && s.runtime_lock.is_some() && unnamed(&s.function) {
                display_with(s, true)
            } else {
                n.clone()
            }
        })
        .collect()
}

fn display_with(site: &WaitSite, offset: bool) -> String {
    let frames = site.stacks.first().map_or(&[][..], |s| &s.frames[..]);
    let lock = site.runtime_lock.as_deref();
    // The lock as this site's name says it: with its offset when asked.
    let label = match (lock, site.function.rsplit_once('+')) {
        (Some(l), Some((_, off))) if offset => Some(format!("{l} {off}")),
        _ => lock.map(str::to_string),
    };
    let f = readable(&site.function, frames, label.as_deref(), WAIT_PRIMITIVES);
    match site.via.last() {
        Some(_) if lock.is_some() && unnamed(&site.function) => f,
        Some(v) => format!("{f} via {}", short_function(v)),
        None => f,
    }
}

/// Where the wakers of a site released it, as people read it: their
/// function, or for an unnamed one the code that called it and, in a
/// runtime lock's site, the lock it handed over (`work ← block in <main>,
/// handing over Ruby's GVL (condvar)`).
pub fn release_site(r: &Release, runtime_lock: Option<&str>) -> Option<String> {
    let site = r.site.as_deref()?;
    let frames = r.stacks.first().map_or(&[][..], |s| &s.frames[..]);
    // Only a release that the stack shows is a wake-up of a primitive is
    // the lock's release.
    let wake = primitive(frames, site, WAKE_PRIMITIVES);
    match (runtime_lock, wake, named_callers_in(frames, site)) {
        (Some(lock), Some(p), Some(ctx)) => Some(format!("{ctx}, handing over {lock} ({p})")),
        (Some(lock), Some(p), None) if unnamed(site) => Some(format!("{lock} ({p})")),
        _ => Some(with_callers(site, frames)),
    }
}

/// A function that threads wait in, `function_name` on `frames` (innermost
/// first), as people read it: a lock's role is named as its site is.
pub fn wait_function(function_name: &str, frames: &[Frame], runtime_lock: Option<&str>) -> String {
    readable(function_name, frames, runtime_lock, WAIT_PRIMITIVES)
}

/// A function on `frames` (innermost first) as people read it, with its
/// nearest named callers when it has no name itself (`mariadbd+0xd5b023 in
/// handler::ha_index_read_map ← mysql_update`).
pub fn with_callers(function_name: &str, frames: &[Frame]) -> String {
    readable(function_name, frames, None, &[])
}

/// `function_name` on `frames` (innermost first) as people read it.
fn readable(
    function_name: &str,
    frames: &[Frame],
    runtime_lock: Option<&str>,
    primitives: &'static [(&'static str, &'static str)],
) -> String {
    let mut f = short_function(function_name);
    if !unnamed(function_name) {
        return f;
    }
    if let Some(lock) = runtime_lock {
        f = match primitive(frames, function_name, primitives) {
            Some(p) => format!("{lock} ({p})"),
            None => lock.to_string(),
        };
    }
    match named_callers_in(frames, function_name) {
        Some(ctx) => format!("{f} in {ctx}"),
        None => f,
    }
}

/// Parts of the C library's and runtimes' function names, and the primitive
/// a wait through them sleeps in; the timed forms first.
const WAIT_PRIMITIVES: &[(&str, &str)] = &[
    ("cond_timedwait", "timed condvar"),
    ("cond_clockwait", "timed condvar"),
    ("cond_wait", "condvar"),
    ("lll_lock_wait", "mutex"),
    ("mutex_lock", "mutex"),
    ("mutex_timedlock", "mutex"),
    ("rwlock", "rwlock"),
    ("sem_wait", "semaphore"),
    ("sem_timedwait", "semaphore"),
    ("sem_clockwait", "semaphore"),
];

/// The same on the release side.
const WAKE_PRIMITIVES: &[(&str, &str)] = &[
    ("cond_signal", "condvar"),
    ("cond_broadcast", "condvar"),
    ("lll_unlock_wake", "mutex"),
    ("mutex_unlock", "mutex"),
    ("rwlock_unlock", "rwlock"),
    ("sem_post", "semaphore"),
];

/// The primitive the frames inward of `function_name` wait (or wake) in,
/// the one nearest it first (`rb_native_cond_wait` before the C library's
/// internals).
fn primitive(
    frames: &[Frame],
    function_name: &str,
    primitives: &'static [(&'static str, &'static str)],
) -> Option<&'static str> {
    let at = frames.iter().position(|f| f.function() == function_name)?;
    frames[..at].iter().rev().find_map(|f| {
        let name = f.function();
        primitives
            .iter()
            .find(|(part, _)| name.contains(part))
            .map(|(_, p)| *p)
    })
}

/// The nearest named functions below `function_name` on `frames`
/// (innermost first), when it has no name itself: `A ← B`. When the
/// interpreter's frames were read, the program's own (Python, Ruby) are
/// shown rather than the interpreter's exported C they ran through.
fn named_callers_in(frames: &[Frame], function_name: &str) -> Option<String> {
    if !unnamed(function_name) {
        return None;
    }
    let at = frames.iter().position(|f| f.function() == function_name)?;
    let callers = &frames[at + 1..];
    let interpreted = callers.iter().any(|f| f.is_interpreted());
    let named: Vec<String> = callers
        .iter()
        .filter(|f| {
            !unnamed(f)
                && f.jit_kind() != Some(JitKind::Stub)
                && f.function() != "Interpreter"
                && !(interpreted && f.is_interpreter())
        })
        .take(NAMED_CALLERS)
        .map(|f| short_function(f.function()))
        .collect();
    (!named.is_empty()).then(|| named.join(" ← "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{CountedStack, TimedStack};

    const LIB: &str = "libruby-3.1.so.3.1.2";

    fn v(f: &[&str]) -> Vec<crate::frame::Frame> {
        f.iter().map(|s| crate::frame::Frame::new(*s)).collect()
    }

    /// A GVL wait of Ruby 3.1 as a merged stack shows it: libruby's static
    /// wait code between the C library's condition wait and the program's
    /// Ruby method.
    fn gvl_frames(off: &str, wait: &str) -> Vec<crate::frame::Frame> {
        v(&[
            "__futex_abstimed_wait_common (futex-internal.c:87)",
            wait,
            &format!("rb_native_cond_wait ({LIB})"),
            &format!("{LIB}+{off}"),
            &format!("{LIB}+0x211121"),
            &format!("rb_threadptr_execute_interrupts ({LIB})"),
            "work (gvl_work.rb:14)",
            &format!("rb_vm_invoke_proc ({LIB})"),
            "block (2 levels) in <main> (gvl_work.rb:26)",
            "start_thread (pthread_create.c:442)",
        ])
    }

    fn site(off: &str, wait: &str, lock: Option<&str>) -> WaitSite {
        let mut s = crate::analyze::build::tests::sample_wait_site();
        s.function = format!("{LIB}+{off}");
        s.via = vec![format!("rb_native_cond_wait")];
        s.runtime_lock = lock.map(str::to_string);
        s.stacks = vec![TimedStack {
            frames: gvl_frames(off, wait),
            ns: 1,
            samples: 1,
            estimated: false,
        }];
        s
    }

    #[test]
    fn a_runtime_locks_unnamed_site_is_named_by_the_lock_and_the_programs_own_code() {
        let s = site(
            "0x20f772",
            "___pthread_cond_wait (pthread_cond_wait.c:618)",
            Some("Ruby's GVL"),
        );
        assert_eq!(
            display(&s),
            "Ruby's GVL (condvar) in work ← block (2 levels) in <main>"
        );
        let mut t = site(
            "0x20a2ac",
            "___pthread_cond_timedwait64 (pthread_cond_wait.c:643)",
            Some("Ruby's GVL"),
        );
        // The C wrapper nearest the site says condvar; the timed wait is
        // told by the C library's own frame when no wrapper says more.
        t.stacks[0].frames.remove(2);
        assert_eq!(
            display(&t),
            "Ruby's GVL (timed condvar) in work ← block (2 levels) in <main>"
        );
    }

    #[test]
    fn without_a_runtime_lock_an_unnamed_site_keeps_its_address_and_named_callers() {
        let s = site(
            "0x20f772",
            "___pthread_cond_wait (pthread_cond_wait.c:618)",
            None,
        );
        assert_eq!(
            display(&s),
            format!("{LIB}+0x20f772 in work ← block (2 levels) in <main> via rb_native_cond_wait")
        );
        // No Ruby frames read: the VM's exported C is all there is to show.
        let mut bare = s.clone();
        bare.stacks[0].frames.retain(|f| !f.contains(".rb:"));
        assert_eq!(
            display(&bare),
            format!(
                "{LIB}+0x20f772 in rb_threadptr_execute_interrupts ← rb_vm_invoke_proc via \
                 rb_native_cond_wait"
            )
        );
        // A named function is its own name.
        let mut named = s.clone();
        named.function = "Cache::lookup(std::string const&)".into();
        named.via.clear();
        assert_eq!(display(&named), "Cache::lookup");
    }

    #[test]
    fn sites_that_would_read_alike_in_one_table_are_told_apart_by_their_offsets() {
        let w = "___pthread_cond_wait (pthread_cond_wait.c:618)";
        let (a, b) = (
            site("0x20f772", w, Some("Ruby's GVL")),
            site("0x2110f2", w, Some("Ruby's GVL")),
        );
        let mut c = site(
            "0x20a2ac",
            "___pthread_cond_timedwait64 (pthread_cond_wait.c:643)",
            Some("Ruby's GVL"),
        );
        c.stacks[0].frames.remove(2);
        assert_eq!(
            displays(&[&a, &b, &c]),
            [
                "Ruby's GVL 0x20f772 (condvar) in work ← block (2 levels) in <main>",
                "Ruby's GVL 0x2110f2 (condvar) in work ← block (2 levels) in <main>",
                "Ruby's GVL (timed condvar) in work ← block (2 levels) in <main>",
            ]
        );
        assert_eq!(displays(&[&a]), [display(&a)]);
    }

    #[test]
    fn a_release_in_a_runtime_locks_site_says_what_it_handed_over_and_from_where() {
        let frames = v(&[
            "___pthread_cond_signal (pthread_cond_signal.c:93)",
            &format!("rb_native_cond_signal ({LIB})"),
            &format!("{LIB}+0x2110c0"),
            &format!("rb_threadptr_execute_interrupts ({LIB})"),
            "work (gvl_work.rb:14)",
        ]);
        let r = Release {
            mechanism: "futex".into(),
            site: Some(format!("{LIB}+0x2110c0")),
            from_waiters: true,
            in_target: true,
            wakers: 4,
            count: 1,
            wait_ns: 1,
            stacks: vec![CountedStack {
                frames,
                count: 1,
                samples: 1,
                estimated: false,
            }],
        };
        assert_eq!(
            release_site(&r, Some("Ruby's GVL")).unwrap(),
            "work, handing over Ruby's GVL (condvar)"
        );
        assert_eq!(
            release_site(&r, None).unwrap(),
            format!("{LIB}+0x2110c0 in work")
        );
        // A waker whose stack wakes no primitive hands over no lock.
        let mut odd = r.clone();
        odd.stacks[0].frames.remove(0);
        odd.stacks[0].frames.remove(0);
        assert_eq!(
            release_site(&odd, Some("Ruby's GVL")).unwrap(),
            format!("{LIB}+0x2110c0 in work")
        );
    }
}
