//! Decoding of ring buffer records into owned events. A record whose size does
//! not match its kind is rejected (and counted by the caller), never guessed at.

use std::mem::size_of;

use super::bpf::types;
use super::c_string;
use crate::model::{LockKey, LockOp, LockSample, Waker};

unsafe impl plain::Plain for types::kt_event_header {}
unsafe impl plain::Plain for types::kt_stack_event {}
unsafe impl plain::Plain for types::kt_stack_sample {}
unsafe impl plain::Plain for types::kt_proc_event {}
unsafe impl plain::Plain for types::kt_exit_maps_event {}
unsafe impl plain::Plain for types::kt_map_change_event {}
unsafe impl plain::Plain for types::kt_py_proc {}

#[allow(dead_code)]
pub(crate) mod constants {
    include!(concat!(env!("OUT_DIR"), "/bpf_constants.rs"));
}
use constants::*;

/// A mapping of an exiting process: a file's, the anonymous one right after
/// a file's (its .bss), or the heap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExitMapping {
    pub start: u64,
    pub end: u64,
    pub offset: u64,
    /// As in /proc/PID/maps: (major << 32) | minor; 0 for anonymous memory.
    pub dev: u64,
    pub inode: u64,
    pub executable: bool,
    pub heap: bool,
}

const KT_MAPPING_EXEC: u32 = 1;
const KT_MAPPING_HEAP: u32 = 2;
const KT_CHANGE_UNREAD: u32 = 1;
const KT_CHANGE_TRUNCATED: u32 = 2;
const KT_CHANGE_PATH_CUT: u32 = 4;
/// KT_PATH_PART_BYTES: each name's cell in a map change's path.
const PATH_PART_BYTES: usize = 64;

fn exit_mapping(m: &types::kt_exit_mapping) -> ExitMapping {
    ExitMapping {
        start: m.start,
        end: m.end,
        offset: m.offset,
        dev: if m.ino == 0 { 0 } else { proc_dev(m.dev) },
        inode: m.ino,
        executable: m.flags & KT_MAPPING_EXEC != 0,
        heap: m.flags & KT_MAPPING_HEAP != 0,
    }
}

/// Registers and the copied top of the user stack at a sampled syscall.
#[derive(Clone, Debug)]
pub struct StackSample {
    pub pid: u32,
    pub tid: u32,
    pub nr: u32,
    /// Calls, lock operations or wake-ups it stands for (see the roles).
    pub weight: u64,
    /// Role: stands for `weight` calls of syscall `nr` (lock operations are
    /// syscalls too).
    pub call: bool,
    /// Role: stands for `weight` operations on this lock.
    pub lock: Option<LockSample>,
    /// Role: stands for this much sleep inside syscall `nr` (0: not this role).
    pub off_ns: u64,
    /// ... in this many sleeps, the last ended by `waker` (None: no wake-up
    /// seen, e.g. a signal or the end of the run).
    pub off_count: u64,
    pub waker: Option<Waker>,
    /// When the sleeping call returned (CLOCK_MONOTONIC ns), for the
    /// timeline: the sleep ended then.
    pub at_ns: u64,
    /// The lock a lock syscall operated on, whichever role the sample has.
    pub lock_key: Option<LockKey>,
    /// The syscall's return value, for samples taken at its exit.
    pub ret: i32,
    /// Role: stands for `weight` wake-ups by the sampled thread of
    /// (woken pid, woken tid, what the waker had run since its
    /// own last sleep, as `Waker::ran_log2`).
    pub woken: Option<(u32, u32, u8)>,
    /// A poll-family call: (fds passed, fds ready).
    pub poll: Option<(u32, u32)>,
    /// Role: one on-CPU sample.
    pub cpu: Option<CpuSample>,
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
    /// User stack bytes starting at `sp`.
    pub stack: Vec<u8>,
    /// Pages of `stack` that could not be read, their bytes meaningless:
    /// bit 0 the page holding sp, then each next page (most often a page
    /// the thread was faulting in as its stack grew).
    pub absent_pages: u8,
    /// Where its process's executable mappings are not known (a change of
    /// them lost, none since): `start..end`, whose frames are not named.
    pub maps_lost: Option<(u64, u64)>,
    /// Taken with no user stack to read (the thread exiting, or its image
    /// replaced by execve): not a loss, and no user frames to show.
    pub no_user_stack: bool,
    /// An on-CPU sample in user code: the machine code from its instruction
    /// minus `frame::code::CODE_BEFORE`.
    pub code: Option<Vec<u8>>,
    /// A sampled call of a file syscall: the path it named.
    pub path: Option<String>,
    /// A Python process's sample: the thread's Python frames as BPF read
    /// them (None: the process is not registered as Python).
    pub python: Option<crate::interp::python::walk::PyFrames>,
    /// A Ruby process's sample: the thread's Ruby frames as BPF read them.
    pub ruby: Option<crate::interp::ruby::walk::RbFrames>,
}

/// What an on-CPU sample saw besides the user stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct CpuSample {
    /// The kernel's stack (key in the stack map) when it ran kernel code.
    pub kernel_stack: Option<i32>,
    pub in_kernel: bool,
    /// At a spin-wait (PAUSE) loop in user code.
    pub spinning: bool,
    /// Just after a compare-and-swap (LOCK CMPXCHG) in user code.
    pub after_cas: bool,
}

impl StackSample {
    /// The sample without its (large) stack bytes, once unwound.
    pub fn without_stack(&self) -> StackSample {
        StackSample {
            stack: Vec::new(),
            python: None,
            ruby: None,
            ..self.clone()
        }
    }

    /// A CPU sample at `ip` with registers only, as the kernel sends one
    /// (for tests elsewhere in the crate).
    #[cfg(test)]
    pub(crate) fn at(ip: u64, sp: u64) -> StackSample {
        let mut ev = Box::<types::kt_stack_event>::default();
        ev.s.hdr.kind = KT_EV_STACK;
        ev.s.flags = KT_SAMPLE_CPU;
        ev.s.ip = ip;
        ev.s.sp = sp;
        // SAFETY: kt_stack_event is Plain: integers only, valid as bytes.
        let bytes = unsafe { plain::as_bytes(&*ev) };
        match Event::decode(bytes) {
            Some(Event::Stack(s)) => *s,
            _ => unreachable!("a stack record decodes as one"),
        }
    }
}

#[derive(Clone, Debug)]
pub enum Event {
    Stack(Box<StackSample>),
    /// A new process joined the target tree.
    Fork {
        pid: u32,
        ppid: u32,
        comm: String,
    },
    /// A tracked process replaced its program image.
    Exec {
        pid: u32,
        comm: String,
        filename: String,
    },
    /// A tracked process exits; its executable mappings, while they exist.
    ExitMaps {
        pid: u32,
        maps: Vec<ExitMapping>,
        truncated: bool,
    },
    /// A tracked process changed its executable file mappings.
    MapChange(MapChange),
    /// A tracked process is about to exec: the mappings it has until then.
    ExecMaps {
        pid: u32,
        maps: Vec<ExitMapping>,
    },
}

/// In `start..end` of process `pid` the executable file mappings are now
/// `maps` (whole mappings, which may reach past the range), unless
/// `unread`: then they are not known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapChange {
    pub pid: u32,
    pub start: u64,
    pub end: u64,
    pub maps: Vec<ExitMapping>,
    /// The process's memory map was busy: what is there now is unknown.
    pub unread: bool,
    /// More mappings than the record holds: those past it are unknown.
    pub truncated: bool,
    /// The path of `maps[0]`'s file as the kernel walked it (None: cut
    /// short); to be checked by device and inode before use.
    pub path: Option<String>,
}

/// A path from its names, the file's first (each a C string in its cell);
/// None when it did not reach the root or a name is unusable.
fn joined_path(parts: &[std::ffi::c_char], count: usize, cut: bool) -> Option<String> {
    let parts: Vec<&[std::ffi::c_char]> = parts.chunks_exact(PATH_PART_BYTES).take(count).collect();
    if cut || parts.is_empty() {
        return None;
    }
    let mut path = String::new();
    for part in parts.iter().rev() {
        let name = chars_to_string(part);
        if name.is_empty() || name == "." || name == ".." || name.contains('/') {
            return None;
        }
        path.push('/');
        path.push_str(&name);
    }
    Some(path)
}

/// A lock's identity from its BPF form; None for an unknown kind.
pub(crate) fn lock_key(k: &types::kt_lock_key) -> Option<LockKey> {
    match k.kind {
        1 => Some(LockKey::Private {
            pid: k.pid,
            addr: k.addr,
        }),
        2 => Some(LockKey::Shared {
            dev: proc_dev(k.dev),
            ino: k.ino,
            offset: k.addr,
        }),
        3 => Some(LockKey::SysV {
            semid: (k.addr >> 32) as u32,
            semnum: k.addr as u16,
        }),
        _ => None,
    }
}

fn lock_sample(s: &types::kt_lock_sample, ret: i32) -> Option<LockSample> {
    let op = match s.op {
        1 => LockOp::Wait,
        2 => LockOp::WaitPi,
        3 => LockOp::Wake,
        4 => LockOp::Other,
        _ => return None,
    };
    Some(LockSample {
        key: lock_key(&s.lock)?,
        op,
        blocked: s.blocked != 0,
        wait_ns: s.wait_ns,
        ret,
    })
}

/// The kernel's internal dev_t (major << 20 | minor) as /proc/PID/maps shows it.
fn proc_dev(kernel_dev: u32) -> u64 {
    (u64::from(kernel_dev >> 20) << 32) | u64::from(kernel_dev & 0xfffff)
}

fn chars_to_string(raw: &[i8]) -> String {
    let bytes: Vec<u8> = raw.iter().map(|&c| c as u8).collect();
    c_string(&bytes)
}

impl Event {
    pub fn decode(data: &[u8]) -> Option<Event> {
        let hdr: &types::kt_event_header =
            plain::from_bytes(data.get(..size_of::<types::kt_event_header>())?).ok()?;
        match hdr.kind {
            KT_EV_STACK => {
                // The sample, then as many stack bytes as were copied.
                let head = size_of::<types::kt_stack_sample>();
                let ev: &types::kt_stack_sample = plain::from_bytes(data.get(..head)?).ok()?;
                // Then the interpreter frames' records, then the stack: right
                // after them in a record cut to size, at their fixed places in
                // the fixed-size record (kernels before 6.16, syscalls.h).
                let py_bytes = usize::from(ev.py_frames) * size_of::<types::kt_py_frame>();
                let (frames_at, stack_at) = if data.len() == size_of::<types::kt_stack_event>() {
                    (
                        std::mem::offset_of!(types::kt_stack_event, frames),
                        std::mem::offset_of!(types::kt_stack_event, stack),
                    )
                } else {
                    (head, head + py_bytes)
                };
                let py = data.get(frames_at..frames_at + py_bytes)?;
                let stack = data.get(stack_at..stack_at + ev.stack_len as usize)?;
                Some(Event::Stack(Box::new(StackSample {
                    pid: ev.hdr.pid,
                    tid: ev.hdr.tid,
                    nr: ev.nr,
                    weight: u64::from(ev.weight),
                    call: ev.flags & (KT_SAMPLE_CALL | KT_SAMPLE_LOCK) != 0,
                    lock: if ev.flags & KT_SAMPLE_LOCK != 0 {
                        lock_sample(&ev.lock, ev.ret)
                    } else {
                        None
                    },
                    off_ns: if ev.flags & KT_SAMPLE_OFFCPU != 0 {
                        ev.off_ns
                    } else {
                        0
                    },
                    off_count: u64::from(ev.off_count),
                    waker: if ev.flags & KT_SAMPLE_OFFCPU != 0 {
                        Waker::from_raw(ev.waker.pid, ev.waker.tid, ev.waker.nr, ev.waker.flags)
                    } else {
                        None
                    },
                    at_ns: ev.at_ns,
                    ret: ev.ret,
                    lock_key: lock_key(&ev.lock.lock),
                    woken: (ev.flags & KT_SAMPLE_WAKE != 0).then_some((
                        ev.woken_pid,
                        ev.woken_tid,
                        (ev.waker.flags >> 8) as u8,
                    )),
                    poll: (ev.flags & KT_SAMPLE_POLL != 0).then_some((ev.poll_fds, ev.poll_ready)),
                    cpu: (ev.flags & KT_SAMPLE_CPU != 0).then_some(CpuSample {
                        kernel_stack: (ev.kstack_id >= 0).then_some(ev.kstack_id),
                        in_kernel: ev.flags & KT_SAMPLE_IN_KERNEL != 0,
                        spinning: ev.flags & KT_SAMPLE_SPIN != 0,
                        after_cas: ev.flags & KT_SAMPLE_CAS != 0,
                    }),
                    ip: ev.ip,
                    sp: ev.sp,
                    bp: ev.bp,
                    stack: stack.to_vec(),
                    absent_pages: ((ev.flags >> KT_SAMPLE_ABSENT_SHIFT)
                        & ((1 << KT_SAMPLE_ABSENT_PAGES) - 1))
                        as u8,
                    maps_lost: (ev.maps_lost_hi > ev.maps_lost_lo)
                        .then_some((ev.maps_lost_lo, ev.maps_lost_hi)),
                    no_user_stack: ev.flags & KT_SAMPLE_NO_USER != 0,
                    code: (ev.flags & KT_SAMPLE_CODE != 0).then(|| ev.extra.to_vec()),
                    path: (ev.flags & KT_SAMPLE_PATH != 0).then(|| {
                        let end = ev
                            .extra
                            .iter()
                            .position(|&b| b == 0)
                            .unwrap_or(ev.extra.len());
                        String::from_utf8_lossy(&ev.extra[..end]).into_owned()
                    }),
                    python: crate::interp::python::walk::PyFrames::decode(ev.py_flags, py),
                    ruby: crate::interp::ruby::walk::RbFrames::decode(ev.py_flags, py),
                })))
            }
            KT_EV_FORK | KT_EV_EXEC => {
                let ev: &types::kt_proc_event = plain::from_bytes(data).ok()?;
                let comm = chars_to_string(&ev.comm);
                Some(if hdr.kind == KT_EV_FORK {
                    Event::Fork {
                        pid: ev.hdr.pid,
                        ppid: ev.ppid,
                        comm,
                    }
                } else {
                    Event::Exec {
                        pid: ev.hdr.pid,
                        comm,
                        filename: chars_to_string(&ev.filename),
                    }
                })
            }
            KT_EV_EXIT_MAPS | KT_EV_EXEC_MAPS => {
                let ev: &types::kt_exit_maps_event = plain::from_bytes(data).ok()?;
                let n = (ev.count as usize).min(ev.maps.len());
                let (pid, maps) = (ev.hdr.pid, ev.maps[..n].iter().map(exit_mapping).collect());
                Some(if hdr.kind == KT_EV_EXEC_MAPS {
                    Event::ExecMaps { pid, maps }
                } else {
                    Event::ExitMaps {
                        pid,
                        maps,
                        truncated: ev.truncated != 0,
                    }
                })
            }
            KT_EV_MAP_CHANGE => {
                let ev: &types::kt_map_change_event = plain::from_bytes(data).ok()?;
                if ev.end <= ev.start {
                    return None;
                }
                let n = (ev.count as usize).min(ev.maps.len());
                Some(Event::MapChange(MapChange {
                    pid: ev.hdr.pid,
                    start: ev.start,
                    end: ev.end,
                    maps: ev.maps[..n]
                        .iter()
                        .map(exit_mapping)
                        .filter(|m| m.end > m.start)
                        .collect(),
                    unread: ev.flags & KT_CHANGE_UNREAD != 0,
                    truncated: ev.flags & KT_CHANGE_TRUNCATED != 0,
                    path: joined_path(
                        &ev.path,
                        ev.path_parts as usize,
                        ev.flags & KT_CHANGE_PATH_CUT != 0,
                    ),
                }))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes of `v` in an 8-byte aligned buffer, as ring buffer records are.
    fn record<T: plain::Plain>(v: &T) -> Vec<u64> {
        // SAFETY: T is Plain: a repr(C) struct of integers, valid to view as bytes.
        let bytes = unsafe { plain::as_bytes(v) };
        let mut words = vec![0u64; bytes.len().div_ceil(8)];
        // SAFETY: `words` has at least bytes.len() bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                words.as_mut_ptr() as *mut u8,
                bytes.len(),
            )
        };
        words
    }

    fn view(words: &[u64], len: usize) -> &[u8] {
        assert!(len <= words.len() * 8);
        // SAFETY: in bounds, u8 has no alignment requirement.
        unsafe { std::slice::from_raw_parts(words.as_ptr() as *const u8, len) }
    }

    #[test]
    fn decodes_a_stack_sample_and_keeps_only_copied_bytes() {
        let mut ev = Box::<types::kt_stack_event>::default();
        ev.s.hdr.kind = KT_EV_STACK;
        ev.s.hdr.pid = 10;
        ev.s.hdr.tid = 11;
        ev.s.nr = 14;
        ev.s.weight = 64;
        ev.s.flags = KT_SAMPLE_CALL;
        ev.s.sp = 0x7ffd_0000;
        ev.s.stack_len = 3;
        ev.stack[..4].copy_from_slice(&[1, 2, 3, 4]);
        let words = record(&*ev);
        // A record cut to the bytes copied (the stack right after the
        // sample) decodes like a full-size one (the stack at its place).
        let head = size_of::<types::kt_stack_sample>();
        let mut cut = view(&words, head).to_vec();
        cut.extend([1, 2, 3]);
        for data in [&cut[..], view(&words, size_of::<types::kt_stack_event>())] {
            match Event::decode(data) {
                Some(Event::Stack(s)) => assert_eq!(s.stack, vec![1, 2, 3]),
                other => panic!("unexpected {other:?}"),
            }
        }
        assert!(
            Event::decode(&cut[..cut.len() - 1]).is_none(),
            "stack_len beyond the record"
        );
        match Event::decode(view(&words, size_of::<types::kt_stack_event>())) {
            Some(Event::Stack(s)) => {
                assert_eq!(
                    (s.pid, s.tid, s.nr, s.weight, s.sp),
                    (10, 11, 14, 64, 0x7ffd_0000)
                );
                assert_eq!(s.stack, vec![1, 2, 3]);
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    /// A sample taken while its process had a mapping change lost carries
    /// the span lost; one whose span is empty (hi not above lo) carries none.
    #[test]
    fn a_sample_after_a_lost_mapping_change_carries_its_span() {
        let mut ev = Box::<types::kt_stack_event>::default();
        ev.s.hdr.kind = KT_EV_STACK;
        ev.s.flags = KT_SAMPLE_CALL;
        ev.s.maps_lost_lo = 0x7f00_0000_0000;
        ev.s.maps_lost_hi = 0x7f00_0000_4000;
        let words = record(&*ev);
        let len = size_of::<types::kt_stack_event>();
        match Event::decode(view(&words, len)) {
            Some(Event::Stack(s)) => {
                assert_eq!(s.maps_lost, Some((0x7f00_0000_0000, 0x7f00_0000_4000)))
            }
            other => panic!("unexpected {other:?}"),
        }
        ev.s.maps_lost_hi = 0;
        let words = record(&*ev);
        match Event::decode(view(&words, len)) {
            Some(Event::Stack(s)) => assert_eq!(s.maps_lost, None),
            other => panic!("unexpected {other:?}"),
        }
    }

    /// Issue 35: the pages of a stack that could not be read are named.
    #[test]
    fn a_stack_with_pages_that_could_not_be_read_names_them() {
        let mut ev = Box::<types::kt_stack_event>::default();
        ev.s.hdr.kind = KT_EV_STACK;
        ev.s.flags = KT_SAMPLE_CPU | (0b1001 << KT_SAMPLE_ABSENT_SHIFT);
        ev.s.sp = 0x7ffd_0ff0;
        ev.s.stack_len = 3;
        let words = record(&*ev);
        match Event::decode(view(&words, size_of::<types::kt_stack_event>())) {
            Some(Event::Stack(s)) => {
                assert_eq!(s.absent_pages, 0b1001);
                assert!(s.cpu.is_some() && s.stack.len() == 3);
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    /// Issue 35: where records cannot be cut to size (before 6.16) the
    /// interpreter's frames and the stack sit at their fixed places.
    #[test]
    fn a_fixed_size_record_has_its_frames_and_stack_at_their_places() {
        let mut ev = Box::<types::kt_stack_event>::default();
        ev.s.hdr.kind = KT_EV_STACK;
        ev.s.stack_len = 2;
        ev.s.py_frames = 2;
        ev.s.py_flags = KT_PY_WALKED as u16;
        ev.frames[0].code = 0x7f00_1000;
        ev.frames[1].code = 0x7f00_2000;
        ev.frames[1].lasti = 7;
        ev.stack[..2].copy_from_slice(&[9, 8]);
        let words = record(&*ev);
        match Event::decode(view(&words, size_of::<types::kt_stack_event>())) {
            Some(Event::Stack(s)) => {
                assert_eq!(s.stack, vec![9, 8]);
                let py = s.python.unwrap();
                assert_eq!(py.frames.len(), 2);
                assert_eq!((py.frames[1].code, py.frames[1].lasti), (0x7f00_2000, 7));
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    /// Issue 20: a Python process's record carries its frames' records
    /// between the sample and the stack.
    #[test]
    fn python_frames_come_between_the_sample_and_the_stack() {
        let mut s = types::kt_stack_sample::default();
        s.hdr.kind = KT_EV_STACK;
        s.stack_len = 2;
        s.py_frames = 1;
        s.py_flags = KT_PY_WALKED as u16;
        let mut bytes = record(&s);
        let head = size_of::<types::kt_stack_sample>();
        let mut data: Vec<u8> = view(&bytes, head).to_vec();
        data.extend(0x7f00_1000u64.to_le_bytes());
        data.extend(5i32.to_le_bytes());
        data.extend([1, 0, 0, 0]);
        data.extend([9, 8]);
        bytes.clear();
        match Event::decode(&data) {
            Some(Event::Stack(s)) => {
                assert_eq!(s.stack, vec![9, 8]);
                let py = s.python.unwrap();
                assert_eq!(
                    (py.frames[0].code, py.frames[0].lasti, py.frames[0].entry),
                    (0x7f00_1000, 5, 1)
                );
            }
            other => panic!("unexpected {other:?}"),
        }
        // Records cut short: rejected, not guessed at.
        assert!(Event::decode(&data[..head + 10]).is_none());
    }

    #[test]
    fn decodes_fork_and_exec() {
        let mut ev = types::kt_proc_event::default();
        ev.hdr.kind = KT_EV_FORK;
        ev.hdr.pid = 20;
        ev.ppid = 19;
        for (dst, src) in ev.comm.iter_mut().zip(b"worker\0") {
            *dst = *src as i8;
        }
        let words = record(&ev);
        let data = view(&words, size_of::<types::kt_proc_event>());
        assert!(
            matches!(Event::decode(data), Some(Event::Fork { pid: 20, ppid: 19, ref comm }) if comm == "worker")
        );
        ev.hdr.kind = KT_EV_EXEC;
        let words = record(&ev);
        let data = view(&words, size_of::<types::kt_proc_event>());
        assert!(
            matches!(Event::decode(data), Some(Event::Exec { pid: 20, ref comm, .. }) if comm == "worker")
        );
    }

    #[test]
    fn decodes_exit_maps_with_proc_style_devices() {
        let mut ev = Box::<types::kt_exit_maps_event>::default();
        ev.hdr.kind = KT_EV_EXIT_MAPS;
        ev.hdr.pid = 30;
        ev.count = 2;
        ev.maps[0].start = 0x1000;
        ev.maps[0].end = 0x2000;
        ev.maps[0].offset = 0x3000;
        ev.maps[0].ino = 77;
        ev.maps[0].dev = (8 << 20) | 0x10;
        ev.maps[0].flags = KT_MAPPING_EXEC;
        ev.maps[1].start = 0x5000;
        ev.maps[1].dev = 5;
        ev.maps[1].flags = KT_MAPPING_HEAP;
        let words = record(&*ev);
        match Event::decode(view(&words, size_of::<types::kt_exit_maps_event>())) {
            Some(Event::ExitMaps {
                pid: 30,
                maps,
                truncated: false,
            }) => {
                assert_eq!(maps.len(), 2);
                assert_eq!(
                    maps[0],
                    ExitMapping {
                        start: 0x1000,
                        end: 0x2000,
                        offset: 0x3000,
                        dev: (8 << 32) | 0x10,
                        inode: 77,
                        executable: true,
                        heap: false,
                    }
                );
                assert_eq!(
                    (maps[1].dev, maps[1].inode, maps[1].heap, maps[1].executable),
                    (0, 0, true, false)
                );
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    /// Puts `names` (the file's first) in a map change's path cells.
    fn set_path(ev: &mut types::kt_map_change_event, names: &[&str]) {
        for (i, name) in names.iter().enumerate() {
            for (j, b) in name.bytes().enumerate() {
                ev.path[i * PATH_PART_BYTES + j] = b as std::ffi::c_char;
            }
        }
        ev.path_parts = names.len() as u32;
    }

    #[test]
    fn decodes_a_map_change_with_the_path_the_kernel_walked() {
        let mut ev = Box::<types::kt_map_change_event>::default();
        ev.hdr.kind = KT_EV_MAP_CHANGE;
        ev.hdr.pid = 31;
        ev.start = 0x7000;
        ev.end = 0x9000;
        ev.count = 1;
        ev.maps[0].start = 0x6000;
        ev.maps[0].end = 0x9000;
        ev.maps[0].offset = 0x1000;
        ev.maps[0].ino = 78;
        ev.maps[0].dev = (8 << 20) | 1;
        ev.maps[0].flags = KT_MAPPING_EXEC;
        set_path(&mut ev, &["libfault_b.so", "fl", "tmp"]);
        let words = record(&*ev);
        let len = size_of::<types::kt_map_change_event>();
        let Some(Event::MapChange(c)) = Event::decode(view(&words, len)) else {
            panic!("not a map change");
        };
        assert_eq!(
            (c.pid, c.start, c.end, c.unread, c.truncated),
            (31, 0x7000, 0x9000, false, false)
        );
        assert_eq!(c.maps.len(), 1);
        assert_eq!((c.maps[0].dev, c.maps[0].inode), ((8 << 32) | 1, 78));
        assert_eq!(c.path.as_deref(), Some("/tmp/fl/libfault_b.so"));
        // A walk cut short, or a name no path holds, names nothing.
        ev.flags = KT_CHANGE_PATH_CUT;
        let words = record(&*ev);
        let Some(Event::MapChange(c)) = Event::decode(view(&words, len)) else {
            panic!("not a map change");
        };
        assert_eq!(c.path, None);
        ev.flags = 0;
        set_path(&mut ev, &["lib.so", ".."]);
        let words = record(&*ev);
        let Some(Event::MapChange(c)) = Event::decode(view(&words, len)) else {
            panic!("not a map change");
        };
        assert_eq!(c.path, None);
        // A change with an empty or reversed range is not one.
        ev.end = ev.start;
        let words = record(&*ev);
        assert!(Event::decode(view(&words, len)).is_none());
        assert!(Event::decode(view(&words, len - 1)).is_none());
    }

    #[test]
    fn rejects_truncated_and_unknown_records() {
        let mut ev = types::kt_proc_event::default();
        ev.hdr.kind = KT_EV_STACK; // claims to be a stack sample but is too short
        let words = record(&ev);
        let len = size_of::<types::kt_proc_event>();
        assert!(Event::decode(view(&words, size_of::<types::kt_stack_sample>() - 1)).is_none());
        assert!(Event::decode(view(&words, 3)).is_none());
        ev.hdr.kind = KT_EV_EXIT_MAPS; // shorter than a mappings record
        let words = record(&ev);
        assert!(Event::decode(view(&words, len)).is_none());
        ev.hdr.kind = 99;
        let words = record(&ev);
        assert!(Event::decode(view(&words, len)).is_none());
    }
}
