//! Checks made before anything is loaded or started, so that a missing
//! privilege or kernel feature gets one actionable sentence instead of a
//! libbpf error from deep inside loading.

use std::fs;
use std::path::PathBuf;

use crate::error::Exit;

const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// The oldest kernel with kerntax's core (collect/features.rs: BTF raw
/// tracepoints, the BPF ring buffer, the task iterator); what came later
/// degrades one feature at a time.
const MIN_KERNEL: (u32, u32) = (5, 8);

/// Where the kernel's BTF is read from: `KERNTAX_BTF` (e.g. a BTFHub file for
/// a kernel built without CONFIG_DEBUG_INFO_BTF) or the kernel's own.
pub fn btf_path() -> PathBuf {
    std::env::var_os("KERNTAX_BTF")
        .map_or_else(|| PathBuf::from("/sys/kernel/btf/vmlinux"), PathBuf::from)
}

fn effective_caps() -> Option<u64> {
    u64::from_str_radix(&crate::target::status_field("self", "CapEff")?, 16).ok()
}

/// Names of the capabilities kerntax lacks to load and attach BPF programs.
pub fn missing_capabilities(cap_eff: u64) -> Vec<&'static str> {
    let has = |cap: u32| cap_eff & (1u64 << cap) != 0;
    if has(CAP_SYS_ADMIN) {
        return vec![];
    }
    let mut missing = vec![];
    if !has(CAP_BPF) {
        missing.push("CAP_BPF");
    }
    if !has(CAP_PERFMON) {
        missing.push("CAP_PERFMON");
    }
    missing
}

fn parse_release(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// The running kernel's (major, minor), if its release reads as one.
pub fn kernel_version() -> Option<(u32, u32)> {
    parse_release(&kernel_release())
}

pub fn kernel_release() -> String {
    fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

pub fn check() -> Result<(), Exit> {
    if let Some(caps) = effective_caps() {
        let missing = missing_capabilities(caps);
        if !missing.is_empty() {
            return Err(Exit::new(
                1,
                format!(
                    "not permitted to load BPF programs: missing {} (run as root, e.g. with sudo, or grant them: setcap cap_bpf,cap_perfmon,cap_sys_ptrace+ep kerntax)",
                    missing.join(" and ")
                ),
            ));
        }
    }
    let release = kernel_release();
    if let Some(version) = parse_release(&release)
        && version < MIN_KERNEL
    {
        return Err(Exit::new(
            1,
            format!(
                "kernel {release} is too old: kerntax needs Linux {}.{} or newer (BTF raw tracepoints, the BPF ring buffer and task iterator)",
                MIN_KERNEL.0, MIN_KERNEL.1
            ),
        ));
    }
    let btf = btf_path();
    if !btf.exists() {
        return Err(Exit::new(
            1,
            format!(
                "kernel BTF not found at {}: this kernel was built without CONFIG_DEBUG_INFO_BTF; set KERNTAX_BTF to a BTF file for it (e.g. from BTFHub)",
                btf.display()
            ),
        ));
    }
    // Kernels before 5.11 charge BPF memory to RLIMIT_MEMLOCK; lifting it is harmless after.
    let unlimited = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: plain syscall with a valid pointer.
    unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &unlimited) };
    Ok(())
}

/// Turns a failure to load or attach into advice, keeping libbpf's reason.
pub fn explain_load_failure(err: anyhow::Error) -> anyhow::Error {
    // Already said in words (collect: a verifier's rejection, a core the
    // kernel lacks).
    if err.downcast_ref::<Exit>().is_some() {
        return err;
    }
    let text = format!("{err:#}");
    let hint = if text.contains("Operation not permitted") || text.contains("EPERM") {
        "the kernel refused BPF (EPERM): kerntax needs CAP_BPF and CAP_PERFMON in the initial user namespace; \
         inside a container or user namespace run it on the host or in a privileged container, \
         and check kernel.unprivileged_bpf_disabled and kernel lockdown"
    } else if text.contains("Function not implemented") || text.contains("ENOSYS") {
        "this kernel has no bpf() system call (CONFIG_BPF_SYSCALL)"
    } else {
        "the kernel rejected kerntax's BPF programs"
    };
    anyhow::Error::new(Exit::new(
        1,
        format!("{hint} (kernel {}: {text})", kernel_release()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_or_bpf_plus_perfmon_is_enough() {
        assert!(missing_capabilities(1 << CAP_SYS_ADMIN).is_empty());
        assert!(missing_capabilities((1 << CAP_BPF) | (1 << CAP_PERFMON)).is_empty());
        assert_eq!(missing_capabilities(1 << CAP_BPF), vec!["CAP_PERFMON"]);
        assert_eq!(missing_capabilities(0), vec!["CAP_BPF", "CAP_PERFMON"]);
    }

    #[test]
    fn kernel_release_parsing() {
        assert_eq!(parse_release("6.18.44-fc-v657"), Some((6, 18)));
        assert_eq!(parse_release("5.4.0-150-generic"), Some((5, 4)));
        assert!(parse_release("5.4.0") < Some(MIN_KERNEL));
        assert_eq!(parse_release("garbage"), None);
    }
}
