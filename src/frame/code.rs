//! The machine code around sampled instructions, and whether samples sit in
//! a busy-wait loop of plain loads: a short backward loop that reads memory
//! and compares, and does nothing else — no store, no call, no syscall, no
//! arithmetic carried from one turn to the next (a flag polled until
//! another thread sets it: `while (!ready) {}`). A spin loop with PAUSE or
//! a compare-and-swap is found from its own instructions in BPF; this one
//! has no mark but its shape.
//!
//! Why decode: samples that gather on a few instructions prove nothing by
//! themselves (a tight checksum loop gathers too); a loop that makes no
//! progress is one whose instructions can change nothing but flags.

use std::collections::BTreeMap;

use iced_x86::{
    Decoder, DecoderOptions, FlowControl, Instruction, InstructionInfoFactory, Mnemonic, OpAccess,
    Register,
};

/// Bytes of code a sample carries before its instruction (KT_CODE_BEFORE).
pub const CODE_BEFORE: u64 = 64;
/// The longest loop body taken for a busy-wait: a few loads, compares and
/// a branch (a JIT adds a safepoint or interrupt check) fit; a loop that
/// does work does not.
pub const MAX_LOOP_BYTES: u64 = 64;
/// ... and the most instructions in it.
pub const MAX_LOOP_INSTRUCTIONS: usize = 16;

/// The known code bytes of one address space (a file's stated addresses,
/// or one process's JIT code), gathered from the windows samples carried.
#[derive(Clone, Debug, Default)]
pub struct CodeBytes {
    bytes: BTreeMap<u64, u8>,
}

impl CodeBytes {
    /// The bytes `b` that start at address `start`.
    pub fn add(&mut self, start: u64, b: &[u8]) {
        for (i, &x) in b.iter().enumerate() {
            self.bytes.insert(start.wrapping_add(i as u64), x);
        }
    }

    /// The known bytes from `from` on, up to the first unknown one or
    /// `max` bytes.
    fn run_from(&self, from: u64, max: u64) -> Vec<u8> {
        let mut v = vec![];
        for (i, (&at, &b)) in self.bytes.range(from..from.saturating_add(max)).enumerate() {
            if at != from + i as u64 {
                break;
            }
            v.push(b);
        }
        v
    }
}

fn decode(bytes: &[u8], at: u64) -> Vec<Instruction> {
    let mut d = Decoder::with_ip(64, bytes, at, DecoderOptions::NONE);
    let mut out = vec![];
    while d.can_decode() {
        let i = d.decode();
        if i.is_invalid() {
            break;
        }
        out.push(i);
    }
    out
}

fn writes(a: OpAccess) -> bool {
    matches!(
        a,
        OpAccess::Write | OpAccess::CondWrite | OpAccess::ReadWrite | OpAccess::ReadCondWrite
    )
}

fn reads(a: OpAccess) -> bool {
    matches!(
        a,
        OpAccess::Read | OpAccess::CondRead | OpAccess::ReadWrite | OpAccess::ReadCondWrite
    )
}

/// Whether a loop's instructions only load, compare and branch: no store,
/// no call or syscall, no lock prefix, at least one load, and no register
/// whose value in one turn is computed from its value in the turn before
/// (a counter, a pointer chased, a sum): values loaded from memory afresh
/// each turn carry nothing (`mov rax, [x]; idiv rcx` polls; `add rdi, 8`
/// and `mov rax, [rax+8]` make progress).
fn plain_loads(body: &[Instruction]) -> bool {
    if body.is_empty() || body.len() > MAX_LOOP_INSTRUCTIONS {
        return false;
    }
    let mut info = InstructionInfoFactory::new();
    let mut loads = 0;
    // Per register written: the registers live at the loop's top its value
    // now depends on.
    let mut deps: BTreeMap<Register, Vec<Register>> = BTreeMap::new();
    let dep_of = |deps: &BTreeMap<Register, Vec<Register>>, r: Register| {
        deps.get(&r).cloned().unwrap_or_else(|| vec![r])
    };
    for i in body {
        match i.flow_control() {
            FlowControl::Next
            | FlowControl::ConditionalBranch
            | FlowControl::UnconditionalBranch => {}
            _ => return false,
        }
        if i.has_lock_prefix() || i.mnemonic() == Mnemonic::Xchg {
            return false;
        }
        let info = info.info(i);
        let mut sources: Vec<Register> = vec![];
        for m in info.used_memory() {
            if writes(m.access()) {
                return false;
            }
            if reads(m.access()) {
                loads += 1;
            }
            for r in [m.base(), m.index()] {
                if r != Register::None && r != Register::RIP {
                    sources.push(r.full_register());
                }
            }
        }
        let used = info.used_registers();
        sources.extend(
            used.iter()
                .filter(|r| reads(r.access()))
                .map(|r| r.register().full_register()),
        );
        let mut from: Vec<Register> = sources.iter().flat_map(|&r| dep_of(&deps, r)).collect();
        from.sort_unstable();
        from.dedup();
        for w in used.iter().filter(|r| writes(r.access())) {
            deps.insert(w.register().full_register(), from.clone());
        }
    }
    loads > 0 && !deps.iter().any(|(r, from)| from.contains(r))
}

/// The busy-wait loop of plain loads that the sampled instructions `ips`
/// (addresses, any order) sit in, as [start, end), if they do.
pub fn plain_load_loop(code: &CodeBytes, ips: &[u64]) -> Option<(u64, u64)> {
    let lo = *ips.iter().min()?;
    let hi = *ips.iter().max()?;
    if hi - lo > MAX_LOOP_BYTES {
        return None;
    }
    // Decode from each start before the samples until one decoding passes
    // through every sampled instruction (x86 has no fixed boundaries).
    for start in lo.saturating_sub(MAX_LOOP_BYTES)..=lo {
        let bytes = code.run_from(start, hi - start + 2 * MAX_LOOP_BYTES);
        if (bytes.len() as u64) <= hi - start {
            continue;
        }
        let insns = decode(&bytes, start);
        let at = |ip: u64| insns.iter().position(|i| i.ip() == ip);
        if !ips.iter().all(|&ip| at(ip).is_some()) {
            continue;
        }
        // The backward branch closing a loop round the samples.
        let Some(branch) = insns.iter().find(|i| {
            matches!(
                i.flow_control(),
                FlowControl::ConditionalBranch | FlowControl::UnconditionalBranch
            ) && i.ip() >= hi
                && i.near_branch_target() <= lo
                && i.near_branch_target() >= start
                && i.next_ip() - i.near_branch_target() <= MAX_LOOP_BYTES
        }) else {
            continue;
        };
        let top = branch.near_branch_target();
        let (Some(from), Some(to)) = (at(top), at(branch.ip())) else {
            continue;
        };
        return plain_loads(&insns[from..=to]).then(|| (top, branch.next_ip()));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(at: u64, b: &[u8]) -> CodeBytes {
        let mut c = CodeBytes::default();
        // Padding before, so decodings from earlier starts exist.
        c.add(at - 64, &[0x90; 64]);
        c.add(at, b);
        c.add(at + b.len() as u64, &[0xc3; 128]);
        c
    }

    #[test]
    fn a_flag_polled_with_plain_loads_is_a_busy_wait() {
        // .L: mov eax, [rip+0x100]; test eax, eax; je .L
        let poll = [0x8b, 0x05, 0x00, 0x01, 0x00, 0x00, 0x85, 0xc0, 0x74, 0xf6];
        let c = code(0x1000, &poll);
        assert_eq!(
            plain_load_loop(&c, &[0x1000, 0x1006, 0x1008]),
            Some((0x1000, 0x100a))
        );
        // HotSpot's shape: load a flag, a safepoint poll, compare, branch.
        // .L: mov r10, [r15+0x20]; test [r10], eax; cmp byte [rip+0x40], 0; je .L
        let jit = [
            0x4d, 0x8b, 0x57, 0x20, 0x41, 0x85, 0x02, 0x80, 0x3d, 0x40, 0x00, 0x00, 0x00, 0x00,
            0x74, 0xf0,
        ];
        let c = code(0x2000, &jit);
        assert!(plain_load_loop(&c, &[0x2004, 0x2007]).is_some());
        // gcc -O2 for `while (turn % workers != me) if (stop) return 0;`:
        // the turn reloaded and divided afresh each time round.
        let turn = [
            0x85, 0xc0, 0x75, 0x24, 0x48, 0x8b, 0x05, 0x7d, 0x38, 0x00, 0x00, 0x48, 0x99, 0x48,
            0xf7, 0xf9, 0x8b, 0x05, 0x66, 0x38, 0x00, 0x00, 0x48, 0x39, 0xfa, 0x75, 0xe5,
        ];
        let c = code(0x1960, &turn);
        assert_eq!(
            plain_load_loop(&c, &[0x1964, 0x1970, 0x1976, 0x1979]),
            Some((0x1960, 0x197b))
        );
    }

    #[test]
    fn loops_that_make_progress_are_not_busy_waits() {
        // .L: add rax, [rdi]; add rdi, 8; cmp rdi, rsi; jne .L (a sum)
        let sum = [
            0x48, 0x03, 0x07, 0x48, 0x83, 0xc7, 0x08, 0x48, 0x39, 0xf7, 0x75, 0xf4,
        ];
        let c = code(0x1000, &sum);
        assert_eq!(plain_load_loop(&c, &[0x1000, 0x1003]), None);
        // .L: mov rax, [rax+8]; test rax, rax; jne .L (a list walked)
        let walk = [0x48, 0x8b, 0x40, 0x08, 0x48, 0x85, 0xc0, 0x75, 0xf7];
        let c = code(0x1000, &walk);
        assert_eq!(plain_load_loop(&c, &[0x1000, 0x1004]), None);
        // .L: mov [rip+0x100], eax; jmp .L (a store)
        let store = [0x89, 0x05, 0x00, 0x01, 0x00, 0x00, 0xeb, 0xf8];
        let c = code(0x1000, &store);
        assert_eq!(plain_load_loop(&c, &[0x1000]), None);
        // .L: mov eax, [rip+0x100]; call f; test eax, eax; je .L (a call)
        let call = [
            0x8b, 0x05, 0x00, 0x01, 0x00, 0x00, 0xe8, 0x00, 0x00, 0x00, 0x00, 0x85, 0xc0, 0x74,
            0xf1,
        ];
        let c = code(0x1000, &call);
        assert_eq!(plain_load_loop(&c, &[0x1000, 0x100b]), None);
        // Samples spread wider than a loop: no verdict.
        let c = code(0x1000, &[0x90; 200]);
        assert_eq!(plain_load_loop(&c, &[0x1000, 0x1080]), None);
    }
}
