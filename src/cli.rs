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
    context switches, and where in the code they come from.",
    after_help = "Examples:\n  \
    kerntax run -- ./server --threads 8       profile a command to its end\n  \
    kerntax attach 4242 --duration 10 --html report.html\n  \
    kerntax demo                              the lab: each story bad and fixed"
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
    /// Do not read the interpreters' own frames at sample time (CPython's,
    /// CRuby's): their code shows as the interpreter's C (its eval loop),
    /// at a lower cost per sample.
    #[arg(long, alias = "no-python-frames")]
    no_interpreter_frames: bool,
    /// Also write a Perfetto trace to FILE (open it in ui.perfetto.dev):
    /// the target's threads' scheduling, with kerntax's reasons for each
    /// wait as slices. Streams a record per switch and wake-up.
    #[arg(long, value_name = "FILE")]
    perfetto: Option<PathBuf>,
    /// Also write a recording to FILE: everything the report is worked out
    /// from, for `kerntax report FILE` later, elsewhere, with newer rules.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
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
    #[command(after_help = "Examples:\n  \
        kerntax run -- ./server --threads 8\n  \
        kerntax run --json out.json --html out.html -- java -jar app.jar")]
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
    #[command(after_help = "Examples:\n  \
        kerntax attach 4242                         until Ctrl-C\n  \
        kerntax attach $(pidof redis-server) --duration 10 --html redis.html")]
    Attach {
        pid: u32,
        #[command(flatten)]
        opts: ProfileArgs,
    },
    /// Record a command (-- CMD) or a running process (-p PID) into one file
    /// that `kerntax report FILE` analyses later, here or on another
    /// machine, with the rules of the kerntax that reads it.
    #[command(after_help = "Examples:\n  \
        kerntax record -- ./server --threads 8          writes kerntax.rec\n  \
        kerntax record -o incident.rec -p 4242 --duration 30\n  \
        kerntax report incident.rec --html incident.html")]
    Record {
        /// Where to write the recording.
        #[arg(
            short = 'o',
            long = "output",
            value_name = "FILE",
            default_value = "kerntax.rec"
        )]
        output: PathBuf,
        /// The process to record, with its threads and children.
        #[arg(short = 'p', long = "pid", value_name = "PID")]
        pid: Option<u32>,
        /// Stop recording after SECS seconds (a command is then sent SIGTERM).
        #[arg(long, value_name = "SECS", value_parser = parse_secs)]
        duration: Option<Duration>,
        #[arg(long, value_name = "HZ", default_value_t = crate::session::DEFAULT_CPU_HZ,
              value_parser = clap::value_parser!(u64).range(0..=10_000))]
        sample_hz: u64,
        #[arg(long)]
        no_interpreter_frames: bool,
        /// Also record every scheduling event of the target's threads, for
        /// `kerntax report FILE --perfetto` (a record per switch and
        /// wake-up: a larger file).
        #[arg(long)]
        sched_trace: bool,
        /// The command to start and record (after `--`).
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "CMD"
        )]
        cmd: Vec<OsString>,
    },
    /// Watch a process (-p PID) or a command (-- CMD) live: why each thread
    /// is not running, and the findings that hold over the last window.
    #[command(
        after_help = "Keys: q quit, ? help, s sort, t threads/processes, / filter, \
        p pause, Enter details.\n\
        When standard output is not a terminal, prints one plain frame per window \
        (like top -b), or one JSON object per line with --json.\n\n\
        Examples:\n  \
        kerntax top -p $(pidof redis-server)\n  \
        kerntax top -d 2 -- ./server --threads 8\n  \
        kerntax top -p 4242 -n 5 --json > windows.jsonl"
    )]
    Top {
        /// The process to watch, with its threads and children.
        #[arg(short = 'p', long = "pid", value_name = "PID")]
        pid: Option<u32>,
        /// Seconds per window (and between refreshes).
        #[arg(short = 'd', long = "delay", value_name = "SECS", default_value = "1",
              value_parser = parse_secs)]
        delay: Duration,
        /// Stop after COUNT windows.
        #[arg(short = 'n', long = "iterations", value_name = "COUNT",
              value_parser = clap::value_parser!(u64).range(1..))]
        iterations: Option<u64>,
        /// One JSON object per window and line, never the full screen.
        #[arg(long)]
        json: bool,
        /// At the end, write the whole run's report as JSON to FILE.
        #[arg(long, value_name = "FILE")]
        report_json: Option<PathBuf>,
        /// At the end, write the whole run's recording to FILE (`kerntax
        /// record`'s file).
        #[arg(long, value_name = "FILE")]
        record: Option<PathBuf>,
        /// On-CPU samples per second on each CPU (0: no CPU sampling).
        #[arg(long, value_name = "HZ", default_value_t = crate::session::DEFAULT_CPU_HZ,
              value_parser = clap::value_parser!(u64).range(0..=10_000))]
        sample_hz: u64,
        /// Do not read the interpreters' own frames at sample time.
        #[arg(long)]
        no_interpreter_frames: bool,
        #[command(flatten)]
        files: FileArgs,
        /// The command to start and watch (after `--`).
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "CMD"
        )]
        cmd: Vec<OsString>,
    },
    /// Run the built-in lab: each scenario's bad and fixed variant, profiled.
    /// Keep profiling a process and push a profile of every window to
    /// Parca or Grafana Pyroscope, with the window's findings.
    #[command(
        after_help = "The backend is chosen by --backend, else by the URL: a path ending \
        in /api/profiles/writeraw is Parca, /push.v1.PusherService/Push Pyroscope; else port \
        4040 is Pyroscope and any other Parca.\n\n\
        Examples:\n  \
        kerntax agent -p $(pidof icinga2) --push http://127.0.0.1:7070\n  \
        kerntax agent --push http://pyroscope:4040 --service-name api --label env=prod -- ./server"
    )]
    Agent {
        /// The backend's URL; a user in it (https://USER:PASSWORD@host, or
        /// the password in KERNTAX_PUSH_PASSWORD) is sent as basic auth.
        #[arg(long, value_name = "URL")]
        push: String,
        /// parca or pyroscope (default: from the URL).
        #[arg(long, value_name = "KIND", value_parser = parse_backend)]
        backend: Option<crate::agent::backend::Kind>,
        /// The process to profile, with its threads and children.
        #[arg(short = 'p', long = "pid", value_name = "PID")]
        pid: Option<u32>,
        /// Seconds per window, one push each.
        #[arg(long, value_name = "SECS", default_value = "10", value_parser = parse_secs)]
        interval: Duration,
        /// The service_name (and job) label (default: the command's or the
        /// process's name).
        #[arg(long, value_name = "NAME")]
        service_name: Option<String>,
        /// An extra series label (repeatable).
        #[arg(long = "label", value_name = "NAME=VALUE",
              value_parser = crate::agent::labels::parse_user_label)]
        labels: Vec<(String, String)>,
        /// X-Scope-OrgID, for a multi-tenant Pyroscope.
        #[arg(long, value_name = "ID")]
        tenant: Option<String>,
        /// Stop after this many seconds (default: until Ctrl-C or the
        /// target's exit).
        #[arg(long, value_name = "SECS", value_parser = parse_secs)]
        duration: Option<Duration>,
        /// One JSON object per window on stdout instead of a line on stderr.
        #[arg(long)]
        json: bool,
        #[arg(long, value_name = "HZ", default_value_t = crate::session::DEFAULT_CPU_HZ,
              value_parser = clap::value_parser!(u64).range(0..=10_000))]
        sample_hz: u64,
        #[arg(long)]
        no_interpreter_frames: bool,
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "CMD"
        )]
        cmd: Vec<OsString>,
    },
    #[command(after_help = "Examples:\n  \
        kerntax demo                       every story, one screen each\n  \
        kerntax demo zabbix-config -v      one story, with its whole reports")]
    Demo {
        /// Run only this scenario (see --list).
        scenario: Option<String>,
        /// List the scenarios.
        #[arg(long)]
        list: bool,
        /// Write every variant's report (JSON and HTML), its recording
        /// (`kerntax report` reads it) and an index.html linking them into DIR.
        #[arg(long, value_name = "DIR", default_value = "kerntax-demo")]
        out: PathBuf,
        /// Print every variant's whole text report, not one screen a story.
        #[arg(long, short)]
        verbose: bool,
    },
    /// Analyse a recording (`kerntax record`) with this kerntax's rules, or
    /// render a JSON report again: as text, JSON, HTML, pprof, folded
    /// stacks or a Perfetto trace.
    #[command(after_help = "Examples:\n  \
        kerntax report kerntax.rec\n  \
        kerntax report incident.rec --json out.json --html out.html\n  \
        kerntax report out.json --pprof out.pb.gz")]
    Report {
        /// A recording (`kerntax record`, `--record`) or a JSON report
        /// (`--json` of run, attach or demo).
        report: PathBuf,
        /// Also write the report as JSON to FILE.
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        /// Also write a Perfetto trace to FILE (a recording made with
        /// `--sched-trace` or `--perfetto`).
        #[arg(long, value_name = "FILE")]
        perfetto: Option<PathBuf>,
        #[command(flatten)]
        files: FileArgs,
    },
    /// Compare two runs, each a JSON report or a recording: figures,
    /// syscalls, locks, and which findings were resolved, are new, or
    /// remain.
    #[command(after_help = "Examples:\n  \
        kerntax diff before.json after.json\n  \
        kerntax diff before.rec after.rec")]
    Diff {
        /// The report or recording before the change.
        before: PathBuf,
        /// The report or recording after it.
        after: PathBuf,
        /// Also write the comparison as JSON to FILE.
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
    },
}

fn parse_backend(s: &str) -> Result<crate::agent::backend::Kind, String> {
    crate::agent::backend::Kind::parse(s)
        .ok_or_else(|| format!("{s:?}: the backend is parca or pyroscope"))
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

fn stdout_is_tty() -> bool {
    std::io::stdout().is_terminal()
}

fn profile(what: What, opts: ProfileArgs, started: Instant) -> anyhow::Result<i32> {
    let options = Options {
        duration: opts.duration,
        cpu_hz: opts.sample_hz,
        target_stdout: None,
        target_quiet: None,
        interpreter_frames: !opts.no_interpreter_frames,
        sched_trace: opts.perfetto.is_some(),
        windows_only: false,
    };
    let outcome = session::profile(what, &options, started)?;
    // Like strace -c and perf stat: the report goes to stderr, leaving the
    // command's own stdout alone. Printed before the JSON is written, so a
    // bad --json path still leaves the user with the report.
    let stderr = std::io::stderr();
    let report = text::render(&outcome.report, stderr.is_terminal());
    eprint!("{}", text::for_terminal(report, &stderr));
    let written = opts.files.outputs(opts.json.clone()).write(&outcome.report);
    // The trace and the recording after the report files: a bad path for
    // one does not stop the others, and each failure is one `kerntax:` line.
    let traced = perfetto(
        opts.perfetto.as_deref(),
        &outcome.report,
        &outcome.recording,
        &outcome.lock_names,
    );
    let recorded = opts.record.as_deref().map_or(Ok(()), |p| {
        crate::recording::file::write(p, &outcome.recording).map(drop)
    });
    written?;
    traced?;
    recorded?;
    Ok(outcome.exit_code)
}

/// Writes `--perfetto`'s trace, if asked, from the recording's scheduling
/// records.
fn perfetto(
    path: Option<&std::path::Path>,
    report: &crate::report::Report,
    recording: &crate::recording::Recording,
    lock_names: &[(crate::model::LockKey, String)],
) -> anyhow::Result<()> {
    let Some(path) = path else { return Ok(()) };
    let Some(trace) = &recording.sched_trace else {
        return Err(crate::error::Exit::new(
            2,
            format!(
                "{}: the recording holds no scheduling records for a Perfetto trace (record \
                 with --sched-trace)",
                path.display()
            ),
        )
        .into());
    };
    let w = crate::render::perfetto::write(report, &trace.with_lock_names(lock_names), path)?;
    if std::env::var_os("KERNTAX_DEBUG").is_some() {
        eprintln!("kerntax: debug: perfetto trace: {w:?}");
    }
    Ok(())
}

/// The target of `top` or `agent`: a process or a command, one of them.
fn target_of(verb: &str, pid: Option<u32>, cmd: Vec<OsString>) -> anyhow::Result<What> {
    match (pid, cmd.is_empty()) {
        (Some(pid), true) => Ok(What::Attach(pid)),
        (None, false) => Ok(What::Run(cmd)),
        (Some(_), false) => Err(crate::error::Exit::new(
            2,
            format!("{verb} watches a process (-p PID) or a command (-- CMD), not both"),
        )
        .into()),
        (None, true) => Err(crate::error::Exit::new(
            2,
            format!("{verb} needs a process (-p PID) or a command (-- CMD)"),
        )
        .into()),
    }
}

fn dispatch(cli: Cli, started: Instant) -> anyhow::Result<i32> {
    match cli.command {
        Command::Run { opts, cmd } => profile(What::Run(cmd), opts, started),
        Command::Attach { pid, opts } => profile(What::Attach(pid), opts, started),
        Command::Record {
            output,
            pid,
            duration,
            sample_hz,
            no_interpreter_frames,
            sched_trace,
            cmd,
        } => {
            let what = target_of("record", pid, cmd)?;
            let options = Options {
                duration,
                cpu_hz: sample_hz,
                target_stdout: None,
                target_quiet: None,
                interpreter_frames: !no_interpreter_frames,
                sched_trace,
                windows_only: false,
            };
            let outcome = session::profile(what, &options, started)?;
            let bytes = crate::recording::file::write(&output, &outcome.recording)?;
            eprintln!(
                "kerntax: recorded {} of {} into {} ({}); `kerntax report {}` analyses it",
                crate::units::duration(outcome.report.duration_ns),
                outcome.report.command.as_ref().map_or_else(
                    || format!("pid {}", outcome.report.target_pid),
                    |c| c.join(" ")
                ),
                output.display(),
                crate::units::bytes(bytes),
                output.display(),
            );
            Ok(outcome.exit_code)
        }
        Command::Top {
            pid,
            delay,
            iterations,
            json,
            report_json,
            record,
            sample_hz,
            no_interpreter_frames,
            files,
            cmd,
        } => {
            let what = target_of("top", pid, cmd)?;
            crate::top::run::top(
                crate::top::run::TopOptions {
                    what,
                    delay,
                    iterations,
                    json,
                    cpu_hz: sample_hz,
                    interpreter_frames: !no_interpreter_frames,
                    outputs: files.outputs(report_json),
                    record,
                },
                started,
            )
        }
        Command::Agent {
            push,
            backend,
            pid,
            interval,
            service_name,
            labels,
            tenant,
            duration,
            json,
            sample_hz,
            no_interpreter_frames,
            cmd,
        } => {
            let what = target_of("agent", pid, cmd)?;
            let password = std::env::var("KERNTAX_PUSH_PASSWORD").ok();
            let backend =
                crate::agent::backend::Backend::at(&push, backend, tenant, password.as_deref())
                    .map_err(|e| crate::error::Exit::new(2, format!("--push {e}")))?;
            if labels.len() > crate::agent::labels::MAX_USER_LABELS {
                return Err(crate::error::Exit::new(
                    2,
                    format!(
                        "at most {} --label (a series has at most {} labels)",
                        crate::agent::labels::MAX_USER_LABELS,
                        crate::agent::labels::MAX_LABELS
                    ),
                )
                .into());
            }
            crate::agent::run::agent(
                crate::agent::run::AgentOptions {
                    what,
                    backend,
                    interval,
                    service_name,
                    labels,
                    duration,
                    json,
                    cpu_hz: sample_hz,
                    interpreter_frames: !no_interpreter_frames,
                },
                started,
            )
        }
        Command::Demo { list: true, .. } => {
            print!("{}", crate::demo::list());
            Ok(0)
        }
        Command::Demo {
            scenario,
            out,
            verbose,
            ..
        } => crate::demo::run(&crate::demo::DemoOptions {
            only: scenario.as_deref(),
            out: &out,
            verbose,
        }),
        Command::Report {
            report,
            json,
            perfetto: trace,
            files,
        } => {
            let loaded = crate::report_file::read_any(&report)?;
            let r = &loaded.report;
            let outputs = files.outputs(json);
            if outputs.is_empty() && trace.is_none() {
                let report = text::render(r, stdout_is_tty());
                print!("{}", text::for_terminal(report, &std::io::stdout()));
            }
            let written = outputs.write(r);
            let traced = match (&loaded.recording, &trace) {
                (Some(rec), _) => perfetto(trace.as_deref(), r, rec, &loaded.lock_names),
                (None, Some(path)) => Err(crate::error::Exit::new(
                    2,
                    format!(
                        "{}: a Perfetto trace is made from a recording (kerntax record \
                         --sched-trace), not from a JSON report",
                        path.display()
                    ),
                )
                .into()),
                (None, None) => Ok(()),
            };
            written?;
            traced?;
            Ok(0)
        }
        Command::Diff {
            before,
            after,
            json,
        } => {
            let before = crate::report_file::read(&before)?;
            let after = crate::report_file::read(&after)?;
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
