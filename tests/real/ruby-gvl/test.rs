//! ruby-gvl (issue 19): Debian's Ruby 3.1, its libruby stripped. Four
//! threads of pure-Ruby CPU work serialise on the GVL (1.00 CPU used; perf
//! and bpftrace: 117 futex waits on the GVL's condition variables and
//! mutex, 7.5 s of waiting in 2.6 s, 25 of them timed out: the timer
//! waiter's 100 ms waits); one thread takes no turns at all.
use super::*;

#[test]
fn ruby_threads_serialise_on_the_gvl_named_as_such_and_one_thread_does_not() {
    live("ruby-gvl");
}

/// What `ruby_threads_serialise_on_the_gvl_named_as_such_and_one_thread_does_not` asserts of a bad and a healthy run, live or recorded.
pub fn ruby_threads_serialise_on_the_gvl_named_as_such_and_one_thread_does_not_holds(
    bad: &Report,
    healthy: &Report,
) {
    let f = first(bad, "lock.global-serializes");
    // Named by its role, not libruby-3.1.so.3.1.7+0x20fe82.
    assert_eq!(f.culprit.name, "Ruby's GVL", "{f:?}");
    assert!(f.remedy.contains("Ractors"), "{}", f.remedy);
    // And the Ruby code that holds it: where its holders hand it over.
    assert!(
        f.remedy.contains("hand it over in work (gvl_work.rb:"),
        "{}",
        f.remedy
    );
    // Issue 20: its threads queue from the program's own Ruby method,
    // named from the VM's frames (`work`, gvl_work.rb's loop).
    assert!(
        f.title.contains("queued in work (gvl_work.rb:"),
        "{}",
        f.title
    );
    // About 3 of the 4 wait at any time; its two waits (gvl_acquire_common
    // and the timer's timed wait) are one lock.
    let queued = f
        .evidence
        .iter()
        .find(|e| e.metric == "queued_threads")
        .unwrap();
    // CI on 18392a8 saw 1.94 once (2.88-2.95 in 3 recordings and 9 runs
    // since): the timer's waits had nearly all timed out, read as the
    // kernel ending them (I/O), so its one queued thread was left out; an
    // interpreter lock's timed waits are its queue (waits::runtime). What
    // the run showed is printed with it.
    assert!(queued.value > 2.0, "{f:?}\n{}", seen(bad));
    let gvl: Vec<&kerntax::report::WaitSite> = bad
        .waits
        .iter()
        .filter(|s| {
            s.runtime_lock.as_deref() == Some("Ruby's GVL") && s.class == WaitClass::Contention
        })
        .collect();
    let names: Vec<String> = gvl
        .iter()
        .map(|s| kerntax::analyze::waits::display(s))
        .collect();
    assert!(gvl.len() >= 2, "{names:?}");
    // Its sites, in libruby's static code, read as the lock they are and
    // the Ruby code that waits there, not libruby-3.1.so.3.1.2+0x20f772 in
    // the VM's rb_threadptr_execute_interrupts (issue 20).
    let site = kerntax::analyze::waits::display(gvl[0]);
    assert!(site.starts_with("Ruby's GVL ("), "{names:?}");
    assert!(site.contains(" in work"), "{names:?}");
    // Each site whose stack holds the Ruby code is named by it, never by
    // the VM's rb_ functions. A rare site whose one chain was lost (a run
    // counts ~8 faulted chains in loss.interpreted_chains_faulted) is named
    // by its native caller, as it should be: found in 1 of 3 clean-clone
    // suite runs of issue 35, `(condvar) in rb_threadptr_execute_interrupts`.
    let ruby_named: Vec<&String> = gvl
        .iter()
        .zip(&names)
        .filter(|(s, _)| {
            s.stacks
                .first()
                .is_some_and(|st| st.frames.iter().any(|f| f.contains(".rb:")))
        })
        .map(|(_, n)| n)
        .collect();
    assert!(ruby_named.len() >= 2, "{names:?}");
    assert!(ruby_named.iter().all(|n| !n.contains("rb_")), "{names:?}");
    nothing_idle_is_contention(bad);
    lacks(bad, "wait.bottleneck");
    assert!(
        healthy.findings.iter().all(|f| !f.id.starts_with("lock.")),
        "{:?}",
        ids(healthy)
    );
}
