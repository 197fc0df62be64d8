//! Command line: parsing and dispatch. Errors end here as one
//! `kerntax: ...` line and an exit status.

use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};

use crate::error::describe;
use crate::render::text;
use crate::session::{self, Options, What};

#[derive(Parser, Debug)]
#[command(
    name = "kerntax",
    version,
    about = "Finds the time a program pays to the kernel: system calls, \
    context switches, and where in the code they come from."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args, Debug, Clone)]
struct ProfileArgs {
    /// Also write the report as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Stop profiling after SECS seconds (a `run` command is then sent SIGTERM).
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    duration: Option<Duration>,
    /// On-CPU samples per second on each CPU (0: no CPU sampling).
    #[arg(long, value_name = "HZ", default_value_t = crate::session::DEFAULT_CPU_HZ,
          value_parser = clap::value_parser!(u64).range(0..=10_000))]
    sample_hz: u64,
    #[command(flatten)]
    files: FileArgs,
}

/// Report files besides JSON.
#[derive(clap::Args, Debug, Clone)]
struct FileArgs {
    /// Also write the report as one self-contained HTML page to FILE.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Also write the stacks as a gzip-compressed pprof profile to FILE.
    #[arg(long, value_name = "FILE")]
    pprof: Option<PathBuf>,
    /// Also write the on-CPU samples as folded stacks to FILE.
    #[arg(long, value_name = "FILE")]
    folded: Option<PathBuf>,
}

impl FileArgs {
    fn outputs(&self, json: Option<PathBuf>) -> crate::render::Outputs {
        crate::render::Outputs {
            json,
            html: self.html.clone(),
            pprof: self.pprof.clone(),
            folded: self.folded.clone(),
        }
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Start CMD and profile it, its threads and its children until it exits.
    Run {
        #[command(flatten)]
        opts: ProfileArgs,
        /// The command and its arguments (after `--`).
        #[arg(
            required = true,
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "CMD"
        )]
        cmd: Vec<OsString>,
    },
    /// Profile a running process, its threads and children, until the
    /// duration or Ctrl-C.
    Attach {
        pid: u32,
        #[command(flatten)]
        opts: ProfileArgs,
    },
    /// Run the built-in lab: each scenario's bad and fixed variant, profiled.
    Demo {
        /// Run only this scenario (see --list).
        scenario: Option<String>,
        /// List the scenarios.
        #[arg(long)]
        list: bool,
        /// Write each report as JSON into DIR.
        #[arg(long, value_name = "DIR")]
        json: Option<PathBuf>,
        /// Write each report as an HTML page into DIR.
        #[arg(long, value_name = "DIR")]
        html: Option<PathBuf>,
    },
    /// Render a JSON report again: as text, or as HTML, pprof or folded
    /// stacks.
    Report {
        /// The JSON report (`--json` of run, attach or demo).
        report: PathBuf,
        #[command(flatten)]
        files: FileArgs,
    },
    /// Compare two JSON reports: figures, syscalls, locks, and which
    /// findings were resolved, are new, or remain.
    Diff {
        /// The report before the change.
        before: PathBuf,
        /// The report after it.
        after: PathBuf,
        /// Also write the comparison as JSON to FILE.
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
    },
}

fn parse_secs(s: &str) -> Result<Duration, String> {
    let secs: f64 = s
        .trim_end_matches('s')
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !(secs > 0.0 && secs.is_finite() && secs < 1e9) {
        return Err(format!(
            "{s:?}: the duration must be a positive number of seconds"
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}

pub fn stdout_is_tty() -> bool {
    std::io::stdout().is_terminal()
}

fn profile(what: What, opts: ProfileArgs, started: Instant) -> anyhow::Result<i32> {
    let options = Options {
        duration: opts.duration,
        cpu_hz: opts.sample_hz,
        target_stdout: None,
    };
    let outcome = session::profile(what, &options, started)?;
    // Like strace -c and perf stat: the report goes to stderr, leaving the
    // command's own stdout alone. Printed before the JSON is written, so a
    // bad --json path still leaves the user with the report.
    eprint!(
        "{}",
        text::render(&outcome.report, std::io::stderr().is_terminal())
    );
    opts.files
        .outputs(opts.json.clone())
        .write(&outcome.report)?;
    Ok(outcome.exit_code)
}

fn dispatch(cli: Cli, started: Instant) -> anyhow::Result<i32> {
    match cli.command {
        Command::Run { opts, cmd } => profile(What::Run(cmd), opts, started),
        Command::Attach { pid, opts } => profile(What::Attach(pid), opts, started),
        Command::Demo { list: true, .. } => {
            print!("{}", crate::demo::list());
            Ok(0)
        }
        Command::Demo {
            scenario,
            json,
            html,
            ..
        } => crate::demo::run(scenario.as_deref(), json.as_deref(), html.as_deref()),
        Command::Report { report, files } => {
            let r = crate::report::read::read(&report)?;
            let outputs = files.outputs(None);
            if outputs.is_empty() {
                print!("{}", text::render(&r, stdout_is_tty()));
            }
            outputs.write(&r)?;
            Ok(0)
        }
        Command::Diff {
            before,
            after,
            json,
        } => {
            let before = crate::report::read::read(&before)?;
            let after = crate::report::read::read(&after)?;
            let d = crate::diff::diff(&before, &after);
            print!("{}", crate::render::diff_text::render(&d));
            if let Some(path) = json {
                let text = serde_json::to_string_pretty(&d).expect("a diff always serializes");
                crate::render::json::write_atomic(&path, text.as_bytes())?;
            }
            Ok(0)
        }
    }
}

/// Runs kerntax with the process arguments and returns its exit status.
pub fn main() -> i32 {
    let started = Instant::now();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    match dispatch(cli, started) {
        Ok(code) => code,
        Err(err) => {
            let (code, msg) = describe(&err);
            eprintln!("kerntax: {msg}");
            code
        }
    }
}
