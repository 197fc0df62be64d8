//! The floor: attaches the very hooks kerntax attaches (sys_enter/exit,
//! sched_switch, sched_waking, fork/exec/exit, the timer expiries and the
//! CPU-clock sampler at kerntax's default rate), each with a program that
//! returns at once, so the benchmarks can tell what the hooks themselves
//! cost a workload from what kerntax's programs add to it.
//!
//!   floor [--sample-hz HZ] -- CMD ARGS   hooks attached while CMD runs
//!   floor [--sample-hz HZ] --duration S  hooks attached for S seconds
//!
//!   floor --cost PROGRAM -- CMD ARGS     only PROGRAM, on sys_enter, while
//!                                        CMD runs; prints what one run of it
//!                                        costs (kernel BPF run-time stats)
//!
//! The cost programs (floor.bpf.c: kt_floor_sys_enter, the empty one, and
//! kt_cost_*, one primitive each) make the price list an exact hook is built
//! from on this machine; bench/costs runs them all.
//!
//! Prints `floor: attached` on stderr once attached. Exits with CMD's status.

use std::mem::MaybeUninit;
use std::process::{Command, ExitCode};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};

struct Args {
    sample_hz: u64,
    duration: Option<Duration>,
    cost: Option<String>,
    command: Vec<String>,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Args> {
    let mut out = Args {
        sample_hz: kerntax::session::DEFAULT_CPU_HZ,
        duration: None,
        cost: None,
        command: vec![],
    };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--sample-hz" => {
                out.sample_hz = args.next().context("--sample-hz needs a rate")?.parse()?
            }
            "--duration" => {
                let secs: f64 = args.next().context("--duration needs seconds")?.parse()?;
                out.duration = Some(Duration::from_secs_f64(secs));
            }
            "--cost" => out.cost = Some(args.next().context("--cost needs a program")?),
            "--" => {
                out.command = args.collect();
                break;
            }
            other => bail!("unknown argument {other:?}"),
        }
    }
    if out.command.is_empty() == out.duration.is_none()
        || (out.cost.is_some() && out.command.is_empty())
    {
        bail!("usage: floor [--sample-hz HZ | --cost PROGRAM] (--duration SECS | -- CMD ARGS)");
    }
    Ok(out)
}

fn run() -> Result<u8> {
    let args = parse(std::env::args().skip(1))?;
    let mut storage = MaybeUninit::uninit();
    let mut open = kerntax::collect::bpf::floor::FloorSkelBuilder::default()
        .open(&mut storage)
        .context("opening the floor's BPF object")?;
    open.progs.kt_floor_cpu_sample.set_autoattach(false);
    if let Some(cost) = &args.cost {
        return cost_of(open, cost, &args.command);
    }
    for mut prog in open.open_object_mut().progs_mut() {
        if prog.name().to_string_lossy().starts_with("kt_cost_") {
            prog.set_autoattach(false);
        }
    }
    let mut skel = open.load().context("loading the floor's programs")?;
    skel.attach().context("attaching the floor's programs")?;
    let _sampler = (args.sample_hz > 0)
        .then(|| {
            kerntax::collect::cpu::CpuSampler::start(
                &skel.progs.kt_floor_cpu_sample,
                args.sample_hz,
            )
        })
        .transpose()?;
    eprintln!("floor: attached");
    if let Some(d) = args.duration {
        std::thread::sleep(d);
        return Ok(0);
    }
    let status = Command::new(&args.command[0])
        .args(&args.command[1..])
        .status()
        .with_context(|| format!("running {}", args.command[0]))?;
    Ok(status.code().unwrap_or(128) as u8)
}

/// Attaches only the program `name` while `command` runs, with the kernel's
/// run-time stats on, and prints its runs and nanoseconds per run.
fn cost_of(
    mut open: kerntax::collect::bpf::floor::OpenFloorSkel<'_>,
    name: &str,
    command: &[String],
) -> Result<u8> {
    use std::os::fd::AsFd;
    let mut found = false;
    for mut prog in open.open_object_mut().progs_mut() {
        let this = prog.name().to_string_lossy() == name;
        found |= this;
        prog.set_autoattach(this);
    }
    if !found {
        bail!("no program {name:?} in the floor's object");
    }
    let mut skel = open.load().context("loading the floor's programs")?;
    skel.attach().context("attaching the cost program")?;
    // SAFETY: a plain syscall; the fd it returns keeps the stats on until closed.
    let stats_fd = unsafe {
        libbpf_rs::libbpf_sys::bpf_enable_stats(libbpf_rs::libbpf_sys::BPF_STATS_RUN_TIME)
    };
    if stats_fd < 0 {
        bail!("enabling BPF run-time stats failed ({stats_fd})");
    }
    eprintln!("floor: attached");
    let started = std::time::Instant::now();
    let status = Command::new(&command[0])
        .args(&command[1..])
        .status()
        .with_context(|| format!("running {}", command[0]))?;
    let wall = started.elapsed();
    let prog = skel
        .object()
        .progs()
        .find(|p| p.name().to_string_lossy() == name)
        .context("the cost program vanished")?;
    let info = kerntax::collect::prog_info(prog.as_fd());
    // SAFETY: the fd bpf_enable_stats returned, closed once.
    unsafe { libc::close(stats_fd) };
    let Some(info) = info else {
        bail!("reading {name}'s stats failed");
    };
    println!(
        "{name}\truns={}\tns_per_run={:.1}\twall_ns_per_run={:.1}",
        info.run_cnt,
        info.run_time_ns as f64 / info.run_cnt.max(1) as f64,
        wall.as_nanos() as f64 / info.run_cnt.max(1) as f64
    );
    Ok(status.code().unwrap_or(128) as u8)
}

fn main() -> ExitCode {
    match run() {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("floor: {e:#}");
            ExitCode::from(2)
        }
    }
}
