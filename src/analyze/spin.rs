//! Spinning: the CPU burned at busy-wait loops, however they spin — at a
//! PAUSE (marked in BPF), on a compare-and-swap retried at once (samples
//! gathered just after a LOCK CMPXCHG, from several threads), or with plain
//! loads (the loop's code decoded: loads, compares and a branch, nothing
//! else; `frame::code`) — each loop apart by the function it spins in,
//! and the sched_yield calls per thread.

use crate::fixed_hash::{HashMap, HashSet};
use std::collections::{BTreeMap, BTreeSet};

use super::aggregate::ThreadUsage;
use super::cpu::{CpuSite, fold, fold_key, folded};
use crate::frame::code::{CODE_BEFORE, CodeBytes, MAX_LOOP_BYTES, plain_load_loop};
use crate::model::FrameLoc;
use crate::report::{SpinLoop, SpinReport, ThreadYields};

const MAX_SPIN_STACKS: usize = 10;

/// A function where at least this share of the user samples in it land
/// just after a compare-and-swap retries it in a loop: a spin lock that
/// never pauses (the CAS instruction is the slow one in such a loop, so
/// the samples gather behind it), not code that makes a CAS now and then.
pub const MIN_CAS_SHARE: f64 = 0.3;
/// ... with at least this many such samples,
pub const MIN_CAS_SAMPLES: u64 = 10;
/// ... from at least this many threads: spinning is contending.
pub const MIN_CAS_THREADS: usize = 2;
/// Samples in a short window of code, fewest, for its loop to be decoded:
/// fewer say too little either way.
pub const MIN_LOOP_SAMPLES: u64 = 10;

/// Functions that spin on a compare-and-swap (see MIN_CAS_SHARE).
fn cas_spinners(sites: &[CpuSite]) -> HashSet<String> {
    // function -> (samples after a CAS, user samples, threads after a CAS)
    let mut by_fn: BTreeMap<&str, (u64, u64, HashSet<u32>)> = BTreeMap::new();
    for s in sites.iter().filter(|s| !s.in_kernel && s.own_code) {
        let Some(f) = s.user_frames.first() else {
            continue;
        };
        let e = by_fn.entry(f.function()).or_default();
        e.1 += s.samples;
        if s.after_cas {
            e.0 += s.samples;
            e.2.insert(s.tid);
        }
    }
    by_fn
        .into_iter()
        .filter(|(_, (cas, all, threads))| {
            *cas >= MIN_CAS_SAMPLES
                && *cas as f64 >= MIN_CAS_SHARE * *all as f64
                && threads.len() >= MIN_CAS_THREADS
        })
        .map(|(f, _)| f.to_string())
        .collect()
}

/// An address space code lives in: a file (its stated addresses), or one
/// process's JIT code; and an address in it.
fn space_of(at: &FrameLoc) -> Option<((u8, u64), u64)> {
    match *at {
        FrameLoc::InModule { module, svma } => Some(((0, module as u64), svma)),
        FrameLoc::Jit { pid, addr } => Some(((1, u64::from(pid)), addr)),
        // A JavaScript function's JIT code, named from V8's heap.
        FrameLoc::Js { pid, addr, .. } if addr != 0 => Some(((1, u64::from(pid)), addr)),
        FrameLoc::Unmapped { .. }
        | FrameLoc::Python { .. }
        | FrameLoc::Ruby { .. }
        | FrameLoc::Java { .. }
        | FrameLoc::Js { .. } => None,
    }
}

/// The locations of user-mode samples that sit in a busy-wait loop of
/// plain loads: per function, the densest MAX_LOOP_BYTES of sampled
/// instructions, decoded from the code the samples carried.
fn plain_load_spinning(sites: &[CpuSite], code: &HashMap<FrameLoc, Vec<u8>>) -> HashSet<FrameLoc> {
    let mut bytes: HashMap<(u8, u64), CodeBytes> = HashMap::default();
    for (at, b) in code {
        if let Some((space, addr)) = space_of(at) {
            bytes
                .entry(space)
                .or_default()
                .add(addr.wrapping_sub(CODE_BEFORE), b);
        }
    }
    // (space, function) -> address -> samples
    type Space = (u8, u64);
    let mut groups: BTreeMap<(Space, &str), BTreeMap<u64, u64>> = BTreeMap::new();
    for s in sites.iter().filter(|s| !s.in_kernel && !s.spinning) {
        let (Some(at), Some(f)) = (&s.at, s.user_frames.first()) else {
            continue;
        };
        if let Some((space, addr)) = space_of(at) {
            *groups
                .entry((space, f.function()))
                .or_default()
                .entry(addr)
                .or_default() += s.samples;
        }
    }
    let mut out = HashSet::default();
    for ((space, _), ips) in groups {
        let Some(code) = bytes.get(&space) else {
            continue;
        };
        let addrs: Vec<(u64, u64)> = ips.into_iter().collect();
        // The densest window of MAX_LOOP_BYTES.
        let (mut best, mut best_n, mut n, mut j) = ((0, 0), 0, 0, 0);
        for i in 0..addrs.len() {
            n += addrs[i].1;
            while addrs[i].0 - addrs[j].0 > MAX_LOOP_BYTES {
                n -= addrs[j].1;
                j += 1;
            }
            if n > best_n {
                best_n = n;
                best = (j, i);
            }
        }
        if best_n < MIN_LOOP_SAMPLES {
            continue;
        }
        let window: Vec<u64> = addrs[best.0..=best.1].iter().map(|a| a.0).collect();
        if let Some((start, end)) = plain_load_loop(code, &window) {
            for s in sites {
                if let Some(at) = &s.at
                    && let Some((sp, addr)) = space_of(at)
                    && sp == space
                    && (start..end).contains(&addr)
                {
                    out.insert(at.clone());
                }
            }
        }
    }
    out
}

/// Whether `function` is a runtime's atomic load that its JIT calls instead
/// of inlining the load (V8's `Atomics.load` builtin): samples in it are its
/// caller's loads, and the caller's loop around the call is out of sight of
/// the code bytes a sample carries.
fn is_load_helper(function: &str) -> bool {
    crate::runtime::all_of(|r| r.load_helpers).any(|h| *h == function)
}
/// The share of a JIT function's samples, its own and its load helper's
/// calls', in the helper, from which it polls memory in a loop: its time
/// goes to loading one value again and again.
pub const MIN_LOAD_HELPER_SHARE: f64 = 0.5;

/// The program's JIT function a load helper's sample was called from.
fn load_helper_caller(s: &CpuSite) -> Option<&str> {
    let leaf = s.user_frames.first()?;
    if !is_load_helper(leaf.function()) {
        return None;
    }
    s.user_frames[1..]
        .iter()
        .find(|f| f.jit_kind() == Some(crate::frame::jit::JitKind::Program))
        .map(|f| f.function())
}

/// The JIT functions that poll through a load helper (MIN_LOAD_HELPER_SHARE
/// of their samples, MIN_LOOP_SAMPLES at least).
fn load_helper_spinners(sites: &[CpuSite]) -> HashSet<String> {
    // function -> (samples in the helper called from it, its own samples)
    let mut by_fn: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for s in sites.iter().filter(|s| !s.in_kernel) {
        if let Some(caller) = load_helper_caller(s) {
            by_fn.entry(caller).or_default().0 += s.samples;
        } else if let Some(f) = s.user_frames.first() {
            by_fn.entry(f.function()).or_default().1 += s.samples;
        }
    }
    by_fn
        .into_iter()
        .filter(|(_, (helper, own))| {
            *helper >= MIN_LOOP_SAMPLES
                && *helper as f64 >= MIN_LOAD_HELPER_SHARE * (*helper + *own) as f64
        })
        .map(|(f, _)| f.to_string())
        .collect()
}

/// The function a spin loop is named by: the spinning one, not a PAUSE
/// helper it calls.
fn spinning_function(s: &CpuSite) -> String {
    if let Some(caller) = load_helper_caller(s) {
        return caller.to_string();
    }
    s.user_frames
        .iter()
        .map(|x| x.function())
        .find(|x| !crate::runtime::all_of(|r| r.pause_helpers).any(|h| x.contains(h)))
        .unwrap_or("[unknown]")
        .to_string()
}

pub fn spin(
    sites: &[CpuSite],
    code: &HashMap<FrameLoc, Vec<u8>>,
    threads: &[ThreadUsage],
    duration_ns: u64,
) -> SpinReport {
    let all: u64 = sites.iter().map(|s| s.samples).sum();
    let cas = cas_spinners(sites);
    let cas_spin = |s: &CpuSite| {
        !s.spinning
            && s.after_cas
            && !s.in_kernel
            && s.user_frames
                .first()
                .is_some_and(|f| cas.contains(f.function()))
    };
    let plain = plain_load_spinning(sites, code);
    let helped = load_helper_spinners(sites);
    let load_spin = |s: &CpuSite| {
        !s.spinning
            && !cas_spin(s)
            && !s.in_kernel
            && (s.at.as_ref().is_some_and(|a| plain.contains(a))
                || load_helper_caller(s).is_some_and(|c| helped.contains(c)))
    };
    let kind = |s: &CpuSite| {
        if s.spinning {
            Some("pause")
        } else if cas_spin(s) {
            Some("cas")
        } else if load_spin(s) {
            Some("plain-loads")
        } else {
            None
        }
    };
    let spins = |s: &CpuSite| kind(s).is_some();
    let count = |f: &dyn Fn(&CpuSite) -> bool| -> u64 {
        sites.iter().filter(|s| f(s)).map(|s| s.samples).sum()
    };
    let spin_samples = count(&spins);
    let share = |n: u64| if all == 0 { 0.0 } else { n as f64 / all as f64 };
    // Each loop apart: (function, kind) -> (samples, threads, stacks).
    type Seen = (u64, BTreeSet<u32>, BTreeMap<Vec<crate::frame::Frame>, u64>);
    let mut loops: BTreeMap<(String, &str), Seen> = BTreeMap::new();
    for s in sites {
        let Some(k) = kind(s) else { continue };
        let e = loops.entry((spinning_function(s), k)).or_default();
        e.0 += s.samples;
        e.1.insert(s.tid);
        *e.2.entry(folded(s)).or_default() += s.samples;
    }
    let mut loops: Vec<SpinLoop> = loops
        .into_iter()
        .map(|((function, kind), (samples, threads, stacks))| SpinLoop {
            function,
            kind: kind.to_string(),
            samples,
            share: share(samples),
            threads: threads.len() as u32,
            frames: stacks
                .into_iter()
                .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
                .map(|(f, _)| f)
                .unwrap_or_default(),
        })
        .collect();
    loops.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.function.cmp(&b.function)));
    let mut yields: Vec<ThreadYields> = threads
        .iter()
        .filter(|t| t.yields > 0)
        .map(|t| ThreadYields {
            tid: t.tid,
            pid: t.pid,
            comm: t.comm.clone(),
            calls: t.yields,
            calls_per_s: if duration_ns == 0 {
                0.0
            } else {
                t.yields as f64 * 1e9 / duration_ns as f64
            },
        })
        .collect();
    yields.sort_by(|a, b| b.calls.cmp(&a.calls).then(a.tid.cmp(&b.tid)));
    SpinReport {
        spin_samples,
        cas_spin_samples: count(&cas_spin),
        load_spin_samples: count(&load_spin),
        spin_share: share(spin_samples),
        spin_stacks: fold(
            sites
                .iter()
                .filter(|s| spins(s))
                .map(|s| (fold_key(s), s.tid, s.samples)),
            MAX_SPIN_STACKS,
        ),
        loops,
        yields,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(
        tid: u32,
        spinning: bool,
        user: &[&str],
        samples: u64,
        at: Option<FrameLoc>,
    ) -> CpuSite {
        CpuSite {
            tid,
            in_kernel: false,
            spinning,
            after_cas: false,
            own_code: true,
            user_frames: user.iter().map(|s| crate::frame::Frame::from(*s)).collect(),
            kernel_frames: crate::analyze::cpu::Frames::default(),
            samples,
            at,
        }
    }

    fn thread(tid: u32, yields: u64) -> ThreadUsage {
        ThreadUsage {
            tid,
            pid: 5,
            ppid: 1,
            comm: "y".into(),
            user_ns: 0,
            sys_ns: 0,
            voluntary_switches: 0,
            involuntary_switches: 0,
            yields,
            syscalls: 0,
            exited: true,
            exit_code: 0,
        }
    }

    #[test]
    fn pause_loops_and_yields_are_counted_per_loop_and_thread() {
        let sites = [
            site(1, false, &["burn (a.c:3)", "main (a.c:9)"], 90, None),
            site(1, true, &["spin_lock (a.c:5)", "main (a.c:9)"], 10, None),
        ];
        let s = spin(
            &sites,
            &HashMap::default(),
            &[thread(5, 400)],
            2_000_000_000,
        );
        assert_eq!((s.spin_samples, s.spin_share), (10, 0.1));
        assert_eq!(
            s.spin_stacks[0]
                .frames
                .last()
                .map(crate::frame::Frame::as_str),
            Some("spin_lock (a.c:5)")
        );
        assert_eq!(s.loops.len(), 1);
        assert_eq!(
            (s.loops[0].function.as_str(), s.loops[0].kind.as_str()),
            ("spin_lock", "pause")
        );
        assert_eq!((s.yields[0].calls, s.yields[0].calls_per_s), (400, 200.0));
    }

    /// Issue 19: four threads poll a flag with plain loads. The samples
    /// carry the loop's code: `mov eax, [rip+0x100]; test eax, eax; je`.
    #[test]
    fn a_loop_of_plain_loads_is_spinning_and_a_sum_is_not() {
        let poll = [0x8b, 0x05, 0x00, 0x01, 0x00, 0x00, 0x85, 0xc0, 0x74, 0xf6];
        let sum = [
            0x48, 0x03, 0x07, 0x48, 0x83, 0xc7, 0x08, 0x48, 0x39, 0xf7, 0x75, 0xf4,
        ];
        let at = |svma: u64| FrameLoc::InModule { module: 0, svma };
        let mut code = HashMap::default();
        let mut sites = vec![];
        for (base, body, name) in [
            (0x1000u64, &poll[..], "wait_for_flag"),
            (0x3000, &sum[..], "checksum"),
        ] {
            let mut window = vec![0x90u8; CODE_BEFORE as usize];
            window.extend_from_slice(body);
            window.resize(96, 0xc3);
            // Each instruction of the loop sampled by each of 4 threads.
            let mut d = iced_x86::Decoder::with_ip(64, body, base, iced_x86::DecoderOptions::NONE);
            while d.can_decode() {
                let ip = d.decode().ip();
                code.insert(at(ip), {
                    let off = (ip - base) as usize;
                    let mut w = vec![0x90u8; CODE_BEFORE as usize - off];
                    w.extend_from_slice(&window[CODE_BEFORE as usize..]);
                    w.truncate(96);
                    w
                });
                for tid in 1..=4 {
                    sites.push(site(
                        tid,
                        false,
                        &[&format!("{name} (a.c:1)"), "main (a.c:9)"],
                        5,
                        Some(at(ip)),
                    ));
                }
            }
        }
        let s = spin(&sites, &code, &[], 1_000_000_000);
        assert_eq!(s.load_spin_samples, 3 * 4 * 5, "{s:?}");
        assert_eq!(s.loops.len(), 1, "{:?}", s.loops);
        assert_eq!(
            (
                s.loops[0].function.as_str(),
                s.loops[0].kind.as_str(),
                s.loops[0].threads
            ),
            ("wait_for_flag", "plain-loads", 4)
        );
        // MIN_LOOP_SAMPLES in the loop's window, and one fewer.
        let with = |n: u64| {
            let mut few: Vec<CpuSite> = sites.iter().take(1).cloned().collect();
            few[0].samples = n;
            spin(&few, &code, &[], 1_000_000_000).load_spin_samples
        };
        assert_eq!(with(MIN_LOOP_SAMPLES), MIN_LOOP_SAMPLES);
        assert_eq!(with(MIN_LOOP_SAMPLES - 1), 0);
    }

    /// Issue 19 (node-spin): V8 calls its Atomics.load builtin from the
    /// JIT loop that polls, so the samples land in the builtin: they are
    /// the caller's loads when MIN_LOAD_HELPER_SHARE of its samples are.
    #[test]
    fn a_jit_loop_polling_through_a_load_builtin_spins_in_the_caller_issue_19() {
        let js = "JS:*waitForJob /app/w.js:100:22 (jit)";
        let run = |helper: u64, own: u64| {
            let sites = vec![
                site(
                    1,
                    false,
                    &[
                        "Builtins_AtomicsLoad (node)",
                        js,
                        "JS:*main /app/w.js:1:1 (jit)",
                    ],
                    helper,
                    None,
                ),
                site(2, false, &[js, "JS:*main /app/w.js:1:1 (jit)"], own, None),
            ];
            spin(&sites, &HashMap::default(), &[], 1_000_000_000)
        };
        let r = run(51, 49);
        assert_eq!(r.loops.len(), 1, "{r:?}");
        assert_eq!(r.loops[0].function, "JS:*waitForJob /app/w.js:100:22");
        assert_eq!(r.loops[0].kind, "plain-loads");
        assert_eq!(r.load_spin_samples, 51);
        assert!(run(49, 51).loops.is_empty());
        // Too few samples say nothing.
        assert!(run(MIN_LOOP_SAMPLES - 1, 0).loops.is_empty());
        const { assert!(0.51 >= MIN_LOAD_HELPER_SHARE && 0.49 < MIN_LOAD_HELPER_SHARE) };
    }
}
