//! mariadb-hot-row (issue 19): Debian's MariaDB 10.11, one thread per
//! connection, mariadbd stripped. 16 sysbench connections update one row:
//! 14.0-14.5 of the 16 transactions are in LOCK WAIT at any time
//! (information_schema.INNODB_TRX), 9.2-9.5 k row-lock waits a second, one
//! per commit, ~9.7 s of row-lock waiting per second (Innodb_row_lock_time),
//! the server using 0.86 of 2 CPUs; on random rows, none.
use super::*;

#[test]
fn mariadb_connections_queue_on_a_hot_row_lock_and_on_spread_rows_do_not() {
    live("mariadb-hot-row");
}

/// What `mariadb_connections_queue_on_a_hot_row_lock_and_on_spread_rows_do_not` asserts of a bad and a healthy run, live or recorded.
pub fn mariadb_connections_queue_on_a_hot_row_lock_and_on_spread_rows_do_not_holds(
    bad: &Report,
    healthy: &Report,
) {
    let f = bad
        .findings
        .first()
        .unwrap_or_else(|| panic!("no finding: {:?}", ids(bad)));
    assert!(f.id.starts_with("lock."), "{:?}", ids(bad));
    assert!(f.evidence.iter().all(|e| e.holds()), "{f:?}");
    // The row lock's wait, in the UPDATE's index read: named by the
    // nearest named functions when the waiting one is not.
    let name = &f.culprit.name;
    assert!(
        !name.starts_with("mariadbd+0x") || name.contains(" in handler::"),
        "{name}"
    );
    let lock = bad
        .waits
        .iter()
        .filter(|s| s.class == WaitClass::Contention)
        .max_by_key(|s| s.wait_ns)
        .unwrap();
    assert!(
        lock.waiting_threads > 8.0 && lock.waiters >= 14,
        "{}",
        lock.function
    );
    // Inside the connection's work, deeper than its wait for the next
    // statement (vio_read).
    assert!(
        lock.nested_share > 0.5,
        "{}: {}",
        lock.function,
        lock.nested_share
    );
    // InnoDB's background pool waits for tasks: not contention.
    not_contention(bad, |f| f.contains("get_task"));
    nothing_idle_is_contention(bad);
    lacks(bad, "wait.bottleneck");
    assert!(
        healthy.findings.iter().all(|f| !f.id.starts_with("lock.")),
        "{:?}",
        ids(healthy)
    );
    lacks(healthy, "wait.bottleneck");
}
