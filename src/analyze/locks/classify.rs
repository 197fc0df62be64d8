//! What kind of lock a futex word is, decided from evidence: the library
//! functions on the stacks of the threads that waited on it or woke it, and
//! the futex operations used (each runtime's `lock_kinds`, in
//! `crate::runtime`). An address alone says nothing.

pub use crate::report::LockKind;

/// The kind a stack shows, from its innermost library frame that says: a
/// mutex re-taken inside pthread_cond_wait is a mutex wait.
pub fn kind_of_stack(frames: &[crate::frame::Frame]) -> Option<LockKind> {
    frames.iter().find_map(|f| {
        let name = f.function();
        crate::runtime::all_of(|r| r.lock_kinds)
            .find(|(_, names)| names.iter().any(|n| name.contains(n)))
            .map(|(kind, _)| *kind)
    })
}

/// A lock's kind from what it was seen doing: SysV semaphores and PI futexes
/// by their operations, futex words by the most common kind their waiter (or
/// else waker) stacks show, weighted by the operations each stands for.
pub fn classify<'a>(
    sysv: bool,
    pi_operations: bool,
    waiter_stacks: impl IntoIterator<Item = (&'a [crate::frame::Frame], u64)>,
    waker_stacks: impl IntoIterator<Item = (&'a [crate::frame::Frame], u64)>,
) -> LockKind {
    if sysv {
        return LockKind::SysvSem;
    }
    if pi_operations {
        return LockKind::PiMutex;
    }
    let vote = |stacks: &mut dyn Iterator<Item = (&'a [crate::frame::Frame], u64)>| {
        let mut votes: Vec<(LockKind, u64)> = vec![];
        for (frames, weight) in stacks {
            if let Some(kind) = kind_of_stack(frames) {
                match votes.iter_mut().find(|(k, _)| *k == kind) {
                    Some(v) => v.1 += weight,
                    None => votes.push((kind, weight)),
                }
            }
        }
        votes
            .into_iter()
            .max_by_key(|&(kind, w)| (w, std::cmp::Reverse(kind)))
            .map(|(k, _)| k)
    };
    vote(&mut waiter_stacks.into_iter())
        .or_else(|| vote(&mut waker_stacks.into_iter()))
        .unwrap_or(LockKind::Unknown)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stack(frames: &[&str]) -> Vec<crate::frame::Frame> {
        frames
            .iter()
            .map(|s| crate::frame::Frame::new(*s))
            .collect()
    }

    #[test]
    fn glibc_and_rust_stacks_name_their_kind() {
        let mutex = stack(&[
            "__lll_lock_wait (lowlevellock.c:49)",
            "___pthread_mutex_lock (pthread_mutex_lock.c:93)",
            "worker (a.c:10)",
        ]);
        assert_eq!(kind_of_stack(&mutex), Some(LockKind::Mutex));
        let cond = stack(&[
            "__futex_abstimed_wait_common64 (futex-internal.c:57) [inlined]",
            "__pthread_cond_wait_common (pthread_cond_wait.c:503) [inlined]",
            "___pthread_cond_wait (pthread_cond_wait.c:618)",
            "pool_worker (pool.c:30)",
        ]);
        assert_eq!(kind_of_stack(&cond), Some(LockKind::Condvar));
        // The mutex re-taken when a condition variable wait ends.
        let retake = stack(&[
            "__lll_lock_wait (lowlevellock.c:49)",
            "___pthread_cond_wait (pthread_cond_wait.c:618)",
        ]);
        assert_eq!(kind_of_stack(&retake), Some(LockKind::Mutex));
        let rw = stack(&[
            "__pthread_rwlock_rdlock_full64 (pthread_rwlock_common.c:460)",
            "___pthread_rwlock_rdlock (pthread_rwlock_rdlock.c:26)",
        ]);
        assert_eq!(kind_of_stack(&rw), Some(LockKind::Rwlock));
        let sem = stack(&[
            "do_futex_wait (sem_waitcommon.c:111)",
            "__new_sem_wait_slow64 (sem_waitcommon.c:183)",
            "__new_sem_wait (sem_wait.c:42)",
        ]);
        assert_eq!(kind_of_stack(&sem), Some(LockKind::Semaphore));
        let join = stack(&[
            "__futex_abstimed_wait_common (futex-internal.c:87)",
            "__pthread_clockjoin_ex (pthread_join_common.c:102)",
        ]);
        assert_eq!(kind_of_stack(&join), Some(LockKind::ThreadJoin));
        let rust = stack(&[
            "syscall (libc.so.6)",
            "std::sys::sync::mutex::futex::Mutex::lock_contended (futex.rs:68)",
        ]);
        assert_eq!(kind_of_stack(&rust), Some(LockKind::Mutex));
        assert_eq!(kind_of_stack(&stack(&["main (a.c:1)"])), None);
    }

    #[test]
    fn operations_decide_before_stacks_and_waiters_before_wakers() {
        let mutex = stack(&["__lll_lock_wait (x)"]);
        let signal = stack(&["___pthread_cond_signal (pthread_cond_signal.c:77)"]);
        assert_eq!(
            classify(true, false, [(&mutex[..], 5)], []),
            LockKind::SysvSem
        );
        assert_eq!(
            classify(false, true, [(&mutex[..], 5)], []),
            LockKind::PiMutex
        );
        assert_eq!(
            classify(false, false, [(&mutex[..], 5)], [(&signal[..], 9)]),
            LockKind::Mutex
        );
        assert_eq!(
            classify(false, false, [], [(&signal[..], 9)]),
            LockKind::Condvar
        );
        assert_eq!(classify(false, false, [], []), LockKind::Unknown);
        // The weightiest evidence wins.
        let cond = stack(&["___pthread_cond_wait (x)"]);
        assert_eq!(
            classify(false, false, [(&mutex[..], 2), (&cond[..], 7)], []),
            LockKind::Condvar
        );
        assert!(
            LockKind::Mutex.is_contention()
                && !LockKind::Condvar.is_contention()
                && !LockKind::ThreadJoin.is_contention()
        );
    }
}
