//! The floor: attaches the very hooks kerntax attaches (sys_enter/exit,
//! sched_switch, sched_waking, fork/exec/exit, the timer expiries and the
//! CPU-clock sampler at kerntax's default rate), each with a program that
//! returns at once, so the benchmarks can tell what the hooks themselves
//! cost a workload from what kerntax's programs add to it.
//!
//!   floor [--sample-hz HZ] -- CMD ARGS   hooks attached while CMD runs
//!   floor [--sample-hz HZ] --duration S  hooks attached for S seconds
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
    command: Vec<String>,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Args> {
    let mut out = Args {
        sample_hz: kerntax::session::DEFAULT_CPU_HZ,
        duration: None,
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
            "--" => {
                out.command = args.collect();
                break;
            }
            other => bail!("unknown argument {other:?}"),
        }
    }
    if out.command.is_empty() == out.duration.is_none() {
        bail!("usage: floor [--sample-hz HZ] (--duration SECS | -- CMD ARGS)");
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

fn main() -> ExitCode {
    match run() {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("floor: {e:#}");
            ExitCode::from(2)
        }
    }
}
