//! Issue #4: where threads wait, who wakes them, polling, yielding, CPU.

mod common;

use common::*;
use kerntax::report::{OffCpuReason, OffCpuThread, Report};

fn run_waits(args: &[&str]) -> Profiled {
    let exe = fixture("waits");
    let mut argv = vec![exe.to_str().unwrap()];
    argv.extend_from_slice(args);
    let p = run(&[], &argv);
    assert!(p.output.status.success(), "{}", p.stderr);
    p
}

fn printed(p: &Profiled, key: &str) -> i64 {
    let stdout = String::from_utf8_lossy(&p.output.stdout);
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key}= in {stdout}"))
        .parse()
        .unwrap()
}

fn thread(r: &Report, tid: u32) -> &OffCpuThread {
    r.offcpu
        .iter()
        .find(|t| t.tid == tid)
        .unwrap_or_else(|| panic!("no off-CPU record of {tid}"))
}

#[test]
fn a_second_blocked_in_read_is_io_wait_ended_by_the_writer() {
    if !bpf_available() {
        return;
    }
    let p = run_waits(&["pipe", "1000"]);
    let (reader, writer) = (
        printed(&p, "reader_tid") as u32,
        printed(&p, "writer_tid") as u32,
    );
    let own_ns = printed(&p, "blocked_ns") as f64;
    let r = &p.report;
    let t = thread(r, reader);
    let read = t
        .reasons
        .iter()
        .find(|x| x.reason == OffCpuReason::BlockingSyscall)
        .expect("blocking syscall time");
    assert!(
        (read.ns as f64 - own_ns).abs() <= own_ns * 0.05,
        "kerntax {} ns vs the program's {own_ns} ns",
        read.ns
    );
    assert!(read.ns >= 950_000_000);
    assert_eq!(read.syscalls.keys().collect::<Vec<_>>(), vec!["read"]);
    assert!(
        has_frame(&read.stacks[0].frames, "reader_thread"),
        "{:?}",
        read.stacks[0].frames
    );
    // The wake-up that ended it: the writer thread, through its write.
    let edge = r
        .wakeups
        .iter()
        .find(|w| w.woken_tid == reader)
        .expect("the reader's wake-up");
    assert_eq!((edge.waker_tid, edge.count), (writer, 1));
    assert_eq!(edge.mechanism, "write (pipe, socket, eventfd)");
    assert!(edge.waker_in_target);
    assert!((edge.wait_ns as f64 - own_ns).abs() <= own_ns * 0.05);
    assert!(
        has_frame(&edge.waker_stacks[0].frames, "writer_thread"),
        "{:?}",
        edge.waker_stacks
    );
    // The writer slept in usleep (nanosleep) until a timer woke it.
    let w = thread(r, writer);
    assert_eq!(w.reasons[0].reason, OffCpuReason::Sleep);
    let timer = r.wakeups.iter().find(|w| w.woken_tid == writer).unwrap();
    assert!(
        !timer.waker_in_target && timer.mechanism.starts_with("kernel"),
        "{timer:?}"
    );
    // The main thread joined: waiting, not contention.
    let main = thread(r, r.target_pid);
    assert_eq!(main.reasons[0].reason, OffCpuReason::WaitingForWork);
    assert!(
        p.stderr.contains("OFF-CPU") && p.stderr.contains("WAKE-UPS"),
        "{}",
        p.stderr
    );
}
