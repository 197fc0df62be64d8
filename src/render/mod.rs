//! Renderers: each reads a `Report` and nothing else.

pub mod json;
pub mod text;
