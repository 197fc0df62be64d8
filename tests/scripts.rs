//! The README's two commands (issue 13): `scripts/demo.sh` and
//! `scripts/test.sh` work as written on a fresh machine as root with no
//! sudo installed, and a user who is not root is told what to do (or, with
//! sudo, the script runs itself again through it).
//!
//! `cargo` is replaced on PATH by a stand-in that logs its arguments: the
//! test runs inside `cargo test`, whose build lock a nested build would
//! wait on forever, and the binary is built already. CI itself runs the
//! real `scripts/test.sh` end to end.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::*;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn script(dir: &Path, name: &str, body: &str) {
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A directory of stand-ins put first on PATH: `cargo` logs its arguments
/// to `cargo.log`; `sudo`, if `with_sudo`, logs its to `sudo.log` (and
/// does nothing else).
struct Stand {
    dir: tempfile::TempDir,
}

impl Stand {
    fn new(with_sudo: bool) -> Stand {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let d = dir.path().display().to_string();
        script(
            dir.path(),
            "cargo",
            &format!("echo \"$*\" >> {d}/cargo.log"),
        );
        if with_sudo {
            script(dir.path(), "sudo", &format!("echo \"$*\" >> {d}/sudo.log"));
        }
        Stand { dir }
    }

    fn log(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(self.dir.path().join(name)).ok()
    }

    /// PATH with the stand-ins first and no other sudo: the system's
    /// directories, less any that hold one.
    fn path(&self) -> String {
        let mut dirs = vec![self.dir.path().to_path_buf()];
        let system = std::env::var("PATH").unwrap_or_default();
        for d in std::env::split_paths(&system) {
            if !d.join("sudo").exists() {
                dirs.push(d);
            }
        }
        std::env::join_paths(dirs).unwrap().into_string().unwrap()
    }
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `scripts/NAME ARGS` of the clone as root with `stand` first on PATH:
/// it succeeds and never calls sudo; its standard output.
fn as_root(stand: &Stand, name: &str, args: &[&str]) -> String {
    let out = Command::new(repo().join("scripts").join(name))
        .args(args)
        .env("PATH", stand.path())
        .current_dir("/")
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{name}: {stdout}\n{stderr}");
    assert_eq!(stand.log("sudo.log"), None, "root never calls sudo");
    stdout
}

#[test]
fn as_root_with_no_sudo_the_demo_command_sets_up_builds_and_runs() {
    if !bpf_available() {
        return;
    }
    let stand = Stand::new(true);
    let stdout = as_root(&stand, "demo.sh", &["--list"]);
    assert!(stdout.contains("lab scenarios"), "{stdout}");
    assert!(stdout.contains("ruby-switch"), "{stdout}");
    assert_eq!(
        stand.log("cargo.log").as_deref(),
        Some("build --release --quiet\n")
    );
}

#[test]
fn as_root_with_no_sudo_the_test_command_passes_its_arguments_to_cargo_test() {
    if !bpf_available() {
        return;
    }
    let stand = Stand::new(true);
    as_root(&stand, "test.sh", &["--test", "diff"]);
    assert_eq!(
        stand.log("cargo.log").as_deref(),
        Some("build --release --quiet\ntest --release --quiet --test diff -- --test-threads=1\n")
    );
}

/// The scripts copied where any user can read them (a clone under /root
/// is not), as `DIR/scripts/*.sh`.
fn readable_copy() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let scripts = dir.path().join("scripts");
    std::fs::create_dir(&scripts).unwrap();
    for name in ["setup.sh", "demo.sh", "test.sh"] {
        std::fs::copy(repo().join("scripts").join(name), scripts.join(name)).unwrap();
    }
    (dir, scripts)
}

/// `scripts/NAME ARGS` as the user nobody, with `stand` on PATH.
fn as_nobody(scripts: &Path, name: &str, args: &[&str], stand: &Stand) -> Output {
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(scripts.join(name))
        .args(args)
        .env_clear()
        .env("PATH", stand.path())
        .env("HOME", "/nonexistent")
        .current_dir("/")
        .output()
        .unwrap()
}

#[test]
fn not_root_and_no_sudo_the_commands_say_to_run_them_as_root() {
    if !bpf_available() {
        return;
    }
    let (_dir, scripts) = readable_copy();
    let stand = Stand::new(false);
    for name in ["demo.sh", "test.sh"] {
        let out = as_nobody(&scripts, name, &[], &stand);
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(1), "{name}: {stdout}\n{stderr}");
        assert!(
            stderr.contains("need root") && stderr.contains("no sudo"),
            "{name}: {stderr}"
        );
        let whole = scripts.join(name).display().to_string();
        assert!(
            stderr.contains(&format!("su -c '{whole}'")),
            "{name}: says how: {stderr}"
        );
        assert_eq!(
            stand.log("cargo.log"),
            None,
            "{name} stopped before building"
        );
    }
}

#[test]
fn not_root_with_sudo_the_commands_run_again_through_it_with_their_arguments() {
    if !bpf_available() {
        return;
    }
    let (_dir, scripts) = readable_copy();
    let stand = Stand::new(true);
    let out = as_nobody(&scripts, "demo.sh", &["zabbix-config", "-v"], &stand);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stderr.contains("through sudo"), "{stderr}");
    let sudo = stand.log("sudo.log").unwrap_or_default();
    let whole = scripts.join("demo.sh").display().to_string();
    assert!(
        sudo.starts_with(&format!("env PATH={}", stand.path()))
            && sudo.ends_with(&format!(" {whole} zabbix-config -v\n")),
        "{sudo}"
    );
    assert_eq!(stand.log("cargo.log"), None, "nothing ran before sudo");
}
