//! Reading another process's memory (`process_vm_readv`): the interpreters'
//! code objects and strings, named after the sample. A read that fails (the
//! process gone, the page unmapped, the object freed) is an error the
//! caller counts, never a guess.

use std::io;

/// Memory to read objects from: a live process, or bytes in a test.
pub trait Memory {
    /// Fills `buf` from `addr`, all of it or an error.
    fn read(&self, addr: u64, buf: &mut [u8]) -> io::Result<()>;

    fn read_u64(&self, addr: u64) -> io::Result<u64> {
        let mut b = [0u8; 8];
        self.read(addr, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    fn read_vec(&self, addr: u64, len: usize) -> io::Result<Vec<u8>> {
        let mut b = vec![0u8; len];
        self.read(addr, &mut b)?;
        Ok(b)
    }
}

/// A live process's memory, by pid.
pub struct ProcessMemory {
    pub pid: u32,
}

impl Memory for ProcessMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> io::Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let local = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let remote = libc::iovec {
            iov_base: addr as *mut libc::c_void,
            iov_len: buf.len(),
        };
        // SAFETY: `local` covers `buf`, which we own mutably; `remote` is
        // only read by the kernel from the other process.
        let n =
            unsafe { libc::process_vm_readv(self.pid as libc::pid_t, &local, 1, &remote, 1, 0) };
        match n {
            n if n < 0 => Err(io::Error::last_os_error()),
            n if n as usize == buf.len() => Ok(()),
            n => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "read {n} of {} bytes at {addr:#x} in pid {}",
                    buf.len(),
                    self.pid
                ),
            )),
        }
    }
}

/// Little-endian fields of a block read at once.
pub fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(off..off + 8)?.try_into().ok()?))
}

pub fn i32_at(b: &[u8], off: usize) -> Option<i32> {
    Some(i32::from_le_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

pub fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

/// Bytes at a fixed address, for tests: reads outside them fail.
#[derive(Default)]
pub struct FakeMemory {
    pub blocks: Vec<(u64, Vec<u8>)>,
}

impl Memory for FakeMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> io::Result<()> {
        for (start, bytes) in &self.blocks {
            if let Some(off) = addr.checked_sub(*start)
                && let Some(src) = bytes.get(off as usize..off as usize + buf.len())
            {
                buf.copy_from_slice(src);
                return Ok(());
            }
        }
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no bytes at {addr:#x}"),
        ))
    }
}
