//! Lock contention: per-lock kernel counters, sampled waiter and waker
//! stacks and lock names become the report's `locks[]`.
//!
//! Futex words of one object (a condvar's two sequence words, a rwlock's
//! reader and writer words) are one lock when their variable is known.

pub mod classify;
pub mod name;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::analyze::aggregate::estimate_sites;
use crate::model::{LockCounters, LockKey};
use crate::report::{LockReport, LockStack};
use classify::{LockKind, classify};
use name::LockName;

/// Stacks kept per lock and side.
const MAX_STACKS: usize = 20;

/// Sampled operations of one lock from one stack.
#[derive(Clone, Debug)]
pub struct LockSite {
    pub key: LockKey,
    /// A wait (else a wake or another operation).
    pub wait: bool,
    pub frames: Vec<String>,
    /// Operations the samples stand for.
    pub weight: u64,
    /// Sum over samples of weight x time inside the call.
    pub weighted_ns: u128,
    pub samples: u64,
    /// Processes the samples came from.
    pub pids: BTreeSet<u32>,
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
    let mut merged: BTreeMap<&[String], (u64, u128, u64)> = BTreeMap::new();
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

/// The lock reports, and the kind each lock key was found to be.
pub fn build(
    locks: &[(LockKey, LockCounters)],
    waiters: &[(LockKey, u32, u64)],
    sites: &[LockSite],
    names: &HashMap<LockKey, LockName>,
    duration_ns: u64,
) -> (Vec<LockReport>, HashMap<LockKey, LockKind>) {
    let mut kinds = HashMap::new();
    let mut groups: BTreeMap<String, Group<'_>> = BTreeMap::new();
    let mut group_of: HashMap<&LockKey, String> = HashMap::new();
    for (key, counters) in locks {
        let name = names.get(key);
        let id = name
            .and_then(LockName::object)
            .unwrap_or_else(|| format!("{key:?}"));
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
    let mut site_groups: HashMap<&str, Vec<&LockSite>> = HashMap::new();
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
            let name = g.name.cloned().unwrap_or_default();
            // Several words of one variable: named by the variable itself.
            let (symbol, address) = match (&name.variable, g.keys.len()) {
                (Some((var, at)), n) if n > 1 => (Some(var.clone()), Some(*at)),
                _ => (name.symbol.clone(), name.address),
            };
            let (semid, semnum) = match *g.keys[0] {
                LockKey::SysV { semid, semnum } => (Some(semid), Some(semnum)),
                _ => (None, None),
            };
            for key in &g.keys {
                kinds.insert(**key, kind);
            }
            let mut hist = c.hist_log2_ns.clone();
            while hist.last() == Some(&0) {
                hist.pop();
            }
            LockReport {
                kind,
                contention: kind.is_contention(),
                symbol,
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
            }
        })
        .collect();
    // Contention first, by what it cost; then waiting for work, by time.
    out.sort_by(|a, b| {
        b.contention
            .cmp(&a.contention)
            .then((b.wait_ns + b.cpu_ns).cmp(&(a.wait_ns + a.cpu_ns)))
            .then(a.address.cmp(&b.address))
    });
    (out, kinds)
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
            frames: vec![f.to_string()],
            weight,
            weighted_ns: ns,
            samples: 1,
            pids: [7].into(),
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
        .into();
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
        let (out, kinds) = build(&locks, &waiters, &sites, &names, 1_000_000_000);
        assert_eq!(
            (kinds[&w0], kinds[&w1], kinds[&hot]),
            (LockKind::Condvar, LockKind::Condvar, LockKind::Mutex)
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
        let (out, _) = build(&[(key, counters(5, 100, 5))], &[], &[], &HashMap::new(), 1);
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
}
