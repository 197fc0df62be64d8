//! The BPF side's part (src/bpf/ruby.bpf.h): what user space tells it
//! about a CRuby process (`kt_rb_proc`: where a thread's execution context
//! is, the control-frame layout of its minor version) and the frame
//! records it sends back with each stack sample, in the place a CPython's
//! would take (`KT_PY_RUBY` set).

use super::discover::EcTls;
use super::layout::Layout;
use super::stack::RbFrameRec;
use crate::collect::bpf::types;
use crate::collect::events::constants::{
    KT_PY_FAULT, KT_PY_NO_THREAD, KT_PY_RUBY, KT_PY_TRUNCATED, KT_PY_WALKED,
};

/// Bytes of one record (`struct kt_rb_frame`).
pub const RECORD_BYTES: usize = 16;

/// A thread's control frames at a sample, innermost first (a C method's
/// recorded empty: no iseq, no pc). A record's pc is its low half until `Iseq::full_pc` restores
/// it; its flags are `ep[0]`'s low half.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RbFrames {
    pub frames: Vec<RbFrameRec>,
    pub no_thread: bool,
    pub fault: bool,
    pub truncated: bool,
}

impl RbFrames {
    /// The records BPF sent; None when they are not Ruby's.
    pub fn decode(flags: u16, bytes: &[u8]) -> Option<RbFrames> {
        let flags = u32::from(flags);
        if flags & KT_PY_WALKED == 0 || flags & KT_PY_RUBY == 0 {
            return None;
        }
        let frames = bytes
            .chunks_exact(RECORD_BYTES)
            .map(|r| RbFrameRec {
                iseq: u64::from_le_bytes(r[0..8].try_into().unwrap_or_default()),
                pc: u64::from(u32::from_le_bytes(r[8..12].try_into().unwrap_or_default())),
                ep_flags: u64::from(u32::from_le_bytes(r[12..16].try_into().unwrap_or_default())),
            })
            .collect();
        Some(RbFrames {
            frames,
            no_thread: flags & KT_PY_NO_THREAD != 0,
            fault: flags & KT_PY_FAULT != 0,
            truncated: flags & KT_PY_TRUNCATED != 0,
        })
    }
}

/// What the walk of a process needs, as `kt_rb_proc` carries it.
pub fn proc_config(tls: &EcTls, l: &Layout) -> Option<types::kt_rb_proc> {
    let small = |v: u64| u16::try_from(v).ok();
    let small_usize = |v: usize| u16::try_from(v).ok();
    Some(types::kt_rb_proc {
        tls_module: tls.module,
        tls_offset: tls.offset,
        ec_vm_stack: small(l.ec_vm_stack)?,
        ec_vm_stack_size: small(l.ec_vm_stack_size)?,
        ec_cfp: small(l.ec_cfp)?,
        cfp_size: small(l.cfp_size)?,
        cfp_pc: small_usize(l.cfp_pc)?,
        cfp_iseq: small_usize(l.cfp_iseq)?,
        cfp_ep: small_usize(l.cfp_ep)?,
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_decode_innermost_first_and_only_when_rubys() {
        let mut bytes = Vec::new();
        for (iseq, pc, flags) in [
            (0x7f00_0010u64, 0x1234u32, 0x1111_0003u32),
            (0x7f00_0020, 8, 0x7777_0025),
        ] {
            bytes.extend(iseq.to_le_bytes());
            bytes.extend(pc.to_le_bytes());
            bytes.extend(flags.to_le_bytes());
        }
        let f = RbFrames::decode((KT_PY_WALKED | KT_PY_RUBY) as u16, &bytes).unwrap();
        assert_eq!(f.frames.len(), 2);
        assert_eq!((f.frames[0].iseq, f.frames[0].pc), (0x7f00_0010, 0x1234));
        assert!(!f.frames[0].finishes_run() && f.frames[1].finishes_run());
        // A CPython's records are not Ruby's, nor is an unregistered process.
        assert!(RbFrames::decode(KT_PY_WALKED as u16, &bytes).is_none());
        assert!(RbFrames::decode(0, &[]).is_none());
    }

    #[test]
    fn the_3_1_layout_fits_the_bpf_config() {
        let tls = EcTls {
            module_slot: 0,
            offset_slot: 0,
            module: 2,
            offset: 8,
        };
        let c = proc_config(&tls, &super::super::layout::RUBY_3_1).unwrap();
        assert_eq!(
            (c.tls_module, c.tls_offset, c.cfp_size, c.cfp_ep),
            (2, 8, 64, 32)
        );
    }
}
