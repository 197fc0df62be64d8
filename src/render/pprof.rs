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

/// profile.proto (github.com/google/pprof/proto/profile.proto), the
/// fields kerntax writes.
mod proto {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Profile {
        #[prost(message, repeated, tag = "1")]
        pub sample_type: Vec<ValueType>,
        #[prost(message, repeated, tag = "2")]
        pub sample: Vec<Sample>,
        #[prost(message, repeated, tag = "4")]
        pub location: Vec<Location>,
        #[prost(message, repeated, tag = "5")]
        pub function: Vec<Function>,
        #[prost(string, repeated, tag = "6")]
        pub string_table: Vec<String>,
        #[prost(int64, tag = "10")]
        pub duration_nanos: i64,
        #[prost(message, optional, tag = "11")]
        pub period_type: Option<ValueType>,
        #[prost(int64, tag = "12")]
        pub period: i64,
        #[prost(int64, repeated, tag = "13")]
        pub comment: Vec<i64>,
        #[prost(int64, tag = "14")]
        pub default_sample_type: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ValueType {
        #[prost(int64, tag = "1")]
        pub r#type: i64,
        #[prost(int64, tag = "2")]
        pub unit: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Sample {
        #[prost(uint64, repeated, tag = "1")]
        pub location_id: Vec<u64>,
        #[prost(int64, repeated, tag = "2")]
        pub value: Vec<i64>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Location {
        #[prost(uint64, tag = "1")]
        pub id: u64,
        #[prost(message, repeated, tag = "4")]
        pub line: Vec<Line>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Line {
        #[prost(uint64, tag = "1")]
        pub function_id: u64,
        #[prost(int64, tag = "2")]
        pub line: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Function {
        #[prost(uint64, tag = "1")]
        pub id: u64,
        #[prost(int64, tag = "2")]
        pub name: i64,
        #[prost(int64, tag = "3")]
        pub system_name: i64,
        #[prost(int64, tag = "4")]
        pub filename: i64,
    }
}

pub use proto::Profile;

/// The sample types, in value order.
pub const SAMPLE_TYPES: &[(&str, &str)] = &[
    ("samples", "count"),
    ("cpu", "nanoseconds"),
    ("syscalls", "count"),
    ("syscall-time", "nanoseconds"),
    ("contentions", "count"),
    ("delay", "nanoseconds"),
    ("off-cpu", "nanoseconds"),
];
const SAMPLES: usize = 0;
const CPU: usize = 1;
const SYSCALLS: usize = 2;
const SYSCALL_TIME: usize = 3;
const CONTENTIONS: usize = 4;
const DELAY: usize = 5;
const OFF_CPU: usize = 6;

/// `name (file.c:12) [inlined]` -> (`name`, `file.c`, 12).
pub fn parse_frame(frame: &str) -> (&str, &str, i64) {
    let f = frame.trim_end_matches(" [inlined]");
    let Some(open) = f.rfind(" (").filter(|_| f.ends_with(')')) else {
        return (f, "", 0);
    };
    let (name, inside) = (&f[..open], &f[open + 2..f.len() - 1]);
    match inside.rsplit_once(':') {
        Some((file, line)) if line.parse::<i64>().is_ok() => {
            (name, file, line.parse().unwrap_or(0))
        }
        _ => (name, inside, 0),
    }
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

    /// A sample at `innermost_first` frames with `values` at their types.
    fn sample<'a>(
        &mut self,
        innermost_first: impl IntoIterator<Item = &'a str>,
        values: &[(usize, u64)],
    ) {
        let location_id: Vec<u64> = innermost_first
            .into_iter()
            .map(|f| self.location(f))
            .collect();
        let mut value = vec![0i64; SAMPLE_TYPES.len()];
        for &(i, v) in values {
            value[i] = i64::try_from(v).unwrap_or(i64::MAX);
        }
        if value.iter().any(|&v| v != 0) {
            self.profile
                .sample
                .push(proto::Sample { location_id, value });
        }
    }
}

/// The profile of `r`.
pub fn profile(r: &Report) -> Profile {
    let mut b = Builder::default();
    b.string("");
    for (kind, unit) in SAMPLE_TYPES {
        let t = proto::ValueType {
            r#type: b.string(kind),
            unit: b.string(unit),
        };
        b.profile.sample_type.push(t);
    }
    let hz = r.cpu_samples.frequency_hz;
    let period_ns = 1_000_000_000u64.checked_div(hz).unwrap_or(0);
    for f in &r.cpu_samples.folded {
        let frames: Vec<&str> = f.frames.iter().rev().map(String::as_str).collect();
        b.sample(
            frames,
            &[(SAMPLES, f.count), (CPU, f.count.saturating_mul(period_ns))],
        );
    }
    for s in &r.syscalls {
        let leaf = format!("[syscall {}]", s.name);
        for c in &s.callsites {
            let ns = (s.total_ns as f64 * c.calls as f64 / s.calls.max(1) as f64) as u64;
            let frames = std::iter::once(leaf.as_str()).chain(c.frames.iter().map(String::as_str));
            b.sample(frames, &[(SYSCALLS, c.calls), (SYSCALL_TIME, ns)]);
        }
    }
    for l in r.locks.iter().filter(|l| l.contention) {
        let leaf = format!("[lock {}]", l.display_name());
        for w in &l.waiter_stacks {
            let frames = std::iter::once(leaf.as_str()).chain(w.frames.iter().map(String::as_str));
            b.sample(frames, &[(CONTENTIONS, w.count), (DELAY, w.wait_ns)]);
        }
    }
    for t in &r.offcpu {
        for reason in &t.reasons {
            let name = super::sched_text::reason_name(reason.reason);
            let leaf = format!("[off-cpu {name}]");
            for s in &reason.stacks {
                let frames =
                    std::iter::once(leaf.as_str()).chain(s.frames.iter().map(String::as_str));
                b.sample(frames, &[(OFF_CPU, s.ns)]);
            }
        }
    }
    b.profile.duration_nanos = i64::try_from(r.duration_ns).unwrap_or(i64::MAX);
    b.profile.period_type = Some(proto::ValueType {
        r#type: b.string("cpu"),
        unit: b.string("nanoseconds"),
    });
    b.profile.period = i64::try_from(period_ns).unwrap_or(0);
    b.profile.default_sample_type = b.string("cpu");
    let comment = match &r.command {
        Some(argv) => format!("kerntax run: {}", argv.join(" ")),
        None => format!("kerntax attach: pid {}", r.target_pid),
    };
    let comment = b.string(&comment);
    b.profile.comment.push(comment);
    b.profile
}

/// The gzip-compressed profile of `r`.
pub fn render(r: &Report) -> Vec<u8> {
    let raw = profile(r).encode_to_vec();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&raw).expect("writing to memory");
    gz.finish().expect("writing to memory")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::build::{build, tests::sample_inputs};
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
}
