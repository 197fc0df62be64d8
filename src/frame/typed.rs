//! A frame typed once, where its stack is symbolized (issue 38): the text a
//! report shows (`name (file:line)`, `name (library)`, `name (jit)`,
//! `name (script:line, js)`, either with ` [inlined]`) and what that text
//! says, parsed from it once: its function, its location, whether it was
//! inlined, and the kind of code it is (native, a language runtime's own,
//! JIT-compiled or interpreted managed code, an interpreter's source, the
//! interpreter itself). Later stages read these as fields instead of
//! re-parsing the string at every step.
//!
//! Why the text stays the frame's identity: the JSON report, recordings,
//! folded stacks and pprof all carry frames as that text, and a report read
//! back must type its frames the same way. A `Frame` serializes as its text
//! and is typed again when read, so nothing written changes; it compares,
//! orders and hashes as its text, and dereferences to it for display and
//! for the name lists a runtime's data matches against.

use std::fmt;

use super::jit::JitKind;

/// The kind of code a frame is, as its text says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    /// Native code: C, C++, Rust, Go, the kernel's.
    Native,
    /// Managed code a VM runs (JIT-compiled, a JVM's interpreted method, a
    /// JavaScript function read from V8's heap), or a language runtime's
    /// native library, with whose it is.
    Managed(JitKind),
    /// An interpreted program's source line (`work (gil.py:16)`).
    Source,
    /// An interpreter's own C, named or not (`python3.11+0x4f94ed`).
    Interpreter,
}

/// A symbolized frame: its text, typed once.
#[derive(Clone)]
pub struct Frame {
    text: String,
    /// Byte range of the function's name in `text`, trimmed.
    function: (u32, u32),
    /// Byte range of the location inside its parentheses, if any.
    location: Option<(u32, u32)>,
    inlined: bool,
    code: Code,
    /// A JIT's frame (`(jit)`, a JVM's interpreted method, V8's `js`).
    jit: bool,
}

fn range(outer: &str, inner: &str) -> (u32, u32) {
    let start = inner.as_ptr() as usize - outer.as_ptr() as usize;
    (start as u32, (start + inner.len()) as u32)
}

impl Frame {
    /// Types `text` once.
    pub fn new(text: impl Into<String>) -> Frame {
        let text = text.into();
        let (name, location, inlined) = super::split(&text);
        let function = range(&text, name.trim());
        let location = location.map(|l| range(&text, l));
        let code = if super::is_interpreted(&text) {
            Code::Source
        } else if super::is_interpreter(&text) {
            Code::Interpreter
        } else {
            match super::jit_kind(&text) {
                Some(k) => Code::Managed(k),
                None => Code::Native,
            }
        };
        let jit = super::is_jit(&text);
        Frame {
            text,
            function,
            location,
            inlined,
            code,
            jit,
        }
    }

    /// The frame as a report shows it.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The function it names: `ns_get (icinga.c:115)` -> `ns_get`.
    pub fn function(&self) -> &str {
        &self.text[self.function.0 as usize..self.function.1 as usize]
    }

    /// Its location: a file and line, a library, `jit`, a script's.
    pub fn location(&self) -> Option<&str> {
        self.location
            .map(|(a, b)| &self.text[a as usize..b as usize])
    }

    /// Whether the compiler inlined it into its caller.
    pub fn inlined(&self) -> bool {
        self.inlined
    }

    /// The kind of code it is.
    pub fn code(&self) -> Code {
        self.code
    }

    /// Whose managed code it is, or a language runtime's own native code
    /// (`frame::jit_kind`).
    pub fn jit_kind(&self) -> Option<JitKind> {
        match self.code {
            Code::Managed(k) => Some(k),
            _ => None,
        }
    }

    /// Whether a JIT or a VM runs it (`frame::is_jit`).
    pub fn is_jit(&self) -> bool {
        self.jit
    }

    /// Whether it is an interpreted program's source line.
    pub fn is_interpreted(&self) -> bool {
        self.code == Code::Source
    }

    /// Whether it is an interpreter's own C.
    pub fn is_interpreter(&self) -> bool {
        self.code == Code::Interpreter
    }

    /// The text, given up.
    pub fn into_string(self) -> String {
        self.text
    }
}

impl std::ops::Deref for Frame {
    type Target = str;
    fn deref(&self) -> &str {
        &self.text
    }
}

impl AsRef<str> for Frame {
    fn as_ref(&self) -> &str {
        &self.text
    }
}

impl std::borrow::Borrow<str> for Frame {
    fn borrow(&self) -> &str {
        &self.text
    }
}

impl From<String> for Frame {
    fn from(s: String) -> Frame {
        Frame::new(s)
    }
}

impl From<&str> for Frame {
    fn from(s: &str) -> Frame {
        Frame::new(s)
    }
}

impl From<&String> for Frame {
    fn from(s: &String) -> Frame {
        Frame::new(s.as_str())
    }
}

impl fmt::Display for Frame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Debug for Frame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.text, f)
    }
}

impl PartialEq for Frame {
    fn eq(&self, other: &Frame) -> bool {
        self.text == other.text
    }
}

impl Eq for Frame {}

impl PartialEq<str> for Frame {
    fn eq(&self, other: &str) -> bool {
        self.text == other
    }
}

impl PartialEq<&str> for Frame {
    fn eq(&self, other: &&str) -> bool {
        self.text == *other
    }
}

impl PartialEq<String> for Frame {
    fn eq(&self, other: &String) -> bool {
        self.text == *other
    }
}

impl PartialEq<Frame> for &str {
    fn eq(&self, other: &Frame) -> bool {
        *self == other.text
    }
}

impl PartialEq<Frame> for String {
    fn eq(&self, other: &Frame) -> bool {
        *self == other.text
    }
}

impl PartialOrd for Frame {
    fn partial_cmp(&self, other: &Frame) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Frame {
    fn cmp(&self, other: &Frame) -> std::cmp::Ordering {
        self.text.cmp(&other.text)
    }
}

impl std::hash::Hash for Frame {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.text.hash(h)
    }
}

impl serde::Serialize for Frame {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> serde::Deserialize<'de> for Frame {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Frame, D::Error> {
        String::deserialize(d).map(Frame::new)
    }
}

/// Frames from their texts.
pub fn frames<S: AsRef<str>>(texts: &[S]) -> Vec<Frame> {
    texts.iter().map(|t| Frame::new(t.as_ref())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame's fields are what the string readers say of its text, and it
    /// writes and reads back as that text.
    #[test]
    fn a_frame_is_typed_once_as_its_text_says_and_round_trips_as_it() {
        let cases = [
            "ns_get (icinga.c:115)",
            "rocksdb::LRUCacheShard::Lookup(rocksdb::Slice const&, unsigned int) (lru_cache.cc:400) [inlined]",
            "Parker::park(bool, long) (libjvm.so)",
            "java.util.concurrent.locks.ReentrantLock.lock (jit)",
            "Spin.work (Spin.java:12, interpreted)",
            "burn (/srv/work.js:12, js)",
            "push (js)",
            "work (gil_work.py:16)",
            "python3.11+0x4f94ed",
            "caddy+0x473b63",
            "[unresolved]",
        ];
        for text in cases {
            let f = Frame::new(text);
            assert_eq!(f.as_str(), text);
            let (name, location, inlined) = crate::frame::split(text);
            assert_eq!(f.function(), name.trim(), "{text}");
            assert_eq!(f.location(), location, "{text}");
            assert_eq!(f.inlined(), inlined, "{text}");
            assert_eq!(f.is_jit(), crate::frame::is_jit(text), "{text}");
            assert_eq!(
                f.is_interpreted(),
                crate::frame::is_interpreted(text),
                "{text}"
            );
            let json = serde_json::to_string(&f).unwrap();
            assert_eq!(json, serde_json::to_string(text).unwrap());
            assert_eq!(serde_json::from_str::<Frame>(&json).unwrap(), f);
        }
        assert_eq!(Frame::new("work (gil_work.py:16)").code(), Code::Source);
        assert_eq!(Frame::new("python3.11+0x4f94ed").code(), Code::Interpreter);
        assert_eq!(
            Frame::new("Parker::park(bool, long) (libjvm.so)").code(),
            Code::Managed(JitKind::Platform)
        );
        assert_eq!(
            Frame::new("burn (/srv/work.js:12, js)").jit_kind(),
            Some(JitKind::Program)
        );
        assert_eq!(Frame::new("ns_get (icinga.c:115)").code(), Code::Native);
    }
}
