//! A map as a recording writes it: a list of entries sorted by their keys'
//! debug text. JSON keys maps by strings only, and a `HashMap`'s order
//! changes from run to run; sorted, one map always writes the same bytes.
//! For `#[serde(with = "entries")]`.

use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::{BuildHasher, Hash};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A map's entries (borrowed or owned) in a stable order: by their keys'
/// debug text (each key has one).
pub fn sorted<K: Debug, V>(entries: impl IntoIterator<Item = (K, V)>) -> Vec<(K, V)> {
    let mut out: Vec<(String, (K, V))> = entries
        .into_iter()
        .map(|e| (format!("{:?}", e.0), e))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out.into_iter().map(|(_, e)| e).collect()
}

pub fn serialize<K, V, H, S>(map: &HashMap<K, V, H>, s: S) -> Result<S::Ok, S::Error>
where
    K: Serialize + Debug,
    V: Serialize,
    S: Serializer,
{
    sorted(map).serialize(s)
}

pub fn deserialize<'de, K, V, H, D>(d: D) -> Result<HashMap<K, V, H>, D::Error>
where
    K: Deserialize<'de> + Eq + Hash,
    H: BuildHasher + Default,
    V: Deserialize<'de>,
    D: Deserializer<'de>,
{
    let entries: Vec<(K, V)> = Vec::deserialize(d)?;
    let n = entries.len();
    let map: HashMap<K, V, H> = entries.into_iter().collect();
    if map.len() != n {
        return Err(serde::de::Error::custom("a map holds one key twice"));
    }
    Ok(map)
}
