//! Collection: loads the BPF programs, marks the target's tasks as tracked,
//! streams sampled stacks and process events, and reads the kernel's counters
//! out of the maps when profiling stops.
//!
//! Nothing here interprets the numbers; it only turns BPF layouts into the
//! plain types of `crate::model`.

pub mod bpf;
mod counters;
pub mod cpu;
pub mod events;
pub mod evict;
pub mod features;
pub mod host;
mod kernel_btf;
mod libbpf_log;
pub mod trace;

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::CString;
use std::io::Read;
use std::mem::{MaybeUninit, size_of};
use std::os::unix::ffi::OsStringExt;
use std::rc::Rc;

use anyhow::{Context, Result};
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{Iter, MapCore, MapFlags, OpenObject, RingBuffer, RingBufferBuilder};

use crate::model::{LockCounters, ProgramCost, SyscallCounters, ThreadCounters, Totals};
use bpf::types;
pub use events::{Event, MapChange};

unsafe impl plain::Plain for types::kt_syscall_stats {}
unsafe impl plain::Plain for types::kt_errno_key {}
unsafe impl plain::Plain for types::kt_thread_record {}
unsafe impl plain::Plain for types::kt_kernel_loss {}
unsafe impl plain::Plain for types::kt_lock_key {}
unsafe impl plain::Plain for types::kt_lock_stats {}
unsafe impl plain::Plain for types::kt_lock_thread_key {}
unsafe impl plain::Plain for types::kt_offcpu_key {}
unsafe impl plain::Plain for types::kt_wakeup_key {}
unsafe impl plain::Plain for types::kt_time_count {}
unsafe impl plain::Plain for types::kt_poll_key {}
unsafe impl plain::Plain for types::kt_poll_stats {}
unsafe impl plain::Plain for types::kt_totals {}

/// Calls of one syscall a CPU times before it times only some (syscalls.h).
pub const TIME_ALL_CALLS: u64 = events::constants::KT_TIME_ALL as u64;
/// Past those, one call in this many is timed on average.
pub const TIME_PERIOD_CALLS: u64 = events::constants::KT_TIME_PERIOD as u64;

/// User stack bytes copied per sample (the BPF side's KT_STACK_BYTES).
pub const STACK_BYTES: usize =
    size_of::<types::kt_stack_event>() - std::mem::offset_of!(types::kt_stack_event, stack);

/// Events decoded by the ring buffer callback, waiting to be processed.
pub type EventQueue = Rc<RefCell<Vec<Event>>>;
/// `--perfetto`'s scheduling records, likewise.
pub type TraceQueue = Rc<RefCell<Vec<crate::sched_trace::Record>>>;

pub struct Collector<'obj> {
    cpu: Option<cpu::CpuSampler>,
    skel: bpf::SyscallsSkel<'obj>,
    ring: RingBuffer<'static>,
    queue: EventQueue,
    trace: TraceQueue,
    /// Records the ring buffer callbacks could not decode.
    pub undecodable_events: Rc<RefCell<u64>>,
    /// What the kernel offered the programs (collect/features.rs).
    pub features: features::KernelFeatures,
}

impl<'obj> Collector<'obj> {
    /// Loads and attaches the programs, sampling CPUs `cpu_hz` times a
    /// second (0: not at all), and streaming a record per scheduling event
    /// of the target's threads if `trace` (`--perfetto`; src/bpf/trace.bpf.h).
    /// Fails with the kernel's reason.
    /// libbpf's own log goes to stderr only with KERNTAX_DEBUG set: errors
    /// reach the user as one `kerntax:` line.
    pub fn load(
        storage: &'obj mut MaybeUninit<OpenObject>,
        cpu_hz: u64,
        trace: bool,
    ) -> Result<Self> {
        use features::Facility::*;
        let debug = std::env::var_os("KERNTAX_DEBUG").is_some();
        libbpf_log::capture();
        let features = features::probe(
            &crate::preflight::btf_path(),
            crate::preflight::kernel_version().unwrap_or((0, 0)),
        )
        .map_err(|why| anyhow::Error::new(crate::error::Exit::new(1, why)))?;
        if debug {
            for gap in features.gaps() {
                eprintln!(
                    "kerntax: debug: kernel lacks {} ({}, Linux {}): {}",
                    gap.facility, gap.what, gap.since, gap.copes
                );
            }
        }
        bpf::use_old_verifier_object(!features.has(GlobalFuncPointers) || !features.has(Callbacks));
        let builder = bpf::SyscallsSkelBuilder::default();
        let mut open = match std::env::var_os("KERNTAX_BTF") {
            // CO-RE against a BTF file instead of the kernel's own.
            Some(path) => {
                let path =
                    CString::new(path.into_vec()).context("KERNTAX_BTF contains a NUL byte")?;
                let opts = libbpf_rs::libbpf_sys::bpf_object_open_opts {
                    sz: size_of::<libbpf_rs::libbpf_sys::bpf_object_open_opts>() as _,
                    btf_custom_path: path.as_ptr(),
                    ..Default::default()
                };
                // libbpf copies the path during open; `path` outlives the call.
                builder.open_opts(opts, storage)
            }
            None => builder.open(storage),
        }
        .context("opening the BPF object")?;
        // The snapshot iterator is attached on demand, once per snapshot.
        open.progs.kt_snapshot.set_autoattach(false);
        open.progs.kt_cpu_sample.set_autoattach(false);
        // One sched_switch program: with prev_state (5.18+) or reading it.
        let legacy_switch = !features.has(SwitchPrevState);
        open.progs.kt_switch.set_autoload(!legacy_switch);
        open.progs.kt_switch_legacy.set_autoload(legacy_switch);
        // A tp_btf program on a tracepoint the kernel lacks fails the whole
        // load (sched_prepare_exec: 6.10); without the VMA iterator it
        // would send nothing.
        if !features.has(PrepareExec) {
            open.progs.kt_prepare_exec.set_autoload(false);
        }
        // Per-thread state: task storage, or a hash map where there is none.
        if features.has(TaskStorage) {
            open.maps.kt_task_map.set_autocreate(false)?;
        } else {
            open.maps.kt_tasks.set_autocreate(false)?;
        }
        // Before 6.1 a perf event's program may not use a map allocated as
        // it goes, and an allocation inside the scheduler's hooks can
        // deadlock: those maps are preallocated there.
        if !features.has(MemAlloc) {
            for map in [
                &mut open.maps.kt_kstacks,
                &mut open.maps.kt_task_map,
                &mut open.maps.kt_offcpu,
                &mut open.maps.kt_wakeups,
            ] {
                map.set_map_flags(0).context("preallocating a map")?;
            }
        }
        // KERNTAX_DEBUG: the verifier's statistics for every program (the
        // instructions it processed, which kernels before 5.16 state only
        // there).
        if debug {
            for mut prog in open.open_object_mut().progs_mut() {
                prog.set_log_level(4);
            }
        }
        // KERNTAX_DEBUG_PROGS=name,name: load only those programs (and the
        // snapshot iterator), to find which one a kernel cannot verify.
        if let Ok(only) = std::env::var("KERNTAX_DEBUG_PROGS") {
            let keep: Vec<&str> = only.split(',').chain(["kt_snapshot"]).collect();
            for mut prog in open.open_object_mut().progs_mut() {
                if !keep.contains(&prog.name().to_string_lossy().as_ref()) {
                    prog.set_autoload(false);
                }
            }
        }
        if let Some(rodata) = open.maps.rodata_data.as_deref_mut() {
            rodata.kt_self_tgid = std::process::id();
            rodata.kt_cfg_trace = u32::from(trace);
            rodata.kt_cfg_ncpus =
                libbpf_rs::num_possible_cpus().context("counting the possible CPUs")? as u32;
            rodata.kt_cfg_task_storage = u32::from(features.has(TaskStorage));
            rodata.kt_cfg_current_btf = u32::from(features.has(CurrentTaskBtf));
            rodata.kt_cfg_find_vma = u32::from(features.has(FindVma));
            rodata.kt_cfg_task_pt_regs = u32::from(features.has(TaskPtRegs));
            rodata.kt_cfg_open_iter = u32::from(features.has(OpenIterators));
            rodata.kt_cfg_vma_iter = u32::from(features.has(VmaIterator));
            rodata.kt_cfg_sized_records = u32::from(features.has(SizedRecords));
            rodata.kt_cfg_lose_map_changes = lose_map_changes()?;
        }
        // Without --perfetto its ring stays one page and the new-task
        // wake-up hook unattached: the default mode pays nothing for it.
        if trace {
            open.maps
                .kt_trace
                .set_max_entries(trace::RINGBUF_BYTES)
                .context("sizing the trace ring buffer")?;
        } else {
            open.progs.kt_trace_wakeup_new.set_autoattach(false);
        }
        let mut skel = open.load().map_err(|e| match libbpf_log::rejected() {
            Some((prog, said)) => anyhow::Error::new(crate::error::Exit::new(
                1,
                format!(
                    "the kernel's verifier rejected kerntax's BPF program {prog} (kernel {}){}{} \
                         (KERNTAX_DEBUG=1 shows libbpf's whole log)",
                    crate::preflight::kernel_release(),
                    if said.is_empty() { "" } else { ": " },
                    said.join(" / ")
                ),
            )),
            None => anyhow::Error::new(e).context("loading the BPF programs into the kernel"),
        })?;
        if debug {
            print_verified(&skel);
        }
        skel.attach().context("attaching the BPF programs")?;
        let cpu = if cpu_hz > 0 {
            Some(cpu::CpuSampler::start(&skel.progs.kt_cpu_sample, cpu_hz)?)
        } else {
            None
        };

        let queue: EventQueue = Rc::default();
        let trace_queue: TraceQueue = Rc::default();
        let undecodable_events: Rc<RefCell<u64>> = Rc::default();
        let mut builder = RingBufferBuilder::new();
        let (q, bad) = (queue.clone(), undecodable_events.clone());
        builder
            .add(&skel.maps.kt_events, move |data: &[u8]| {
                match Event::decode(data) {
                    Some(ev) => q.borrow_mut().push(ev),
                    None => *bad.borrow_mut() += 1,
                }
                0
            })
            .context("setting up the BPF ring buffer")?;
        if trace {
            let (q, bad) = (trace_queue.clone(), undecodable_events.clone());
            builder
                .add(&skel.maps.kt_trace, move |data: &[u8]| {
                    match trace::decode(data) {
                        Some(r) => q.borrow_mut().push(r),
                        None => *bad.borrow_mut() += 1,
                    }
                    0
                })
                .context("setting up the trace ring buffer")?;
        }
        let ring = builder.build().context("setting up the BPF ring buffer")?;
        Ok(Collector {
            cpu,
            skel,
            ring,
            queue,
            trace: trace_queue,
            undecodable_events,
            features,
        })
    }

    /// Marks process `pid`, its threads and its existing descendants as
    /// tracked, and returns their counters at this moment (the baseline).
    pub fn track(&self, pid: u32) -> Result<Vec<ThreadCounters>> {
        self.skel
            .maps
            .kt_tgids
            .update(&pid.to_ne_bytes(), &1u32.to_ne_bytes(), MapFlags::ANY)
            .context("registering the target process")?;
        // Each pass adopts the children of processes adopted so far.
        let mut threads = self.snapshot()?;
        loop {
            let next = self.snapshot()?;
            if next.len() == threads.len() {
                return Ok(next);
            }
            threads = next;
        }
    }

    /// Registers a CPython process for the frame walk at sample time
    /// (src/bpf/python.bpf.h).
    pub fn register_python(&self, pid: u32, config: &bpf::types::kt_py_proc) -> Result<()> {
        // SAFETY: kt_py_proc is Plain: a repr(C) struct of integers.
        let value = unsafe { plain::as_bytes(config) };
        self.skel
            .maps
            .kt_py_procs
            .update(&pid.to_ne_bytes(), value, MapFlags::ANY)
            .context("registering a Python process")
    }

    /// Registers a CRuby process for the frame walk at sample time
    /// (src/bpf/ruby.bpf.h).
    pub fn register_ruby(&self, pid: u32, config: &bpf::types::kt_rb_proc) -> Result<()> {
        // SAFETY: kt_rb_proc is Plain: a repr(C) struct of integers.
        let value = unsafe { plain::as_bytes(config) };
        self.skel
            .maps
            .kt_rb_procs
            .update(&pid.to_ne_bytes(), value, MapFlags::ANY)
            .context("registering a Ruby process")
    }

    /// Seeds the interest-set sizes of the epoll instances `pids` already
    /// have (an attached server registered its fds before kerntax came):
    /// from /proc/PID/fdinfo, where each watched fd is a `tfd:` line.
    /// Later epoll_ctl calls adjust them as for a fresh instance. Returns
    /// the instances seeded; a process that cannot be read is skipped (it
    /// only loses the interest set it had before the attach).
    pub fn seed_epoll_sizes(&self, pids: &[u32]) -> usize {
        let mut seeded = 0;
        for &pid in pids {
            for (epfd, size) in epoll_sets(pid) {
                // kt_epoll_key: pid, epfd (no padding).
                let mut key = pid.to_ne_bytes().to_vec();
                key.extend(epfd.to_ne_bytes());
                if self
                    .skel
                    .maps
                    .kt_epoll_sizes
                    .update(&key, &size.to_ne_bytes(), MapFlags::ANY)
                    .is_ok()
                {
                    seeded += 1;
                }
            }
        }
        seeded
    }

    /// Counters of every live tracked thread, read by a task iterator.
    pub fn snapshot(&self) -> Result<Vec<ThreadCounters>> {
        let link = self
            .skel
            .progs
            .kt_snapshot
            .attach()
            .context("attaching the task iterator")?;
        let mut bytes = Vec::new();
        Iter::new(&link)
            .and_then(|mut it| it.read_to_end(&mut bytes).map_err(libbpf_rs::Error::from))
            .context("reading the task iterator")?;
        let record = size_of::<types::kt_thread_record>();
        Ok(bytes.chunks_exact(record).map(thread_counters).collect())
    }

    /// Whether the kernel streams changes of executable file mappings
    /// (src/bpf/maps.bpf.h): known once a snapshot has run.
    pub fn map_events_on(&self) -> bool {
        self.skel
            .maps
            .bss_data
            .as_deref()
            .is_some_and(|b| b.kt_map_events_on != 0)
    }

    /// Whether the kernel sends a process's mappings as its image ends:
    /// at its exec (sched_prepare_exec) or its exit (the exit tracepoint
    /// before the memory map goes).
    pub fn image_maps_sent(&self) -> bool {
        use features::Facility::{ExitKeepsMm, PrepareExec};
        self.features.has(PrepareExec) || self.features.has(ExitKeepsMm)
    }

    /// Like `snapshot`, and moves what each live thread keeps pending (its
    /// off-CPU time and wake-ups since the key it counts them under last
    /// changed) into the maps, for a live view's window. While the programs
    /// run, a switch of that thread on another CPU may race the move and
    /// lose or double one interval: a live window can be that inexact; the
    /// end of a run flushes after the programs are detached, exactly.
    pub fn snapshot_flushing(&mut self) -> Result<Vec<ThreadCounters>> {
        let set = |c: &mut Self, on: u32| {
            if let Some(bss) = c.skel.maps.bss_data.as_deref_mut() {
                bss.kt_flush_pending = on;
            }
        };
        set(self, 1);
        let out = self.snapshot();
        set(self, 0);
        out
    }

    /// The target's running totals now, summed over CPUs.
    pub fn totals(&self) -> Result<Totals> {
        let per_cpu = self
            .skel
            .maps
            .kt_totals
            .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)?;
        let mut t = Totals::default();
        for bytes in per_cpu.unwrap_or_default() {
            let mut v = types::kt_totals::default();
            plain::copy_from_bytes(&mut v, &bytes).expect("totals size");
            t.syscalls += v.syscalls;
            t.voluntary_switches += v.voluntary_switches;
            t.involuntary_switches += v.involuntary_switches;
            t.exited_runtime_ns += v.exited_runtime_ns;
            t.exited_utime_ns += v.exited_utime_ns;
            t.exited_stime_ns += v.exited_stime_ns;
        }
        Ok(t)
    }

    /// The kernel stacks (innermost first) CPU samples recorded, by number.
    pub fn kernel_stacks(&self) -> HashMap<i32, Vec<u64>> {
        let map = &self.skel.maps.kt_kstacks;
        map.keys()
            .filter_map(|key| {
                let value = map.lookup(&key, MapFlags::ANY).ok()??;
                let id = i32::from_ne_bytes(value.get(..4)?.try_into().ok()?);
                let ips = key.chunks_exact(8).map(read_u64).take_while(|&ip| ip != 0);
                Some((id, ips.collect()))
            })
            .collect()
    }

    /// How syscall entries are chosen for a stack sample, in words.
    pub fn sampling_policy(&self) -> String {
        let rodata = self
            .skel
            .maps
            .rodata_data
            .as_ref()
            .expect("the object has read-only data");
        let (all, max) = (
            1u64 << rodata.kt_cfg_sample_shift,
            1u64 << rodata.kt_cfg_max_period_log2,
        );
        format!(
            "every call until a CPU has seen {all} of a syscall, then ~{} random samples per doubling of its count, \
             mean gap at most {max} calls; each weighted by the calls it stands for",
            all / 2
        )
    }

    /// How syscall latencies are measured, for the report to state.
    pub fn latency_policy() -> String {
        format!(
            "every call timed until a CPU has seen {} of a syscall, then 1 in {} on average (random gaps); \
             counts, errors and bytes stay exact and the rest is scaled from the timed calls; \
             lock operations and poll-family calls always timed",
            TIME_ALL_CALLS, TIME_PERIOD_CALLS
        )
    }

    pub fn epoll_fd(&self) -> i32 {
        self.ring.epoll_fd()
    }

    /// Everything in the ring buffer now. Stack samples are submitted
    /// without waking an epoll waiter (syscalls.bpf.c, `sample_wakeup`), so
    /// a poll would leave them there until the ring filled to a quarter or
    /// the run ended: the ring is consumed, whatever epoll says (issue 20:
    /// a short Python run's samples were all unwound after it exited, too
    /// late to read its code objects).
    pub fn drain(&self) -> Result<Vec<Event>> {
        self.ring
            .consume()
            .context("draining the BPF ring buffer")?;
        Ok(self.queue.take())
    }

    /// The scheduling records drained so far (`--perfetto`), in the order
    /// they were reserved in the ring (near time order; the writer sorts).
    pub fn take_trace(&self) -> Vec<crate::sched_trace::Record> {
        self.trace.take()
    }

    /// Detaches the counting programs (the maps keep their contents) and
    /// returns the events still in the ring buffer. The exit program stays
    /// until `detach_exit`, after the final snapshot: a thread that exits
    /// between the two would otherwise be in neither (CI on 64e8add: 4 of
    /// a producer's 32 sending threads, ending with the profile, missing
    /// from its report).
    pub fn stop(&mut self) -> Result<Vec<Event>> {
        self.cpu = None;
        let exit = self.skel.links.kt_exit.take();
        self.skel.links = Default::default();
        self.skel.links.kt_exit = exit;
        // The next snapshot (the final one) moves what threads keep
        // pending in their task storage into the off-CPU and wake-up maps.
        if let Some(bss) = self.skel.maps.bss_data.as_deref_mut() {
            bss.kt_flush_pending = 1;
        }
        self.drain()
    }

    /// Detaches the exit program (`stop` kept it for the final snapshot)
    /// and returns what it put in the ring buffer since.
    pub fn detach_exit(&mut self) -> Result<Vec<Event>> {
        self.skel.links = Default::default();
        self.drain()
    }

    /// What each of kerntax's programs cost in the kernel so far: runs and
    /// time inside the program, by name. The kernel counts these only while
    /// `kernel.bpf_stats_enabled` is 1 (it costs two clock reads per run),
    /// so without it every figure is 0; a program nothing ran is left out.
    pub fn program_costs(&self) -> Vec<ProgramCost> {
        use std::os::fd::AsFd;
        let mut costs: Vec<ProgramCost> = self
            .skel
            .object()
            .progs()
            .filter_map(|prog| {
                let info = prog_info(prog.as_fd())?;
                (info.run_cnt > 0 || info.recursion_misses > 0).then(|| ProgramCost {
                    name: prog.name().to_string_lossy().into_owned(),
                    runs: info.run_cnt,
                    run_ns: info.run_time_ns,
                    recursion_misses: info.recursion_misses,
                })
            })
            .collect();
        costs.sort_by_key(|c| std::cmp::Reverse(c.run_ns));
        costs
    }
}

fn read_u64(bytes: &[u8]) -> u64 {
    let mut v = 0u64;
    plain::copy_from_bytes(&mut v, bytes).expect("u64 value");
    v
}

fn time_count(bytes: &[u8]) -> types::kt_time_count {
    let mut t = types::kt_time_count::default();
    plain::copy_from_bytes(&mut t, bytes).expect("time/count size");
    t
}

fn lock_counters(bytes: &[u8]) -> LockCounters {
    let mut s = types::kt_lock_stats::default();
    plain::copy_from_bytes(&mut s, bytes).expect("lock stats size");
    LockCounters {
        waits: s.waits,
        blocked: s.blocked,
        futile: s.futile,
        timeouts: s.timeouts,
        wait_ns: s.wait_ns,
        blocked_ns: s.blocked_ns,
        max_wait_ns: s.max_wait_ns,
        cpu_ns: s.cpu_ns,
        wakes: s.wakes,
        woken: s.woken,
        other: s.other,
        pi: s.pi,
        samples: s.samples,
        hist_log2_ns: s.hist_log2_ns.to_vec(),
    }
}

/// What the kernel says of a loaded program (its run-time stats, its
/// instructions as loaded and verified), or None if it would not say.
pub fn prog_info(
    prog: std::os::fd::BorrowedFd<'_>,
) -> Option<libbpf_rs::libbpf_sys::bpf_prog_info> {
    use std::os::fd::AsRawFd;
    let mut info = libbpf_rs::libbpf_sys::bpf_prog_info::default();
    let mut len = size_of::<libbpf_rs::libbpf_sys::bpf_prog_info>() as u32;
    // SAFETY: a loaded program's fd, and a buffer of `len` bytes.
    let rc = unsafe {
        libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(prog.as_raw_fd(), &mut info, &mut len)
    };
    (rc == 0).then_some(info)
}

/// With KERNTAX_DEBUG: each program's instructions as loaded and as the
/// verifier walked them (what its load time grows with).
fn print_verified(skel: &bpf::SyscallsSkel<'_>) {
    use libbpf_rs::skel::Skel;
    use std::os::fd::AsFd;
    for prog in skel.object().progs() {
        if let Some(info) = prog_info(prog.as_fd()) {
            let name = prog.name().to_string_lossy();
            let verified = match info.verified_insns {
                0 => libbpf_log::processed_insns(&name).unwrap_or(0),
                n => u64::from(n),
            };
            eprintln!(
                "kerntax: debug: {name}: {} instructions, {verified} verified",
                info.xlated_prog_len / 8,
            );
        }
    }
}

fn syscall_counters(nr: u32, bytes: &[u8]) -> SyscallCounters {
    let mut s = types::kt_syscall_stats::default();
    plain::copy_from_bytes(&mut s, bytes).expect("syscall stats size");
    SyscallCounters {
        nr,
        calls: s.calls,
        returns: s.returns,
        errors: s.errors,
        timed: s.timed,
        total_ns: s.total_ns,
        max_ns: s.max_ns,
        samples: s.samples,
        samples_deferred: s.samples_deferred,
        ret_sum: s.ret_sum,
        req_sum: s.req_sum,
        hist_log2_ns: s.hist_log2_ns.to_vec(),
    }
}

/// The epoll instances open in process `pid`: (fd, fds it watches).
fn epoll_sets(pid: u32) -> Vec<(i32, i64)> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return vec![];
    };
    dir.flatten()
        .filter_map(|e| {
            let fd: i32 = e.file_name().to_str()?.parse().ok()?;
            let link = std::fs::read_link(e.path()).ok()?;
            if link.to_str()? != "anon_inode:[eventpoll]" {
                return None;
            }
            let info = std::fs::read(format!("/proc/{pid}/fdinfo/{fd}")).ok()?;
            Some((fd, epoll_interest(&info)))
        })
        .collect()
}

/// The interest-set size an epoll instance's fdinfo states: one `tfd:`
/// line per watched fd.
pub fn epoll_interest(fdinfo: &[u8]) -> i64 {
    fdinfo
        .split(|&b| b == b'\n')
        .filter(|l| l.starts_with(b"tfd:"))
        .count() as i64
}

pub(crate) fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

fn thread_counters(bytes: &[u8]) -> ThreadCounters {
    let mut r = types::kt_thread_record::default();
    plain::copy_from_bytes(&mut r, bytes).expect("thread record size");
    let comm: Vec<u8> = r.comm.iter().map(|&c| c as u8).collect();
    ThreadCounters {
        pid: r.pid,
        tid: r.tid,
        ppid: r.ppid,
        exited: r.exited != 0,
        exit_code: r.exit_code,
        comm: c_string(&comm),
        utime_ns: r.utime_ns,
        stime_ns: r.stime_ns,
        runtime_ns: r.runtime_ns,
        voluntary_switches: r.voluntary_switches,
        involuntary_switches: r.involuntary_switches,
        start_ns: r.start_ns,
        yields: r.yields,
        syscalls: r.syscalls,
    }
}

/// `KERNTAX_FAULT_LOSE_MAP_CHANGES=N`: a fault for tests, every Nth change of
/// a process's executable mappings lost in the kernel as to a full ring
/// buffer (src/bpf/maps.bpf.h), so that what kerntax does with the samples
/// after a lost change can be seen at will. Unset or 0: none.
fn lose_map_changes() -> Result<u32> {
    match std::env::var("KERNTAX_FAULT_LOSE_MAP_CHANGES") {
        Err(_) => Ok(0),
        Ok(v) => v.trim().parse().map_err(|_| {
            anyhow::Error::new(crate::error::Exit::new(
                2,
                format!("KERNTAX_FAULT_LOSE_MAP_CHANGES: '{v}' is not a count"),
            ))
        }),
    }
}
