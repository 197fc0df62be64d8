//! `/proc/PID/maps`, read while the process lives: after it exits the file is
//! empty, so stacks are unwound against a copy taken in time.

use std::fs;
use std::io;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    /// File offset of `start`.
    pub offset: u64,
    pub executable: bool,
    /// (major << 32) | minor of the file's device.
    pub dev: u64,
    pub inode: u64,
    /// File path, a pseudo name such as `[vdso]` or `[stack]`, or None.
    pub path: Option<String>,
}

impl Mapping {
    /// Backed by a regular file (not anonymous, not a `[pseudo]` region).
    pub fn is_file(&self) -> bool {
        self.inode != 0 && self.path.as_deref().is_some_and(|p| p.starts_with('/'))
    }

    pub fn contains(&self, addr: u64) -> bool {
        (self.start..self.end).contains(&addr)
    }
}

fn hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s, 16).ok()
}

/// Parses one line; None for a malformed one.
pub fn parse_line(line: &str) -> Option<Mapping> {
    let mut rest = line;
    let mut field = || {
        let t = rest.trim_start();
        let end = t.find(char::is_whitespace).unwrap_or(t.len());
        let (f, r) = t.split_at(end);
        rest = r;
        (!f.is_empty()).then_some(f)
    };
    let range = field()?;
    let perms = field()?;
    let offset = hex(field()?)?;
    let dev = field()?;
    let inode: u64 = field()?.parse().ok()?;
    let (start, end) = range.split_once('-')?;
    let (major, minor) = dev.split_once(':')?;
    let path = rest.trim();
    let (start, end) = (hex(start)?, hex(end)?);
    // The kernel never writes an empty or reversed range; a line that does
    // is not a mapping (its length would underflow).
    if end <= start {
        return None;
    }
    Some(Mapping {
        start,
        end,
        offset,
        executable: perms.as_bytes().get(2) == Some(&b'x'),
        dev: (hex(major)? << 32) | hex(minor)?,
        inode,
        path: (!path.is_empty()).then(|| path.to_string()),
    })
}

pub fn parse(text: &str) -> Vec<Mapping> {
    text.lines().filter_map(parse_line).collect()
}

/// A process's mappings. A file name that is not UTF-8 (the kernel writes
/// names as bytes) costs that mapping its name, not the process its maps.
pub fn read(pid: u32) -> io::Result<Vec<Mapping>> {
    let maps = parse(&String::from_utf8_lossy(&fs::read(format!(
        "/proc/{pid}/maps"
    ))?));
    if maps.is_empty() {
        // A zombie's maps are empty: as good as gone.
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    Ok(maps)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
55d0c8a4e000-55d0c8a50000 r--p 00000000 fe:01 1048602                    /usr/bin/my prog (deleted)
55d0c8a50000-55d0c8a55000 r-xp 00002000 fe:01 1048602                    /usr/bin/my prog (deleted)
7f1e2a400000-7f1e2a428000 r--p 00000000 08:10 393                        /usr/lib/x86_64-linux-gnu/libc.so.6
7f1e2a428000-7f1e2a5bd000 r-xp 00028000 08:10 393                        /usr/lib/x86_64-linux-gnu/libc.so.6
7f1e2a60f000-7f1e2a612000 rw-p 00000000 00:00 0 
7ffd1b9e5000-7ffd1ba06000 rw-p 00000000 00:00 0                          [stack]
7ffd1bbd6000-7ffd1bbd8000 r-xp 00000000 00:00 0                          [vdso]
garbage line
7ffd1bbd8000-7ffd1bbd8000 r-xp 00000000 00:00 0                          [empty]
7ffd1bbd9000-7ffd1bbd8000 r-xp 00000000 00:00 0                          [reversed]
";

    #[test]
    fn parses_paths_with_spaces_anonymous_and_pseudo_regions() {
        let maps = parse(SAMPLE);
        assert_eq!(maps.len(), 7);
        assert_eq!(maps[1].path.as_deref(), Some("/usr/bin/my prog (deleted)"));
        assert_eq!(
            (maps[1].start, maps[1].end, maps[1].offset),
            (0x55d0c8a50000, 0x55d0c8a55000, 0x2000)
        );
        assert!(maps[1].executable && !maps[0].executable);
        assert_eq!(maps[3].dev, (8 << 32) | 0x10);
        assert_eq!(maps[3].inode, 393);
        assert!(maps[3].is_file());
        assert_eq!(maps[4].path, None);
        assert!(!maps[4].is_file());
        assert_eq!(maps[6].path.as_deref(), Some("[vdso]"));
        assert!(!maps[6].is_file() && maps[6].executable);
        assert!(maps[3].contains(0x7f1e2a428000) && !maps[3].contains(0x7f1e2a5bd000));
    }
}
