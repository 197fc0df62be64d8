//! Decoding of `--perfetto`'s scheduling records (src/bpf/trace.h) into the
//! plain `sched_trace::Record`. A record of the wrong size or an unknown
//! kind is rejected (and counted by the caller), never guessed at.

use std::mem::size_of;

use super::bpf::types;
use super::events::lock_key;
use crate::sched_trace::{Comm, Kind, Left, Record, Task, ftrace_prev_state};

unsafe impl plain::Plain for types::kt_trace_record {}

/// The BPF side's kind and flag values (trace.h).
const KT_TR_SWITCH: u32 = 1;
const KT_TR_WAKING: u32 = 2;
const KT_TR_NEW: u32 = 3;
const KT_TR_WAKEUP_NEW: u32 = 4;
const KT_TR_EXIT: u32 = 5;
const KT_TR_PREV_TRACKED: u32 = 1;
const KT_TR_NEXT_TRACKED: u32 = 2;
const KT_TR_IN_TIMER: u32 = 4;
const KT_TR_WAKER_TRACKED: u32 = 8;
/// enum kt_off_reason (sched.h).
const KT_OFF_PREEMPTED: u32 = 1;
const KT_OFF_SYSCALL: u32 = 2;

/// The ring buffer's size with --perfetto (KT_TRACE_RINGBUF_BYTES).
pub const RINGBUF_BYTES: u32 = 16 << 20;

fn comm(raw: &[i8; 16]) -> Comm {
    Comm(raw.map(|c| c as u8))
}

pub fn decode(data: &[u8]) -> Option<Record> {
    if data.len() != size_of::<types::kt_trace_record>() {
        return None;
    }
    let r: &types::kt_trace_record = plain::from_bytes(data).ok()?;
    let first = Task {
        pid: r.pid,
        tid: r.tid,
        prio: r.prio,
        comm: comm(&r.comm),
    };
    let second = Task {
        pid: r.pid2,
        tid: r.tid2,
        prio: r.prio2,
        comm: comm(&r.comm2),
    };
    let kind = match r.kind {
        KT_TR_SWITCH => Kind::Switch {
            prev: first,
            next: second,
            prev_state: ftrace_prev_state(r.preempt != 0, r.state, r.exit_state),
            left: (r.flags & KT_TR_PREV_TRACKED != 0).then(|| match r.off_reason {
                KT_OFF_PREEMPTED => Left::Preempted,
                KT_OFF_SYSCALL => Left::Syscall {
                    nr: r.nr,
                    lock: lock_key(&r.lock),
                },
                _ => Left::Other,
            }),
            next_tracked: r.flags & KT_TR_NEXT_TRACKED != 0,
        },
        KT_TR_WAKING => Kind::Waking {
            woken: first,
            waker: second,
            in_timer: r.flags & KT_TR_IN_TIMER != 0,
            waker_tracked: r.flags & KT_TR_WAKER_TRACKED != 0,
            target_cpu: r.target_cpu,
        },
        KT_TR_NEW => Kind::New {
            task: first,
            parent: second,
        },
        KT_TR_WAKEUP_NEW => Kind::WakeupNew {
            task: first,
            waker: second,
            target_cpu: r.target_cpu,
        },
        KT_TR_EXIT => Kind::Exit { task: first },
        _ => return None,
    };
    Some(Record {
        ts_ns: r.ts_ns,
        cpu: r.cpu,
        kind,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(r: &types::kt_trace_record) -> Vec<u8> {
        // SAFETY: kt_trace_record is Plain: a repr(C) struct of integers.
        unsafe { plain::as_bytes(r) }.to_vec()
    }

    #[test]
    fn a_switch_decodes_with_its_sleep_and_lock() {
        let mut r = types::kt_trace_record {
            ts_ns: 5,
            kind: KT_TR_SWITCH,
            cpu: 1,
            pid: 10,
            tid: 11,
            pid2: 20,
            tid2: 20,
            prio: 120,
            prio2: 100,
            state: 1,
            flags: KT_TR_PREV_TRACKED,
            off_reason: KT_OFF_SYSCALL,
            nr: 202,
            ..Default::default()
        };
        r.lock.kind = 1;
        r.lock.pid = 10;
        r.lock.addr = 0x4000;
        r.comm[0] = b'w' as i8;
        let got = decode(&bytes(&r)).unwrap();
        assert_eq!((got.ts_ns, got.cpu), (5, 1));
        let Kind::Switch {
            prev,
            next,
            prev_state,
            left,
            next_tracked,
        } = got.kind
        else {
            panic!("{got:?}")
        };
        assert_eq!(
            (prev.tid, prev.comm.to_str(), next.prio),
            (11, "w".into(), 100)
        );
        assert_eq!((prev_state, next_tracked), (1, false));
        assert_eq!(
            left,
            Some(Left::Syscall {
                nr: 202,
                lock: Some(crate::model::LockKey::Private {
                    pid: 10,
                    addr: 0x4000
                })
            })
        );
    }

    #[test]
    fn a_short_record_or_an_unknown_kind_is_refused() {
        let r = types::kt_trace_record {
            kind: 99,
            ..Default::default()
        };
        assert!(decode(&bytes(&r)).is_none());
        assert!(decode(&bytes(&r)[..8]).is_none());
    }
}
