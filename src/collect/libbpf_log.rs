//! libbpf's messages while kerntax loads: kept, so that a program the
//! verifier rejects is named with what the verifier said (not only
//! "Invalid argument"), and shown on stderr only with KERNTAX_DEBUG.

use std::sync::Mutex;

use libbpf_rs::PrintLevel;

static LOG: Mutex<String> = Mutex::new(String::new());
/// Bytes of libbpf's messages kept: a verifier log can be megabytes; its
/// end says why.
const KEPT_BYTES: usize = 1 << 20;

fn keep(level: PrintLevel, msg: String) {
    let debug = std::env::var_os("KERNTAX_DEBUG").is_some();
    if debug {
        eprint!("{msg}");
    }
    // A successful load's verifier statistics come at debug level.
    if matches!(level, PrintLevel::Debug) && !(debug && msg.contains("LOAD LOG")) {
        return;
    }
    let mut log = LOG.lock().unwrap_or_else(|e| e.into_inner());
    if log.len() > KEPT_BYTES {
        let cut = log.len() - KEPT_BYTES / 2;
        let cut = (cut..log.len())
            .find(|&i| log.is_char_boundary(i))
            .unwrap_or(0);
        log.drain(..cut);
    }
    log.push_str(&msg);
}

/// Starts keeping libbpf's warnings (and printing everything with
/// KERNTAX_DEBUG).
pub fn capture() {
    LOG.lock().unwrap_or_else(|e| e.into_inner()).clear();
    let level = if std::env::var_os("KERNTAX_DEBUG").is_some() {
        PrintLevel::Debug
    } else {
        PrintLevel::Warn
    };
    libbpf_rs::set_print(Some((level, keep as fn(_, _))));
}

/// The program the verifier rejected and the lines its log ends with,
/// from what was kept.
pub fn rejected() -> Option<(String, Vec<String>)> {
    parse_rejection(&LOG.lock().unwrap_or_else(|e| e.into_inner()))
}

/// The instructions the verifier processed for `prog`, from its log's
/// statistics (kept with KERNTAX_DEBUG, which asks for them): what
/// kernels before 5.16 do not state in the program's info.
pub fn processed_insns(prog: &str) -> Option<u64> {
    let log = LOG.lock().unwrap_or_else(|e| e.into_inner());
    let begin = format!("prog '{prog}': -- BEGIN PROG LOAD LOG --");
    let body = &log[log.rfind(&begin)? + begin.len()..];
    let body = &body[..body.find("-- END PROG LOAD LOG --").unwrap_or(body.len())];
    body.lines()
        .find_map(|l| l.trim().strip_prefix("processed "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// How many lines of the verifier's log a rejection quotes.
const QUOTED_LINES: usize = 3;

/// From libbpf's messages: the last program whose load failed, and the
/// last lines of its verifier log that say why (the statistics lines that
/// end every log left out).
pub fn parse_rejection(log: &str) -> Option<(String, Vec<String>)> {
    const FAILED: &str = "': BPF program load failed";
    let at = log.rfind(FAILED)?;
    let name_start = log[..at].rfind("prog '")? + "prog '".len();
    let name = log[name_start..at].to_string();
    let begin = format!("prog '{name}': -- BEGIN PROG LOAD LOG --");
    let lines: Vec<String> = match log[at..].find(&begin) {
        Some(b) => {
            let body = &log[at + b + begin.len()..];
            let body = &body[..body.find("-- END PROG LOAD LOG --").unwrap_or(body.len())];
            let mut said: Vec<String> = body
                .lines()
                .map(str::trim)
                .filter(|l| {
                    !l.is_empty()
                        && !l.starts_with("processed ")
                        && !l.starts_with("verification time")
                        && !l.starts_with("stack depth")
                })
                .map(String::from)
                .collect();
            let keep = said.len().saturating_sub(QUOTED_LINES);
            said.drain(..keep);
            said
        }
        None => vec![],
    };
    Some((name, lines))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 35: what libbpf printed when 6.1's verifier refused kt_sys_exit.
    #[test]
    fn names_the_rejected_program_and_the_verifiers_reason() {
        let log = "libbpf: prog 'kt_sys_exit': BPF program load failed: Invalid argument\n\
                   libbpf: prog 'kt_sys_exit': -- BEGIN PROG LOAD LOG --\n\
                   0: R1=ctx(off=0,imm=0) R10=fp0\n\
                   393: (0f) r3 += r2\n\
                   math between map_value pointer and register with unbounded min value is not allowed\n\
                   processed 394 insns (limit 1000000) max_states_per_insn 1 total_states 20\n\
                   -- END PROG LOAD LOG --\n\
                   libbpf: prog 'kt_sys_exit': failed to load: -22\n";
        let (prog, lines) = parse_rejection(log).unwrap();
        assert_eq!(prog, "kt_sys_exit");
        assert_eq!(
            lines.last().map(String::as_str),
            Some(
                "math between map_value pointer and register with unbounded min value is not allowed"
            )
        );
        assert_eq!(lines.len(), QUOTED_LINES);
        assert!(!lines.iter().any(|l| l.starts_with("processed")));
    }

    #[test]
    fn a_failure_without_a_log_still_names_the_program() {
        let log = "libbpf: prog 'kt_switch': BPF program load failed: Permission denied\n";
        assert_eq!(parse_rejection(log), Some(("kt_switch".into(), vec![])));
        assert_eq!(parse_rejection("libbpf: map 'x': created\n"), None);
    }
}
