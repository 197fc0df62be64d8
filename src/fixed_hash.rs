//! Hash maps and sets whose order of iteration is the same in every
//! process: std's default hasher is seeded at random per process, so a
//! float summed over a map's entries came out differently in its last bits
//! from run to run, and a recording analysed twice (the live run, then
//! `kerntax report FILE`) gave two JSON files. The analysis, its input
//! (`SampleTally`, `recording::Named`) and nothing else use these: none of
//! their keys come from anyone who could pick them to collide.

use std::hash::{BuildHasherDefault, DefaultHasher};

/// SipHash with fixed keys.
pub type Fixed = BuildHasherDefault<DefaultHasher>;
pub type HashMap<K, V> = std::collections::HashMap<K, V, Fixed>;
pub type HashSet<T> = std::collections::HashSet<T, Fixed>;
