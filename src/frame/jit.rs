//! What a JIT's name for a piece of its code says: the program's method,
//! the language runtime's own, or the VM's stub. Read by naming (to show
//! a Java method as `pkg.Class.method`) and by the analyses and findings
//! (whose code a wait or a spin is).

/// What a JIT's name for its code says about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JitKind {
    /// A method of the program (or of a library it brought).
    Program,
    /// A method of the language runtime's own library (the Java platform's
    /// `java.`, `jdk.`, `sun.` packages): a lock, queue or thread pool the
    /// program calls, as libc is for C.
    Platform,
    /// Code of the VM itself, not a method: an interpreter (which runs
    /// methods it does not name), call stubs, adapters.
    Stub,
}

/// The name a frame shows: a Java method's `RET pkg.Class.method(ARGS)`
/// becomes `pkg.Class.method`; other JITs' names are kept as written.
pub fn display_name(raw: &str) -> String {
    let raw = raw.trim();
    if raw.ends_with(')')
        && let Some(open) = raw.find('(')
        && !raw[..open].ends_with(' ')
    {
        let head = &raw[..open];
        let method = head.rsplit(' ').next().unwrap_or(head);
        if method.contains('.') {
            return method.to_string();
        }
    }
    raw.to_string()
}

/// The kind of code a displayed JIT name stands for.
pub fn kind(name: &str) -> JitKind {
    if !name.contains('.') {
        JitKind::Stub
    } else if crate::runtime::jvm::RUNTIME
        .platform_code
        .iter()
        .any(|p| name.starts_with(p))
    {
        JitKind::Platform
    } else {
        JitKind::Program
    }
}
