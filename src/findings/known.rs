//! Known kernel-cost patterns of the standard libraries and runtimes, each
//! with its specific fix: a storm of one syscall whose call site runs
//! through the library function that is known to issue it on every call.
//! Matched on the syscall and the culprit's stack, never on a program's
//! own names. The patterns are each runtime's data (`crate::runtime`,
//! its `patterns`), each saying where the behaviour is documented.

use crate::frame::function;
pub use crate::runtime::KnownPattern;

/// The known pattern a syscall from a call site with `frames` (innermost
/// first) is, if any.
pub fn known(syscall: &str, frames: &[crate::frame::Frame]) -> Option<&'static KnownPattern> {
    crate::runtime::all_of(|r| r.patterns)
        .find(|p| p.syscalls.contains(&syscall) && frames.iter().any(|f| is_pattern_frame(p, f)))
}

/// Whether a frame is one of a pattern's library functions: its whole
/// name (leading underscores aside) or a part of it.
pub fn is_pattern_frame(p: &KnownPattern, frame: &str) -> bool {
    let name = function(frame).trim_start_matches('_');
    p.frames
        .iter()
        .any(|k| name == k.trim_start_matches('_') || name.contains(k))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(f: &[&str]) -> Vec<crate::frame::Frame> {
        f.iter().map(|s| crate::frame::Frame::new(*s)).collect()
    }

    #[test]
    fn a_storm_is_matched_on_its_syscall_and_the_librarys_frames() {
        let tz = v(&[
            "__GI___fstatat64 (fstatat64.c:166)",
            "__tzfile_read (tzfile.c:154)",
            "tzset_internal (tzset.c:405)",
            "__tz_convert (tzset.c:577)",
            "do_strftime (builtin.c:2100)",
        ]);
        assert_eq!(
            known("newfstatat", &tz).map(|p| p.name),
            Some("glibc re-reads the time zone on every call with TZ unset")
        );
        // The same stack for another syscall, or a program's own stat: none.
        assert!(known("read", &tz).is_none());
        assert!(
            known(
                "newfstatat",
                &v(&["__GI___fstatat64 (x)", "scan_dir (a.c:3)"])
            )
            .is_none()
        );
        let ctx = v(&[
            "__GI___sigprocmask (sigprocmask.c:26)",
            "swapcontext (swapcontext.S:80)",
        ]);
        assert!(
            known("rt_sigprocmask", &ctx)
                .unwrap()
                .fix
                .contains("_setjmp")
        );
        let cpus = v(&[
            "sched_getaffinity (x)",
            "os::active_processor_count() (libjvm.so)",
        ]);
        assert!(known("sched_getaffinity", &cpus).is_some());
    }
}
