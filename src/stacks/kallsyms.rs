//! Kernel function names from /proc/kallsyms. Reading and sorting its
//! ~120,000 text symbols takes ~40 ms, as long as the rest of the report
//! together; `load_in_background` does it while the target runs so the
//! report does not wait for it, and at the lowest priority, so it does not
//! slow either.

use std::collections::HashMap;
use std::io::BufRead;
use std::thread::JoinHandle;

pub use crate::recording::KernelStacks;

/// Text symbols sorted by address, their names in one buffer (a String
/// each would double kerntax's memory).
#[derive(Debug, Default)]
pub struct Kallsyms {
    /// (address, range of its name in `names`), sorted by address.
    symbols: Vec<(u64, u32, u32)>,
    names: String,
}

/// The kernel's symbols, loading in the background until first needed:
/// at the end of a run, or at a live view's first window.
pub struct LazyKallsyms {
    loading: Option<JoinHandle<Kallsyms>>,
    ready: Kallsyms,
}

impl LazyKallsyms {
    pub fn new(loading: JoinHandle<Kallsyms>) -> LazyKallsyms {
        LazyKallsyms {
            loading: Some(loading),
            ready: Kallsyms::default(),
        }
    }

    /// The symbols if they are loaded, without waiting: a live view's
    /// windows name kernel frames once they are (the loading thread runs
    /// at idle priority, which a busy target can starve for seconds).
    pub fn try_get(&mut self) -> Option<&Kallsyms> {
        if self.loading.as_ref().is_some_and(|h| !h.is_finished()) {
            return None;
        }
        Some(self.get())
    }

    /// The symbols (none if loading failed). If the idle-priority loader
    /// has not finished, they are loaded here instead (about 40 ms), not
    /// waited for: on a machine a busy target keeps busy the loader may
    /// not run for as long as the target does (issue 24: a report took
    /// 24 s with two CPU hogs running, 51 ms without). The loader is left
    /// to finish on its own.
    pub fn get(&mut self) -> &Kallsyms {
        if let Some(h) = self.loading.take() {
            self.ready = if h.is_finished() {
                h.join().unwrap_or_default()
            } else {
                Kallsyms::load()
            };
        }
        &self.ready
    }
}

impl Kallsyms {
    /// Parses kallsyms text: `ADDRESS TYPE NAME [MODULE]`. Only code
    /// (types t, T, w, W) is kept; with every address zero (kptr_restrict)
    /// nothing is, and every lookup fails.
    pub fn parse(text: impl BufRead) -> Kallsyms {
        let mut k = Kallsyms::default();

        for line in text.lines().map_while(Result::ok) {
            let mut fields = line.split_ascii_whitespace();
            let (Some(addr), Some(kind), Some(name)) =
                (fields.next(), fields.next(), fields.next())
            else {
                continue;
            };
            let Ok(addr) = u64::from_str_radix(addr, 16) else {
                continue;
            };
            if addr != 0 && matches!(kind, "t" | "T" | "w" | "W") {
                let start = k.names.len() as u32;
                k.names.push_str(name);
                k.symbols.push((addr, start, k.names.len() as u32));
            }
        }
        k.symbols.sort_by_key(|s| s.0);
        k.symbols.shrink_to_fit();
        k.names.shrink_to_fit();
        k
    }

    pub fn load() -> Kallsyms {
        std::fs::File::open("/proc/kallsyms")
            .map(|f| Kallsyms::parse(std::io::BufReader::new(f)))
            .unwrap_or_default()
    }

    pub fn load_in_background() -> JoinHandle<Kallsyms> {
        std::thread::spawn(|| {
            let param = libc::sched_param { sched_priority: 0 };
            // SAFETY: pid 0 is the calling thread; param is a valid struct.
            unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
            Kallsyms::load()
        })
    }

    /// The function an address is in: the closest symbol at or below it.
    pub fn name(&self, addr: u64) -> Option<&str> {
        let i = self.symbols.partition_point(|s| s.0 <= addr);
        let (_, start, end) = self.symbols[i.checked_sub(1)?];
        Some(&self.names[start as usize..end as usize])
    }

    /// Every stack (by stack id) as `function [k]` frames.
    pub fn name_stacks(&self, stacks: &HashMap<i32, Vec<u64>>) -> KernelStacks {
        let mut unresolved = 0;
        let addrs: Vec<u64> = stacks.values().flatten().copied().collect();
        // Typed once (`frame::Frame`), shared by every stack with them.
        let names: HashMap<u64, crate::frame::Frame> = self
            .names(&addrs, &mut unresolved)
            .into_iter()
            .map(|(ip, name)| (ip, crate::frame::Frame::new(name)))
            .collect();
        KernelStacks {
            frames: stacks
                .iter()
                .map(|(&id, ips)| (id, ips.iter().map(|ip| names[ip].clone()).collect()))
                .collect(),
            unresolved,
        }
    }

    /// `function [k]` for each address; one it cannot name is counted in
    /// `unresolved` and shown as `[kernel] 0x...`.
    pub fn names(&self, addrs: &[u64], unresolved: &mut u64) -> HashMap<u64, String> {
        let mut out = HashMap::new();
        for &addr in addrs {
            out.entry(addr).or_insert_with(|| match self.name(addr) {
                Some(name) => format!("{name} [k]"),
                None => {
                    *unresolved += 1;
                    format!("[kernel] {addr:#x}")
                }
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
ffffffff81000080 T entry_SYSCALL_64
ffffffff81002000 D some_data
ffffffff81001000 t do_sys_poll
ffffffffc0a01000 t bpf_prog_d8008fd09bb9d03a_kt_sys_exit\t[bpf]
ffffffffc0b00000 W weak_fn [some_module]
";

    /// Issue 24: a loader that cannot run (its CPU time taken by busy
    /// threads) is not waited for.
    #[test]
    fn symbols_are_not_waited_for_from_a_starved_loader() {
        let (release, wait) = std::sync::mpsc::channel::<()>();
        let starved = std::thread::spawn(move || {
            let _ = wait.recv();
            Kallsyms::parse(TEXT.as_bytes())
        });
        let mut lazy = LazyKallsyms::new(starved);
        assert!(lazy.try_get().is_none());
        // Returns while the loader is still blocked: it is released only
        // below (a get that joined it would never return).
        let _ = lazy.get();
        assert!(lazy.loading.is_none());
        release.send(()).unwrap();
        // A finished loader's symbols are taken as they are.
        let mut lazy = LazyKallsyms::new(std::thread::spawn(|| Kallsyms::parse(TEXT.as_bytes())));
        while lazy.try_get().is_none() {
            std::thread::yield_now();
        }
        assert_eq!(
            lazy.get().name(0xffffffff81000080),
            Some("entry_SYSCALL_64")
        );
    }

    #[test]
    fn an_address_is_named_by_the_closest_code_symbol_below_it() {
        let k = Kallsyms::parse(TEXT.as_bytes());
        assert_eq!(k.name(0xffffffff81000080), Some("entry_SYSCALL_64"));
        assert_eq!(k.name(0xffffffff81001fff), Some("do_sys_poll"));
        // Data symbols are not functions: the address stays in do_sys_poll.
        assert_eq!(k.name(0xffffffff81002010), Some("do_sys_poll"));
        assert_eq!(
            k.name(0xffffffffc0a01234),
            Some("bpf_prog_d8008fd09bb9d03a_kt_sys_exit")
        );
        assert_eq!(k.name(0xffffffffc0b00010), Some("weak_fn"));
        assert_eq!(k.name(0xffffffff81000000), None);
    }

    #[test]
    fn unnamed_addresses_are_counted_once_each() {
        let k = Kallsyms::parse(TEXT.as_bytes());
        let mut unresolved = 0;
        let names = k.names(&[0x10, 0x10, 0xffffffff81001008], &mut unresolved);
        assert_eq!(unresolved, 1);
        assert_eq!(names[&0x10], "[kernel] 0x10");
        assert_eq!(names[&0xffffffff81001008], "do_sys_poll [k]");
    }

    #[test]
    fn hidden_addresses_name_nothing() {
        let k = Kallsyms::parse(&b"0000000000000000 T entry_SYSCALL_64\n"[..]);
        assert_eq!(k.name(0xffffffff81000080), None);
    }
}
