//! The labels a pushed profile's series carries: what a fleet filters and
//! groups by. `__name__` is `kerntax` (both backends require one, and each
//! sample type becomes `kerntax:<type>:<unit>:cpu:nanoseconds`);
//! `service_name` and `job` name the service (the flag, else the command,
//! else the process); `hostname`, `pid`, `comm` and `kernel` say where; the
//! window's findings go in `kerntax_findings`. Names are checked as both
//! backends check them (a Prometheus label name), and the count stays
//! within Pyroscope's 30.

/// The profile name both backends file kerntax's types under.
pub const PROFILE_NAME: &str = "kerntax";
/// The label the window's finding ids go in, comma-separated (`none`).
pub const FINDINGS_LABEL: &str = "kerntax_findings";
/// Pyroscope refuses a series with more labels.
pub const MAX_LABELS: usize = 30;
/// The labels kerntax sets itself; the user's come on top.
const OWN_LABELS: usize = 8;
/// How many `--label`s a user may add.
pub const MAX_USER_LABELS: usize = MAX_LABELS - OWN_LABELS;

/// A Prometheus label name: `[a-zA-Z_][a-zA-Z0-9_]*`.
pub fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `KEY=VALUE` from `--label`; names starting `__` are the backends' own.
pub fn parse_user_label(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: a label is NAME=VALUE"))?;
    if !valid_name(k) || k.starts_with("__") {
        return Err(format!(
            "{k:?}: a label name is letters, digits and _, not starting with a digit or __"
        ));
    }
    if v.is_empty() {
        return Err(format!("{s:?}: the label's value is empty"));
    }
    Ok((k.to_string(), v.to_string()))
}

/// What is known of the target and the host, for the labels.
#[derive(Clone, Debug, Default)]
pub struct Origin {
    pub service_name: String,
    pub hostname: String,
    pub pid: u32,
    pub comm: String,
    pub kernel: String,
}

/// The series labels of one window's profile, sorted by name (the user's
/// labels do not replace kerntax's own).
pub fn series(
    origin: &Origin,
    user: &[(String, String)],
    findings: &[String],
) -> Vec<(String, String)> {
    let findings = if findings.is_empty() {
        "none".to_string()
    } else {
        findings.join(",")
    };
    let mut out: Vec<(String, String)> = [
        ("__name__", PROFILE_NAME.to_string()),
        ("service_name", origin.service_name.clone()),
        ("job", origin.service_name.clone()),
        ("hostname", origin.hostname.clone()),
        ("pid", origin.pid.to_string()),
        ("comm", origin.comm.clone()),
        ("kernel", origin.kernel.clone()),
        (FINDINGS_LABEL, findings),
    ]
    .into_iter()
    .filter(|(_, v)| !v.is_empty())
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    for (k, v) in user.iter().take(MAX_USER_LABELS) {
        if !out.iter().any(|(o, _)| o == k) {
            out.push((k.clone(), v.clone()));
        }
    }
    out.sort();
    out
}

/// The service a target is, when no `--service-name` says: the command's
/// file name, else the process's name.
pub fn default_service(command: Option<&[String]>, comm: &str) -> String {
    let from_cmd = command
        .and_then(|c| c.first())
        .and_then(|c| c.rsplit('/').next())
        .filter(|c| !c.is_empty());
    let name = from_cmd.unwrap_or(comm);
    if name.is_empty() {
        "unknown".to_string()
    } else {
        name.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_names_follow_prometheus() {
        for ok in ["env", "_x", "a1_b", "Zone"] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", "1a", "a-b", "a.b", "é"] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn user_labels_are_name_equals_value() {
        assert_eq!(
            parse_user_label("env=prod=1"),
            Ok(("env".into(), "prod=1".into()))
        );
        for bad in ["env", "=x", "__name__=x", "a-b=x", "env="] {
            assert!(parse_user_label(bad).is_err(), "{bad}");
        }
    }

    fn origin() -> Origin {
        Origin {
            service_name: "icinga2".into(),
            hostname: "h1".into(),
            pid: 42,
            comm: "icinga2".into(),
            kernel: "6.18.44".into(),
        }
    }

    #[test]
    fn a_series_has_the_fleet_labels_and_the_findings() {
        let user = vec![("env".to_string(), "prod".to_string())];
        let l = series(
            &origin(),
            &user,
            &["lock.contended".into(), "switch.storm".into()],
        );
        let get = |k: &str| l.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("__name__"), Some("kerntax"));
        assert_eq!(get("service_name"), Some("icinga2"));
        assert_eq!(get("job"), Some("icinga2"));
        assert_eq!(get("pid"), Some("42"));
        assert_eq!(get("env"), Some("prod"));
        assert_eq!(get(FINDINGS_LABEL), Some("lock.contended,switch.storm"));
        assert!(l.windows(2).all(|w| w[0].0 < w[1].0), "sorted, no repeats");
        assert!(l.iter().all(|(k, _)| valid_name(k)));
        let none = series(&origin(), &[], &[]);
        assert_eq!(
            none.iter().find(|(k, _)| k == FINDINGS_LABEL).unwrap().1,
            "none"
        );
    }

    #[test]
    fn the_labels_stay_within_pyroscopes_thirty() {
        let user: Vec<(String, String)> = (0..40).map(|i| (format!("l{i}"), "v".into())).collect();
        assert_eq!(series(&origin(), &user, &[]).len(), MAX_LABELS);
        // A user label does not replace kerntax's own.
        let l = series(&origin(), &[("pid".into(), "7".into())], &[]);
        assert_eq!(l.iter().filter(|(k, _)| k == "pid").count(), 1);
        assert!(l.contains(&("pid".into(), "42".into())));
    }

    #[test]
    fn the_service_is_the_command_then_the_process() {
        let cmd = vec!["/usr/sbin/icinga2".to_string(), "daemon".into()];
        assert_eq!(default_service(Some(&cmd), "x"), "icinga2");
        assert_eq!(default_service(None, "memcached"), "memcached");
        assert_eq!(default_service(None, ""), "unknown");
    }
}
