//! Syscall and errno names for x86_64, generated at build time from the
//! kernel's UAPI headers (see build.rs), so no table is copied by hand; and
//! `shown`, for names and text another process wrote.

mod generated {
    include!(concat!(env!("OUT_DIR"), "/names.rs"));
}

use generated::{ERRNO_NAMES, SYSCALL_NAMES};

/// Text another process wrote (a perf map's names, a JVM's answer), made
/// safe to show on a terminal: control characters (escape sequences)
/// replaced with U+FFFD, and cut with `…` so that at most `max_bytes` of
/// it are kept, on a character boundary. Markup is left as written: the
/// page escapes it (`render::html::esc`).
pub fn shown(text: &str, max_bytes: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max_bytes));
    for c in text.chars() {
        let c = if c.is_control() { '\u{fffd}' } else { c };
        if out.len() + c.len_utf8() > max_bytes {
            out.push('…');
            break;
        }
        out.push(c);
    }
    out
}

fn lookup(table: &[(u32, &'static str)], nr: u32) -> Option<&'static str> {
    table
        .binary_search_by_key(&nr, |&(n, _)| n)
        .ok()
        .map(|i| table[i].1)
}

pub fn syscall_name(nr: u32) -> String {
    lookup(SYSCALL_NAMES, nr).map_or_else(|| format!("syscall_{nr}"), str::to_string)
}

/// The poll family: calls that wait for any of several fds.
pub fn is_poll(name: &str) -> bool {
    matches!(
        name,
        "poll" | "ppoll" | "select" | "pselect6" | "epoll_wait" | "epoll_pwait" | "epoll_pwait2"
    )
}

/// Syscalls whose positive return value is the bytes they moved.
pub fn moves_data(name: &str) -> bool {
    matches!(
        name,
        "read"
            | "write"
            | "readv"
            | "writev"
            | "pread64"
            | "pwrite64"
            | "preadv"
            | "pwritev"
            | "preadv2"
            | "pwritev2"
            | "sendto"
            | "recvfrom"
            | "sendmsg"
            | "recvmsg"
            | "splice"
            | "sendfile"
            | "copy_file_range"
    )
}

pub fn syscall_nr(name: &str) -> Option<u32> {
    SYSCALL_NAMES
        .iter()
        .find(|&&(_, n)| n == name)
        .map(|&(nr, _)| nr)
}

/// Kernel-internal codes a syscall can return before being restarted; they
/// never reach user space but are seen at sys_exit.
const KERNEL_ERRNOS: &[(u32, &str)] = &[
    (512, "ERESTARTSYS"),
    (513, "ERESTARTNOINTR"),
    (514, "ERESTARTNOHAND"),
    (515, "ENOIOCTLCMD"),
    (516, "ERESTART_RESTARTBLOCK"),
];

pub fn errno_name(err: u32) -> String {
    lookup(ERRNO_NAMES, err)
        .or_else(|| lookup(KERNEL_ERRNOS, err))
        .map_or_else(|| format!("errno_{err}"), str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Just at and just past the byte cap, with a two-byte character on
    /// the edge (never split).
    #[test]
    fn shown_text_loses_control_characters_and_keeps_at_most_its_bytes() {
        assert_eq!(shown("a\x1b[2Jb\r\n", 100), "a\u{fffd}[2Jb\u{fffd}\u{fffd}");
        let edge = "é".repeat(8);
        assert_eq!(shown(&edge, 16), edge);
        assert_eq!(shown(&edge, 15), format!("{}…", "é".repeat(7)));
        assert_eq!(shown("<b>", 3), "<b>");
        assert_eq!(shown("", 0), "");
        assert_eq!(shown("x", 0), "…");
    }

    #[test]
    fn known_x86_64_numbers() {
        assert_eq!(syscall_name(0), "read");
        assert_eq!(syscall_name(14), "rt_sigprocmask");
        assert_eq!(syscall_name(110), "getppid");
        assert_eq!(syscall_nr("futex"), Some(202));
        assert_eq!(syscall_name(100_000), "syscall_100000");
        assert_eq!(errno_name(9), "EBADF");
        assert_eq!(errno_name(11), "EAGAIN");
        assert_eq!(errno_name(110), "ETIMEDOUT");
        assert_eq!(errno_name(512), "ERESTARTSYS");
        assert_eq!(errno_name(4000), "errno_4000");
    }
}
