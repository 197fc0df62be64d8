//! Fuzz harnesses: one per parser of input kerntax does not control, each
//! taking arbitrary bytes where the outside world's would go. Beyond "no
//! panic", each checks what must hold whatever the bytes (a name safe to
//! show, a range that is a range, a report that reads back as written).
//!
//! Why in the library: the libFuzzer targets in `fuzz/` (coverage-guided,
//! `fuzz/run.sh`) and `cargo test` (the committed seeds and every input
//! that once failed, `tests/fuzz.rs`) run the same code.

use std::sync::Arc;

use crate::report::Report;
use crate::stacks::{elf, jit, maps};

/// A harness: its name (the directory of its seeds under `fuzz/corpus/`),
/// what it reads, and the function.
pub struct Harness {
    pub name: &'static str,
    pub reads: &'static str,
    pub run: fn(&[u8]),
}

pub const HARNESSES: &[Harness] = &[
    Harness {
        name: "perf_map",
        reads: "a JIT's /tmp/perf-PID.map",
        run: perf_map,
    },
    Harness {
        name: "proc_maps",
        reads: "/proc/PID/maps",
        run: proc_maps,
    },
    Harness {
        name: "proc_status",
        reads: "/proc/PID/status and /proc/PID/fdinfo/FD",
        run: proc_status,
    },
    Harness {
        name: "elf",
        reads: "an ELF file: segments, sections, symbols, .eh_frame (framehop), DWARF lines \
                (blazesym)",
        run: elf_file,
    },
    Harness {
        name: "report_json",
        reads: "a JSON report given to `report` and `diff`, and every output made of it",
        run: report_json,
    },
    Harness {
        name: "recording",
        reads: "a recording given to `report` and `diff` (gzip-compressed, or its JSON, which \
                the harness compresses), analysed, and every output made of its report",
        run: recording,
    },
    Harness {
        name: "jvm_reply",
        reads: "a JVM attach listener's answer",
        run: jvm_reply,
    },
    Harness {
        name: "html",
        reads: "target strings (commands, comms, frames, lock names) on the HTML page",
        run: html,
    },
];

/// The harness named `name`.
pub fn harness(name: &str) -> Option<&'static Harness> {
    HARNESSES.iter().find(|h| h.name == name)
}

fn text(data: &[u8]) -> String {
    String::from_utf8_lossy(data).into_owned()
}

/// Perf map lines: every entry is a non-empty range found by its start,
/// and every name (as read and as shown) is free of control characters
/// and bounded.
pub fn perf_map(data: &[u8]) {
    let map = jit::PerfMap::parse(&text(data));
    let mut last = None;
    for (start, end, name) in map.entries() {
        assert!(start < end, "{start:#x}..{end:#x}");
        assert!(last < Some(*start), "entries sorted, one per start");
        last = Some(*start);
        assert!(map.lookup(*start).is_some(), "{start:#x} not found");
        assert!(name.len() <= crate::stacks::perf_map::MAX_NAME_BYTES + '…'.len_utf8());
        let shown = jit::display_name(name);
        for s in [name.as_str(), shown.as_str()] {
            assert!(!s.chars().any(char::is_control), "{s:?}");
        }
        let _ = jit::kind(&shown);
    }
    for addr in [0, 1, u64::MAX, u64::MAX - 1] {
        let _ = map.lookup(addr);
    }
}

/// /proc/PID/maps lines: every mapping is a non-empty range.
pub fn proc_maps(data: &[u8]) {
    for m in maps::parse(&text(data)) {
        assert!(m.start < m.end, "{m:?}");
        assert!(m.contains(m.start) && !m.contains(m.end));
        let _ = m.is_file();
    }
}

/// A status file's fields as kerntax reads them (the thread group, the
/// namespace PID, the caught signals, the uids), and an epoll fd's fdinfo.
pub fn proc_status(data: &[u8]) {
    let status = text(data);
    for field in ["Tgid", "NSpid", "SigCgt", "Uid", "Name"] {
        if let Some(v) = crate::target::status_value(&status, field) {
            assert_eq!(v, v.trim());
            let _ = crate::jvm::innermost_pid(&v);
            for sig in [-1, 0, 1, 3, 64, 65, i32::MIN, i32::MAX] {
                let _ = crate::jvm::catches(&v, sig);
            }
        }
    }
    let lines = data.split(|&b| b == b'\n');
    let tfd = lines.filter(|l| l.starts_with(b"tfd:")).count() as i64;
    assert_eq!(crate::collect::epoll_interest(data), tfd);
}

/// The scratch file the ELF harness writes each input to: blazesym reads
/// files by path, as it does a profiled program's.
fn scratch_path() -> std::path::PathBuf {
    let dir = if std::path::Path::new("/dev/shm").is_dir() {
        std::path::PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    dir.join(format!("kerntax-fuzz-elf-{}", std::process::id()))
}

/// An ELF file as the unwinder and the symbolizer read it: load biases,
/// variables by address, `.eh_frame` rules at addresses across its text
/// (framehop), and names with DWARF lines (blazesym).
pub fn elf_file(data: &[u8]) {
    use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
    use framehop::{Module, Unwinder};

    let Ok(file) = elf::ElfFile::parse(Arc::new(data.to_vec())) else {
        return;
    };
    let file = Arc::new(file);
    let text = file.text_range();
    let mut probes = vec![0, 1, 0x1000, u64::MAX];
    if let Some(t) = &text {
        let len = t.end - t.start;
        probes.extend([t.start, t.start + len / 3, t.start + len / 2, t.end - 1]);
    }
    for offset in [0, 0x1000, 0x2000, !0xfff] {
        let m = maps::Mapping {
            start: 0x5555_0000_0000,
            end: 0x5555_0010_0000,
            offset,
            executable: true,
            dev: 1,
            inode: 1,
            path: Some("/fuzz".into()),
        };
        let _ = file.bias(&m);
    }
    for &svma in &probes {
        if let Some((name, off)) = file.data_symbol(svma) {
            assert!(off <= svma, "{name}+{off:#x} at {svma:#x}");
        }
    }
    // Unwind one frame at each probe, the module loaded at its stated
    // addresses, over a stack of the input's own bytes.
    let mut unwinder = UnwinderX86_64::new();
    unwinder.add_module(Module::new(
        "fuzz".to_string(),
        0..u64::MAX,
        0,
        file.section_info(),
    ));
    let mut cache = CacheX86_64::<_>::new();
    let stack: Vec<u64> = data
        .chunks(8)
        .take(64)
        .map(|c| c.iter().fold(0, |a, &b| (a << 8) | u64::from(b)))
        .collect();
    let sp = 0x7ff0_0000_0000u64;
    let mut read = |addr: u64| -> Result<u64, ()> {
        let i = addr.checked_sub(sp).ok_or(())? / 8;
        stack
            .get(usize::try_from(i).map_err(|_| ())?)
            .copied()
            .ok_or(())
    };
    for &ip in &probes {
        let regs = UnwindRegsX86_64::new(ip, sp, sp + 64);
        let mut frames = unwinder.iter_frames(ip, regs, &mut cache, &mut read);
        for _ in 0..8 {
            if !matches!(frames.next(), Ok(Some(_))) {
                break;
            }
        }
    }
    // Names, through the same call a profile's frames take.
    let path = scratch_path();
    if std::fs::write(&path, data).is_ok() {
        let mut modules = elf::ModuleTable::default();
        modules.add(path.to_string_lossy().into_owned(), Some(file.clone()));
        let locs: Vec<crate::model::FrameLoc> = probes
            .iter()
            .map(|&svma| crate::model::FrameLoc::InModule { module: 0, svma })
            .collect();
        // blazesym 0.2.7 panics on some hostile files (a line table's file
        // index out of range, dwarf/lines.rs:167); kerntax catches that and
        // the file's frames go unnamed. libFuzzer's panic hook aborts on
        // any panic, caught or not: a quiet hook lets kerntax's catch work,
        // and a panic of kerntax's own still ends the run.
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let (python, ruby, java, js) = Default::default();
        let names = crate::stacks::symbolize::Symbols::resolve(
            &modules,
            &jit::JitMaps::default(),
            crate::interp::Interpreters {
                python: &python,
                ruby: &ruby,
                java: &java,
                js: &js,
            },
            &locs,
        );
        std::panic::set_hook(hook);
        assert!(!names.stack(&locs).is_empty());
        let _ = std::fs::remove_file(&path);
    }
}

/// Every output `kerntax report` makes of a report it read, and `diff` of
/// it with itself; a report written out reads back to the same JSON.
pub fn report_json(data: &[u8]) {
    let Ok(r) = crate::report_file::parse(data) else {
        return;
    };
    outputs(&r);
}

fn outputs(r: &Report) {
    let _ = crate::render::text::render(r, false);
    let _ = crate::render::text::render(r, true);
    let _ = crate::render::html::render(r);
    let _ = crate::render::folded::render(r);
    let _ = crate::render::pprof::render(r);
    let d = crate::diff::diff(r, r);
    let _ = crate::render::diff_text::render(&d);
    let _ = serde_json::to_string(&d).expect("a diff serializes");
    let json = crate::render::json::render(r);
    let again = crate::report_file::parse(json.as_bytes()).expect("a written report reads back");
    assert_eq!(crate::render::json::render(&again), json);
}

/// A recording: refused with a reason, or analysed into a report whose
/// outputs all render. Mutated JSON reaches the analysis; mutated gzip
/// mostly reaches the decompressor, so both are fed.
pub fn recording(data: &[u8]) {
    use crate::recording::file::{decode, is_recording};
    let compressed;
    let bytes = if is_recording(data) {
        data
    } else {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(data).expect("writing to memory");
        compressed = gz.finish().expect("writing to memory");
        &compressed[..]
    };
    match decode(bytes) {
        Ok(rec) => {
            let a = crate::analyze::recorded::report(&rec);
            outputs(&a.report);
        }
        Err(why) => {
            assert!(!why.contains('\n'), "{why}");
        }
    }
}

/// An attach listener's answer: success only for result code 0; an error
/// quotes a short line without control characters.
pub fn jvm_reply(data: &[u8]) {
    match crate::jvm::parse_answer(data) {
        Ok(_) => {
            let answer = text(data);
            let code = answer.split('\n').next().unwrap_or("");
            assert_eq!(code.trim(), "0");
        }
        Err(why) => {
            assert!(why.chars().count() <= 260, "{why}");
            assert!(!why.chars().any(char::is_control), "{why:?}");
        }
    }
}

/// A report with the input's strings (split at NUL) as its command, thread
/// names, lock names and frames, on the page: no markup of theirs gets in.
pub fn html(data: &[u8]) {
    let text = text(data);
    // Each between markers, so a string that is markup and shows raw, whole,
    // is told from the page's own markup (a frame's shortened form may end
    // where the page's next tag begins).
    let pieces: Vec<String> = text
        .split('\0')
        .take(8)
        .map(|p| format!("KTFZ{}ZFTK", p.replace("KTFZ", "").replace("ZFTK", "")))
        .collect();
    let piece = |i: usize| pieces[i % pieces.len()].clone();
    let mut r = base_report();
    r.command = Some(pieces.clone());
    for (i, th) in r.threads.iter_mut().enumerate() {
        th.comm = piece(i);
    }
    for (i, l) in r.locks.iter_mut().enumerate() {
        l.symbol = Some(piece(i + 1));
    }
    for (i, s) in r.waits.iter_mut().enumerate() {
        s.function = piece(i + 2);
    }
    for (i, c) in r
        .syscalls
        .iter_mut()
        .flat_map(|s| &mut s.callsites)
        .enumerate()
    {
        c.frames.push(piece(i + 3).into());
    }
    for (i, f) in r.findings.iter_mut().enumerate() {
        f.culprit.name = piece(i + 4);
    }
    for (i, f) in r.cpu_samples.folded.iter_mut().enumerate() {
        f.frames.push(piece(i + 5).into());
    }
    let page = crate::render::html::render(&r);
    // memmem (vector compares) for the searches of the whole page: with
    // str's searcher, the coverage build spent most of a run in them.
    let count = |page: &str, what: &str| memchr::memmem::find_iter(page.as_bytes(), what).count();
    assert_eq!(count(&page, "<script"), 2, "only the page's scripts");
    for p in &pieces {
        let markup = p
            .as_bytes()
            .windows(2)
            .any(|w| w[0] == b'<' && (w[1].is_ascii_alphabetic() || w[1] == b'/' || w[1] == b'!'));
        if markup && let Some(at) = memchr::memmem::find(page.as_bytes(), p.as_bytes()) {
            let from = page.floor_char_boundary(at.saturating_sub(300));
            let to = page.ceil_char_boundary((at + p.len() + 100).min(page.len()));
            panic!("{p:?} shows raw: …{}…", &page[from..to]);
        }
    }
    let escaped = crate::render::html::esc(&text);
    static BASE_IFRAMES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let base_iframes = *BASE_IFRAMES.get_or_init(|| count(base_page(), "<iframe"));
    assert_eq!(count(&page, "<iframe"), base_iframes);
    assert!(!escaped.contains(['<', '>', '"', '\'']));
}

/// The base report's page.
fn base_page() -> &'static str {
    static PAGE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PAGE.get_or_init(|| crate::render::html::render(&base_report()))
}

/// The golden report (a lab run's), for the HTML harness to fill in: two
/// of each thing that carries a string, so a page takes milliseconds to
/// make, not tens of them.
fn base_report() -> Report {
    static BASE: std::sync::OnceLock<Report> = std::sync::OnceLock::new();
    BASE.get_or_init(|| {
        let mut r = crate::report_file::parse(include_bytes!("../tests/golden/report.json"))
            .expect("the golden report reads");
        r.threads.truncate(2);
        r.locks.truncate(2);
        r.waits.truncate(2);
        r.syscalls.truncate(2);
        r.findings.truncate(2);
        r.cpu_samples.folded.truncate(2);
        r
    })
    .clone()
}
