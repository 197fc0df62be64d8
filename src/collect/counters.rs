//! Reading the kernel's counters out of the maps: the whole run's at its
//! end, or a window's for a live session (which may delete the entries that
//! went idle, `evict`).

use anyhow::{Context, Result};
use libbpf_rs::{MapCore, MapFlags};

use super::bpf::types;
use super::{
    Collector, c_string, events, evict, lock_counters, read_u64, syscall_counters, thread_counters,
    time_count,
};
use crate::model::{
    KernelCounters, KernelLoss, LockCounters, OffCpuCounters, OffReason, PollCounters,
    SyscallCounters, WakeupCounters,
};

/// Deletes `key` from `map` when the last read saw it at the same value
/// (`unmoved`), counting it in `count`; true if it went.
fn evict_unmoved(map: &impl MapCore, key: &[u8], unmoved: bool, count: &mut u64) -> bool {
    if unmoved {
        let _ = map.delete(key);
        *count += 1;
    }
    unmoved
}

impl Collector<'_> {
    /// Deletes these kernel stacks, as `kernel_stacks` read them (their
    /// frames are the map's key, zero-filled past the last), from the map;
    /// returns how many went.
    pub fn delete_kernel_stacks<'a>(&self, stacks: impl IntoIterator<Item = &'a Vec<u64>>) -> u64 {
        let map = &self.skel.maps.kt_kstacks;
        let mut key = vec![0u8; map.key_size() as usize];
        let mut deleted = 0;
        for ips in stacks {
            key.fill(0);
            for (slot, ip) in key.chunks_exact_mut(8).zip(ips) {
                slot.copy_from_slice(&ip.to_ne_bytes());
            }
            deleted += u64::from(map.delete(&key).is_ok());
        }
        deleted
    }

    /// Reads the final counters. Call after `stop`.
    pub fn counters(&self) -> Result<KernelCounters> {
        self.read_counters(None, &mut evict::Evicted::default())
    }

    /// Reads the counters, deleting the entries that did not move since
    /// `earlier` (the last read) from their maps and from the result
    /// (`evict`): for a windows-only session.
    pub fn counters_evicting(
        &self,
        earlier: &KernelCounters,
    ) -> Result<(KernelCounters, evict::Evicted)> {
        let mut evicted = evict::Evicted::default();
        let idle = evict::Earlier::of(earlier);
        let c = self.read_counters(Some(&idle), &mut evicted)?;
        Ok((c, evicted))
    }

    fn read_counters(
        &self,
        idle: Option<&evict::Earlier<'_>>,
        evicted: &mut evict::Evicted,
    ) -> Result<KernelCounters> {
        let maps = &self.skel.maps;
        let mut syscalls = Vec::new();
        for nr in 0..maps.kt_syscalls.max_entries() {
            let per_cpu = maps
                .kt_syscalls
                .lookup_percpu(&nr.to_ne_bytes(), MapFlags::ANY)
                .context("reading syscall counters")?
                .unwrap_or_default();
            let mut total = SyscallCounters {
                nr,
                ..Default::default()
            };
            for bytes in &per_cpu {
                total.merge(&syscall_counters(nr, bytes));
            }
            if total.calls > 0 || total.returns > 0 {
                syscalls.push(total);
            }
        }

        let mut errnos = Vec::new();
        for key in maps.kt_errnos.keys() {
            let mut k = types::kt_errno_key::default();
            plain::copy_from_bytes(&mut k, &key).expect("errno key size");
            let per_cpu = maps
                .kt_errnos
                .lookup_percpu(&key, MapFlags::ANY)?
                .unwrap_or_default();
            let count: u64 = per_cpu.iter().map(|v| read_u64(v)).sum();
            errnos.push((k.nr, k.err, count));
        }

        let mut exited_threads = Vec::new();
        for key in maps.kt_exited.keys().collect::<Vec<_>>() {
            if let Some(v) = maps.kt_exited.lookup(&key, MapFlags::ANY)? {
                let t = thread_counters(&v);
                let unmoved = idle.is_some_and(|e| e.exited.contains(&t.key()));
                if evict_unmoved(&maps.kt_exited, &key, unmoved, &mut evicted.exited_threads) {
                    continue;
                }
                exited_threads.push(t);
            }
        }

        let mut locks = Vec::new();
        for key in maps.kt_locks.keys().collect::<Vec<_>>() {
            let mut k = types::kt_lock_key::default();
            plain::copy_from_bytes(&mut k, &key).expect("lock key size");
            let Some(lock) = events::lock_key(&k) else {
                continue;
            };
            let mut total = LockCounters::default();
            for bytes in maps
                .kt_locks
                .lookup_percpu(&key, MapFlags::ANY)?
                .unwrap_or_default()
            {
                total.merge(&lock_counters(&bytes));
            }
            let unmoved = idle.is_some_and(|e| e.locks.get(&lock) == Some(&&total));
            if evict_unmoved(&maps.kt_locks, &key, unmoved, &mut evicted.locks) {
                continue;
            }
            locks.push((lock, total));
        }
        let mut lock_waiters = Vec::new();
        for key in maps.kt_lock_threads.keys().collect::<Vec<_>>() {
            let mut k = types::kt_lock_thread_key::default();
            plain::copy_from_bytes(&mut k, &key).expect("lock thread key size");
            let waits = maps
                .kt_lock_threads
                .lookup(&key, MapFlags::ANY)?
                .map_or(0, |v| read_u64(&v));
            if let Some(lock) = events::lock_key(&k.lock) {
                let unmoved =
                    idle.is_some_and(|e| e.lock_waiters.get(&(lock, k.tid)) == Some(&waits));
                if evict_unmoved(
                    &maps.kt_lock_threads,
                    &key,
                    unmoved,
                    &mut evicted.lock_waiters,
                ) {
                    continue;
                }
                lock_waiters.push((lock, k.tid, waits));
            }
        }

        // src/bpf/sched.h: or'ed into an off-CPU key's reason.
        const KT_OFF_UNINTERRUPTIBLE: u32 = 0x100;
        let mut offcpu = Vec::new();
        for key in maps.kt_offcpu.keys().collect::<Vec<_>>() {
            let mut k = types::kt_offcpu_key::default();
            plain::copy_from_bytes(&mut k, &key).expect("off-CPU key size");
            let Some(v) = maps.kt_offcpu.lookup(&key, MapFlags::ANY)? else {
                continue;
            };
            let uninterruptible = k.reason & KT_OFF_UNINTERRUPTIBLE != 0;
            let reason = match k.reason & !KT_OFF_UNINTERRUPTIBLE {
                2 => OffReason::Syscall {
                    nr: k.nr,
                    lock: events::lock_key(&k.lock),
                },
                3 => OffReason::Other,
                1 | 4 => OffReason::RunQueue,
                _ => continue,
            };
            let t = time_count(&v);
            let o = OffCpuCounters {
                pid: k.pid,
                tid: k.tid,
                reason,
                uninterruptible,
                ns: t.ns,
                count: t.count,
            };
            let unmoved = idle.is_some_and(|e| e.offcpu.get(&o.key()) == Some(&(o.ns, o.count)));
            if evict_unmoved(&maps.kt_offcpu, &key, unmoved, &mut evicted.offcpu) {
                continue;
            }
            offcpu.push(o);
        }
        let mut wakeups = Vec::new();
        for key in maps.kt_wakeups.keys().collect::<Vec<_>>() {
            let mut k = types::kt_wakeup_key::default();
            plain::copy_from_bytes(&mut k, &key).expect("wake-up key size");
            let Some(v) = maps.kt_wakeups.lookup(&key, MapFlags::ANY)? else {
                continue;
            };
            let t = time_count(&v);
            let comm: Vec<u8> = k.waker_comm.iter().map(|&c| c as u8).collect();
            let w = WakeupCounters {
                waker_pid: k.waker_pid,
                waker_tid: k.waker_tid,
                waker_comm: c_string(&comm),
                waker_tracked: k.waker_flags & 1 != 0,
                waker_kernel: k.waker_flags & 2 != 0,
                waker_nr: (k.waker_nr != u32::MAX).then_some(k.waker_nr),
                woken_pid: k.woken_pid,
                woken_tid: k.woken_tid,
                count: t.count,
                wait_ns: t.ns,
            };
            let unmoved =
                idle.is_some_and(|e| e.wakeups.get(&w.key()) == Some(&(w.count, w.wait_ns)));
            if evict_unmoved(&maps.kt_wakeups, &key, unmoved, &mut evicted.wakeups) {
                continue;
            }
            wakeups.push(w);
        }

        let mut polls = Vec::new();
        for key in maps.kt_polls.keys().collect::<Vec<_>>() {
            let mut k = types::kt_poll_key::default();
            plain::copy_from_bytes(&mut k, &key).expect("poll key size");
            let mut c = PollCounters {
                pid: k.pid,
                nr: k.nr,
                ..Default::default()
            };
            for bytes in maps
                .kt_polls
                .lookup_percpu(&key, MapFlags::ANY)?
                .unwrap_or_default()
            {
                let mut v = types::kt_poll_stats::default();
                plain::copy_from_bytes(&mut v, &bytes).expect("poll stats size");
                c.calls += v.calls;
                c.fds += v.fds;
                c.max_fds = c.max_fds.max(v.max_fds);
                c.ready += v.ready;
                c.timeouts += v.timeouts;
                c.errors += v.errors;
                c.total_ns += v.total_ns;
                c.cpu_ns += v.cpu_ns;
            }
            let unmoved = idle.is_some_and(|e| e.polls.get(&(c.pid, c.nr)) == Some(&&c));
            if evict_unmoved(&maps.kt_polls, &key, unmoved, &mut evicted.polls) {
                continue;
            }
            polls.push(c);
        }

        let mut loss = KernelLoss::default();
        let per_cpu = maps
            .kt_loss
            .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)?;
        for bytes in per_cpu.unwrap_or_default() {
            let mut l = types::kt_kernel_loss::default();
            plain::copy_from_bytes(&mut l, &bytes).expect("loss record size");
            loss.ringbuf_full += l.ringbuf_full;
            loss.stack_read_failed += l.stack_read_failed;
            loss.task_storage_failed += l.task_storage_failed;
            loss.thread_map_full += l.thread_map_full;
            loss.errno_map_full += l.errno_map_full;
            loss.syscall_nr_out_of_range += l.syscall_nr_out_of_range;
            loss.lock_map_full += l.lock_map_full;
            loss.lock_thread_map_full += l.lock_thread_map_full;
            loss.sched_map_full += l.sched_map_full;
            loss.poll_map_full += l.poll_map_full;
            loss.kernel_stack_lost += l.kernel_stack_lost;
            loss.switch_in_unseen += l.switch_in_unseen;
            loss.trace_ringbuf_full += l.trace_ringbuf_full;
            loss.map_changes_unread += l.map_changes_unread;
            loss.maps_lost_untracked += l.maps_lost_untracked;
        }
        Ok(KernelCounters {
            syscalls,
            errnos,
            exited_threads,
            locks,
            lock_waiters,
            offcpu,
            wakeups,
            polls,
            loss,
        })
    }
}
