//! caddy-serve (issue 37: a runtime's own parking is not a lock; a blind
//! case first: the binary before this rule said `lock.global-serializes`
//! "caddy+0x473b63 serializes 6 threads"): Debian's caddy 2.6.2, a stripped
//! Go binary, serving a static file to wrk. Go parks each OS thread it has
//! nothing to run on in runtime.stopm, on a futex word of its own. Ground
//! truth (Go's scheduler trace, without kerntax): GOMAXPROCS 2, 9-11
//! threads, 2-4 of them parked idle by the scheduler; 13.5 k requests/s
//! with 64 connections, 10.0 k with 4. See README.md.
use super::*;

#[test]
fn caddys_go_scheduler_parks_its_idle_threads_and_no_lock_is_called_serializing() {
    live("caddy-serve");
}

fn the_runtimes_parking_is_the_runtimes(r: &Report, variant: &str) {
    for f in &r.findings {
        assert!(!f.id.starts_with("lock."), "{variant}: {:?}", ids(r));
    }
    // The scheduler's idle threads: named from the binary's own Go table
    // (no symbol is left in it), classed by what the runtime's frames say.
    let park = r
        .waits
        .iter()
        .find(|s| s.function == "runtime.stopm")
        .unwrap_or_else(|| panic!("{variant}: no runtime.stopm site: {}", seen(r)));
    assert_eq!(
        park.class,
        WaitClass::WaitingForWork,
        "{variant}: {:?}",
        park.evidence
    );
    assert_eq!(
        park.prior,
        kerntax::report::WaitPrior::RuntimeIdle,
        "{variant}"
    );
    assert!(
        park.evidence[0].contains("Go scheduler"),
        "{variant}: {:?}",
        park.evidence
    );
    assert!(park.waiters >= 2, "{variant}: {}", brief(park));
    let st = &park.stacks[0].frames;
    assert!(
        st.iter().any(|x| x.starts_with("runtime.notesleep"))
            && !st.iter().any(|x| x.contains("+0x")),
        "{variant}: {st:?}"
    );
    // Each with its file and line, from the table's pc-value programs
    // (issue 38).
    assert!(
        st.iter().any(|x| x.starts_with("runtime.stopm (proc.go:"))
            && st
                .iter()
                .filter(|x| x.starts_with("runtime."))
                .all(|x| x.contains(".go:") || x.contains(".s:")),
        "{variant}: {st:?}"
    );
    // It is the heaviest wait that is not a timer's.
    let heaviest = r
        .waits
        .iter()
        .filter(|s| s.class != WaitClass::Timer)
        .max_by_key(|s| s.wait_ns)
        .expect("a wait site");
    assert_eq!(
        heaviest.function,
        "runtime.stopm",
        "{variant}: {}",
        brief(heaviest)
    );
    nothing_idle_is_contention(r);
    lacks(r, "wait.bottleneck");
}

/// What `caddys_go_scheduler_parks_its_idle_threads_and_no_lock_is_called_serializing` asserts of a bad and a healthy run, live or recorded.
pub fn caddys_go_scheduler_parks_its_idle_threads_and_no_lock_is_called_serializing_holds(
    bad: &Report,
    healthy: &Report,
) {
    the_runtimes_parking_is_the_runtimes(bad, "bad");
    the_runtimes_parking_is_the_runtimes(healthy, "healthy");
}
