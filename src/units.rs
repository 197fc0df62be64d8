//! Numbers in words, as every output writes them: durations, counts,
//! rates. Shared by the report's own words, the findings and the renderers.

pub fn duration(ns: u64) -> String {
    let ns_f = ns as f64;
    if ns >= 1_000_000_000 {
        format!("{:.3} s", ns_f / 1e9)
    } else if ns >= 1_000_000 {
        format!("{:.1} ms", ns_f / 1e6)
    } else if ns >= 1_000 {
        format!("{:.1} us", ns_f / 1e3)
    } else {
        format!("{ns} ns")
    }
}

pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A count or rate in few digits: `1.17 M`, `12.3 k`, `512`.
pub fn short(x: f64) -> String {
    if x >= 1e6 {
        format!("{:.2} M", x / 1e6)
    } else if x >= 1e4 {
        format!("{:.1} k", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}

pub fn rate(per_s: f64) -> String {
    if per_s >= 1e6 {
        format!("{:.2} M/s", per_s / 1e6)
    } else if per_s >= 1e3 {
        format!("{:.1} k/s", per_s / 1e3)
    } else {
        format!("{per_s:.1}/s")
    }
}

/// A size: `812 B`, `14.2 KiB`, `3.1 MiB`.
pub fn bytes(n: u64) -> String {
    let f = n as f64;
    if n >= 1 << 20 {
        format!("{:.1} MiB", f / (1u64 << 20) as f64)
    } else if n >= 1 << 10 {
        format!("{:.1} KiB", f / 1024.0)
    } else {
        format!("{n} B")
    }
}
