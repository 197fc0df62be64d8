//! node-lookup (issue 38): a Node.js 20 HTTP client opening a connection
//! per request to its peer on loopback. Named `localhost`, the peer is
//! resolved for every connection (dns.lookup: glibc's getaddrinfo on
//! libuv's thread pool, about fifteen syscalls each: a netlink round trip
//! for AI_ADDRCONFIG, /etc/hosts read, resolv.conf and nsswitch.conf
//! stat'ed; ~34 syscalls and 5 futex calls a request against ~16 and 0.2
//! by address, under strace); the client spends 214-226 us of CPU a
//! request against 182-187 us by address (-15%), at the same 5.5-5.8 k
//! requests/s, which its event loop bounds. See NOTES.md.
use super::*;

#[test]
fn a_node_client_resolving_its_peer_per_connection_pays_getaddrinfos_syscalls_and_by_address_does_not()
 {
    live("node-lookup");
}

/// What `a_node_client_resolving_its_peer_per_connection_pays_getaddrinfos_syscalls_and_by_address_does_not` asserts of a bad and a healthy run, live or recorded.
pub fn a_node_client_resolving_its_peer_per_connection_pays_getaddrinfos_syscalls_and_by_address_does_not_holds(
    bad: &Report,
    healthy: &Report,
) {
    let f = first(bad, "syscall.known-pattern");
    assert!(
        f.title
            .starts_with("glibc's getaddrinfo resolves the name again on every call"),
        "{}",
        f.title
    );
    assert!(
        f.culprit.frames.iter().any(|s| s.contains("getaddrinfo (")),
        "{f:?}"
    );
    assert!(f.remedy.contains("keepAlive"), "{}", f.remedy);
    // Every netlink request is a lookup's (__check_pf: one sendto each,
    // as strace's stacks show), none the client's HTTP.
    let sendto = syscall(bad, "sendto");
    let through: u64 = sendto
        .callsites
        .iter()
        .filter(|c| has_frame(&c.frames, "__check_pf"))
        .map(|c| c.calls)
        .sum();
    assert!(
        through * 100 >= sendto.calls * 95,
        "{through} of {} sendto through __check_pf",
        sendto.calls
    );
    // By address: no lookup, no pattern, no netlink.
    assert!(
        healthy
            .findings
            .iter()
            .all(|f| f.id != "syscall.known-pattern"),
        "{:?}",
        healthy.findings
    );
    let netlink: u64 = healthy
        .syscalls
        .iter()
        .filter(|s| s.name == "sendto")
        .map(|s| s.calls)
        .sum();
    assert!(netlink * 100 < sendto.calls, "{netlink} sendto by address");
}
