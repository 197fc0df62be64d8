//! The CPU clock perf events that drive on-CPU sampling: one per CPU, each
//! running the kt_cpu_sample program at the chosen frequency.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use anyhow::{Context, Result};
use libbpf_rs::libbpf_sys::{self, perf_event_attr};
use libbpf_rs::{Link, ProgramMut};

pub struct CpuSampler {
    // Links before fds: detach, then close.
    _links: Vec<Link>,
    _fds: Vec<OwnedFd>,
}

fn perf_event_open(attr: &perf_event_attr, cpu: i32) -> io::Result<OwnedFd> {
    // SAFETY: valid attr pointer; pid -1 with a cpu samples every task there.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr as *const perf_event_attr,
            -1 as libc::pid_t,
            cpu,
            -1 as libc::c_int,
            libbpf_sys::PERF_FLAG_FD_CLOEXEC as libc::c_ulong,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

fn online_cpus() -> Vec<i32> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    let mut cpus = vec![];
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(a), Ok(b)) = (a.parse::<i32>(), b.parse::<i32>()) {
            cpus.extend(a..=b);
        }
    }
    cpus
}

impl CpuSampler {
    /// Samples every online CPU `hz` times a second with `prog`.
    pub fn start(prog: &ProgramMut<'_>, hz: u64) -> Result<CpuSampler> {
        let mut attr = perf_event_attr {
            type_: libbpf_sys::PERF_TYPE_SOFTWARE,
            size: std::mem::size_of::<perf_event_attr>() as u32,
            config: libbpf_sys::PERF_COUNT_SW_CPU_CLOCK as u64,
            ..Default::default()
        };
        attr.__bindgen_anon_1.sample_freq = hz;
        attr.set_freq(1);
        let (mut links, mut fds) = (vec![], vec![]);
        for cpu in online_cpus() {
            let fd = perf_event_open(&attr, cpu)
                .with_context(|| format!("opening a CPU clock event on CPU {cpu}"))?;
            links.push(
                prog.attach_perf_event(fd.as_raw_fd())
                    .context("attaching the CPU sampler")?,
            );
            fds.push(fd);
        }
        Ok(CpuSampler {
            _links: links,
            _fds: fds,
        })
    }
}
