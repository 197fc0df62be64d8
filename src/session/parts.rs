//! The event loop's hand-offs: events to the unwinder and the tallies, new
//! interpreters to the BPF frame walk, and the run's losses gathered.

use crate::collect::{Collector, Event};
use crate::model::KernelLoss;
use crate::report::Loss;
use crate::stacks::jit;
use crate::stacks::unwind::Unwinding;
use crate::tally::SampleTally;

pub(super) fn handle(
    events: Vec<Event>,
    unwinding: &mut Unwinding,
    tally: Option<&mut SampleTally>,
    window: Option<&mut SampleTally>,
) {
    let mut out = Vec::new();
    unwinding.new_batch();
    for ev in events {
        match ev {
            Event::Stack(s) => unwinding.push(*s, &mut out),
            Event::Fork { pid, ppid, .. } => unwinding.on_fork(pid, ppid),
            Event::Exec { pid, filename, .. } => unwinding.on_exec(pid, &filename),
            Event::ExitMaps { pid, maps, .. } => unwinding.on_exit_maps(pid, &maps, &mut out),
            Event::MapChange(c) => unwinding.on_map_change(&c),
            Event::ExecMaps { pid, maps } => unwinding.on_exec_maps(pid, &maps, &mut out),
        }
    }
    match (tally, window) {
        (Some(t), Some(w)) => {
            w.add(out.clone());
            t.add(out);
        }
        (Some(t), None) => t.add(out),
        (None, Some(w)) => w.add(out),
        (None, None) => {}
    }
}

/// Hands the CPython processes found since the last call to the BPF frame
/// walk. One that cannot be registered (the map full) just gets no Python
/// frames; `sampling.interpreters` counts them.
pub(super) fn register_pythons(collector: &Collector<'_>, unwinding: &mut Unwinding) {
    for (pid, config) in std::mem::take(&mut unwinding.python.to_register) {
        if collector.register_python(pid, &config).is_err() {
            unwinding.python.stats.registrations_failed += 1;
        }
    }
    for (pid, config) in std::mem::take(&mut unwinding.ruby.to_register) {
        if collector.register_ruby(pid, &config).is_err() {
            unwinding.ruby.stats.registrations_failed += 1;
        }
    }
}

/// What the interpreters' frame walk gave, for the report.
pub(super) fn interpreters(u: &Unwinding) -> crate::report::Interpreters {
    let mut out = crate::report::Interpreters::default();
    for r in u.readers() {
        out.add(r.stats());
    }
    out.seen = u
        .readers()
        .iter()
        .flat_map(|r| r.seen())
        .map(|(pid, what)| format!("pid {pid}: {what}"))
        .collect();
    out
}

pub(crate) fn loss(
    kernel: &KernelLoss,
    undecodable: u64,
    unwinding: &Unwinding,
    unresolved_frames: u64,
    threads_unaccounted: u64,
    bpf_recursion_misses: u64,
    jit: &jit::Gathered,
) -> Loss {
    Loss {
        ringbuf_full: kernel.ringbuf_full,
        stack_read_failed: kernel.stack_read_failed,
        task_storage_failed: kernel.task_storage_failed,
        thread_map_full: kernel.thread_map_full,
        errno_map_full: kernel.errno_map_full,
        syscall_nr_out_of_range: kernel.syscall_nr_out_of_range,
        events_undecodable: undecodable,
        maps_unavailable: unwinding.stats.maps_unavailable,
        stacks_truncated: unwinding.stats.truncated,
        frames_unsymbolized: unresolved_frames,
        modules_unreadable: unwinding.modules.failed,
        threads_unaccounted,
        lock_map_full: kernel.lock_map_full,
        lock_thread_map_full: kernel.lock_thread_map_full,
        sched_map_full: kernel.sched_map_full,
        poll_map_full: kernel.poll_map_full,
        kernel_stack_lost: kernel.kernel_stack_lost,
        switch_in_unseen: kernel.switch_in_unseen,
        bpf_recursion_misses,
        jit_frames_unnamed: jit.frames_unnamed(),
        jit_stacks_cut: jit.stacks_cut,
        interpreted_frames_unreadable: unwinding
            .readers()
            .iter()
            .map(|r| r.stats().frames_unreadable)
            .sum(),
        interpreted_chains_faulted: unwinding.python.stats.samples_fault
            + unwinding.ruby.stats.samples_fault,
        trace_ringbuf_full: kernel.trace_ringbuf_full,
        // The trace's, set by the caller.
        trace_records_unkept: 0,
        // The tally's, set by the caller.
        cpu_stacks_unkept: 0,
        process_maps_forgotten: unwinding.exited_forgotten,
        map_changes_unread: kernel.map_changes_unread,
        maps_lost_untracked: kernel.maps_lost_untracked,
        frames_in_lost_maps: unwinding.stats.frames_in_lost_maps,
    }
}
