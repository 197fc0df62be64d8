//! Builds what the Rust code cannot: the BPF objects and their skeletons, the
//! syscall/errno name tables of the build machine's kernel headers, and the C
//! lab and test-fixture programs (compiled with the system C compiler at -O2
//! and no frame pointers, so stacks are unwound the way stock binaries need).

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use libbpf_cargo::SkeletonBuilder;

const BPF_OBJECTS: &[&str] = &["syscalls", "floor"];

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    build_bpf(&out);
    write_name_tables(&out);
    write_bpf_constants(&out);
    build_c_programs(Path::new("lab"), &out.join("lab"), "KERNTAX_LAB_DIR");
    build_c_programs(
        Path::new("tests/fixtures"),
        &out.join("fixtures"),
        "KERNTAX_FIXTURE_DIR",
    );
}

const BPF_CLANG_ARGS: &[&str] = &[
    "-I", "src/bpf", "-Wall", "-Werror", "-O2", "-g",
    // v3: 32-bit registers and jumps (kernel 5.1+). Atomic adds whose
    // result is used (5.12+) are avoided: 5.10 refuses them.
    "-mcpu=v3",
];

fn build_bpf(out: &Path) {
    println!("cargo:rerun-if-changed=src/bpf");
    for name in BPF_OBJECTS {
        let src = format!("src/bpf/{name}.bpf.c");
        SkeletonBuilder::new()
            .source(&src)
            .obj(out.join(format!("{name}.bpf.o")))
            .clang_args(BPF_CLANG_ARGS)
            .build_and_generate(out.join(format!("{name}.skel.rs")))
            .unwrap_or_else(|e| panic!("building {src}: {e:#} (is clang installed?)"));
    }
    build_old_verifier_variant(out);
}

/// The object for kernels whose verifier refuses pointer arguments to
/// global functions (before 5.12) or knows no callbacks (before 5.13): the
/// same source with those functions static and the one callback left out
/// (src/bpf/syscalls.bpf.c KT_GLOBAL, compat.bpf.h). It is loaded through
/// the one skeleton (src/collect/bpf.rs picks the bytes), which holds only
/// if both objects have the same maps and programs, by name, and their
/// global data laid out alike: the generated skeletons must say so.
fn build_old_verifier_variant(out: &Path) {
    let mut args = BPF_CLANG_ARGS.to_vec();
    args.push("-DKT_OLD_VERIFIER");
    let skel = out.join("syscalls_old.skel.rs");
    SkeletonBuilder::new()
        .source("src/bpf/syscalls.bpf.c")
        .obj(out.join("syscalls_old.bpf.o"))
        .clang_args(args)
        .build_and_generate(&skel)
        .unwrap_or_else(|e| panic!("building the object for old verifiers: {e:#}"));
    // Maps and programs are found by name (any order); the global data
    // is reached through the generated structs, which must be the same.
    let shape = |path: &Path| {
        let text = fs::read_to_string(path).expect("reading a generated skeleton");
        let mut named: Vec<&str> = text
            .lines()
            .filter(|l| l.trim_start().starts_with(".map(") || l.trim_start().starts_with(".prog("))
            .collect();
        named.sort();
        let mut shape = named.join("\n");
        for section in ["rodata", "data", "bss"] {
            let head = format!("        pub struct {section} {{");
            if let Some(at) = text.find(&head) {
                let body = &text[at..];
                shape.push_str(&body[..body.find("\n        }").unwrap_or(body.len())]);
            }
        }
        shape
    };
    let (main, variant) = (shape(&out.join("syscalls.skel.rs")), shape(&skel));
    assert!(
        main == variant,
        "syscalls_old.bpf.o differs from syscalls.bpf.o in its maps, programs or global data; \
         one skeleton cannot load both:\n{main}\n---\n{variant}"
    );
    // The skeleton opens whichever object the kernel needs.
    let path = out.join("syscalls.skel.rs");
    let text = fs::read_to_string(&path).expect("reading the skeleton");
    let from = "ObjectSkeletonConfigBuilder::new(&DATA)";
    assert!(text.contains(from), "libbpf-cargo's skeleton changed shape");
    fs::write(
        &path,
        text.replace(
            from,
            "ObjectSkeletonConfigBuilder::new(super::object_bytes(&DATA))",
        ),
    )
    .expect("writing the skeleton");
}

/// Reads `#define PREFIXname number` lines of a header into (number, name).
fn read_defines(path: &str, prefix: &str) -> Vec<(u32, String)> {
    let text = fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("reading {path}: {e} (install linux-libc-dev)"));
    println!("cargo:rerun-if-changed={path}");
    text.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            if words.next() != Some("#define") {
                return None;
            }
            let name = words.next()?.strip_prefix(prefix)?;
            let value = words.next()?.parse().ok()?;
            Some((value, name.to_string()))
        })
        .collect()
}

fn first_existing(paths: &[&'static str]) -> &'static str {
    paths
        .iter()
        .copied()
        .find(|p| Path::new(p).exists())
        .unwrap_or(paths[0])
}

fn write_name_tables(out: &Path) {
    let unistd = first_existing(&[
        "/usr/include/x86_64-linux-gnu/asm/unistd_64.h",
        "/usr/include/asm/unistd_64.h",
    ]);
    let mut syscalls = read_defines(unistd, "__NR_");
    syscalls.sort();
    let mut errnos = read_defines("/usr/include/asm-generic/errno-base.h", "");
    errnos.extend(read_defines("/usr/include/asm-generic/errno.h", ""));
    errnos.retain(|(_, name)| name.starts_with('E'));
    errnos.sort();
    errnos.dedup_by_key(|(nr, _)| *nr);

    let mut src = String::from("// Generated by build.rs from the kernel UAPI headers.\n");
    writeln!(src, "pub const SYSCALL_NAMES: &[(u32, &str)] = &[").unwrap();
    for (nr, name) in &syscalls {
        writeln!(src, "    ({nr}, {name:?}),").unwrap();
    }
    writeln!(src, "];\npub const ERRNO_NAMES: &[(u32, &str)] = &[").unwrap();
    for (nr, name) in &errnos {
        writeln!(src, "    ({nr}, {name:?}),").unwrap();
    }
    writeln!(src, "];").unwrap();
    fs::write(out.join("names.rs"), src).expect("writing names.rs");
}

/// The event kinds and sample flags BPF and Rust share, from the one header
/// that defines them, so the two sides cannot drift apart.
fn write_bpf_constants(out: &Path) {
    let header = "src/bpf/syscalls.h";
    let mut src = format!("// Generated by build.rs from {header}.\n");
    for (header, prefix) in [
        (header, "KT_EV_"),
        (header, "KT_SAMPLE_"),
        (header, "KT_TIME_"),
        ("src/bpf/python.h", "KT_PY_"),
    ] {
        for (value, name) in read_defines(header, prefix) {
            writeln!(src, "pub const {prefix}{name}: u32 = {value};").unwrap();
        }
    }
    fs::write(out.join("bpf_constants.rs"), src).expect("writing bpf_constants.rs");
}

/// Compiles every `*.c` in `dir` into `out_dir/<stem>` and exports `out_dir`
/// to the crate as the environment variable `env_name`.
fn build_c_programs(dir: &Path, out_dir: &Path, env_name: &str) {
    println!("cargo:rerun-if-changed={}", dir.display());
    fs::create_dir_all(out_dir).expect("creating program output directory");
    let cc = env::var("CC").unwrap_or_else(|_| "cc".into());
    let mut sources: Vec<PathBuf> = fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    sources.retain(|p| p.extension().is_some_and(|x| x == "c"));
    sources.sort();
    for src in sources {
        let stem = src.file_stem().unwrap().to_string_lossy().into_owned();
        let exe = out_dir.join(&stem);
        let abs_src = fs::canonicalize(&src).expect("canonical source path");
        let status = Command::new(&cc)
            .args(["-O2", "-g", "-U_FORTIFY_SOURCE", "-Wall", "-pthread", "-o"])
            .arg(&exe)
            .arg(&abs_src)
            .status()
            .unwrap_or_else(|e| panic!("running {cc}: {e} (install gcc)"));
        assert!(status.success(), "compiling {}", src.display());
    }
    println!("cargo:rustc-env={env_name}={}", out_dir.display());
}
