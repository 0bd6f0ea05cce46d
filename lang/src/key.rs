//! Keys of table rows: an integer, a string, or a tuple of them (composite keys).
//!
//! Every key is compared as a sequence of parts, part by part, an integer before any string and a
//! shorter tuple before a longer one it is a prefix of. So `(w, d)` sorts before every `(w, d, o)`,
//! which is what makes prefix scans work: the rows of `(w, d)` are the keys in
//! `[(w, d), (w, d + 1))`. Keys of up to four integers are stored inline: no allocation on the
//! hot path of integer keys (RHAI.md: composite keys as arrays are costly).

use std::cmp::Ordering;
use std::sync::Arc;

use rhai::{Dynamic, ImmutableString};

/// Most integer parts kept inline, without an allocation.
const INLINE_INTS_MAX: usize = 4;

/// One part of a key.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KeyPart {
    Int(i64),
    Str(ImmutableString),
}

/// Fills the unused parts of an inline key. With it, comparing two inline keys is comparing
/// their four slots in order and then their lengths: a missing part sorts before every real
/// part, and where a real part equals the filler the lengths still decide.
const UNUSED: i64 = i64::MIN;

/// A row's key. Construct with [`Key::from_parts`] so that equal keys have equal representations.
#[derive(Clone, Debug)]
pub enum Key {
    /// One to four integer parts; `len` says how many of `ints` are used, the rest are `UNUSED`.
    Ints {
        len: u8,
        ints: [i64; INLINE_INTS_MAX],
    },
    /// Anything else: strings, or more than four parts.
    Parts(Arc<[KeyPart]>),
}

impl Key {
    pub fn int(value: i64) -> Key {
        Key::Ints {
            len: 1,
            ints: [value, UNUSED, UNUSED, UNUSED],
        }
    }

    /// The key of one to four integer parts, without an allocation.
    pub fn ints(parts: &[i64]) -> Key {
        assert!(
            (1..=INLINE_INTS_MAX).contains(&parts.len()),
            "1 to 4 parts inline"
        );
        let mut ints = [UNUSED; INLINE_INTS_MAX];
        ints[..parts.len()].copy_from_slice(parts);
        Key::Ints {
            len: parts.len() as u8,
            ints,
        }
    }

    /// The canonical key for `parts` (inline when they are few integers).
    pub fn from_parts(parts: Vec<KeyPart>) -> Key {
        if !parts.is_empty()
            && parts.len() <= INLINE_INTS_MAX
            && parts.iter().all(|p| matches!(p, KeyPart::Int(_)))
        {
            let mut ints = [UNUSED; INLINE_INTS_MAX];
            for (slot, part) in ints.iter_mut().zip(&parts) {
                if let KeyPart::Int(i) = part {
                    *slot = *i;
                }
            }
            return Key::Ints {
                len: parts.len() as u8,
                ints,
            };
        }
        Key::Parts(parts.into())
    }

    pub fn len(&self) -> usize {
        match self {
            Key::Ints { len, .. } => *len as usize,
            Key::Parts(parts) => parts.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The part at `index` (which must be `< len()`), borrowed where possible.
    fn part(&self, index: usize) -> PartRef<'_> {
        match self {
            Key::Ints { ints, .. } => PartRef::Int(ints[index]),
            Key::Parts(parts) => match &parts[index] {
                KeyPart::Int(i) => PartRef::Int(*i),
                KeyPart::Str(s) => PartRef::Str(s.as_str()),
            },
        }
    }

    pub fn parts(&self) -> Vec<KeyPart> {
        (0..self.len())
            .map(|i| match self {
                Key::Ints { ints, .. } => KeyPart::Int(ints[i]),
                Key::Parts(parts) => parts[i].clone(),
            })
            .collect()
    }

    /// The key as a script sees it: an integer or string for a one-part key, else an array.
    pub fn to_dynamic(&self) -> Dynamic {
        let part = |p: KeyPart| match p {
            KeyPart::Int(i) => Dynamic::from_int(i),
            KeyPart::Str(s) => Dynamic::from(s),
        };
        let mut parts = self.parts();
        if parts.len() == 1 {
            return part(parts.pop().expect("one part"));
        }
        Dynamic::from_array(parts.into_iter().map(part).collect())
    }

    /// The key as JSON: a number or string for one part, else an array.
    pub fn to_json(&self) -> serde_json::Value {
        let part = |p: KeyPart| match p {
            KeyPart::Int(i) => serde_json::Value::from(i),
            KeyPart::Str(s) => serde_json::Value::from(s.as_str()),
        };
        let mut parts = self.parts();
        if parts.len() == 1 {
            return part(parts.pop().expect("one part"));
        }
        serde_json::Value::Array(parts.into_iter().map(part).collect())
    }
}

#[derive(PartialEq, Eq, PartialOrd, Ord)]
enum PartRef<'a> {
    Int(i64),
    Str(&'a str),
}

impl Ord for Key {
    fn cmp(&self, other: &Self) -> Ordering {
        if let (
            Key::Ints {
                len: a_len,
                ints: a,
            },
            Key::Ints {
                len: b_len,
                ints: b,
            },
        ) = (self, other)
        {
            return a.cmp(b).then(a_len.cmp(b_len));
        }
        // The common case of string keys, without going through `part`: a third of the
        // scoreboard handler's comparisons' cost was that indirection.
        if let (Key::Parts(a), Key::Parts(b)) = (self, other) {
            for (x, y) in a.iter().zip(b.iter()) {
                let order = match (x, y) {
                    (KeyPart::Str(x), KeyPart::Str(y)) => x.as_str().cmp(y.as_str()),
                    (KeyPart::Int(x), KeyPart::Int(y)) => x.cmp(y),
                    (KeyPart::Int(_), KeyPart::Str(_)) => Ordering::Less,
                    (KeyPart::Str(_), KeyPart::Int(_)) => Ordering::Greater,
                };
                if order != Ordering::Equal {
                    return order;
                }
            }
            return a.len().cmp(&b.len());
        }
        let common = self.len().min(other.len());
        for i in 0..common {
            match self.part(i).cmp(&other.part(i)) {
                Ordering::Equal => {}
                unequal => return unequal,
            }
        }
        self.len().cmp(&other.len())
    }
}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Key {}

/// Why a script value cannot be a key part.
pub fn key_part(value: &Dynamic) -> Result<KeyPart, String> {
    if let Some(i) = value.clone().try_cast::<i64>() {
        return Ok(KeyPart::Int(i));
    }
    if let Some(s) = value.read_lock::<ImmutableString>() {
        return Ok(KeyPart::Str(s.clone()));
    }
    Err(format!(
        "a key part must be an integer or a string, not {}",
        value.type_name()
    ))
}

/// A key from a script value: an integer, a string, or an array of them.
pub fn key_from_dynamic(value: &Dynamic) -> Result<Key, String> {
    if let Ok(i) = value.as_int() {
        return Ok(Key::int(i));
    }
    if let Some(array) = value.read_lock::<rhai::Array>() {
        if array.is_empty() {
            return Err("a key must have at least one part".into());
        }
        let parts = array.iter().map(key_part).collect::<Result<Vec<_>, _>>()?;
        return Ok(Key::from_parts(parts));
    }
    Ok(Key::from_parts(vec![key_part(value)?]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(parts: &[KeyPart]) -> Key {
        Key::from_parts(parts.to_vec())
    }

    #[test]
    fn keys_order_as_part_sequences_across_representations() {
        use KeyPart::{Int, Str};
        let s = |x: &str| Str(x.into());
        let ordered = [
            k(&[Int(-5)]),
            k(&[Int(1)]),
            k(&[Int(1), Int(-1)]),
            k(&[Int(1), Int(2)]),
            k(&[Int(1), Int(2), Int(0), Int(0), Int(0)]),
            k(&[Int(1), s("a")]),
            k(&[Int(2)]),
            k(&[s("a")]),
            k(&[s("a"), Int(1)]),
            k(&[s("a"), s("")]),
            k(&[s("ab")]),
            k(&[s("ab"), s("c")]),
            k(&[s("b")]),
        ];
        for (i, a) in ordered.iter().enumerate() {
            for (j, b) in ordered.iter().enumerate() {
                assert_eq!(a.cmp(b), i.cmp(&j), "{a:?} vs {b:?}");
            }
        }
    }
}
