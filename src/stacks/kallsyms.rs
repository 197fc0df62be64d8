//! Kernel function names from /proc/kallsyms. Reading and sorting its
//! ~120,000 text symbols takes ~40 ms, as long as the rest of the report
//! together; `load_in_background` does it while the target runs so the
//! report does not wait for it, and at the lowest priority, so it does not
//! slow either.

use std::collections::HashMap;
use std::thread::JoinHandle;

/// Kernel stacks by stack id, named.
#[derive(Debug, Default)]
pub struct KernelStacks {
    pub frames: HashMap<i32, Vec<String>>,
    /// Distinct addresses no symbol covers.
    pub unresolved: u64,
}

/// Text symbols sorted by address.
#[derive(Debug, Default)]
pub struct Kallsyms {
    symbols: Vec<(u64, String)>,
}

impl Kallsyms {
    /// Parses kallsyms text: `ADDRESS TYPE NAME [MODULE]`. Only code
    /// (types t, T, w, W) is kept; with every address zero (kptr_restrict)
    /// nothing is, and every lookup fails.
    pub fn parse(text: &str) -> Kallsyms {
        let mut symbols: Vec<(u64, String)> = text
            .lines()
            .filter_map(|line| {
                let mut fields = line.split_ascii_whitespace();
                let addr = u64::from_str_radix(fields.next()?, 16).ok()?;
                let kind = fields.next()?;
                let name = fields.next()?;
                (addr != 0 && matches!(kind, "t" | "T" | "w" | "W"))
                    .then(|| (addr, name.to_string()))
            })
            .collect();
        symbols.sort_by_key(|s| s.0);
        Kallsyms { symbols }
    }

    pub fn load() -> Kallsyms {
        std::fs::read_to_string("/proc/kallsyms")
            .map(|text| Kallsyms::parse(&text))
            .unwrap_or_default()
    }

    /// Loads on a SCHED_IDLE thread: on a small machine it must not take
    /// a CPU from the target or from draining the ring buffer.
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
        i.checked_sub(1).map(|i| self.symbols[i].1.as_str())
    }

    /// Every stack (by stack id) as `function [k]` frames.
    pub fn name_stacks(&self, stacks: &HashMap<i32, Vec<u64>>) -> KernelStacks {
        let mut unresolved = 0;
        let addrs: Vec<u64> = stacks.values().flatten().copied().collect();
        let names = self.names(&addrs, &mut unresolved);
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

    #[test]
    fn an_address_is_named_by_the_closest_code_symbol_below_it() {
        let k = Kallsyms::parse(TEXT);
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
        let k = Kallsyms::parse(TEXT);
        let mut unresolved = 0;
        let names = k.names(&[0x10, 0x10, 0xffffffff81001008], &mut unresolved);
        assert_eq!(unresolved, 1);
        assert_eq!(names[&0x10], "[kernel] 0x10");
        assert_eq!(names[&0xffffffff81001008], "do_sys_poll [k]");
    }

    #[test]
    fn hidden_addresses_name_nothing() {
        let k = Kallsyms::parse("0000000000000000 T entry_SYSCALL_64\n");
        assert_eq!(k.name(0xffffffff81000080), None);
    }
}
