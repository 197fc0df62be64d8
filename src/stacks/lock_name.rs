//! Names for lock addresses: the variable a futex word lives in (from the
//! binary's symbol table, .bss included), or the kind of memory it is in.
//!
//! .bss is the anonymous mapping right after the last mapping of a file:
//! its variables are named with that file's symbols and load bias.

use std::sync::OnceLock;

use crate::frame::file_name;
use crate::model::LockKey;
use crate::recording::LockName;
use crate::stacks::maps::Mapping;
use crate::stacks::unwind::Unwinding;

/// The variable at `addr` in file mapping `file` (the mapping holding it, or
/// for .bss the file mapping just before it; `maps` its process's): its
/// name and the offset in it.
fn variable(
    unwinding: &mut Unwinding,
    file: &Mapping,
    maps: &[Mapping],
    addr: u64,
) -> Option<(String, u64)> {
    let (_, elf) = unwinding.modules.get(file);
    let elf = elf?;
    let svma = addr.wrapping_sub(elf.load_bias(file, maps)?);
    let (name, offset) = elf.data_symbol(svma)?;
    Some((name.to_string(), offset))
}

fn name_private(unwinding: &mut Unwinding, pid: u32, addr: u64) -> LockName {
    let mut name = LockName {
        address: Some(addr),
        pid: Some(pid),
        ..Default::default()
    };
    let Some(maps) = unwinding.mappings_for(pid, addr).map(<[Mapping]>::to_vec) else {
        return name;
    };
    let Some(i) = maps.iter().position(|m| m.contains(addr)) else {
        return name;
    };
    let m = &maps[i];
    let before = i
        .checked_sub(1)
        .map(|j| &maps[j])
        .filter(|b| b.is_file() && b.end == m.start);
    let file = if m.is_file() {
        Some(m)
    } else {
        before.filter(|_| m.path.is_none())
    };
    name.mapping = match (file, m.path.as_deref()) {
        (Some(f), _) => f.path.as_deref().map(|p| file_name(p).to_string()),
        (None, Some(p)) if p.starts_with('[') => Some(p.to_string()),
        (None, Some(p)) => Some(file_name(p).to_string()),
        (None, None) => Some("[anon]".to_string()),
    };
    if let Some((var, offset)) = file.and_then(|f| variable(unwinding, f, &maps, addr)) {
        name.symbol = Some(if offset == 0 {
            var.clone()
        } else {
            format!("{var}+{offset:#x}")
        });
        name.variable = Some((var, addr - offset));
    }
    name
}

/// The device of the kernel's internal shared-memory mount, where every
/// MAP_SHARED|MAP_ANONYMOUS mapping and SysV segment lives, learnt from a
/// page of kerntax's own. A shared lock there is in shared anonymous
/// memory even when no process showed the mapping's path while it lived (a
/// short run whose processes all exited first).
fn shmem_dev() -> Option<u64> {
    static DEV: OnceLock<Option<u64>> = OnceLock::new();
    *DEV.get_or_init(|| {
        const PAGE: usize = 4096;
        // SAFETY: a new mapping of its own, never referenced by Rust, and
        // unmapped below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                PAGE,
                libc::PROT_READ,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return None;
        }
        let dev = crate::stacks::maps::read(std::process::id())
            .ok()
            .and_then(|maps| maps.iter().find(|m| m.start == p as u64).map(|m| m.dev));
        // SAFETY: the mapping made above, of that length.
        unsafe { libc::munmap(p, PAGE) };
        dev
    })
}

/// The name of the lock `key`, from the mappings of its process.
pub fn name(unwinding: &mut Unwinding, key: &LockKey) -> LockName {
    match *key {
        LockKey::Private { pid, addr } => name_private(unwinding, pid, addr),
        LockKey::Shared { dev, ino, offset } => LockName {
            address: Some(offset),
            mapping: Some(match unwinding.path_of(dev, ino) {
                Some(p) if p.starts_with("/dev/zero") || p.starts_with("/SYSV") => {
                    "[shared anon]".to_string()
                }
                Some(p) => file_name(p).to_string(),
                None if shmem_dev() == Some(dev) => "[shared anon]".to_string(),
                None => "[shared]".to_string(),
            }),
            ..Default::default()
        },
        LockKey::SysV { .. } => LockName::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CI (tests/locks.rs): both processes sharing a mutex exited before
    /// kerntax read a map that showed the mapping's path, and the lock's
    /// memory read "[shared]".
    #[test]
    fn a_shared_lock_on_the_shmem_mount_is_shared_anon_without_a_path() {
        let dev = shmem_dev().expect("the shared-memory mount's device");
        let mut unwinding = Unwinding::default();
        let on = |dev: u64, unwinding: &mut Unwinding| {
            name(
                unwinding,
                &LockKey::Shared {
                    dev,
                    ino: 123_456_789,
                    offset: 0x40,
                },
            )
            .mapping
        };
        assert_eq!(on(dev, &mut unwinding).as_deref(), Some("[shared anon]"));
        assert_eq!(on(dev + 1, &mut unwinding).as_deref(), Some("[shared]"));
    }
}
