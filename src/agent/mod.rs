//! `kerntax agent`: continuous profiling for a fleet. It keeps profiling a
//! process and every interval pushes one profile of the window, with all
//! of kerntax's sample types (on-CPU, syscalls and their time by call
//! site, lock contentions and delay with the waiters' stacks, off-CPU
//! time), to Parca or Grafana Pyroscope, labelled as a fleet needs; the
//! window's findings go along and to the local log.
//!
//! Pipeline: the session's watcher (`run`) reads a window as `kerntax top`
//! does (`top::live::Windows`), `render::pprof` makes the profile within the
//! backends' limits, `labels` names its series, `backend` picks the backend and
//! `wire` wraps it in that backend's request, and `queue` posts it from its own thread over `http`.

pub mod backend;
mod base64;
pub mod http;
pub mod labels;
pub mod queue;
pub mod run;
mod wire;
