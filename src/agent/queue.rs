//! The push queue: profiling never waits for the backend. Each window's
//! request is queued and a sender thread posts them in order, as the
//! established agents do (Alloy's pyroscope.write, parca-agent): a bounded
//! queue that drops its oldest profile when full, retries with exponential
//! backoff and a cap on attempts, every drop counted by why, and at exit a
//! short grace to send what is queued. Memory is bounded by the queue's
//! size in profiles and bytes, however long the backend is down.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::backend::Request;

/// What one attempt to post a request came to.
#[derive(Clone, Debug, PartialEq)]
pub enum Sent {
    Ok,
    /// The backend is down, slow or overloaded (no answer, 408, 429,
    /// 5xx): worth another try.
    Retry(String),
    /// The backend refused the profile: another try would be refused too.
    Reject(String),
}

/// Posts requests (HTTP, or a test's script).
pub trait Transport: Send {
    fn send(&mut self, req: &Request) -> Sent;
}

/// How the queue holds and retries.
#[derive(Clone, Copy, Debug)]
pub struct Policy {
    /// Profiles held at most (the oldest goes first).
    pub capacity: usize,
    /// Bytes held at most, of request bodies.
    pub max_bytes: usize,
    /// Attempts per profile, the first included.
    pub max_attempts: u32,
    /// The wait after the first failure; it doubles each time...
    pub backoff_first: Duration,
    /// ...up to this.
    pub backoff_cap: Duration,
}

impl Policy {
    /// Four profiles (40 s of the default 10 s windows) and at most 64 MiB;
    /// five attempts 0.5, 1, 2, 4 s apart (Alloy: 500 ms first, 10 tries).
    pub const DEFAULT: Policy = Policy {
        capacity: 4,
        max_bytes: 64 << 20,
        max_attempts: 5,
        backoff_first: Duration::from_millis(500),
        backoff_cap: Duration::from_secs(30),
    };

    /// The wait before attempt `attempt + 1` (1-based `attempt` failed),
    /// with up to 20% jitter from `seed`, so that many hosts do not retry in
    /// step.
    pub fn backoff(&self, attempt: u32, seed: u64) -> Duration {
        let doubling = 1u32 << attempt.saturating_sub(1).min(16);
        let base = self
            .backoff_first
            .saturating_mul(doubling)
            .min(self.backoff_cap);
        let jitter = (seed % 1000) as f64 / 1000.0 * 0.2;
        base.mul_f64(1.0 - jitter)
    }
}

/// What the queue did, for the agent's lines and its summary.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PushStats {
    pub pushed: u64,
    pub bytes_pushed: u64,
    /// Attempts after a first failure.
    pub retries: u64,
    /// Oldest profiles dropped for a newer one (the queue full).
    pub dropped_queue_full: u64,
    /// Profiles that failed every attempt.
    pub dropped_after_retries: u64,
    /// Profiles the backend refused.
    pub rejected: u64,
    /// Profiles still queued when the grace at exit ran out.
    pub dropped_at_exit: u64,
    /// Profiles waiting now.
    pub queued: u64,
    /// The largest bytes held at once.
    pub queued_bytes_peak: u64,
    pub last_error: Option<String>,
}

impl PushStats {
    pub fn dropped(&self) -> u64 {
        self.dropped_queue_full + self.dropped_after_retries + self.rejected + self.dropped_at_exit
    }
}

struct State {
    queue: VecDeque<Request>,
    queued_bytes: usize,
    stats: PushStats,
    /// Set by `finish`: send until then, then stop.
    deadline: Option<Instant>,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The queue and its sender thread.
pub struct Pusher {
    shared: Arc<Shared>,
    policy: Policy,
    thread: Option<JoinHandle<()>>,
}

impl Pusher {
    /// Starts the sender; `log` gets a line when pushing fails and when it
    /// works again (not one per failure).
    pub fn start(
        transport: Box<dyn Transport>,
        policy: Policy,
        log: Box<dyn Fn(&str) + Send>,
    ) -> Pusher {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                queued_bytes: 0,
                stats: PushStats::default(),
                deadline: None,
            }),
            wake: Condvar::new(),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("kerntax-push".into())
            .spawn(move || send_loop(&s, transport, policy, log))
            .ok();
        Pusher {
            shared,
            policy,
            thread,
        }
    }

    /// Queues `req`, dropping the oldest profiles if it would not fit.
    pub fn push(&self, req: Request) {
        let mut st = self.shared.lock();
        while !st.queue.is_empty()
            && (st.queue.len() >= self.policy.capacity
                || st.queued_bytes + req.body.len() > self.policy.max_bytes)
        {
            let old = st.queue.pop_front().expect("not empty");
            st.queued_bytes -= old.body.len();
            st.stats.dropped_queue_full += 1;
        }
        st.queued_bytes += req.body.len();
        st.queue.push_back(req);
        st.stats.queued_bytes_peak = st.stats.queued_bytes_peak.max(st.queued_bytes as u64);
        self.shared.wake.notify_all();
    }

    pub fn stats(&self) -> PushStats {
        let st = self.shared.lock();
        PushStats {
            queued: st.queue.len() as u64,
            ..st.stats.clone()
        }
    }

    /// Sends what is queued for at most `grace`, then stops; what is left
    /// is counted dropped. Returns within about `grace` even if a request
    /// hangs (its thread is left to its own timeout).
    pub fn finish(mut self, grace: Duration) -> PushStats {
        let deadline = Instant::now() + grace;
        self.shared.lock().deadline = Some(deadline);
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            while !t.is_finished() && Instant::now() < deadline + Duration::from_millis(200) {
                std::thread::sleep(Duration::from_millis(10));
            }
            if t.is_finished() {
                let _ = t.join();
            }
        }
        let mut st = self.shared.lock();
        let left = st.queue.len() as u64;
        st.queue.clear();
        st.queued_bytes = 0;
        st.stats.dropped_at_exit += left;
        st.stats.clone()
    }
}

impl Drop for Pusher {
    /// Stops the sender at once if `finish` was not called.
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.shared.lock().deadline = Some(Instant::now());
            self.shared.wake.notify_all();
        }
    }
}

fn seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| {
            u64::from(d.subsec_nanos()) ^ u64::from(std::process::id())
        })
}

fn send_loop(
    shared: &Shared,
    mut transport: Box<dyn Transport>,
    policy: Policy,
    log: Box<dyn Fn(&str) + Send>,
) {
    let mut failing_since: Option<Instant> = None;
    loop {
        let req = {
            let mut st = shared.lock();
            loop {
                if st.deadline.is_some_and(|d| Instant::now() >= d) {
                    return;
                }
                if let Some(r) = st.queue.pop_front() {
                    st.queued_bytes -= r.body.len();
                    break r;
                }
                if st.deadline.is_some() {
                    return;
                }
                st = shared.wake.wait(st).unwrap_or_else(|e| e.into_inner());
            }
        };
        let mut attempt = 0;
        loop {
            attempt += 1;
            let sent = transport.send(&req);
            let mut st = shared.lock();
            match sent {
                Sent::Ok => {
                    st.stats.pushed += 1;
                    st.stats.bytes_pushed += req.body.len() as u64;
                    if let Some(since) = failing_since.take() {
                        log(&format!(
                            "pushing to {} again (it failed for {:.0} s)",
                            req.url,
                            since.elapsed().as_secs_f64()
                        ));
                    }
                    break;
                }
                Sent::Reject(e) => {
                    st.stats.rejected += 1;
                    if st.stats.last_error.as_ref() != Some(&e) {
                        log(&format!("{} refused a profile: {e}", req.url));
                    }
                    st.stats.last_error = Some(e);
                    break;
                }
                Sent::Retry(e) => {
                    if failing_since.is_none() {
                        failing_since = Some(Instant::now());
                        log(&format!(
                            "pushing to {} failed: {e}; retrying, and profiling goes on",
                            req.url
                        ));
                    }
                    st.stats.last_error = Some(e);
                    if attempt >= policy.max_attempts {
                        st.stats.dropped_after_retries += 1;
                        break;
                    }
                    st.stats.retries += 1;
                    let wait = policy.backoff(attempt, seed());
                    let until = Instant::now() + wait;
                    // Sleep out the backoff, unless `finish` ends it first.
                    while Instant::now() < until {
                        if st.deadline.is_some_and(|d| Instant::now() >= d) {
                            st.stats.dropped_at_exit += 1;
                            return;
                        }
                        let left = until.saturating_duration_since(Instant::now());
                        let left = st.deadline.map_or(left, |d| {
                            left.min(d.saturating_duration_since(Instant::now()))
                        });
                        st = shared
                            .wake
                            .wait_timeout(st, left)
                            .unwrap_or_else(|e| e.into_inner())
                            .0;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "queue_tests.rs"]
mod tests;
