//! The queue against scripted backends: ordering, retries, each kind of
//! drop, and exit within its grace.

use super::*;
use std::sync::mpsc;

/// Answers from a script, then `Ok`; tells the test each request's body.
struct Script {
    answers: VecDeque<Sent>,
    seen: mpsc::Sender<Vec<u8>>,
    /// Each send waits for a token (a backend that hangs until told).
    gate: Option<mpsc::Receiver<()>>,
}

impl Transport for Script {
    fn send(&mut self, req: &Request) -> Sent {
        if let Some(g) = &self.gate {
            let _ = g.recv();
        }
        let _ = self.seen.send(req.body.clone());
        self.answers.pop_front().unwrap_or(Sent::Ok)
    }
}

fn req(body: &[u8]) -> Request {
    Request {
        url: "http://test".into(),
        content_type: "application/json",
        headers: vec![],
        body: body.to_vec(),
    }
}

const FAST: Policy = Policy {
    capacity: 3,
    max_bytes: 1 << 20,
    max_attempts: 3,
    backoff_first: Duration::from_millis(1),
    backoff_cap: Duration::from_millis(4),
};

fn pusher(answers: Vec<Sent>, policy: Policy) -> (Pusher, mpsc::Receiver<Vec<u8>>) {
    let (tx, rx) = mpsc::channel();
    let t = Script {
        answers: answers.into(),
        seen: tx,
        gate: None,
    };
    (Pusher::start(Box::new(t), policy, Box::new(|_| {})), rx)
}

fn retry() -> Sent {
    Sent::Retry("connection refused".into())
}

#[test]
fn profiles_are_pushed_in_order() {
    let (p, rx) = pusher(vec![], FAST);
    for b in [b"a", b"b", b"c"] {
        p.push(req(b));
    }
    let s = p.finish(Duration::from_secs(5));
    let seen: Vec<Vec<u8>> = rx.try_iter().collect();
    assert_eq!(seen, vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
    assert_eq!((s.pushed, s.bytes_pushed, s.dropped()), (3, 3, 0));
}

#[test]
fn a_failed_push_is_retried_until_it_goes() {
    let (p, rx) = pusher(vec![retry(), retry()], FAST);
    p.push(req(b"a"));
    let s = p.finish(Duration::from_secs(5));
    assert_eq!(rx.try_iter().count(), 3);
    assert_eq!((s.pushed, s.retries, s.dropped()), (1, 2, 0));
}

#[test]
fn a_profile_failing_every_attempt_is_dropped_and_the_next_goes() {
    // max_attempts is 3: the first profile fails 3 times, the second goes.
    let (p, rx) = pusher(vec![retry(), retry(), retry()], FAST);
    p.push(req(b"a"));
    p.push(req(b"b"));
    let s = p.finish(Duration::from_secs(5));
    let seen: Vec<Vec<u8>> = rx.try_iter().collect();
    assert_eq!(seen.len(), 4);
    assert_eq!(seen[3], b"b");
    assert_eq!((s.pushed, s.retries, s.dropped_after_retries), (1, 2, 1));
    assert_eq!(s.last_error.as_deref(), Some("connection refused"));
}

#[test]
fn a_refused_profile_is_not_retried() {
    let (p, rx) = pusher(vec![Sent::Reject("HTTP 400: bad".into())], FAST);
    p.push(req(b"a"));
    p.push(req(b"b"));
    let s = p.finish(Duration::from_secs(5));
    assert_eq!(rx.try_iter().count(), 2);
    assert_eq!((s.pushed, s.rejected, s.retries), (1, 1, 0));
}

/// A backend that hangs: the queue fills and its oldest go.
#[test]
fn a_full_queue_drops_its_oldest() {
    let (tx, rx) = mpsc::channel();
    let (gate_tx, gate_rx) = mpsc::channel();
    let t = Script {
        answers: VecDeque::new(),
        seen: tx,
        gate: Some(gate_rx),
    };
    let p = Pusher::start(Box::new(t), FAST, Box::new(|_| {}));
    p.push(req(b"0"));
    // Wait until the sender holds "0" (the queue is empty again).
    while p.stats().queued > 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    for b in [b"1", b"2", b"3", b"4", b"5"] {
        p.push(req(b));
    }
    let s = p.stats();
    assert_eq!((s.queued, s.dropped_queue_full), (3, 2));
    for _ in 0..4 {
        gate_tx.send(()).unwrap();
    }
    let s = p.finish(Duration::from_secs(5));
    let seen: Vec<Vec<u8>> = rx.try_iter().collect();
    assert_eq!(
        seen,
        vec![b"0".to_vec(), b"3".to_vec(), b"4".to_vec(), b"5".to_vec()]
    );
    assert_eq!((s.pushed, s.dropped_queue_full), (4, 2));
}

#[test]
fn the_queue_holds_at_most_its_bytes() {
    let policy = Policy {
        max_bytes: 10,
        ..FAST
    };
    let (tx, _rx) = mpsc::channel();
    let (_gate_tx, gate_rx) = mpsc::channel::<()>();
    let t = Script {
        answers: VecDeque::new(),
        seen: tx,
        gate: Some(gate_rx),
    };
    let p = Pusher::start(Box::new(t), policy, Box::new(|_| {}));
    p.push(req(b"held by the sender"));
    while p.stats().queued > 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    p.push(req(b"123456"));
    p.push(req(b"789012"));
    let s = p.stats();
    // The peak is the first profile, queued before the sender took it.
    assert_eq!(
        (s.queued, s.dropped_queue_full, s.queued_bytes_peak),
        (1, 1, 18)
    );
}

#[test]
fn exit_with_the_backend_down_keeps_to_its_grace() {
    let slow = Policy {
        backoff_first: Duration::from_secs(10),
        backoff_cap: Duration::from_secs(10),
        ..FAST
    };
    let (p, _rx) = pusher(vec![retry(); 10], slow);
    p.push(req(b"a"));
    p.push(req(b"b"));
    while p.stats().retries == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let t = Instant::now();
    let s = p.finish(Duration::from_millis(100));
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert_eq!((s.pushed, s.dropped_at_exit), (0, 2));
}

#[test]
fn backoff_doubles_to_its_cap_with_bounded_jitter() {
    let p = Policy::DEFAULT;
    assert_eq!(p.backoff(1, 0), Duration::from_millis(500));
    assert_eq!(p.backoff(2, 0), Duration::from_secs(1));
    assert_eq!(p.backoff(4, 0), Duration::from_secs(4));
    assert_eq!(p.backoff(20, 0), Duration::from_secs(30));
    let j = p.backoff(2, 999);
    assert!(
        j < Duration::from_secs(1) && j >= Duration::from_millis(800),
        "{j:?}"
    );
}
