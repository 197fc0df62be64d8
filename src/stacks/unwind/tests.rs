//! The order and the holding of samples as processes fork, exec, lose
//! mapping changes and exit.

use super::*;
use crate::model::FrameLoc;
use framehop::x86_64::UnwinderX86_64;

/// Issue 21: every exited process's maps were kept for as long as
/// kerntax ran. The last MAX_EXITED_KEPT stay (lock addresses are
/// named from them), the rest are let go and counted; a live process
/// that reused an old pid keeps its own.
#[test]
fn exited_processes_maps_are_bounded_and_counted_issue_21() {
    let mut u = Unwinding::default();
    let mut out = Vec::new();
    let n = MAX_EXITED_KEPT as u32;
    for pid in 1..=n {
        u.on_exit_maps(pid, &[], &mut out);
    }
    assert_eq!((u.mappings.len(), u.exited_forgotten), (MAX_EXITED_KEPT, 0));
    // Pid 2 is used again by a live process.
    u.procs.insert(
        2,
        Process {
            regions: Vec::new(),
            unwinder: UnwinderX86_64::new(),
        },
    );
    for pid in n + 1..=n + 3 {
        u.on_exit_maps(pid, &[], &mut out);
    }
    assert_eq!(u.exited_forgotten, 2);
    assert!(!u.mappings.contains_key(&1) && !u.mappings.contains_key(&3));
    assert!(u.mappings.contains_key(&2) && u.mappings.contains_key(&4));
    assert_eq!(u.mappings.len(), MAX_EXITED_KEPT + 1);
    assert!(out.is_empty());
}

/// Issue 35: a process gone before its exec was handled (its /proc
/// unreadable) keeps the code the kernel sent for it where map changes
/// are sent, and has nothing kept where they are not.
#[test]
fn a_process_gone_before_its_exec_is_handled_keeps_what_was_sent_issue_35() {
    let gone = u32::MAX - 7; // above pid_max: /proc/PID/maps never reads
    let code = ExitMapping {
        start: 0x5000_0000,
        end: 0x5000_4000,
        offset: 0x1000,
        dev: 0,
        inode: 42,
        executable: true,
        heap: false,
    };
    let change = crate::collect::MapChange {
        pid: gone,
        start: code.start,
        end: code.end,
        maps: vec![code.clone()],
        unread: false,
        truncated: false,
        path: None,
    };
    for map_events in [true, false] {
        let mut u = Unwinding {
            map_events,
            ..Unwinding::default()
        };
        u.on_exec(gone, "/nonexistent/prog");
        u.on_map_change(&change);
        let kept = u.mappings.get(&gone).map(|m| {
            m.iter()
                .map(|x| (x.start, x.end, x.inode))
                .collect::<Vec<_>>()
        });
        let want = map_events.then(|| vec![(code.start, code.end, 42)]);
        assert_eq!(kept, want, "map_events {map_events}");
        assert_eq!(u.procs.contains_key(&gone), map_events);
    }
}

/// A sample of `pid` at `ip`, its stack copied from nowhere.
fn sample_of(pid: u32, ip: u64) -> StackSample {
    let mut s = StackSample::at(ip, 0x7fff_0000);
    s.pid = pid;
    s.tid = pid;
    s
}

/// Issue 35 (CI, 5.10): one sample of a live process whose address no
/// map covered held every later sample of that process to the end of
/// the run, where they were named from the map as it was then. Now it
/// is unwound at once, unmapped, and the next sample is not held;
/// unless /proc shows a later image than the one the process runs
/// and the kernel sends an image's mappings as it ends: then its
/// samples wait for them, in order.
#[test]
fn a_live_process_is_not_held_behind_a_sample_no_map_covers_issue_35() {
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let pid = child.id();
    // Spawned is exec'd, not yet mapped: wait for its program's code.
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
    let mapped = || {
        std::fs::read_to_string(format!("/proc/{pid}/maps"))
            .unwrap()
            .contains(exe.to_str().unwrap())
    };
    for _ in 0..5000 {
        if mapped() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert!(mapped(), "sleep never mapped {exe:?}");
    let uncovered = 0x10;
    for (image_maps, later_image) in [(false, true), (true, false), (true, true)] {
        let mut u = Unwinding {
            image_maps,
            ..Unwinding::default()
        };
        u.learn(pid);
        let sleep = u.images[&pid];
        assert!(
            u.mappings[&pid].iter().any(|m| (m.dev, m.inode) == sleep),
            "{sleep:?} {:?}",
            u.mappings[&pid].first()
        );
        if later_image {
            // As if it exec'd another program since its sample.
            u.images.insert(pid, (0, 42));
        }
        let covered = u.mappings[&pid]
            .iter()
            .find(|m| m.executable && m.is_file())
            .map(|m| m.start)
            .unwrap();
        let mut out = Vec::new();
        u.push(sample_of(pid, uncovered), &mut out);
        u.push(sample_of(pid, covered), &mut out);
        let held = u.pending.get(&pid).map_or(0, Vec::len);
        let case = format!("image_maps {image_maps}, later image {later_image}");
        if image_maps && later_image {
            assert_eq!((out.len(), held), (0, 2), "{case}");
            continue;
        }
        assert_eq!((out.len(), held), (2, 0), "{case}");
        assert_eq!(u.stats.maps_unavailable, 1, "{case}");
        assert!(matches!(
            out[0].stack.frames[..],
            [FrameLoc::Unmapped { addr: 0x10, .. }]
        ));
        assert!(matches!(
            out[1].stack.frames.first(),
            Some(FrameLoc::InModule { .. })
        ));
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Issue 35: a sample whose own address lies where its process's
/// mapping changes were lost is not held for a map, nor named from
/// one (/proc may show what is mapped there since): its frame is
/// unknown, counted in frames_in_lost_maps. Just outside the span, the
/// same sample of a process gone waits for its map as before.
#[test]
fn a_sample_in_its_lost_span_is_refused_at_once_issue_35() {
    let gone = u32::MAX - 7; // above pid_max: /proc/PID/maps never reads
    for (ip, lost) in [(0x2000, true), (0x3000, false)] {
        let mut u = Unwinding::default();
        u.procs.insert(
            gone,
            Process {
                regions: Vec::new(),
                unwinder: UnwinderX86_64::new(),
            },
        );
        let mut s = sample_of(gone, ip);
        s.maps_lost = Some((0x1000, 0x3000));
        let mut out = Vec::new();
        u.push(s, &mut out);
        if lost {
            assert_eq!(u.stats.frames_in_lost_maps, 1);
            assert!(u.pending.is_empty());
            assert!(matches!(
                out[..],
                [Unwound { ref stack, .. }]
                    if stack.frames == [FrameLoc::Unmapped { addr: 0x2000, mapping: None }]
            ));
        } else {
            assert_eq!(u.stats.frames_in_lost_maps, 0);
            assert!(out.is_empty());
            assert_eq!(u.pending[&gone].len(), 1);
        }
    }
}

/// An exec whose program cannot be found by the name it gave (a relative
/// path gone) leaves the process's image as /proc/PID/exe shows it, not
/// the program it ran before: that one would make every later read of
/// /proc look like a later image, and hold its samples.
#[test]
fn an_exec_forgets_the_program_before_it_issue_35() {
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut u = Unwinding::default();
    u.images.insert(pid, (0, 42));
    u.on_exec(pid, "no/such/program");
    assert_eq!(
        u.images.get(&pid).copied(),
        known::file_key(format!("/proc/{pid}/exe"))
    );
    child.kill().unwrap();
    child.wait().unwrap();
}
