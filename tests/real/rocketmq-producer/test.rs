//! rocketmq-producer (issue 37: waiting for a peer is not a lock): the
//! producer JVM of rocketmq-commitlog profiled instead of its broker. Its
//! 32 sending threads wait for the broker's replies in
//! CompletableFuture.get under NettyRemotingAbstract.invokeSyncImpl; the
//! replies reach them through the client's own threads (selector, netty
//! worker, public executor), which never wait there. Ground truth (thread
//! dumps and /proc, without kerntax): see README.md. kerntax once named
//! such a wait `lock.global-serializes` "... serializes 50 threads" (a
//! shared acquire's frames read as a lock's), and then, with the frames
//! read right, as waiting for work.
use super::*;

fn sending_threads(r: &Report) -> Vec<u32> {
    r.threads
        .iter()
        .filter(|t| t.pid == r.target_pid && t.comm.starts_with("load-"))
        .map(|t| t.tid)
        .collect()
}

#[test]
fn rocketmq_producer_threads_wait_for_the_brokers_replies_not_for_a_lock() {
    live("rocketmq-producer");
}

fn waits_for_the_broker(r: &Report, variant: &str) {
    let send = sending_threads(r);
    // All 32, though they end as the profile does: one that exited between
    // the end of the profile and its final count of threads was in neither
    // (CI on 64e8add, 4 missing; a recorded healthy run, 1).
    assert_eq!(
        send.len(),
        32,
        "{variant}: threads unaccounted {}",
        r.loss.threads_unaccounted
    );
    // The reply wait: most sending threads wait there, for a result (the
    // JDK's future says so), and it is the broker's reply: passed on by
    // the client's threads from another process, which is named.
    let site = r
        .waits
        .iter()
        .filter(|s| s.waiter_tids.iter().filter(|t| send.contains(t)).count() >= 24)
        .max_by_key(|s| s.wait_ns)
        .unwrap_or_else(|| panic!("{variant}: no site of the sending threads: {}", seen(r)));
    assert!(
        s_has(site, "invokeSyncImpl") || s_has(site, "CompletableFuture"),
        "{variant}: {}",
        brief(site)
    );
    assert_eq!(
        site.prior,
        kerntax::report::WaitPrior::Result,
        "{variant}: {}",
        brief(site)
    );
    assert_eq!(
        site.class,
        WaitClass::IoOrPeer,
        "{variant}: {:?}",
        site.evidence
    );
    let said = site.evidence.join(" ");
    assert!(
        said.contains("a peer's reply, not a lock"),
        "{variant}: {said}"
    );
    // The peer: a thread of another process (the broker's netty server).
    let peer_pid: Option<u32> = said.split("behind them ").nth(1).and_then(|rest| {
        let at = rest.find("pid ")? + 4;
        let digits: String = rest[at..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    });
    assert!(
        peer_pid.is_some_and(|p| p != r.target_pid),
        "{variant}: {said}"
    );
    // Nothing of the producer's is a lock, and no sending thread paces
    // another. The client's own netty threads, which hand the replies
    // on, may be named as pacing the pool they feed, as pigz's reader
    // behind its pipe is (compressor-pool; its remedy says what paces it
    // in turn) (CI on 64e8add: "NettyClientSele (tid …) paces the others" in one
    // run of the bad variant); the broker behind them is the reply
    // site's peer above.
    for f in &r.findings {
        assert!(!f.id.starts_with("lock."), "{variant}: {:?}", ids(r));
        if f.id == "wait.bottleneck" {
            assert!(
                f.culprit.name.starts_with("NettyClient"),
                "{variant}: {f:?}"
            );
            assert!(
                f.remedy.contains("that is what paces it"),
                "{variant}: {}",
                f.remedy
            );
        }
    }
    nothing_idle_is_contention(r);
    jvm_map_read(r);
}

/// Whether a site's heaviest stack has a frame containing `what`.
fn s_has(s: &WaitSite, what: &str) -> bool {
    s.stacks
        .first()
        .is_some_and(|st| st.frames.iter().any(|x| x.contains(what)))
}

/// What `rocketmq_producer_threads_wait_for_the_brokers_replies_not_for_a_lock` asserts of a bad and a healthy run, live or recorded.
pub fn rocketmq_producer_threads_wait_for_the_brokers_replies_not_for_a_lock_holds(
    bad: &Report,
    healthy: &Report,
) {
    waits_for_the_broker(bad, "bad");
    waits_for_the_broker(healthy, "healthy");
}
