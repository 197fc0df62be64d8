//! `kerntax top`: a live view of why each thread of a target is not
//! running, refreshed every window, with the findings that hold over it.
pub mod live;
pub mod plain;
pub mod run;
pub mod screen;
pub mod snapshot;
pub mod view;
pub mod window;

#[cfg(test)]
mod fixture;
