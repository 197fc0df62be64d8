//! Reading symbolized frame strings (`name (file:line)`, `name (library)`,
//! either with ` [inlined]`): the function they name, that name without a
//! C++ parameter list or template arguments for people to read, and the
//! words a name is made of. The JSON keeps frames whole; only the terminal
//! and the HTML page show the short forms.

pub mod code;
pub mod jit;
pub mod typed;

pub use typed::{Code, Frame};

const INLINED: &str = " [inlined]";

/// Whether `path` (or a frame's location) is a language runtime's VM
/// library (`libjvm.so`): its frames are the runtime's machinery — its own
/// threads' loops, its parking and monitor code — that a program's thread
/// passes through on the way to the program's own code.
pub fn is_language_runtime(path: &str) -> bool {
    let name = file_name(path);
    crate::runtime::all_of(|r| r.vm_libraries).any(|l| *l == name)
}

/// The location a frame of JIT code shows: `Spin.work (jit)`.
pub const JIT_LOCATION: &str = "jit";

/// What the location of a method a JVM interprets ends with:
/// `Spin.work (Spin.java:12, interpreted)`.
pub const INTERPRETED_LOCATION: &str = "interpreted";

/// What the location of a JavaScript function read from V8's heap ends
/// with: `burn (/srv/work.js:12, js)`, or `push (js)` for a function of
/// no script (V8's own builtins).
pub const JS_LOCATION: &str = "js";

/// The script of a JavaScript function's location (`""` for none), if the
/// location is one.
fn js_script(location: &str) -> Option<&str> {
    if location == JS_LOCATION {
        return Some("");
    }
    let rest = location.strip_suffix(", js")?;
    // The line, if any, follows the script's last colon.
    Some(match rest.rsplit_once(':') {
        Some((s, l)) if l.bytes().all(|b| b.is_ascii_digit()) && !l.is_empty() => s,
        _ => rest,
    })
}

/// Whether a frame's location is a JVM's interpreted method's.
fn is_interpreted_java(location: &str) -> bool {
    location == INTERPRETED_LOCATION || location.ends_with(", interpreted")
}

/// The last part of `path`.
pub fn file_name(path: &str) -> &str {
    std::path::Path::new(path)
        .file_name()
        .and_then(|f| f.to_str())
        .unwrap_or(path)
}

/// Whether the file at `path` is one of the runtimes' libraries whose
/// frames are wait and lock machinery (libc, the C++ runtime, the loader),
/// not the program's own code: a wait site is the first frame past them.
pub fn is_runtime_library(path: &str) -> bool {
    let name = file_name(path);
    crate::runtime::all_of(|r| r.machinery_libraries).any(|r| name.starts_with(r))
}

/// The index of the `(` matching the `)` that ends `s` (which must end in `)`).
fn matching_open(s: &str) -> Option<usize> {
    let mut depth = 0i32;
    for (i, c) in s.char_indices().rev() {
        match c {
            ')' => depth += 1,
            '(' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// (function, location, inlined) of a frame string. A location is the last
/// parenthesised group, after a space: C++ parameter lists have none.
pub fn split(frame: &str) -> (&str, Option<&str>, bool) {
    let (body, inlined) = match frame.strip_suffix(INLINED) {
        Some(b) => (b, true),
        None => (frame, false),
    };
    if body.ends_with(')')
        && let Some(open) = matching_open(body)
        && open > 0
        && body[..open].ends_with(' ')
    {
        return (
            &body[..open - 1],
            Some(&body[open + 1..body.len() - 1]),
            inlined,
        );
    }
    (body, None, inlined)
}

/// Whether a frame is a managed runtime's code: JIT-compiled (`name
/// (jit)`), a Java method its JVM still interprets, which reads the same
/// before and after the JIT compiles it, or a JavaScript function read from
/// V8's heap (`name (script:line, js)`), however V8 runs it.
pub fn is_jit(frame: &str) -> bool {
    split(frame)
        .1
        .is_some_and(|l| l == JIT_LOCATION || is_interpreted_java(l) || js_script(l).is_some())
}

/// What a frame past the C runtime's is: JIT code of a kind, the native
/// code of a language runtime (`Parker::park (libjvm.so)`, which counts as
/// the platform's), or other native code (None).
pub fn jit_kind(frame: &str) -> Option<jit::JitKind> {
    match split(frame) {
        (name, Some(JIT_LOCATION), _) => Some(jit::kind(name.trim())),
        (name, Some(l), _) if is_interpreted_java(l) => Some(jit::kind(name.trim())),
        (_, Some(l), _) if let Some(script) = js_script(l) => Some(
            if script.is_empty()
                || crate::runtime::v8::RUNTIME
                    .platform_code
                    .iter()
                    .any(|p| script.starts_with(p))
            {
                jit::JitKind::Platform
            } else {
                jit::JitKind::Program
            },
        ),
        (_, Some(lib), _) if is_language_runtime(lib) => Some(jit::JitKind::Platform),
        (name, Some(_), _) if is_vm_function(name.trim()) => Some(jit::JitKind::Platform),
        _ => None,
    }
}

/// A VM's own code linked into whatever binary embeds it (V8's C++ and
/// builtins in node): the runtime a program's JIT methods pass through,
/// like a JVM's libjvm.
fn is_vm_function(name: &str) -> bool {
    crate::runtime::all_of(|r| r.vm_functions).any(|p| name.starts_with(p))
}

/// Whether a frame is an interpreter's own machinery that its language's
/// code runs through, not the program's code: in CPython's binary or
/// library (`python3.11`, `libpython3.12.so.1.0`), CRuby's library or a
/// static `ruby` binary, named or not (`python3.11+0x4f94ed`).
pub fn is_interpreter(frame: &str) -> bool {
    let (name, location, _) = split(frame);
    let module = match name.trim().rsplit_once("+0x") {
        Some((m, _)) => m,
        None => location.unwrap_or(""),
    };
    // A module's name, not a program's own `ruby.c:41`.
    !module.contains(':')
        && crate::runtime::all_of(|r| r.interpreter_modules).any(|p| module.starts_with(p))
}

/// Whether a frame is an interpreted program's own (`name (file.py:line)`).
pub fn is_interpreted(frame: &str) -> bool {
    split(frame)
        .1
        .is_some_and(|l| crate::runtime::all_of(|r| r.source_markers).any(|s| l.contains(s)))
}

/// The function a frame names: `ns_get (icinga.c:115)` -> `ns_get`.
pub fn function(frame: &str) -> &str {
    split(frame).0.trim()
}

/// A function name without its parameter list (and what follows it, such as
/// `const`) and with template arguments folded: `rocksdb::LRUCacheShard::
/// Lookup(rocksdb::Slice const&, unsigned int)` -> `rocksdb::LRUCacheShard::
/// Lookup`, `std::vector<int, std::allocator<int> >::push_back(int&&)` ->
/// `std::vector<…>::push_back`.
pub fn short_function(name: &str) -> String {
    let mut name = name.trim();
    // Parameters: the last top-level `(...)`, with `const`, `&` or `&&` after it.
    let trimmed = name
        .trim_end_matches(" const")
        .trim_end_matches(" &&")
        .trim_end_matches(" &")
        .trim_end_matches("&&")
        .trim_end_matches('&')
        .trim_end_matches(" const");
    if trimmed.ends_with(')')
        && let Some(open) = matching_open(trimmed)
        && open > 0
        && !trimmed[..open].ends_with("operator")
    {
        name = &trimmed[..open];
    }
    fold_templates(name)
}

/// Replaces every outermost `<...>` with `<…>`, leaving `operator<`,
/// `operator<<` and `operator->` alone.
fn fold_templates(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut depth = 0usize;
    let chars: Vec<char> = name.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let after_operator = out.ends_with("operator") || out.ends_with("operator<");
        match c {
            '<' if depth == 0 && after_operator => out.push(c),
            '>' if depth == 0 && (out.ends_with("operator") || out.ends_with("operator-")) => {
                out.push(c)
            }
            '<' if depth == 0 && is_bracketed_word(&chars, i) => {
                // An interpreted language's own name for a scope, not
                // template arguments: keep it whole.
                let end = i + chars[i..].iter().position(|&c| c == '>').unwrap_or(0);
                out.extend(&chars[i..=end]);
                i = end + 1;
                continue;
            }
            '<' => {
                if depth == 0 {
                    out.push_str("<…>");
                }
                depth += 1;
            }
            '>' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
        i += 1;
    }
    if depth > 0 {
        // Unbalanced (a cut name): keep it as it was.
        return name.to_string();
    }
    out
}

/// Whether the `<` at `i` opens a whole word in angle brackets: Ruby's
/// `<main>`, `<top (required)>`, `<class:Foo>`, Python's `<module>`,
/// `<lambda>`, `f.<locals>.g`, Java's `Object.<init>` (at the name's start
/// or after a space or a dot, the closing `>` ending the name or followed
/// by a space or a dot), not C++ or Rust template arguments
/// (`vector<int>`, `<T as Trait>::f`).
fn is_bracketed_word(chars: &[char], i: usize) -> bool {
    if i > 0 && !matches!(chars[i - 1], ' ' | '.') {
        return false;
    }
    let Some(len) = chars[i + 1..].iter().position(|&c| c == '>') else {
        return false;
    };
    let inner = &chars[i + 1..i + 1 + len];
    let after = chars.get(i + 2 + len);
    !inner.is_empty()
        && !inner.contains(&'<')
        && !inner.contains(&',')
        && matches!(after, None | Some(' ' | '.'))
}

/// A frame as people read it: its short function name and its location.
pub fn short_frame(frame: &str) -> String {
    let (name, location, inlined) = split(frame);
    let mut out = short_function(name);
    if let Some(loc) = location {
        out.push_str(" (");
        out.push_str(loc);
        out.push(')');
    }
    if inlined {
        out.push_str(INLINED);
    }
    out
}

/// A stack's frames as people read them (`short_frame` of each).
pub fn short_frames<S: AsRef<str>>(frames: &[S]) -> Vec<String> {
    frames.iter().map(|f| short_frame(f.as_ref())).collect()
}

/// The words of a function's own name (its last `::` part, without
/// parameters), lower case: `DCget_user_macro` -> [d, cget, user, macro],
/// `lookUpName` -> [look, up, name], `Cache::Lookup(int)` -> [lookup].
pub fn words(function: &str) -> Vec<String> {
    let short = short_function(function);
    let name = short.rsplit("::").next().unwrap_or(&short);
    let name = name.rsplit('.').next().unwrap_or(name);
    let mut out = vec![];
    for part in name.split(|c: char| !c.is_ascii_alphanumeric()) {
        let mut word = String::new();
        let chars: Vec<char> = part.chars().collect();
        for (i, &c) in chars.iter().enumerate() {
            let lower_before = i > 0 && chars[i - 1].is_ascii_lowercase();
            let upper_run_ends = i > 0
                && chars[i - 1].is_ascii_uppercase()
                && c.is_ascii_uppercase()
                && chars.get(i + 1).is_some_and(|n| n.is_ascii_lowercase());
            if c.is_ascii_uppercase() && (lower_before || upper_run_ends) && !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            word.push(c.to_ascii_lowercase());
        }
        if !word.is_empty() {
            out.push(word);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 38: a method the JVM interprets is the same method compiled:
    /// managed code, of the program's or the platform's by its name.
    #[test]
    fn an_interpreted_java_frame_reads_as_its_compiled_code() {
        use jit::JitKind;
        for (frame, kind) in [
            (
                "JavaLocks.work (JavaLocks.java:53, interpreted)",
                JitKind::Program,
            ),
            ("JavaLocks.work (jit)", JitKind::Program),
            (
                "jdk.internal.misc.Unsafe.park (Unsafe.java, interpreted)",
                JitKind::Platform,
            ),
            ("Gen.run (interpreted)", JitKind::Program),
        ] {
            assert!(is_jit(frame), "{frame}");
            assert_eq!(jit_kind(frame), Some(kind), "{frame}");
        }
        for frame in [
            "ns_get (icinga.c:115)",
            "work (gil_work.py:16)",
            "interpreted_thing (a.c:3)",
        ] {
            assert!(!is_jit(frame), "{frame}");
            assert_eq!(jit_kind(frame), None, "{frame}");
        }
    }

    /// Issue 38: a JavaScript function read from V8's heap is managed
    /// code, the program's unless its script is Node.js's own library (or
    /// it has none: a V8 builtin).
    #[test]
    fn a_javascript_frame_is_the_program_s_unless_its_script_is_node_s() {
        use jit::JitKind;
        for (frame, kind) in [
            (
                "waitForJob (/srv/app/spin_work.js:100, js)",
                JitKind::Program,
            ),
            ("(anonymous) (/srv/app/spin_work.js, js)", JitKind::Program),
            (
                "Module._compile (node:internal/modules/cjs/loader:1522, js)",
                JitKind::Platform,
            ),
            ("push (js)", JitKind::Platform),
            ("f (file:///srv/app/m.mjs:3, js)", JitKind::Program),
        ] {
            assert!(is_jit(frame), "{frame}");
            assert_eq!(jit_kind(frame), Some(kind), "{frame}");
        }
        for frame in ["js_free (lib.c:3)", "render (jsx.c:1)", "g (a, b)"] {
            assert!(!is_jit(frame), "{frame}");
            assert_eq!(jit_kind(frame), None, "{frame}");
        }
    }

    #[test]
    fn locations_are_told_from_parameter_lists() {
        assert_eq!(
            split("ns_get (icinga.c:115)"),
            ("ns_get", Some("icinga.c:115"), false)
        );
        assert_eq!(
            split("__lll_lock_wait (lowlevellock.c:49) [inlined]"),
            ("__lll_lock_wait", Some("lowlevellock.c:49"), true)
        );
        let cxx = "rocksdb::LRUCacheShard::Lookup(rocksdb::Slice const&, unsigned int) (librocksdb.so.7.8)";
        assert_eq!(
            split(cxx),
            (
                "rocksdb::LRUCacheShard::Lookup(rocksdb::Slice const&, unsigned int)",
                Some("librocksdb.so.7.8"),
                false
            )
        );
        // A function-pointer parameter has a space before its `(`.
        let fp = "call(void (*)(int)) (a.cc:3)";
        assert_eq!(function(fp), "call(void (*)(int))");
        assert_eq!(split("main"), ("main", None, false));
        assert_eq!(function("[unknown] 0x1234"), "[unknown] 0x1234");
    }

    #[test]
    fn cxx_names_lose_parameters_and_template_arguments() {
        assert_eq!(
            short_function("rocksdb::LRUCacheShard::Lookup(rocksdb::Slice const&, unsigned int)"),
            "rocksdb::LRUCacheShard::Lookup"
        );
        assert_eq!(
            short_function("std::vector<int, std::allocator<int> >::push_back(int&&) const"),
            "std::vector<…>::push_back"
        );
        assert_eq!(short_function("call(void (*)(int))"), "call");
        assert_eq!(short_function("Foo::operator()(int)"), "Foo::operator()");
        assert_eq!(
            short_function("operator<<(std::ostream&, X const&)"),
            "operator<<"
        );
        assert_eq!(short_function("Foo::operator->() const"), "Foo::operator->");
        assert_eq!(short_function("take_gil"), "take_gil");
        assert_eq!(short_function("broken<cut"), "broken<cut");
        // Interpreted languages' scope names are words, not templates.
        assert_eq!(
            short_function("block (2 levels) in <main>"),
            "block (2 levels) in <main>"
        );
        assert_eq!(short_function("<module>"), "<module>");
        assert_eq!(short_function("<top (required)>"), "<top (required)>");
        assert_eq!(short_function("f.<locals>.<lambda>"), "f.<locals>.<lambda>");
        assert_eq!(
            short_function("java.lang.Object.<init>"),
            "java.lang.Object.<init>"
        );
        assert_eq!(
            short_function("<alloc::vec::Vec<u8> as Drop>::drop"),
            "<…>::drop"
        );
        assert_eq!(short_function("a <b, c> d"), "a <…> d");
        assert_eq!(
            short_frame("a::B<int>::c(int) (b.cc:7) [inlined]"),
            "a::B<…>::c (b.cc:7) [inlined]"
        );
    }

    #[test]
    fn the_ruby_vm_is_told_by_its_module_not_a_programs_file() {
        assert!(is_interpreter("rb_vm_exec (libruby-3.1.so.3.1.2)"));
        assert!(is_interpreter("main (ruby3.1)"));
        assert!(!is_interpreter("switch_to (ruby.c:41)"));
        assert!(!is_interpreter("work (gvl_work.rb:14)"));
        assert!(!is_interpreter("ruby_like_name (app)"));
        assert!(is_interpreter("_PyEval_EvalFrameDefault (python3.11)"));
        assert!(is_interpreter("python3.11+0x4f94ed"));
        assert!(is_interpreter("libpython3.12.so.1.0+0x1234"));
        assert!(!is_interpreter("work (gil_work.py:16)"));
    }

    #[test]
    fn words_split_snake_and_camel_case_of_the_last_name() {
        assert_eq!(words("ns_get_value"), ["ns", "get", "value"]);
        // Ambiguous run-togethers stay whole rather than guessed at.
        assert_eq!(words("DCget_user_macro"), ["d", "cget", "user", "macro"]);
        assert_eq!(words("lookUpName"), ["look", "up", "name"]);
        assert_eq!(words("ns::Namespace::getValue"), ["get", "value"]);
        assert_eq!(words("HTTPServer"), ["http", "server"]);
        assert_eq!(words("rocksdb::port::Mutex::Lock()"), ["lock"]);
        assert_eq!(words("LWLockAcquire"), ["lw", "lock", "acquire"]);
        assert_eq!(
            words("java.util.concurrent.locks.LockSupport.park"),
            ["park"]
        );
    }
}
