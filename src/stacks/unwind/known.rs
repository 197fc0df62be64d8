//! What kerntax knows of each target's memory map: read from /proc, sent by
//! the kernel at exit and exec, and changed in ring order with the samples
//! (`map_change`). Files are known by device and inode, named from every
//! map read so far. Kept apart from the walk because naming lock addresses
//! (`mappings_for`) needs the same maps once profiling stops.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;

use framehop::x86_64::UnwinderX86_64;
use framehop::{Module, Unwinder};

use super::Unwinding;
use super::walk::{Process, Region, in_lost_span};
use crate::collect::events::{ExitMapping, MapChange, StackSample};
use crate::stacks::map_change;
use crate::stacks::maps::{self, Mapping};

/// Whether `path` is the file with this (device, inode) as /proc/PID/maps
/// shows them.
fn same_file(path: &str, key: (u64, u64)) -> bool {
    file_key(path) == Some(key)
}

/// The file at `path` as /proc/PID/maps shows it: (device, inode).
pub(super) fn file_key(path: impl AsRef<std::path::Path>) -> Option<(u64, u64)> {
    std::fs::metadata(path)
        .ok()
        .map(|m| (maps_dev(m.dev()), m.ino()))
}

/// The path by which kerntax sees the file the kernel walked as `walked`
/// (up to the root of its mount tree, past any chroot): as it is, inside
/// the process's root, or with leading directories dropped for a chroot
/// that kerntax shares (the kernel matrix's guests run in one: there a
/// library mapped and unmapped between two batches was named nothing and
/// its frames read as JIT code). Each checked to be the file.
fn seen_as(walked: &str, pid: u32, key: (u64, u64)) -> Option<String> {
    if same_file(walked, key) {
        return Some(walked.to_string());
    }
    let rooted = format!("/proc/{pid}/root{walked}");
    if same_file(&rooted, key) {
        return Some(rooted);
    }
    let mut rest = walked;
    while let Some(i) = rest.get(1..).and_then(|r| r.find('/')) {
        rest = &rest[i + 1..];
        if same_file(rest, key) {
            return Some(rest.to_string());
        }
    }
    None
}

/// A stat(2) device number as /proc/PID/maps shows it.
pub(super) fn maps_dev(dev: u64) -> u64 {
    (libc::major(dev) as u64) << 32 | libc::minor(dev) as u64
}

impl Unwinding {
    /// Learns the file names in `pid`'s memory map (kerntax's own included:
    /// targets map the same libc and loader) and keeps it if `pid` is a target.
    pub fn learn(&mut self, pid: u32) {
        if !self.images.contains_key(&pid)
            && let Some(image) = file_key(format!("/proc/{pid}/exe"))
        {
            self.images.insert(pid, image);
        }
        if let Ok(m) = maps::read(pid) {
            self.learn_paths(&m);
            if pid != std::process::id() {
                self.keep(pid, m);
            }
        }
    }

    /// The path of a file seen mapped somewhere, by device and inode.
    pub fn path_of(&self, dev: u64, inode: u64) -> Option<&str> {
        self.paths.get(&(dev, inode)).map(String::as_str)
    }

    /// Keeps `mappings` as `pid`'s memory map, for unwinding and naming.
    pub(super) fn keep(&mut self, pid: u32, mappings: Vec<Mapping>) {
        if pid != std::process::id() {
            for r in self.readers_mut() {
                r.learn(pid, &mappings);
            }
        }
        let p = self.build(&mappings);
        self.procs.insert(pid, p);
        self.mappings.insert(pid, mappings);
    }

    /// The latest memory map of `pid`, read again if it lives and does not
    /// cover `addr`; a forked child that never had its own uses its parent's.
    /// With the changes in ring order only executable file mappings follow
    /// the samples: data mappings (where a lock's variable is) are read
    /// again from a live process at most once a batch, else a lock's
    /// mapping was as the process had it at its exec (before ld.so split
    /// the data segment for RELRO, a library's data not yet mapped), and
    /// the lab's `g_namespace_lock` went unnamed in every live window
    /// (`mutex in ns_get`; also a bias from the wrong segment, now
    /// `Segments::load_bias`).
    pub fn mappings_for(&mut self, pid: u32, addr: u64) -> Option<&[Mapping]> {
        let covers = |m: &Vec<Mapping>| m.iter().any(|x| x.contains(addr));
        let stale = self.tracked(pid) && !self.reread.contains(&pid);
        if (stale || !self.mappings.get(&pid).is_some_and(covers))
            && let Ok(fresh) = maps::read(pid)
        {
            self.reread.insert(pid);
            let merged = self.merged(pid, fresh);
            self.mappings.insert(pid, merged);
        }
        let own = self.mappings.get(&pid).filter(|m| covers(m));
        let parent = self
            .forked_from
            .get(&pid)
            .and_then(|pp| self.mappings.get(pp))
            .filter(|m| covers(m));
        own.or(parent).map(Vec::as_slice)
    }

    /// Whether `pid`'s executable file mappings follow its samples: the
    /// kernel sends their changes and kerntax holds its map.
    fn tracked(&self, pid: u32) -> bool {
        self.map_events && self.procs.contains_key(&pid)
    }

    /// `pid`'s map after a fresh read of /proc (its paths learnt): for a
    /// tracked process the read only fills in around the executable file
    /// mappings the changes keep (it may be ahead of the samples); else it
    /// is the map.
    fn merged(&mut self, pid: u32, fresh: Vec<Mapping>) -> Vec<Mapping> {
        self.learn_paths(&fresh);
        match self.mappings.get(&pid) {
            Some(known) if self.tracked(pid) => map_change::fill_gaps(known, &fresh),
            _ => fresh,
        }
    }

    /// A read of /proc/PID/maps while samples are unwound.
    pub(super) fn reread(&mut self, pid: u32, fresh: Vec<Mapping>) {
        let merged = self.merged(pid, fresh);
        self.keep(pid, merged);
    }

    /// Where the kernel sends map changes, a process whose map could not
    /// be read (gone already: a short-lived one, its events handled up to
    /// a batch later) starts from an empty one that its changes fill in:
    /// the image's code at its exec, then each library as it is mapped.
    /// Dropping them left its samples without a map on kernels that send
    /// no mappings at exit (before 6.17; issue 35's matrix, 6.1 and 6.12).
    pub(super) fn follow(&mut self, pid: u32) {
        if self.map_events && !self.procs.contains_key(&pid) && pid != std::process::id() {
            self.keep(pid, Vec::new());
        }
    }

    /// A change of a process's executable file mappings, in ring order
    /// with its samples.
    pub fn on_map_change(&mut self, c: &MapChange) {
        if !self.procs.contains_key(&c.pid) || !self.mappings.contains_key(&c.pid) {
            self.learn(c.pid);
            self.follow(c.pid);
            if !self.mappings.contains_key(&c.pid) {
                return;
            }
        }
        // A file not seen mapped before: named by the path the kernel
        // walked, else from the mapping itself while it lasts, else from a
        // read of the whole map; each checked to be that file (the address
        // may hold another one by now).
        for (i, m) in c.maps.iter().enumerate() {
            let key = (m.dev, m.inode);
            if self.paths.contains_key(&key) {
                continue;
            }
            let walked = c.path.clone().filter(|_| i == 0);
            let linked = || {
                let link = format!("/proc/{}/map_files/{:x}-{:x}", c.pid, m.start, m.end);
                std::fs::read_link(link).ok()
            };
            let found = walked.and_then(|p| seen_as(&p, c.pid, key)).or_else(|| {
                linked()
                    .map(|p| p.to_string_lossy().into_owned())
                    .filter(|p| same_file(p, key))
            });
            if let Some(p) = found {
                self.paths.insert(key, p);
            }
        }
        if c.maps
            .iter()
            .any(|m| !self.paths.contains_key(&(m.dev, m.inode)))
            && let Ok(m) = maps::read(c.pid)
        {
            self.learn_paths(&m);
        }
        let known = self.mappings.get(&c.pid).map_or(&[][..], Vec::as_slice);
        let paths = &self.paths;
        let next = map_change::apply(known, c.start, c.end, &c.maps, |m| {
            paths.get(&(m.dev, m.inode)).cloned()
        });
        self.keep(c.pid, next);
    }

    fn learn_paths(&mut self, mappings: &[Mapping]) {
        for m in mappings.iter().filter(|m| m.is_file()) {
            if let Some(path) = &m.path {
                self.paths
                    .entry((m.dev, m.inode))
                    .or_insert_with(|| path.clone());
            }
        }
    }

    fn build(&mut self, mappings: &[Mapping]) -> Process {
        let mut unwinder = UnwinderX86_64::new();
        let mut regions = Vec::with_capacity(mappings.len());
        let mut added = HashSet::new();
        for m in mappings.iter().filter(|m| m.executable) {
            let mut module = None;
            if m.is_file() || m.path.as_deref() == Some("[vdso]") {
                let (id, elf) = self.modules.get(m);
                if let Some(bias) = elf.as_ref().and_then(|e| e.bias(m)) {
                    module = Some((id, bias));
                    // One framehop module per load of a file, spanning all
                    // its mappings: a map may hold a file loaded twice (an
                    // image replaced, its map read after the next exec,
                    // whose libc is elsewhere), and one module spanning
                    // both had the first load's bias for the second, whose
                    // stacks stopped at their first frame.
                    if added.insert((id, bias)) {
                        let elf = elf.as_ref().expect("bias implies an ELF file");
                        let (lo, hi) = mappings
                            .iter()
                            .filter(|o| o.dev == m.dev && o.inode == m.inode && o.path == m.path)
                            .filter(|o| elf.bias(o) == Some(bias))
                            .fold((u64::MAX, 0), |(lo, hi), o| {
                                (lo.min(o.start), hi.max(o.end))
                            });
                        let info = elf.section_info();
                        unwinder.add_module(Module::new(
                            self.modules.paths[id].clone(),
                            lo..hi,
                            bias,
                            info,
                        ));
                    }
                }
            }
            regions.push(Region {
                start: m.start,
                end: m.end,
                module,
                name: m.path.clone(),
            });
        }
        Process { regions, unwinder }
    }

    /// The process whose mappings cover the sample `s` of its `pid`: `pid`
    /// itself, its memory map read again if needed, or, for a forked child
    /// that has exec'd or exited since the sample, the parent it was a copy
    /// of. None while the map the sample was taken under may still come:
    /// its process is gone, or /proc shows a later image (one that does
    /// not map the program it runs: `images`) and the kernel sends an
    /// image's mappings as it ends (`image_maps`).
    ///
    /// A live process's sample is never held otherwise: nothing but the
    /// end of the run would release it, and every later sample of that
    /// process waits behind it (order is kept), to be named from the map
    /// as it was at the end. CI on 5.10 (issue 35) had 700 of ~1,000
    /// samples of two libraries loaded in turn held so, and unknown.
    pub(super) fn maps_for(&mut self, s: &StackSample) -> Option<u32> {
        let (pid, ip) = (s.pid, s.ip);
        if self.procs.get(&pid).is_some_and(|p| p.covers(ip)) {
            return Some(pid);
        }
        // Where the process's mapping changes were lost: /proc would show
        // what is there since. Unwound now, its frame refused (walk).
        if in_lost_span(s, ip) && self.procs.contains_key(&pid) {
            return Some(pid);
        }
        let (alive, later_image) = match maps::read(pid) {
            Ok(mappings) => {
                let later_image = self
                    .images
                    .get(&pid)
                    .is_none_or(|&i| !mappings.iter().any(|m| (m.dev, m.inode) == i));
                self.reread(pid, mappings);
                if self.procs.get(&pid).is_some_and(|p| p.covers(ip)) {
                    return Some(pid);
                }
                (true, later_image)
            }
            Err(_) => (false, true),
        };
        if let Some(&parent) = self.forked_from.get(&pid)
            && self.procs.get(&parent).is_some_and(|p| p.covers(ip))
        {
            return Some(parent);
        }
        (alive && !(later_image && self.image_maps)).then_some(pid)
    }

    /// Mappings sent by the kernel, files named from the maps read so far.
    pub(super) fn sent_mappings(&self, exit_maps: &[ExitMapping]) -> Vec<Mapping> {
        exit_maps
            .iter()
            .map(|m| Mapping {
                start: m.start,
                end: m.end,
                offset: m.offset,
                executable: m.executable,
                dev: m.dev,
                inode: m.inode,
                path: match (m.inode, m.heap) {
                    (0, true) => Some("[heap]".to_string()),
                    (0, false) => None,
                    _ => self.paths.get(&(m.dev, m.inode)).cloned(),
                },
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 35: the kernel walks a mapped file's path up to the root of
    /// its mount tree; in a chroot kerntax shares (the kernel matrix's
    /// guests) that path has the chroot's directory in front. The file is
    /// found by dropping leading directories, and only if it is that file.
    #[test]
    fn a_path_walked_past_a_chroot_is_found_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("lib.so");
        std::fs::write(&file, b"x").unwrap();
        let meta = std::fs::metadata(&file).unwrap();
        let key = (maps_dev(meta.dev()), meta.ino());
        let path = file.to_str().unwrap();
        assert_eq!(seen_as(path, 0, key).as_deref(), Some(path));
        let walked = format!("/newroot/chroot{path}");
        assert_eq!(seen_as(&walked, 0, key).as_deref(), Some(path));
        assert_eq!(seen_as(&walked, 0, (key.0, key.1 + 1)), None);
        assert_eq!(seen_as("", 0, key), None);
        assert_eq!(seen_as("/", 0, key), None);
    }
}
