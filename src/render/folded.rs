//! Folded stacks (`outer;...;inner count`), what flame graph tools read: the
//! on-CPU samples for `--folded`, and one set per view (off-CPU by reason,
//! lock waiters and wakers, syscalls by call site) for the HTML report's
//! flame graphs. Reads only the `Report`.

use crate::report::Report;

/// Stacks, outermost frame first, with the value each stands for.
pub type Stacks = Vec<(Vec<String>, u64)>;

/// A frame as one folded field: no `;` (the separator) or line breaks.
fn field(frame: &str) -> String {
    frame
        .chars()
        .map(|c| match c {
            ';' => ':',
            '\n' | '\r' => ' ',
            c => c,
        })
        .collect()
}

/// `outer;...;inner value` lines, heaviest first, zero values left out.
pub fn lines(stacks: &Stacks) -> Vec<String> {
    let mut sorted: Vec<&(Vec<String>, u64)> = stacks.iter().filter(|s| s.1 > 0).collect();
    sorted.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    sorted
        .into_iter()
        .map(|(frames, value)| {
            let path: Vec<String> = frames.iter().map(|f| field(f)).collect();
            let path = if path.is_empty() {
                "[no stack]".to_string()
            } else {
                path.join(";")
            };
            format!("{path} {value}")
        })
        .collect()
}

/// Innermost-first frames under `root`, outermost first.
fn rooted(
    root: Option<String>,
    innermost_first: &[crate::frame::Frame],
    leaf: Option<String>,
) -> Vec<String> {
    root.into_iter()
        .chain(innermost_first.iter().rev().map(|f| f.to_string()))
        .chain(leaf)
        .collect()
}

/// On-CPU samples (count per stack).
pub fn cpu(r: &Report) -> Stacks {
    r.cpu_samples
        .folded
        .iter()
        .map(|f| (f.frames.iter().map(|x| x.to_string()).collect(), f.count))
        .collect()
}

/// Off-CPU time (ns) under its reason.
pub fn offcpu(r: &Report) -> Stacks {
    let mut out = Stacks::new();
    for t in &r.offcpu {
        for reason in &t.reasons {
            let name = reason.reason.name().to_string();
            let sampled: u64 = reason.stacks.iter().map(|s| s.ns).sum();
            for s in &reason.stacks {
                out.push((rooted(Some(name.clone()), &s.frames, None), s.ns));
            }
            // Time without a sampled stack (involuntary waits, mostly).
            let rest = reason.ns.saturating_sub(sampled);
            out.push((
                vec![name.clone(), format!("{} (tid {})", t.comm, t.tid)],
                rest,
            ));
        }
    }
    out
}

/// Time waiters spent waiting on contended locks (ns), under the lock.
pub fn lock_waiters(r: &Report) -> Stacks {
    r.locks
        .iter()
        .filter(|l| l.contention)
        .flat_map(|l| {
            let name = l.display_name();
            l.waiter_stacks
                .iter()
                .map(move |s| (rooted(Some(name.clone()), &s.frames, None), s.wait_ns))
        })
        .collect()
}

/// Time asleep at each wait site (ns), under its class and name: what the
/// threads waited for, and where.
pub fn wait_sites(r: &Report) -> Stacks {
    let names = crate::analyze::waits::displays(&r.waits.iter().collect::<Vec<_>>());
    r.waits
        .iter()
        .zip(names)
        .flat_map(|(s, name)| {
            let root = format!("{}: {name}", s.class.name());
            s.stacks.iter().map(move |st| {
                (
                    std::iter::once(root.clone())
                        .chain(st.frames.iter().rev().map(|f| f.to_string()))
                        .collect(),
                    st.ns,
                )
            })
        })
        .collect()
}

/// Wake-ups holders of contended locks made (count), under the lock.
pub fn lock_wakers(r: &Report) -> Stacks {
    r.locks
        .iter()
        .filter(|l| l.contention)
        .flat_map(|l| {
            let name = l.display_name();
            l.waker_stacks
                .iter()
                .map(move |s| (rooted(Some(name.clone()), &s.frames, None), s.count))
        })
        .collect()
}

/// Syscalls (calls) by call site, the syscall as the top frame.
pub fn syscalls(r: &Report) -> Stacks {
    r.syscalls
        .iter()
        .flat_map(|s| {
            s.callsites.iter().map(move |c| {
                (
                    rooted(None, &c.frames, Some(format!("[{}]", s.name))),
                    c.calls,
                )
            })
        })
        .collect()
}

/// The `--folded` file: on-CPU samples, kernel frames marked `[k]`.
pub fn render(r: &Report) -> String {
    let mut out = lines(&cpu(r)).join("\n");
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_sorted_sanitized_and_skip_zero() {
        let stacks: Stacks = vec![
            (vec!["main".into(), "a;b".into()], 3),
            (vec!["main".into(), "c\nd".into()], 7),
            (vec!["main".into()], 0),
            (vec![], 2),
        ];
        assert_eq!(lines(&stacks), ["main;c d 7", "main;a:b 3", "[no stack] 2"]);
    }

    #[test]
    fn innermost_first_stacks_are_turned_outermost_first() {
        let f = rooted(
            Some("lock".into()),
            &["inner".into(), "outer".into()],
            Some("[leaf]".into()),
        );
        assert_eq!(f, ["lock", "outer", "inner", "[leaf]"]);
    }
}
