//! Errors that decide kerntax's exit status. Anything else exits 1.

use std::fmt;

/// Ends kerntax with `code` and prints `message` as `kerntax: message`.
#[derive(Debug)]
pub struct Exit {
    pub code: i32,
    pub message: String,
}

impl Exit {
    pub fn new(code: i32, message: impl Into<String>) -> Exit {
        Exit {
            code,
            message: message.into(),
        }
    }
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Exit {}

/// The exit status and the one-line message for an error chain.
pub fn describe(err: &anyhow::Error) -> (i32, String) {
    match err.downcast_ref::<Exit>() {
        Some(e) => (e.code, e.message.clone()),
        None => (1, format!("{err:#}")),
    }
}
