//! `--pprof FILE`: the report's stacks as a gzip-compressed profile.proto,
//! the format `go tool pprof`, Grafana Pyroscope and Parca read. One sample
//! per stack with a value for every type (zero where it does not apply):
//! on-CPU samples and time, syscalls and their time by call site, lock
//! contentions and delay, off-CPU time. Reads only the `Report`.
//!
//! Frames carry names and file:line but no addresses (the report keeps
//! none), so each distinct frame is one location with one line.

use std::collections::HashMap;
use std::io::Write;

use prost::Message;

use crate::report::Report;

pub mod limits;
pub mod proto;

pub use limits::{Limits, Trimmed};
pub use proto::Profile;

/// The sample types, in value order. Their names are words joined by `_`,
/// as Go's own profiles name theirs (`alloc_space`): Parca files each type
/// as `name:type:unit:...`, which must parse as a PromQL selector, so a
/// `-` in a name failed the whole upload.
pub const SAMPLE_TYPES: &[(&str, &str)] = &[
    ("samples", "count"),
    ("cpu", "nanoseconds"),
    ("syscalls", "count"),
    ("syscall_time", "nanoseconds"),
    ("contentions", "count"),
    ("delay", "nanoseconds"),
    ("off_cpu", "nanoseconds"),
];
const SAMPLES: usize = 0;
const CPU: usize = 1;
const SYSCALLS: usize = 2;
const SYSCALL_TIME: usize = 3;
const CONTENTIONS: usize = 4;
const DELAY: usize = 5;
const OFF_CPU: usize = 6;

/// `name (file.c:12) [inlined]` -> (`name`, `file.c`, 12); a managed
/// runtime's tag after the line is left out: `work (Work.java:12,
/// interpreted)`, `burn (/srv/work.js:12, js)` -> (`burn`,
/// `/srv/work.js`, 12).
pub fn parse_frame(frame: &str) -> (&str, &str, i64) {
    let f = frame.trim_end_matches(" [inlined]");
    let Some(open) = f.rfind(" (").filter(|_| f.ends_with(')')) else {
        return (f, "", 0);
    };
    let (name, inside) = (&f[..open], &f[open + 2..f.len() - 1]);
    let inside = match inside.rsplit_once(", ") {
        Some((at, "interpreted" | "js")) => at,
        _ => inside,
    };
    match inside.rsplit_once(':') {
        Some((file, line)) if line.parse::<i64>().is_ok() => {
            (name, file, line.parse().unwrap_or(0))
        }
        _ => (name, inside, 0),
    }
}

/// One stack of the report with its value at every sample type.
#[derive(Clone, Debug)]
pub(crate) struct Stack {
    /// Innermost frame first.
    pub frames: Vec<String>,
    pub value: Vec<i64>,
}

/// The report's stacks, each with its values (none all zero).
pub(crate) fn stacks(r: &Report) -> Vec<Stack> {
    let mut out = Vec::new();
    let mut push = |frames: Vec<String>, values: &[(usize, u64)]| {
        let mut value = vec![0i64; SAMPLE_TYPES.len()];
        for &(i, v) in values {
            value[i] = i64::try_from(v).unwrap_or(i64::MAX);
        }
        if value.iter().any(|&v| v != 0) {
            out.push(Stack { frames, value });
        }
    };
    let period_ns = period_ns(r);
    for f in &r.cpu_samples.folded {
        let frames = f.frames.iter().rev().map(|x| x.to_string()).collect();
        let cpu_ns = f.count.saturating_mul(period_ns);
        push(frames, &[(SAMPLES, f.count), (CPU, cpu_ns)]);
    }
    let with_leaf = |leaf: String, frames: &[crate::frame::Frame]| {
        std::iter::once(leaf)
            .chain(frames.iter().map(|f| f.to_string()))
            .collect::<Vec<_>>()
    };
    for s in &r.syscalls {
        for c in &s.callsites {
            let ns = (s.total_ns as f64 * c.calls as f64 / s.calls.max(1) as f64) as u64;
            let frames = with_leaf(format!("[syscall {}]", s.name), &c.frames);
            push(frames, &[(SYSCALLS, c.calls), (SYSCALL_TIME, ns)]);
        }
    }
    for l in r.locks.iter().filter(|l| l.contention) {
        for w in &l.waiter_stacks {
            let frames = with_leaf(format!("[lock {}]", l.display_name()), &w.frames);
            push(frames, &[(CONTENTIONS, w.count), (DELAY, w.wait_ns)]);
        }
    }
    for t in &r.offcpu {
        for reason in &t.reasons {
            let name = reason.reason.name();
            for s in &reason.stacks {
                let frames = with_leaf(format!("[off-cpu {name}]"), &s.frames);
                push(frames, &[(OFF_CPU, s.ns)]);
            }
        }
    }
    out
}

fn period_ns(r: &Report) -> u64 {
    1_000_000_000u64
        .checked_div(r.cpu_samples.frequency_hz)
        .unwrap_or(0)
}

#[derive(Default)]
struct Builder {
    profile: Profile,
    strings: HashMap<String, i64>,
    locations: HashMap<String, u64>,
    functions: HashMap<(String, String), u64>,
}

impl Builder {
    fn string(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = self.profile.string_table.len() as i64;
        self.profile.string_table.push(s.to_string());
        self.strings.insert(s.to_string(), i);
        i
    }

    /// The location of `frame`: ids count from 1 in the order first seen
    /// (Parca refuses any other numbering).
    fn location(&mut self, frame: &str) -> u64 {
        if let Some(&id) = self.locations.get(frame) {
            return id;
        }
        let (name, file, line) = parse_frame(frame);
        let key = (name.to_string(), file.to_string());
        let function_id = match self.functions.get(&key) {
            Some(&id) => id,
            None => {
                let id = self.profile.function.len() as u64 + 1;
                let name_i = self.string(name);
                let file_i = self.string(file);
                self.profile.function.push(proto::Function {
                    id,
                    name: name_i,
                    system_name: name_i,
                    filename: file_i,
                });
                self.functions.insert(key, id);
                id
            }
        };
        let id = self.profile.location.len() as u64 + 1;
        self.profile.location.push(proto::Location {
            id,
            line: vec![proto::Line { function_id, line }],
        });
        self.locations.insert(frame.to_string(), id);
        id
    }
}

/// The profile of `r`'s `stacks` (all of the report's, or a selection).
pub(crate) fn build(r: &Report, stacks: &[Stack], comments: &[String]) -> Profile {
    let mut b = Builder::default();
    b.string("");
    for (kind, unit) in SAMPLE_TYPES {
        let t = proto::ValueType {
            r#type: b.string(kind),
            unit: b.string(unit),
        };
        b.profile.sample_type.push(t);
    }
    for s in stacks {
        let location_id = s.frames.iter().map(|f| b.location(f)).collect();
        let value = s.value.clone();
        b.profile.sample.push(proto::Sample { location_id, value });
    }
    b.profile.time_nanos = i64::try_from(r.profiler.started_unix_ns).unwrap_or(0);
    b.profile.duration_nanos = i64::try_from(r.duration_ns).unwrap_or(i64::MAX);
    b.profile.period_type = Some(proto::ValueType {
        r#type: b.string("cpu"),
        unit: b.string("nanoseconds"),
    });
    b.profile.period = i64::try_from(period_ns(r)).unwrap_or(0);
    b.profile.default_sample_type = b.string("cpu");
    let what = match &r.command {
        Some(argv) => format!("kerntax run: {}", argv.join(" ")),
        None => format!("kerntax attach: pid {}", r.target_pid),
    };
    for c in std::iter::once(&what).chain(comments) {
        let i = b.string(c);
        b.profile.comment.push(i);
    }
    b.profile
}

/// The profile of `r`, every stack.
pub fn profile(r: &Report) -> Profile {
    build(r, &stacks(r), &[])
}

/// gzip of `raw`.
pub fn gzip(raw: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(raw).expect("writing to memory");
    gz.finish().expect("writing to memory")
}

/// The gzip-compressed profile of `r`.
pub fn render(r: &Report) -> Vec<u8> {
    gzip(&profile(r).encode_to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::build::{build, tests::sample_inputs};
    use std::io::Read;

    #[test]
    fn frames_are_split_into_function_file_and_line() {
        assert_eq!(parse_frame("ns_get (ns.c:115)"), ("ns_get", "ns.c", 115));
        assert_eq!(
            parse_frame("futex_wait (futex-internal.h:146) [inlined]"),
            ("futex_wait", "futex-internal.h", 146)
        );
        assert_eq!(
            parse_frame("getppid (libc.so.6)"),
            ("getppid", "libc.so.6", 0)
        );
        assert_eq!(
            parse_frame("do_syscall_64 [k]"),
            ("do_syscall_64 [k]", "", 0)
        );
        assert_eq!(
            parse_frame("operator() (a.cc:3)"),
            ("operator()", "a.cc", 3)
        );
        assert_eq!(
            parse_frame("burn (/srv/work.js:12, js)"),
            ("burn", "/srv/work.js", 12)
        );
        assert_eq!(
            parse_frame("Spin.work (Spin.java:7, interpreted)"),
            ("Spin.work", "Spin.java", 7)
        );
        assert_eq!(
            parse_frame("Module._load (node:internal/modules/cjs/loader, js)"),
            ("Module._load", "node:internal/modules/cjs/loader", 0)
        );
    }

    #[test]
    fn the_profile_decodes_with_every_sample_type_and_its_stacks() {
        let r = build(sample_inputs());
        let mut raw = vec![];
        flate2::read::GzDecoder::new(&render(&r)[..])
            .read_to_end(&mut raw)
            .unwrap();
        let p = Profile::decode(&raw[..]).unwrap();
        let s = |i: i64| p.string_table[i as usize].as_str();
        let types: Vec<(&str, &str)> = p
            .sample_type
            .iter()
            .map(|t| (s(t.r#type), s(t.unit)))
            .collect();
        assert_eq!(types, SAMPLE_TYPES);
        assert_eq!(s(p.default_sample_type), "cpu");
        assert_eq!(s(0), "");
        // Syscall call sites: the sample inputs' getppid sites add up to its calls.
        let calls: i64 = p.sample.iter().map(|x| x.value[SYSCALLS]).sum();
        assert_eq!(calls, 1000);
        let leaf = p
            .sample
            .iter()
            .find(|x| x.value[SYSCALLS] > 0)
            .unwrap()
            .location_id[0];
        let loc = &p.location[leaf as usize - 1];
        let f = &p.function[loc.line[0].function_id as usize - 1];
        assert_eq!(s(f.name), "[syscall getppid]");
        // Lock waits of the contended mutex only (not the condvar).
        let delay: i64 = p.sample.iter().map(|x| x.value[DELAY]).sum();
        assert_eq!(delay, 900_000);
        for x in &p.sample {
            assert_eq!(x.value.len(), SAMPLE_TYPES.len());
            assert!(
                x.location_id
                    .iter()
                    .all(|&id| id >= 1 && id as usize <= p.location.len())
            );
        }
    }

    /// Parca files each type as `kerntax:<type>:<unit>:cpu:nanoseconds:delta`
    /// and parses it as a PromQL metric name (issue 23: `off-cpu` failed
    /// every upload); Pyroscope's `__profile_type__` is the same words.
    #[test]
    fn issue_23_every_type_and_unit_is_a_metric_name_word() {
        let word = |s: &str| {
            let mut c = s.chars();
            c.next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && c.all(|c| c.is_ascii_alphanumeric() || c == '_')
        };
        for (t, u) in SAMPLE_TYPES {
            assert!(word(t) && word(u), "{t}:{u}");
        }
    }

    /// Parca files a profile under `time_nanos`, with no fallback (0 was
    /// 1970); a window's profile carries its start and length.
    #[test]
    fn issue_23_the_profile_is_stamped_with_its_start_and_duration() {
        let r = build(sample_inputs());
        let p = profile(&r);
        assert_eq!(p.time_nanos, 1_764_000_000_000_000_000);
        assert_eq!(p.duration_nanos, 2_000_000_000);
        let s = |i: i64| p.string_table[i as usize].as_str();
        let period = p.period_type.as_ref().unwrap();
        assert_eq!((s(period.r#type), s(period.unit)), ("cpu", "nanoseconds"));
        // Ids count from 1 in order, as Parca requires.
        for (i, l) in p.location.iter().enumerate() {
            assert_eq!(l.id, i as u64 + 1);
        }
        for (i, f) in p.function.iter().enumerate() {
            assert_eq!(f.id, i as u64 + 1);
        }
    }
}
