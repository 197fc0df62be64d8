//! Where a wait is: the program's function past the runtime's wait
//! primitives and the program's own wait wrappers (its name as people read
//! it is `naming`'s). A VM's threads are named by the program's methods past the
//! platform's, a site in a VM's own code by the method it called.

use crate::frame::jit::JitKind;
use crate::frame::{Frame, words};

/// Own frames looked at for the site, past the runtime's.
const MAX_WRAPPERS: usize = 6;

/// Words of a function name that make it a wait or lock wrapper of the
/// program's own (`PGSemaphoreLock`, `Mutex::Lock`, `WaitLatch`,
/// `LWLockAcquire`): the site is the function that called it.
pub const WAIT_WORDS: &[&str] = &[
    "wait",
    "waits",
    "timedwait",
    "lock",
    "trylock",
    "rwlock",
    "rdlock",
    "wrlock",
    "locked",
    "mutex",
    "latch",
    "sem",
    "semaphore",
    "futex",
    "park",
    "cond",
    "condvar",
    "acquire",
    "await",
    "parker",
];
/// Words that make a language platform's method (`java.`, `jdk.`...) a
/// blocking helper beside `WAIT_WORDS`: `ForkJoinPool.managedBlock`, a
/// condition node's `block`. Whether the JIT inlined one or left it a
/// frame of its own must not move an idle pool's site. Only for the
/// platform's methods: in a program's own code "block" is as often data
/// (`compress_block`).
pub const PLATFORM_WAIT_WORDS: &[&str] = &["block", "blocker"];
/// The same on the release side (`Mutex::Unlock`, `SetLatch`, `sem_post`).
pub const WAKE_WORDS: &[&str] = &[
    "wake",
    "wakeup",
    "unlock",
    "post",
    "signal",
    "notify",
    "broadcast",
    "unpark",
    "latch",
    "sem",
    "semaphore",
    "futex",
    "mutex",
    "cond",
    "condvar",
    "kill",
];

/// Between a VM stub's name and the method it called, in the name of a
/// site in the VM's code (`Interpreter calling java.lang.Object.wait`).
pub const VM_CALLING: &str = " calling ";

/// The site a stack waits at: (function, wrappers innermost first), from
/// the first own frame past the runtime's; wrappers are own frames whose
/// name has one of `wrapper_words`.
pub fn site_of(frames: &[Frame], runtime: usize, wrapper_words: &[&str]) -> (String, Vec<String>) {
    // A thread stopped at a safepoint waits for the VM's operation,
    // whatever method it was stopped in; so does one that asked the VM
    // thread for an operation (a collection, from an allocation), whatever
    // method allocated.
    if let Some(i) = frames
        .iter()
        .position(|f| crate::analyze::runtime_locks::is_safepoint(f.function()))
        .or_else(|| crate::analyze::runtime_locks::vm_operation_wait(frames))
    {
        let via = frames[runtime.min(i)..i]
            .iter()
            .map(|f| f.function().to_string())
            .collect();
        return (frames[i].function().to_string(), via);
    }
    // A Java thread queued on one of HotSpot's own locks (G1's heap lock
    // in an allocation's slow path) waits for the VM: the VM function that
    // takes it is the site, not the method that allocated (issue 19: a
    // RocketMQ run's heap-lock waits read as contention at a dozen of its
    // methods).
    if let Some(i) = crate::analyze::runtime_locks::hotspot_lock_taker(frames) {
        let via = frames[runtime.min(i)..i]
            .iter()
            .map(|f| f.function().to_string())
            .collect();
        return (frames[i].function().to_string(), via);
    }
    let own: Vec<&Frame> = frames.iter().skip(runtime).collect();
    if own.is_empty() {
        // All runtime: name it by the outermost runtime frame.
        let name = frames.last().map_or("[no stack]", |f| f.function());
        return (name.to_string(), vec![]);
    }
    let is_wrapper = |f: &str| {
        crate::runtime::waits_in(f, |w| w.wrappers)
            || words(f).iter().any(|w| wrapper_words.contains(&w.as_str()))
    };
    let mut via: Vec<String> = vec![];
    let mut looked = 0;
    // A language runtime's code (its native library, its platform's JIT
    // methods, its stubs) passed on the way: threads of a VM pass through
    // it to reach the program's methods, and its own threads never do.
    let mut in_runtime = false;
    // JIT code met: the runtime's native frames beyond it are the VM's
    // entry into Java (a thread's start), no place to name a wait by.
    let mut past_jit = false;
    let mut platform: Option<(String, usize)> = None;
    let mut last_platform: Option<(String, usize)> = None;
    let mut first_stub: Option<(String, usize)> = None;
    // Methods of the program's met, all of them wrappers (a lock manager's
    // layers): the outermost looked at is the site, before any platform
    // frame.
    let mut program_wrappers = 0;
    for f in own {
        let name = f.function();
        let jit = f.is_jit();
        match f.jit_kind() {
            Some(JitKind::Stub) => {
                in_runtime = true;
                past_jit = true;
                first_stub.get_or_insert((name.to_string(), via.len()));
                continue;
            }
            Some(JitKind::Platform) => {
                in_runtime = true;
                past_jit |= jit;
                let blocker = words(name)
                    .iter()
                    .any(|w| PLATFORM_WAIT_WORDS.contains(&w.as_str()));
                if (jit || !past_jit) && platform.is_none() && !is_wrapper(name) && !blocker {
                    platform = Some((name.to_string(), via.len()));
                }
                if jit || !past_jit {
                    last_platform = Some((name.to_string(), via.len()));
                }
                via.push(name.to_string());
                continue;
            }
            Some(JitKind::Program) => in_runtime = true,
            None if in_runtime => {
                // Out of the runtime into other native code (the C library's
                // thread start) without meeting a method of the program's:
                // the thread runs the runtime's own code (a pool's worker
                // loop, a GC thread), or methods the JIT did not name.
                break;
            }
            None => {}
        }
        if looked == MAX_WRAPPERS {
            break;
        }
        looked += 1;
        if !is_wrapper(name) {
            return (name.to_string(), via);
        }
        if f.jit_kind() == Some(JitKind::Program) {
            program_wrappers = via.len() + 1;
        }
        via.push(name.to_string());
    }
    if program_wrappers > 0 {
        via.truncate(program_wrappers);
    } else if let Some((site, at)) = platform {
        via.truncate(at);
        return (site, via);
    } else if let Some((stub, at)) = first_stub {
        // VM code running methods it does not name (the interpreter): the
        // platform method it called tells its waits apart, so that an idle
        // thread's Object.wait and a worker's lock, both interpreted before
        // the JIT compiled them, are not one site.
        via.truncate(at);
        let site = match via.last() {
            Some(called) => format!("{stub}{VM_CALLING}{called}"),
            None => stub,
        };
        return (site, via);
    } else if let Some((site, at)) = last_platform {
        via.truncate(at);
        return (site, via);
    }
    // Nothing but wrappers: the outermost seen is the site (an overload
    // calling itself is not its own wrapper).
    let site = via.pop().unwrap_or_default();
    via.retain(|v| *v != site);
    (site, via)
}
