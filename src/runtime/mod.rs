//! What kerntax knows of the standard runtimes and libraries a program is
//! built on, as data, one module per runtime (issue 38): how to recognise
//! its code, what its wait primitives mean, its well-known locks and their
//! roles, its spin helpers, and its known kernel-cost patterns with their
//! remedies. The analyses iterate over [`ALL`]; none of them names a
//! runtime's function itself.
//!
//! Why data: the same questions (is this frame a lock acquisition? whose
//! library is this? which lock is this wait on?) are asked of every
//! runtime, and were answered by name lists grouped by mechanism and
//! scattered over the analyses, so adding a runtime meant touching all of
//! them. Now a runtime is one module here (plus, for a language whose
//! frames are read from its VM, its reader in `interp/`) and one line in
//! [`ALL`].
//!
//! Everything here is stated by the runtime's own source or documentation
//! (each module says where); a program's own names never appear.

pub mod cpython;
pub mod cruby;
pub mod glibc;
pub mod go;
pub mod jvm;
pub mod libstdcxx;
pub mod libuv;
pub mod rust_std;
pub mod sqlite;
pub mod v8;

pub use crate::report::LockKind;

/// Every runtime kerntax knows. The order is the order of precedence where
/// two could claim the same wait (a JVM's safepoint before glibc's mutex
/// under it).
pub const ALL: &[&Runtime] = &[
    &jvm::RUNTIME,
    &glibc::RUNTIME,
    &cpython::RUNTIME,
    &cruby::RUNTIME,
    &go::RUNTIME,
    &v8::RUNTIME,
    &libuv::RUNTIME,
    &rust_std::RUNTIME,
    &libstdcxx::RUNTIME,
    &sqlite::RUNTIME,
];

/// One runtime or standard library, as data.
pub struct Runtime {
    /// How its users call it (`the JVM`).
    pub name: &'static str,
    /// How its function names in [`Waits`] are matched.
    pub matching: Matching,
    /// Its libraries whose frames are wait and lock machinery (file-name
    /// prefixes: `libc.so`): a wait is named by the first frame past them.
    pub machinery_libraries: &'static [&'static str],
    /// Its VM's native libraries (whole file names: `libjvm.so`), whose
    /// frames count as the runtime's own code that a program's threads
    /// pass through.
    pub vm_libraries: &'static [&'static str],
    /// Prefixes of its VM's own functions in whatever binary embeds it
    /// (`v8::internal::`): the runtime's code too.
    pub vm_functions: &'static [&'static str],
    /// Prefixes of the names of its own library's managed code (the Java
    /// platform's packages, Node's `node:` scripts): the runtime's, as
    /// libc is for C.
    pub platform_code: &'static [&'static str],
    /// File-name prefixes of its interpreter's binary or library
    /// (`libpython3`): the machinery its interpreted code runs through.
    pub interpreter_modules: &'static [&'static str],
    /// What its interpreted code's locations contain (`.py:`).
    pub source_markers: &'static [&'static str],
    /// What its wait primitives mean.
    pub waits: Waits,
    /// Prefixes of its functions (leading underscores aside) that make a
    /// system call for the program (`pthread_`, `syscall`): a call is
    /// named by its caller past them.
    pub call_wrappers: &'static [&'static str],
    /// Outermost functions of a thread (whole names) that are the runtime
    /// starting it, not the program: `start_thread`.
    pub thread_entries: &'static [&'static str],
    /// Parts of function names that are the runtime starting a thread
    /// (`std::thread`).
    pub thread_entry_parts: &'static [&'static str],
    /// Functions (parts of names) a spin loop calls to pause the CPU.
    pub pause_helpers: &'static [&'static str],
    /// Functions (whole names) its JIT calls for an atomic load instead of
    /// inlining it: a sample there is its caller's load.
    pub load_helpers: &'static [&'static str],
    /// The kind of lock word a frame of its lock functions (waiters' and
    /// wakers', parts of names) shows a futex to be.
    pub lock_kinds: &'static [(LockKind, &'static [&'static str])],
    /// Its well-known locks, in order of precedence.
    pub locks: &'static [&'static RuntimeLock],
    /// Its known kernel-cost patterns.
    pub patterns: &'static [KnownPattern],
    /// The loop it runs a program's callbacks on, one at a time, on one
    /// thread, if it has one.
    pub event_loop: Option<&'static EventLoop>,
}

/// A runtime with no knowledge of a kind: the base each module fills in.
pub const EMPTY: Runtime = Runtime {
    name: "",
    matching: Matching::Part,
    machinery_libraries: &[],
    vm_libraries: &[],
    vm_functions: &[],
    platform_code: &[],
    interpreter_modules: &[],
    source_markers: &[],
    waits: Waits::NONE,
    call_wrappers: &[],
    thread_entries: &[],
    thread_entry_parts: &[],
    pause_helpers: &[],
    load_helpers: &[],
    lock_kinds: &[],
    locks: &[],
    patterns: &[],
    event_loop: None,
};

/// How a runtime's function names are matched against a frame's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Matching {
    /// Whole names: Go's fully qualified `runtime.stopm`, which other
    /// runtime functions extend (`runtime.stopmX` would be another).
    Whole,
    /// A part of the name: glibc's symbols carry internal prefixes
    /// (`___pthread_mutex_lock`), C++ and Java names their class and
    /// parameters.
    Part,
}

impl Matching {
    pub fn matches(self, function: &str, names: &[&str]) -> bool {
        match self {
            Matching::Whole => names.contains(&function),
            Matching::Part => names.iter().any(|n| function.contains(n)),
        }
    }
}

/// What a runtime's wait primitives mean: the frames (of its `matching`)
/// by which a sleeping thread's stack says what it waits for.
pub struct Waits {
    /// Its scheduler parking a thread it has nothing to run on (Go's
    /// `runtime.stopm`): the runtime's idle threads.
    pub idle: &'static [&'static str],
    /// What the runtime says of such a site, as evidence.
    pub idle_evidence: &'static str,
    /// Taking a lock: whoever wakes the waiter released what it held.
    pub acquire: &'static [&'static str],
    /// A condition variable's wait re-taking its mutex: a lock wait,
    /// whatever condition wait it is inside.
    pub reacquire: &'static [&'static str],
    /// A condition wait: work, an event, or a lock built from a condition.
    pub condition: &'static [&'static str],
    /// A blocking queue's take or a pool's task fetch.
    pub queue_take: &'static [&'static str],
    /// A wait for a result another thread completes (a future, a latch).
    /// Checked before `acquire`, of which some are a prefix.
    pub result: &'static [&'static str],
    /// A wait for a thread's end.
    pub join: &'static [&'static str],
    /// Wrappers of its own parking on the way to the function that says
    /// why (Go's `runtime.notesleep`): never a wait's site.
    pub wrappers: &'static [&'static str],
}

impl Waits {
    pub const NONE: Waits = Waits {
        idle: &[],
        idle_evidence: "",
        acquire: &[],
        reacquire: &[],
        condition: &[],
        queue_take: &[],
        result: &[],
        join: &[],
        wrappers: &[],
    };
}

/// Whether `function` is one of any runtime's names of a kind (`kind`
/// picks the list from a runtime's waits).
pub fn waits_in(function: &str, kind: impl Fn(&Waits) -> &'static [&'static str]) -> bool {
    ALL.iter()
        .any(|r| r.matching.matches(function, kind(&r.waits)))
}

/// The runtime whose scheduler parks its idle threads at `function`.
pub fn idle_park(function: &str) -> Option<&'static Runtime> {
    ALL.iter()
        .copied()
        .find(|r| r.matching.matches(function, r.waits.idle))
}

/// Every runtime's entries of a list, in [`ALL`]'s order.
pub fn all_of<T: 'static>(
    list: impl Fn(&Runtime) -> &'static [T],
) -> impl Iterator<Item = &'static T> {
    ALL.iter().flat_map(move |r| list(r).iter())
}

/// A runtime's well-known lock.
pub struct RuntimeLock {
    /// How people call it (`CPython's GIL`).
    pub name: &'static str,
    /// What its waiters wait for, which decides how their waiting reads.
    pub role: LockRole,
    /// What to do about it, in the runtime's terms.
    pub remedy: &'static str,
    /// What to do when it changes hands through the kernel at a high rate
    /// for short holds (issue 37: an interpreter's threads that each make
    /// a small blocking call release the lock around every call and take
    /// it back after); None where the general remedy holds.
    pub churn_remedy: Option<&'static str>,
    /// What a wait's stack or lock shows when the wait is on it: any one
    /// identifies it.
    pub signs: &'static [Sign],
}

/// What a runtime lock's waiters wait for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockRole {
    /// An interpreter's global lock: a thread waits for it only to run
    /// the language's code.
    Interpreter,
    /// A lock taken only inside an allocation: its waiters are in the
    /// middle of their work.
    Allocation,
    /// The VM stopping threads for its own operations.
    VmOperation,
}

/// One thing that identifies a wait as being on a runtime's lock.
pub enum Sign {
    /// A frame whose function contains one of these.
    Frame(&'static [&'static str]),
    /// A frame whose function is one of these, leading underscores aside
    /// (`__libc_malloc` and `_int_free` however glibc's build prefixes them).
    FrameNamed(&'static [&'static str]),
    /// The lock lives in a variable whose symbol starts so (`_PyRuntime`).
    Variable(&'static str),
    /// The wait runs through an unnamed (static) function of one of the
    /// `libraries` (file-name prefixes) whose first named caller outward
    /// is one of `callers`: the exported entry a stripped runtime's static
    /// wait code is reached through.
    ReachedThrough {
        libraries: &'static [&'static str],
        callers: &'static [&'static str],
    },
    /// A thread that handed an operation to the JVM's VM thread and waits
    /// until it has run (`jvm::VM_OPERATION_FRAME`).
    VmOperation,
    /// A Java thread queued on one of HotSpot's own locks, taken by one of
    /// these VM functions (`jvm::LOCK_FRAMES` on the way).
    VmLockTakenBy(&'static [&'static str]),
    /// All of these.
    All(&'static [Sign]),
}

/// Every runtime's well-known locks, in [`ALL`]'s order.
pub fn locks() -> impl Iterator<Item = &'static RuntimeLock> {
    all_of(|r| r.locks).copied()
}

/// A runtime's or standard library's known kernel-cost pattern: a storm
/// of one syscall whose call site runs through the library function known
/// to issue it on every call, with its specific fix.
pub struct KnownPattern {
    /// What it is, in a few words.
    pub name: &'static str,
    /// The syscalls it issues.
    pub syscalls: &'static [&'static str],
    /// Functions of the library on the call site, any of which identifies
    /// it (a part of the name, or the whole name leading underscores aside).
    pub frames: &'static [&'static str],
    /// For a pattern of small transfers (writes no buffer gathers): the
    /// most bytes its data syscalls may ask for per call on average; None
    /// for a pattern that is not about their size. Bulk transfers through
    /// the same functions (a file copied in 32 KiB blocks) are not it.
    pub max_bytes_per_call: Option<u64>,
    /// The fix.
    pub fix: &'static str,
}

#[cfg(test)]
mod tests;

/// A runtime's event loop: one thread running every callback of the
/// program in turn, so a thread with one of its frames is the program's
/// loop, and the loop's remedy is the runtime's.
pub struct EventLoop {
    /// How its users call it (`libuv's event loop`).
    pub name: &'static str,
    /// Its functions (of its runtime's `matching`) on the loop thread's
    /// stacks.
    pub frames: &'static [&'static str],
    /// What to do when it paces the program's other threads.
    pub remedy: &'static str,
}

/// The event loop a thread whose stack has `functions` (any order) runs,
/// if any.
pub fn event_loop_of<'a, I>(functions: I) -> Option<&'static EventLoop>
where
    I: IntoIterator<Item = &'a str> + Clone,
{
    ALL.iter().find_map(|r| {
        let l = r.event_loop?;
        functions
            .clone()
            .into_iter()
            .any(|f| r.matching.matches(f, l.frames))
            .then_some(l)
    })
}
