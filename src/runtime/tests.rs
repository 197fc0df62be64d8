use super::*;

/// Every runtime module is in ALL: a module left out of the list would be
/// knowledge no analysis reads.
#[test]
fn every_runtime_module_is_in_the_one_list() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/runtime");
    let modules = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|f| f.ends_with(".rs") && f != "mod.rs" && f != "tests.rs")
        .count();
    assert_eq!(modules, ALL.len());
    let mut names: Vec<&str> = ALL.iter().map(|r| r.name).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), ALL.len(), "two runtimes share a name");
    assert!(names.iter().all(|n| !n.is_empty()));
}

#[test]
fn every_lock_has_a_sign_a_remedy_and_its_own_name() {
    let locks: Vec<&RuntimeLock> = locks().collect();
    assert_eq!(locks.len(), 6);
    for l in &locks {
        assert!(!l.signs.is_empty() && !l.remedy.is_empty(), "{}", l.name);
        assert_eq!(locks.iter().filter(|o| o.name == l.name).count(), 1);
    }
}

#[test]
fn a_runtimes_names_match_as_its_matching_says() {
    // glibc's symbols carry internal prefixes.
    assert!(waits_in("___pthread_mutex_lock", |w| w.acquire));
    assert!(waits_in("__GI___pthread_cond_wait", |w| w.condition));
    // Go's qualified names are whole: another function extending one is
    // not it.
    assert!(waits_in("runtime.stopm", |w| w.idle));
    assert!(!waits_in("runtime.stopmX", |w| w.idle));
    assert!(waits_in("runtime.notetsleepg", |w| w.condition));
    assert!(!waits_in("runtime.lockWithRankMayAcquire", |w| w.acquire));
    assert_eq!(
        idle_park("runtime.findRunnable").map(|r| r.name),
        Some("the Go runtime")
    );
    assert!(idle_park("pthread_cond_wait").is_none());
    assert!(Matching::Whole.matches("a", &["a"]) && !Matching::Whole.matches("ab", &["a"]));
    assert!(Matching::Part.matches("xay", &["a"]) && !Matching::Part.matches("b", &["a"]));
}

/// An idle parking with nothing to say of it would leave a site with no
/// evidence.
#[test]
fn a_runtime_that_parks_idle_threads_says_what_that_is() {
    for r in ALL {
        assert_eq!(
            r.waits.idle.is_empty(),
            r.waits.idle_evidence.is_empty(),
            "{}",
            r.name
        );
    }
}

/// A thread in libuv's loop (named by `node`, or by a stripped
/// `libuv.so.1` that exports `uv_run` only) runs the program's event loop;
/// a program's own function that merely extends a loop function's name
/// does not.
#[test]
fn an_event_loop_is_known_by_its_runtimes_frames() {
    let node = ["uv__io_poll", "uv_run"];
    assert_eq!(
        event_loop_of(node.iter().copied()).map(|l| l.name),
        Some("libuv's event loop")
    );
    let debian = ["libuv.so.1+0x1a2b3", "uv_run", "main"];
    assert!(event_loop_of(debian.iter().copied()).is_some());
    assert!(event_loop_of(["uv_runner", "main"].iter().copied()).is_none());
    assert!(event_loop_of(std::iter::empty()).is_none());
    // Its wrappers are wait primitives: a wait is named past them.
    assert!(waits_in("uv_cond_wait", |w| w.condition));
    assert!(waits_in("uv_mutex_lock", |w| w.acquire));
    assert!(!waits_in("uv_mutex_lockX", |w| w.acquire));
}
