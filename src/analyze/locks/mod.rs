//! Lock contention: per-lock kernel counters, sampled waiter and waker
//! stacks and lock names become the report's `locks[]`.
//!
//! Futex words of one object (a condvar's two sequence words, a rwlock's
//! reader and writer words) are one lock when their variable is known; a
//! large variable holding several pthread objects (a runtime's state struct
//! with a mutex and a condvar) is split into them by the kind each word's
//! stacks show and by their distance.
//!
//! Whether waiting on a lock is contention comes from the wait sites (who
//! ends the waits, how they end, whether the waiters have work), not from
//! its kind; the kind is the fallback for a lock no sampled sleep explains.

pub mod classify;

use crate::fixed_hash::HashMap;
use std::collections::{BTreeMap, BTreeSet};

use crate::analyze::aggregate::estimate_sites;
use crate::model::{LockCounters, LockKey};
use crate::recording::LockName;
use crate::report::{LockReport, LockStack, WaitClass};
use classify::{LockKind, classify};

/// Stacks kept per lock and side.
const MAX_STACKS: usize = 20;

/// Sampled operations of one lock from one stack.
#[derive(Clone, Debug)]
pub struct LockSite {
    pub key: LockKey,
    /// A wait (else a wake or another operation).
    pub wait: bool,
    /// Shared with the other keys that have this stack.
    pub frames: crate::analyze::cpu::Frames,
    /// Operations the samples stand for.
    pub weight: u64,
    /// Sum over samples of weight x time inside the call.
    pub weighted_ns: u128,
    pub samples: u64,
    /// Processes the samples came from.
    pub pids: BTreeSet<u32>,
    /// Leading strings of `frames` in runtime libraries.
    pub runtime: usize,
    /// Of `weight`: waits that returned at once (EAGAIN).
    pub futile: u64,
}

/// Bytes from an object's first futex word within which words of one
/// variable (or one memory region) and one kind are that pthread object: a
/// glibc condvar waits on words at +0x10..+0x2c of its 48 bytes, a rwlock
/// on +0x0..+0xc; the next object's first word is further.
const OBJECT_SPAN: u64 = 0x20;
/// Offset of an object's last futex word from its start (a condvar's
/// +0x2c): words this close to a variable's start belong to an object at
/// its start, which the variable's name then names.
const LAST_WORD_OFFSET: u64 = 0x30;

/// Whether a kind's object has several futex words.
fn multi_word(kind: LockKind) -> bool {
    matches!(kind, LockKind::Condvar | LockKind::Rwlock)
}

#[derive(Default)]
struct Group<'a> {
    keys: Vec<&'a LockKey>,
    counters: LockCounters,
    threads: BTreeSet<u32>,
    pids: BTreeSet<u32>,
    name: Option<&'a LockName>,
}

fn per_s(n: u64, duration_ns: u64) -> f64 {
    if duration_ns == 0 {
        0.0
    } else {
        n as f64 * 1e9 / duration_ns as f64
    }
}

/// Stacks of one side of a lock, their counts scaled to the exact `total`
/// operations and their times to the measured `total_ns` when known.
fn stacks(sites: &[&LockSite], total: u64, total_ns: Option<u64>) -> Vec<LockStack> {
    let mut merged: BTreeMap<&[crate::frame::Frame], (u64, u128, u64)> = BTreeMap::new();
    for s in sites {
        let e = merged.entry(&s.frames).or_default();
        e.0 += s.weight;
        e.1 += s.weighted_ns;
        e.2 += s.samples;
    }
    let weighted_ns: u128 = merged.values().map(|v| v.1).sum();
    let list: Vec<_> = merged.iter().map(|(k, v)| (*k, v.0, v.2)).collect();
    let mut out: Vec<LockStack> = estimate_sites(total, &list)
        .into_iter()
        .map(|site| {
            let ns = merged[site.key].1;
            let wait_ns = match total_ns {
                Some(t) if weighted_ns > 0 => (ns * t as u128 / weighted_ns) as u64,
                _ => ns.min(u64::MAX as u128) as u64,
            };
            LockStack {
                frames: site.key.to_vec(),
                count: site.calls,
                wait_ns,
                samples: site.samples,
                estimated: site.estimated,
            }
        })
        .collect();
    out.truncate(MAX_STACKS);
    out
}

/// Each key's kind from its own sampled stacks.
fn key_kinds(locks: &[(LockKey, LockCounters)], sites: &[LockSite]) -> HashMap<LockKey, LockKind> {
    let mut by_key: HashMap<&LockKey, Vec<&LockSite>> = HashMap::default();
    for s in sites {
        by_key.entry(&s.key).or_default().push(s);
    }
    locks
        .iter()
        .map(|(key, c)| {
            let mine = by_key.get(key).map_or(&[][..], Vec::as_slice);
            let kind = classify(
                matches!(key, LockKey::SysV { .. }),
                c.pi > 0,
                mine.iter()
                    .filter(|s| s.wait)
                    .map(|s| (&s.frames[..], s.weight)),
                mine.iter()
                    .filter(|s| !s.wait)
                    .map(|s| (&s.frames[..], s.weight)),
            );
            (*key, kind)
        })
        .collect()
}

/// The report's identity of each key: one per pthread object, so words of
/// one object share it and objects of one variable do not.
fn group_ids(
    locks: &[(LockKey, LockCounters)],
    names: &HashMap<LockKey, LockName>,
    kinds: &HashMap<LockKey, LockKind>,
) -> HashMap<LockKey, String> {
    let mut by_object: BTreeMap<String, Vec<(u64, LockKey)>> = BTreeMap::new();
    let mut out = HashMap::default();
    for (key, _) in locks {
        // Words with no variable (heap, stack) are grouped by the memory
        // they are in.
        let region = match key {
            LockKey::Private { pid, .. } => Some(format!(
                "{pid}:{}",
                names
                    .get(key)
                    .and_then(|n| n.mapping.as_deref())
                    .unwrap_or("?")
            )),
            LockKey::Shared { dev, ino, .. } => Some(format!("{dev}:{ino}")),
            LockKey::SysV { .. } => None,
        };
        let addr = match key {
            LockKey::Private { addr, .. } => *addr,
            LockKey::Shared { offset, .. } => *offset,
            LockKey::SysV { .. } => 0,
        };
        match names.get(key).and_then(LockName::object).or(region) {
            Some(obj) => by_object.entry(obj).or_default().push((addr, *key)),
            None => {
                out.insert(*key, format!("{key:?}"));
            }
        }
    }
    for (obj, mut keys) in by_object {
        keys.sort();
        // A word whose own stacks say nothing (Unknown) goes with the
        // object next to it.
        let mut anchor: Option<(u64, LockKind)> = None;
        for (addr, key) in keys {
            let kind = kinds[&key];
            let joins = anchor.is_some_and(|(a, k)| {
                let same = k == kind || kind == LockKind::Unknown || k == LockKind::Unknown;
                same && (multi_word(k) || multi_word(kind)) && addr.saturating_sub(a) < OBJECT_SPAN
            });
            if !joins {
                anchor = Some((addr, kind));
            } else if let Some((a, LockKind::Unknown)) = anchor {
                anchor = Some((a, kind));
            }
            let (a, _) = anchor.expect("set above");
            out.insert(key, format!("{obj}:{a:#x}"));
        }
    }
    out
}

/// What the lock analysis hands on.
pub struct Locks {
    pub reports: Vec<LockReport>,
    /// Per lock key: whether waiting on it is contention (from the wait
    /// sites' verdict, else its kind).
    pub contended: HashMap<LockKey, bool>,
    /// Per lock key: its report's display name.
    pub names: HashMap<LockKey, String>,
}

/// The lock reports, and for each lock key whether waiting on it is
/// contention (from `lock_class`, the wait sites' verdict; else its kind).
pub fn build(
    locks: &[(LockKey, LockCounters)],
    waiters: &[(LockKey, u32, u64)],
    sites: &[LockSite],
    names: &HashMap<LockKey, LockName>,
    lock_class: &HashMap<LockKey, WaitClass>,
    duration_ns: u64,
) -> Locks {
    let mut display: HashMap<LockKey, String> = HashMap::default();
    let key_kinds = key_kinds(locks, sites);
    let ids = group_ids(locks, names, &key_kinds);
    let mut contended = HashMap::default();
    let mut groups: BTreeMap<String, Group<'_>> = BTreeMap::new();
    let mut group_of: HashMap<&LockKey, String> = HashMap::default();
    for (key, counters) in locks {
        let name = names.get(key);
        let id = ids[key].clone();
        let g = groups.entry(id.clone()).or_default();
        g.keys.push(key);
        g.counters.merge(counters);
        g.name = g.name.or(name);
        if let LockKey::Private { pid, .. } = key {
            g.pids.insert(*pid);
        }
        group_of.insert(key, id);
    }
    for (key, tid, _) in waiters {
        if let Some(g) = group_of.get(key).and_then(|id| groups.get_mut(id)) {
            g.threads.insert(*tid);
        }
    }
    let mut site_groups: HashMap<&str, Vec<&LockSite>> = HashMap::default();
    for s in sites {
        if let Some(id) = group_of.get(&s.key) {
            site_groups.entry(id.as_str()).or_default().push(s);
            if let Some(g) = groups.get_mut(id) {
                g.pids.extend(&s.pids);
            }
        }
    }

    let mut out: Vec<LockReport> = groups
        .iter()
        .map(|(id, g)| {
            let all = site_groups.get(id.as_str()).map_or(&[][..], Vec::as_slice);
            let (w, k): (Vec<&LockSite>, Vec<&LockSite>) = all.iter().partition(|s| s.wait);
            let c = &g.counters;
            let waiter_stacks = stacks(&w, c.waits, Some(c.wait_ns));
            let waker_stacks = stacks(&k, c.wakes, None);
            let sysv = matches!(g.keys[0], LockKey::SysV { .. });
            let kind = classify(
                sysv,
                c.pi > 0,
                waiter_stacks.iter().map(|s| (&s.frames[..], s.count)),
                waker_stacks.iter().map(|s| (&s.frames[..], s.count)),
            );
            // The group's name is its lowest word's.
            let name = g
                .keys
                .iter()
                .filter_map(|k| names.get(*k))
                .min_by_key(|n| n.address)
                .cloned()
                .unwrap_or_default();
            // Several words of one object at the start of its variable:
            // named by the variable itself.
            let (symbol, address) = match (&name.variable, g.keys.len()) {
                (Some((var, at)), n)
                    if n > 1
                        && name.address.unwrap_or(0).saturating_sub(*at) < LAST_WORD_OFFSET =>
                {
                    (Some(var.clone()), Some(*at))
                }
                _ => (name.symbol.clone(), name.address),
            };
            let runtime_lock = waiter_stacks
                .first()
                .and_then(|s| crate::analyze::runtime_locks::identify(&s.frames, symbol.as_deref()))
                .map(|r| r.name.to_string());
            // Its role: the program's function that waits on it; a stripped
            // binary's read with its nearest named callers (and as the
            // runtime lock it is), as its wait site reads.
            let role = w.iter().max_by_key(|s| s.weight).map(|s| {
                let f = crate::analyze::waits::site_of(
                    &s.frames,
                    s.runtime,
                    crate::analyze::waits::WAIT_WORDS,
                )
                .0;
                crate::analyze::waits::wait_function(&f, &s.frames, runtime_lock.as_deref())
            });
            // Contention from the wait sites where they saw its waits.
            let classes: Vec<WaitClass> = g
                .keys
                .iter()
                .filter_map(|k| lock_class.get(*k).copied())
                .collect();
            let contention = if classes.is_empty() {
                kind.is_contention()
            } else {
                classes.contains(&WaitClass::Contention)
            };
            for key in &g.keys {
                contended.insert(**key, contention);
            }
            let report_keys: Vec<LockKey> = g.keys.iter().map(|k| **k).collect();
            let (semid, semnum) = match *g.keys[0] {
                LockKey::SysV { semid, semnum } => (Some(semid), Some(semnum)),
                _ => (None, None),
            };
            let mut hist = c.hist_log2_ns.clone();
            while hist.last() == Some(&0) {
                hist.pop();
            }
            let report = LockReport {
                kind,
                contention,
                symbol,
                runtime_lock,
                role,
                address: address.map(|a| format!("{a:#x}")),
                mapping: name.mapping,
                pids: g.pids.iter().copied().collect(),
                semid,
                semnum,
                waits: c.waits,
                blocked: c.blocked,
                futile: c.futile,
                timeouts: c.timeouts,
                wait_ns: c.wait_ns,
                blocked_ns: c.blocked_ns,
                max_wait_ns: c.max_wait_ns,
                hist_log2_ns: hist,
                cpu_ns: c.cpu_ns,
                wakes: c.wakes,
                woken: c.woken,
                wakes_per_s: per_s(c.wakes, duration_ns),
                futile_per_s: per_s(c.futile, duration_ns),
                threads: g.threads.len() as u32,
                waiter_stacks,
                waker_stacks,
            };
            for k in report_keys {
                display.insert(k, report.display_name());
            }
            report
        })
        .collect();
    // Contention first, by what it cost; then waiting for work, by time.
    out.sort_by(|a, b| {
        b.contention
            .cmp(&a.contention)
            .then((b.wait_ns + b.cpu_ns).cmp(&(a.wait_ns + a.cpu_ns)))
            .then(a.address.cmp(&b.address))
    });
    Locks {
        reports: out,
        contended,
        names: display,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(waits: u64, wait_ns: u64, wakes: u64) -> LockCounters {
        LockCounters {
            waits,
            blocked: waits,
            wait_ns,
            blocked_ns: wait_ns,
            wakes,
            cpu_ns: 10,
            ..Default::default()
        }
    }

    fn site(key: LockKey, wait: bool, f: &str, weight: u64, ns: u128) -> LockSite {
        LockSite {
            key,
            wait,
            frames: vec![crate::frame::Frame::from(f)].into(),
            weight,
            weighted_ns: ns,
            samples: 1,
            pids: [7].into(),
            runtime: 0,
            futile: 0,
        }
    }

    #[test]
    fn words_of_one_variable_are_one_lock_and_contention_ranks_first() {
        let w0 = LockKey::Private {
            pid: 7,
            addr: 0x1028,
        };
        let w1 = LockKey::Private {
            pid: 7,
            addr: 0x102c,
        };
        let hot = LockKey::Private {
            pid: 7,
            addr: 0x2000,
        };
        let cond_name = |addr: u64| LockName {
            symbol: Some(format!("g_cond+{:#x}", addr - 0x1000)),
            variable: Some(("g_cond".into(), 0x1000)),
            address: Some(addr),
            mapping: Some("app".into()),
            pid: Some(7),
        };
        let names: HashMap<LockKey, LockName> = [
            (w0, cond_name(0x1028)),
            (w1, cond_name(0x102c)),
            (
                hot,
                LockName {
                    symbol: Some("g_hot".into()),
                    variable: Some(("g_hot".into(), 0x2000)),
                    address: Some(0x2000),
                    mapping: Some("app".into()),
                    pid: Some(7),
                },
            ),
        ]
        .into_iter()
        .collect();
        let locks = [
            (w0, counters(2, 4_000_000_000, 1)),
            (w1, counters(1, 1_000_000_000, 1)),
            (hot, counters(100, 5_000_000, 100)),
        ];
        let waiters = [(w0, 11, 2), (w1, 12, 1), (hot, 11, 60), (hot, 13, 40)];
        let sites = [
            site(w0, true, "___pthread_cond_wait (x)", 3, 5_000_000_000),
            site(hot, true, "__lll_lock_wait (x)", 75, 300),
            site(hot, true, "__lll_lock_wait (y)", 25, 100),
            site(hot, false, "__lll_lock_wake (x)", 100, 50),
        ];
        let Locks {
            reports: out,
            contended,
            ..
        } = build(
            &locks,
            &waiters,
            &sites,
            &names,
            &HashMap::default(),
            1_000_000_000,
        );
        // No wait site said otherwise: by kind.
        assert_eq!(
            (contended[&w0], contended[&w1], contended[&hot]),
            (false, false, true)
        );
        assert_eq!(out.len(), 2);
        // The mutex costs less time than the condvar sleeps, yet comes first.
        assert_eq!(
            (out[0].symbol.as_deref(), out[0].kind, out[0].contention),
            (Some("g_hot"), LockKind::Mutex, true)
        );
        assert_eq!(out[0].threads, 2);
        assert_eq!(
            out[0]
                .waiter_stacks
                .iter()
                .map(|s| s.count)
                .collect::<Vec<_>>(),
            vec![75, 25]
        );
        assert_eq!(
            out[0]
                .waiter_stacks
                .iter()
                .map(|s| s.wait_ns)
                .collect::<Vec<_>>(),
            vec![3_750_000, 1_250_000]
        );
        assert_eq!(out[0].waker_stacks[0].count, 100);
        assert!((out[0].wakes_per_s - 100.0).abs() < 1e-9);
        let cond = &out[1];
        assert_eq!(
            (cond.symbol.as_deref(), cond.address.as_deref()),
            (Some("g_cond"), Some("0x1000"))
        );
        assert_eq!((cond.kind, cond.contention), (LockKind::Condvar, false));
        assert_eq!(
            (cond.waits, cond.wait_ns, cond.wakes, cond.threads),
            (3, 5_000_000_000, 2, 2)
        );
    }

    #[test]
    fn a_sysv_semaphore_is_named_by_its_id() {
        let key = LockKey::SysV {
            semid: 42,
            semnum: 1,
        };
        let out = build(
            &[(key, counters(5, 100, 5))],
            &[],
            &[],
            &HashMap::default(),
            &HashMap::default(),
            1,
        )
        .reports;
        assert_eq!(
            (
                out[0].kind,
                out[0].semid,
                out[0].semnum,
                out[0].symbol.as_deref()
            ),
            (LockKind::SysvSem, Some(42), Some(1), None)
        );
    }

    /// Issue #10: a runtime's state struct with a condvar and a mutex is two
    /// locks; the wait sites decide that the condvar is contention; a heap
    /// mutex is named by the function that takes it.
    #[test]
    fn a_variables_objects_are_split_and_a_heap_lock_is_named_by_its_role() {
        let key = |addr| LockKey::Private { pid: 7, addr };
        let (c0, c1, m, heap) = (key(0x1028), key(0x102c), key(0x1048), key(0x9000));
        let name = |addr: u64| LockName {
            symbol: Some(format!("_PyRuntime+{:#x}", addr - 0x1000)),
            variable: Some(("_PyRuntime".into(), 0x1000)),
            address: Some(addr),
            mapping: Some("python3".into()),
            pid: Some(7),
        };
        let mut names: HashMap<LockKey, LockName> =
            [(c0, name(0x1028)), (c1, name(0x102c)), (m, name(0x1048))]
                .into_iter()
                .collect();
        names.insert(
            heap,
            LockName {
                address: Some(0x9000),
                mapping: Some("[heap]".into()),
                pid: Some(7),
                ..Default::default()
            },
        );
        let locks = [
            (c0, counters(10, 1_000, 5)),
            (c1, counters(10, 1_000, 5)),
            (m, counters(10, 1_000, 5)),
            (heap, counters(10, 1_000, 5)),
        ];
        let mut sites = vec![
            site(c0, true, "___pthread_cond_timedwait (x)", 10, 1_000),
            site(m, true, "__lll_lock_wait (x)", 10, 1_000),
        ];
        let mut lookup = site(heap, true, "__lll_lock_wait (lowlevellock.c:49)", 10, 1_000);
        lookup.frames = [
            "__lll_lock_wait (lowlevellock.c:49)",
            "Cache::lookup(std::string const&) (cache.cc:10)",
        ]
        .map(crate::frame::Frame::from)
        .into();
        lookup.runtime = 1;
        sites.push(lookup);
        let classes: HashMap<LockKey, WaitClass> =
            [(c0, WaitClass::Contention)].into_iter().collect();
        let Locks {
            reports: out,
            contended,
            ..
        } = build(&locks, &[], &sites, &names, &classes, 1_000_000_000);
        assert_eq!(out.len(), 3, "{out:?}");
        let cond = out.iter().find(|l| l.kind == LockKind::Condvar).unwrap();
        assert_eq!(
            (cond.symbol.as_deref(), cond.waits, cond.contention),
            (Some("_PyRuntime"), 20, true)
        );
        assert!(contended[&c1]);
        let mutex = out
            .iter()
            .find(|l| l.symbol.as_deref() == Some("_PyRuntime+0x48"))
            .unwrap();
        assert_eq!((mutex.kind, mutex.waits), (LockKind::Mutex, 10));
        let h = out
            .iter()
            .find(|l| l.mapping.as_deref() == Some("[heap]"))
            .unwrap();
        assert_eq!(h.display_name(), "mutex in Cache::lookup ([heap])");
    }
}
