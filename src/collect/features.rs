//! What the running kernel offers kerntax, decided once before loading: each
//! facility kerntax's BPF programs can use, the Linux release it came in,
//! how kerntax copes without it and what that costs the user. The BPF side
//! reads the same decisions from read-only data (src/bpf/compat.bpf.h), so
//! one probe here chooses every variant: which object (global or static
//! functions), which programs (sched_switch with or without prev_state),
//! which maps are created and how (task storage or a hash map, preallocated
//! or not), which branches the verifier keeps.
//!
//! The core (exact syscall and switch counting, lock waits with stacks,
//! off-CPU time by reason) needs Linux 5.8: BTF raw tracepoints, the BPF ring
//! buffer and the task iterator. Everything after that degrades one feature
//! at a time, and the report says which (`profiler.kernel_lacks`).
//!
//! `KERNTAX_KERNEL_WITHOUT=name,name` makes kerntax act as on a kernel that
//! lacks those facilities, so every fallback runs on the newest kernel too
//! (tests/kernel_features.rs).

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::kernel_btf::{self, KernelBtf};

/// Something kerntax's programs use where the kernel has it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Facility {
    CurrentTaskBtf,
    TaskStorage,
    GlobalFuncPointers,
    Callbacks,
    TaskPtRegs,
    FindVma,
    SwitchPrevState,
    MemAlloc,
    OpenIterators,
    VmaIterator,
    PrepareExec,
    ExitKeepsMm,
    SizedRecords,
}

pub struct About {
    /// The name KERNTAX_KERNEL_WITHOUT and the report use.
    pub name: &'static str,
    /// The Linux release it came in.
    pub since: &'static str,
    /// What it is, in the kernel's terms.
    pub what: &'static str,
    /// How kerntax works without it.
    pub copes: &'static str,
    /// What a user loses without it; None: nothing they would see.
    pub costs: Option<&'static str>,
}

use Facility::*;

pub const ALL: [Facility; 13] = [
    CurrentTaskBtf,
    TaskStorage,
    GlobalFuncPointers,
    Callbacks,
    TaskPtRegs,
    FindVma,
    SwitchPrevState,
    MemAlloc,
    OpenIterators,
    VmaIterator,
    PrepareExec,
    ExitKeepsMm,
    SizedRecords,
];

impl Facility {
    pub fn about(self) -> About {
        let (name, since, what, copes, costs) = match self {
            CurrentTaskBtf => (
                "current_task_btf",
                "5.11",
                "bpf_get_current_task_btf",
                "the current task's fields are read with probe reads",
                None,
            ),
            TaskStorage => (
                "task_storage",
                "5.11",
                "BPF task storage",
                "per-thread state in a hash map by thread id, preallocated",
                Some(
                    "at most 32,768 threads are followed at once (more are counted in loss.task_storage_failed)",
                ),
            ),
            GlobalFuncPointers => (
                "global_func_pointers",
                "5.12",
                "pointer arguments to global BPF functions",
                "the object built for older verifiers is loaded: its shared functions are static",
                Some("start-up takes longer: the verifier checks those functions once per call"),
            ),
            Callbacks => (
                "callbacks",
                "5.13",
                "BPF callback functions",
                "the object built for older verifiers is loaded: it has no callback",
                None,
            ),
            TaskPtRegs => (
                "task_pt_regs",
                "5.15",
                "bpf_task_pt_regs",
                "a task's user registers are read from the top of its kernel stack",
                None,
            ),
            FindVma => (
                "find_vma",
                "5.17",
                "bpf_find_vma",
                "the memory map's VMA tree is walked without its lock",
                None,
            ),
            SwitchPrevState => (
                "switch_prev_state",
                "5.18",
                "sched_switch's prev_state argument",
                "the state is read from the task",
                Some(
                    "a thread that goes to sleep with a signal pending counts as preempted, not as a voluntary switch",
                ),
            ),
            MemAlloc => (
                "bpf_mem_alloc",
                "6.1",
                "BPF map memory allocated in any context",
                "the maps the scheduler and CPU-sample programs fill are preallocated",
                None,
            ),
            OpenIterators => (
                "open_iterators",
                "6.4",
                "open-coded iterators (bpf_iter_num)",
                "bounded loops walk interpreter frames",
                None,
            ),
            VmaIterator => (
                "vma_iterator",
                "6.7",
                "the task VMA iterator (bpf_iter_task_vma)",
                "a mapping call's mappings are looked up one at a time (bpf_find_vma, else the VMA tree)",
                Some(
                    "a change over more than 8 mappings, or an unmapping that begins in a hole, is read from /proc instead (up to 100 ms later)",
                ),
            ),
            PrepareExec => (
                "prepare_exec",
                "6.10",
                "the sched_prepare_exec tracepoint",
                "a replaced image's code is known from what was sent since its exec",
                None,
            ),
            ExitKeepsMm => (
                "exit_keeps_mm",
                "6.17",
                "sched_process_exit before the memory map is released",
                "a process's code is known from what was sent since its exec, its data mappings from /proc while it runs",
                Some(
                    "a lock of a process that exits before kerntax read its maps is named by its address, not its variable",
                ),
            ),
            SizedRecords => (
                "sized_records",
                "6.16",
                "bpf_probe_read_user_dynptr",
                "every stack sample takes a fixed 17 KiB record in the ring buffer",
                Some(
                    "a burst of samples fills the ring buffer sooner (samples lost are counted in loss.ringbuf_full)",
                ),
            ),
        };
        About {
            name,
            since,
            what,
            copes,
            costs,
        }
    }

    /// Facilities this one cannot be used without.
    fn needs(self) -> &'static [Facility] {
        match self {
            TaskStorage | TaskPtRegs | VmaIterator => &[CurrentTaskBtf],
            // Only the object for newer verifiers calls bpf_find_vma.
            FindVma => &[CurrentTaskBtf, Callbacks, GlobalFuncPointers],
            PrepareExec | ExitKeepsMm => &[VmaIterator, CurrentTaskBtf],
            _ => &[],
        }
    }
}

/// A facility the kernel lacks, as the report states it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelGap {
    pub facility: String,
    /// The Linux release that has it.
    pub since: String,
    pub what: String,
    /// How kerntax works without it.
    pub copes: String,
    /// What the user loses (empty: nothing they would see).
    #[serde(default)]
    pub costs: String,
}

/// What the running kernel offers, by facility.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelFeatures {
    have: [bool; ALL.len()],
}

impl KernelFeatures {
    /// Every facility, as on the newest kernels.
    pub fn all() -> Self {
        KernelFeatures {
            have: [true; ALL.len()],
        }
    }

    fn index(f: Facility) -> usize {
        ALL.iter()
            .position(|&x| x == f)
            .expect("every facility is in ALL")
    }

    pub fn has(&self, f: Facility) -> bool {
        self.have[Self::index(f)]
    }

    fn set(&mut self, f: Facility, on: bool) {
        self.have[Self::index(f)] = on;
    }

    /// Takes away `names` (KERNTAX_KERNEL_WITHOUT's list) and whatever
    /// needs them; an unknown name is an error naming the known ones.
    pub fn without(mut self, names: &str) -> Result<Self, String> {
        for name in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let f = ALL.iter().find(|f| f.about().name == name).ok_or_else(|| {
                let known: Vec<_> = ALL.iter().map(|f| f.about().name).collect();
                format!(
                    "KERNTAX_KERNEL_WITHOUT: no facility '{name}' (known: {})",
                    known.join(", ")
                )
            })?;
            self.set(*f, false);
        }
        Ok(self.closed())
    }

    /// Without what a facility needs, it goes too.
    fn closed(mut self) -> Self {
        for f in ALL {
            if f.needs().iter().any(|n| !self.has(*n)) {
                self.set(f, false);
            }
        }
        self
    }

    /// The facilities missing, as the report states them.
    pub fn gaps(&self) -> Vec<KernelGap> {
        ALL.iter()
            .filter(|f| !self.has(**f))
            .map(|f| {
                let a = f.about();
                KernelGap {
                    facility: a.name.into(),
                    since: a.since.into(),
                    what: a.what.into(),
                    copes: a.copes.into(),
                    costs: a.costs.unwrap_or_default().into(),
                }
            })
            .collect()
    }
}

/// The oldest release with the core (BTF raw tracepoints 5.5, the ring
/// buffer and the task iterator 5.8).
pub const CORE_SINCE: &str = "5.8";

/// Probes the kernel whose BTF is at `btf_path` (`release`: its version,
/// for the one facility BTF does not show). Err names what the core lacks.
pub fn probe(btf_path: &Path, release: (u32, u32)) -> Result<KernelFeatures, String> {
    let btf = KernelBtf::open(btf_path)
        .ok_or_else(|| format!("the kernel BTF at {} could not be read", btf_path.display()))?;
    for (ok, missing) in [
        (
            btf.enum_has("bpf_prog_type", "BPF_PROG_TYPE_TRACING")
                && btf.has_typedef("btf_trace_sys_enter"),
            "BTF raw tracepoints (Linux 5.5)",
        ),
        (
            btf.enum_has("bpf_map_type", "BPF_MAP_TYPE_RINGBUF"),
            "the BPF ring buffer (Linux 5.8)",
        ),
        (
            btf.has_struct("bpf_iter__task"),
            "the BPF task iterator (Linux 5.8)",
        ),
    ] {
        if !ok {
            return Err(format!(
                "this kernel lacks {missing}: kerntax needs Linux {CORE_SINCE} or newer"
            ));
        }
    }
    let helper = |name: &str| btf.enum_has("bpf_func_id", &format!("BPF_FUNC_{name}"));
    let mut f = KernelFeatures::all();
    f.set(CurrentTaskBtf, helper("get_current_task_btf"));
    f.set(
        TaskStorage,
        helper("task_storage_get") && btf.enum_has("bpf_map_type", "BPF_MAP_TYPE_TASK_STORAGE"),
    );
    f.set(
        GlobalFuncPointers,
        kernel_btf::global_functions_take_pointers(),
    );
    // Callbacks came with the first helper that takes one.
    f.set(Callbacks, helper("for_each_map_elem"));
    f.set(TaskPtRegs, helper("task_pt_regs"));
    f.set(FindVma, helper("find_vma"));
    f.set(
        SwitchPrevState,
        btf.tracepoint_args("sched_switch").is_some_and(|n| n >= 4),
    );
    f.set(MemAlloc, btf.has_struct("bpf_mem_alloc"));
    f.set(OpenIterators, btf.has_func("bpf_iter_num_new"));
    f.set(VmaIterator, btf.has_func("bpf_iter_task_vma_new"));
    f.set(PrepareExec, btf.has_typedef("btf_trace_sched_prepare_exec"));
    // Not in BTF: when the exit tracepoint fires relative to exit_mm().
    f.set(ExitKeepsMm, release >= (6, 17));
    f.set(SizedRecords, btf.has_func("bpf_probe_read_user_dynptr"));
    let f = f.closed();
    match std::env::var("KERNTAX_KERNEL_WITHOUT") {
        Ok(names) => f.without(&names),
        Err(_) => Ok(f),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taking_a_facility_away_takes_what_needs_it() {
        let f = KernelFeatures::all().without("current_task_btf").unwrap();
        for gone in [
            CurrentTaskBtf,
            TaskStorage,
            TaskPtRegs,
            FindVma,
            VmaIterator,
            PrepareExec,
            ExitKeepsMm,
        ] {
            assert!(!f.has(gone), "{gone:?}");
        }
        assert!(f.has(SwitchPrevState) && f.has(MemAlloc) && f.has(GlobalFuncPointers));
        // The object for old verifiers has no bpf_find_vma.
        let f = KernelFeatures::all().without("callbacks").unwrap();
        assert!(!f.has(FindVma) && f.has(TaskStorage));
        let f = KernelFeatures::all().without(" vma_iterator ,").unwrap();
        assert!(!f.has(VmaIterator) && !f.has(PrepareExec) && !f.has(ExitKeepsMm));
        assert!(f.has(CurrentTaskBtf) && f.has(TaskStorage));
        assert_eq!(
            KernelFeatures::all().without("").unwrap(),
            KernelFeatures::all()
        );
    }

    #[test]
    fn an_unknown_facility_is_named_with_the_known_ones() {
        let err = KernelFeatures::all()
            .without("task_storage,warp_drive")
            .unwrap_err();
        assert!(
            err.contains("'warp_drive'") && err.contains("task_storage"),
            "{err}"
        );
    }

    #[test]
    fn gaps_say_what_each_missing_facility_costs() {
        assert!(KernelFeatures::all().gaps().is_empty());
        let gaps = KernelFeatures::all()
            .without("task_storage,find_vma")
            .unwrap()
            .gaps();
        let names: Vec<_> = gaps.iter().map(|g| g.facility.as_str()).collect();
        assert_eq!(names, ["task_storage", "find_vma"]);
        assert_eq!(gaps[0].since, "5.11");
        assert!(gaps[0].costs.contains("32,768 threads"), "{:?}", gaps[0]);
        assert!(
            gaps[1].costs.is_empty(),
            "the tree walk loses nothing a user sees"
        );
    }

    #[test]
    fn every_facility_is_described() {
        for f in ALL {
            let a = f.about();
            assert!(!a.name.is_empty() && !a.what.is_empty() && !a.copes.is_empty());
            assert!(
                a.since.split('.').all(|p| p.parse::<u32>().is_ok()),
                "{}",
                a.since
            );
        }
    }

    /// This machine's kernel (6.18) has every facility.
    #[test]
    fn this_kernel_has_everything() {
        let path = Path::new("/sys/kernel/btf/vmlinux");
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        if !root || !path.exists() || std::env::var_os("KERNTAX_KERNEL_WITHOUT").is_some() {
            return; // the load probe needs root
        }
        let release = crate::preflight::kernel_version().unwrap_or((0, 0));
        if release < (6, 17) {
            return; // another kernel: tests/kernel_features.rs covers it
        }
        let f = probe(path, release).unwrap();
        assert_eq!(f.gaps(), vec![], "a kernel {release:?}");
    }
}
