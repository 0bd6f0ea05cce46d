//! Keys of table rows: an integer, a string, or a tuple of them (composite keys).
//!
//! Every key is compared as a sequence of parts, part by part, an integer before any string and a
//! shorter tuple before a longer one it is a prefix of. So `(w, d)` sorts before every `(w, d, o)`,
//! which is what makes prefix scans work: the rows of `(w, d)` are the keys in
//! `[(w, d), (w, d + 1))`.
//!
//! A key is kept as an order-preserving encoding of its parts: comparing two keys is comparing
//! their bytes, and a key of a few small integers, or a short name and a number, fits inline in
//! the 24 bytes of a `Key` (23 of them encoding), without an allocation (the typical TPC-C key, four small integers, takes 9 or 10). The encoding, part by
//! part:
//!
//! - an integer: a code byte that orders by sign and by the number of significant bytes `n`
//!   (`0x18 + n` for `v >= 0`, `0x17 - n` for `v < 0`), then those `n` bytes big-endian (for a
//!   negative `v`, the low `n` bytes of its two's complement, whose higher bytes are all ones).
//!   So 0 is `18`, 1 is `19 01`, -1 is `17`, 300 is `1A 01 2C`; the codes run from `0x0F`
//!   (`i64::MIN`) to `0x20` (`i64::MAX`).
//! - a string: `0x30`, its UTF-8 bytes with each `00` written `00 FF`, then `00`.
//!
//! Every part starts with a non-zero code, and a string's terminator `00` sorts before its
//! escaped `00 FF` and before any code: so bytewise order is the order of part sequences, and a
//! key that is a prefix of another sorts first. Inline keys are zero-padded, which compares the
//! same (a padding byte meets a non-zero code, or `FF`, where the longer key goes on).

use std::borrow::Cow;
use std::cmp::Ordering;
use std::sync::Arc;

use rhai::{Dynamic, ImmutableString};

/// Bytes of encoding kept inline; longer keys are shared on the heap.
const INLINE: usize = 23;

const STR: u8 = 0x30;
const INT_ZERO: u8 = 0x18;
const INT_MIN_CODE: u8 = INT_ZERO - 9;
const INT_MAX_CODE: u8 = INT_ZERO + 8;

/// The most parts a table's key has: the table API takes a key as 1 to 4 arguments.
pub const KEY_PARTS_MAX: usize = 4;

/// One part of a key.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KeyPart {
    Int(i64),
    Str(ImmutableString),
}

/// A part as decoded from a key, borrowing its string when it holds no `00` byte.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PartRef<'a> {
    Int(i64),
    Str(Cow<'a, str>),
}

/// A row's key: the order-preserving encoding of its parts (see the module doc).
///
/// Invariant: the bytes are a valid encoding of one or more parts. Inline (`tag <= INLINE`),
/// `tag` is their length and the bytes after it are zero (so equal keys have equal
/// representations, and inline keys compare by their whole arrays). On the heap
/// (`tag == HEAP`), `bytes` holds the pointer and length of an `Arc<[u8]>` this key owns one
/// count of. Alignment 1 and 24 bytes: a map entry of a key and a row pointer is 32.
pub struct Key {
    bytes: [u8; INLINE],
    tag: u8,
}

const HEAP: u8 = 0xFF;

enum Repr<'a> {
    Inline(&'a [u8; INLINE]),
    Heap(&'a [u8]),
}

impl Key {
    fn inline(bytes: [u8; INLINE], len: usize) -> Key {
        debug_assert!(len <= INLINE && bytes[len..].iter().all(|&b| b == 0));
        Key {
            bytes,
            tag: len as u8,
        }
    }

    fn heap(shared: Arc<[u8]>) -> Key {
        let raw = Arc::into_raw(shared);
        let mut bytes = [0u8; INLINE];
        bytes[..8].copy_from_slice(&(raw as *const u8 as usize as u64).to_ne_bytes());
        bytes[8..16].copy_from_slice(&(raw.len() as u64).to_ne_bytes());
        Key { bytes, tag: HEAP }
    }

    fn heap_raw(&self) -> *const [u8] {
        let word = |at: usize| u64::from_ne_bytes(self.bytes[at..at + 8].try_into().expect("8"));
        std::ptr::slice_from_raw_parts(word(0) as usize as *const u8, word(8) as usize)
    }

    fn repr(&self) -> Repr<'_> {
        if self.tag == HEAP {
            // SAFETY: a heap key owns a count of the `Arc<[u8]>` at `heap_raw` (the invariant).
            Repr::Heap(unsafe { &*self.heap_raw() })
        } else {
            Repr::Inline(&self.bytes)
        }
    }
}

impl Clone for Key {
    fn clone(&self) -> Key {
        if self.tag == HEAP {
            // SAFETY: as in `repr`; the new key owns the count added here.
            unsafe { Arc::increment_strong_count(self.heap_raw()) };
        }
        Key {
            bytes: self.bytes,
            tag: self.tag,
        }
    }
}

impl Drop for Key {
    fn drop(&mut self) {
        if self.tag == HEAP {
            // SAFETY: as in `repr`; this key's count is given back once.
            drop(unsafe { Arc::from_raw(self.heap_raw()) });
        }
    }
}

const _: () = assert!(std::mem::size_of::<Key>() == 24);

/// Encodes parts into a stack buffer, spilling to the heap for long keys.
struct Encoder {
    stack: [u8; 64],
    len: usize,
    heap: Vec<u8>,
}

impl Encoder {
    fn new() -> Encoder {
        Encoder {
            stack: [0; 64],
            len: 0,
            heap: Vec::new(),
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        if self.heap.is_empty() && self.len + bytes.len() <= self.stack.len() {
            self.stack[self.len..self.len + bytes.len()].copy_from_slice(bytes);
            self.len += bytes.len();
            return;
        }
        if self.heap.is_empty() {
            self.heap.extend_from_slice(&self.stack[..self.len]);
        }
        self.heap.extend_from_slice(bytes);
    }

    fn int(&mut self, v: i64) {
        let mut buf = [0u8; 9];
        let n = encode_int(&mut buf, v);
        self.push(&buf[..n]);
    }

    fn str(&mut self, s: &str) {
        self.push(&[STR]);
        let mut rest = s.as_bytes();
        while let Some(at) = rest.iter().position(|&b| b == 0) {
            self.push(&rest[..at]);
            self.push(&[0x00, 0xFF]);
            rest = &rest[at + 1..];
        }
        self.push(rest);
        self.push(&[0x00]);
    }

    fn part(&mut self, part: &KeyPart) {
        match part {
            KeyPart::Int(i) => self.int(*i),
            KeyPart::Str(s) => self.str(s),
        }
    }

    fn finish(self) -> Key {
        if !self.heap.is_empty() {
            return Key::heap(self.heap.into());
        }
        Key::from_encoded(&self.stack[..self.len])
    }
}

/// Builds a key a part at a time, without collecting the parts first: for decoders of keys
/// (records, checkpoint images), which would otherwise allocate each string part and the list.
pub struct KeyBuilder {
    encoder: Encoder,
    parts: usize,
}

impl Default for KeyBuilder {
    fn default() -> Self {
        KeyBuilder::new()
    }
}

impl KeyBuilder {
    pub fn new() -> KeyBuilder {
        KeyBuilder {
            encoder: Encoder::new(),
            parts: 0,
        }
    }

    pub fn int(&mut self, value: i64) {
        self.encoder.int(value);
        self.parts += 1;
    }

    pub fn str(&mut self, value: &str) {
        self.encoder.str(value);
        self.parts += 1;
    }

    /// Appends part `i` of `key` as it is encoded, without decoding it: false (nothing
    /// appended) when the key has no such part.
    pub(crate) fn part_of(&mut self, key: &Key, i: usize) -> bool {
        let mut rest = key.as_bytes();
        for _ in 0..i {
            if rest.is_empty() {
                return false;
            }
            rest = &rest[part_len(rest)..];
        }
        if rest.is_empty() {
            return false;
        }
        self.encoder.push(&rest[..part_len(rest)]);
        self.parts += 1;
        true
    }

    /// The parts given, then every part of `tail`: the same key as [`Key::from_parts_then`].
    pub(crate) fn finish_then(mut self, tail: &Key) -> Key {
        self.encoder.push(tail.as_bytes());
        self.parts += 1;
        self.finish()
    }

    /// The key of the parts given, in order: the same key as [`Key::from_parts`] of them.
    pub fn finish(self) -> Key {
        assert!(self.parts > 0, "a key has at least one part");
        self.encoder.finish()
    }
}

/// Writes the encoding of `v` at the start of `out`, zeros after it; returns its length (1 to 9).
/// Fixed-size stores only: the bytes after the code are the value's, left-aligned in a word.
#[inline]
fn encode_int(out: &mut [u8; 9], v: i64) -> usize {
    let (code, n) = if v >= 0 {
        let n = 8 - (v as u64).leading_zeros() as usize / 8;
        (INT_ZERO + n as u8, n)
    } else {
        let n = 8 - (!(v as u64)).leading_zeros() as usize / 8;
        (INT_ZERO - 1 - n as u8, n)
    };
    // The value's low `n` bytes at the top of the word, zeros below (none when `n` is 0).
    let word = (v as u64).checked_shl(8 * (8 - n) as u32).unwrap_or(0);
    out[0] = code;
    out[1..9].copy_from_slice(&word.to_be_bytes());
    1 + n
}

/// A part as its encoding holds it: an integer, or a string's UTF-8 bytes (borrowed when they
/// hold no `00`, which the encoding escapes). For writers of the part's bytes, who need not
/// check them as text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PartBytes<'a> {
    Int(i64),
    Str(Cow<'a, [u8]>),
}

impl<'a> From<PartBytes<'a>> for PartRef<'a> {
    /// The part as text. A key's string parts were encoded from strings: they are UTF-8.
    fn from(part: PartBytes<'a>) -> PartRef<'a> {
        match part {
            PartBytes::Int(i) => PartRef::Int(i),
            PartBytes::Str(Cow::Borrowed(raw)) => PartRef::Str(Cow::Borrowed(
                std::str::from_utf8(raw).expect("a key's string part is UTF-8"),
            )),
            PartBytes::Str(Cow::Owned(raw)) => PartRef::Str(Cow::Owned(
                String::from_utf8(raw).expect("a key's string part is UTF-8"),
            )),
        }
    }
}

/// Whether `bytes` holds a `00`, eight bytes at a time: a key's text is short, and `memchr`'s
/// setup cost more than this scan.
fn has_zero(bytes: &[u8]) -> bool {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        let v = u64::from_ne_bytes(word.try_into().expect("8 bytes"));
        // Exact as a yes or no: only a zero byte, or a borrow out of one, sets a high bit here.
        if v.wrapping_sub(ONES) & !v & HIGHS != 0 {
            return true;
        }
    }
    words.remainder().contains(&0)
}

/// The encoded length of the part at the start of `bytes`, which must start with a valid part.
fn part_len(bytes: &[u8]) -> usize {
    let code = bytes[0];
    if code == STR {
        // The terminator is the first `00` not followed by `FF` (an escaped `00`).
        let mut at = 1;
        loop {
            match bytes[at..].iter().position(|&b| b == 0) {
                Some(zero) if bytes.get(at + zero + 1) == Some(&0xFF) => at += zero + 2,
                Some(zero) => return at + zero + 1,
                None => unreachable!("a key's string part is terminated"),
            }
        }
    }
    let n = if code >= INT_ZERO {
        code - INT_ZERO
    } else {
        INT_ZERO - 1 - code
    };
    1 + n as usize
}

/// The part at the start of `bytes` and its encoded length. `bytes` must start with a valid part.
fn decode_part_bytes(bytes: &[u8]) -> (PartBytes<'_>, usize) {
    let len = part_len(bytes);
    let code = bytes[0];
    if code == STR {
        let raw = &bytes[1..len - 1];
        // Every `00` inside a string part is escaped as `00 FF`.
        let text = if has_zero(raw) {
            let mut out = Vec::with_capacity(raw.len());
            let mut i = 0;
            while i < raw.len() {
                out.push(raw[i]);
                i += if raw[i] == 0 { 2 } else { 1 };
            }
            Cow::Owned(out)
        } else {
            Cow::Borrowed(raw)
        };
        return (PartBytes::Str(text), len);
    }
    debug_assert!(
        (INT_MIN_CODE..=INT_MAX_CODE).contains(&code),
        "code {code:#x}"
    );
    // Big-endian, sign-extended from the code: a byte at a time, as a part has at most eight
    // (a copy into a word would call `memcpy` for every part).
    let fill = if code < INT_ZERO { u64::MAX } else { 0 };
    let value = bytes[1..len]
        .iter()
        .fold(fill, |value, &b| value << 8 | u64::from(b));
    (PartBytes::Int(value as i64), len)
}

impl Key {
    pub(crate) fn from_encoded(bytes: &[u8]) -> Key {
        if bytes.len() <= INLINE {
            let mut inline = [0u8; INLINE];
            inline[..bytes.len()].copy_from_slice(bytes);
            return Key::inline(inline, bytes.len());
        }
        Key::heap(bytes.into())
    }

    /// The key whose encoding (see the module doc) is `bytes`, as a record carries it: an
    /// error, not a key, for bytes that are not exactly what encoding some parts gives (a
    /// truncated part, an unknown code, a string that is not UTF-8, an integer or escape not
    /// written the one way the encoder writes it), since a key must compare as its parts do.
    pub fn from_checked_encoding(bytes: &[u8]) -> Result<Key, String> {
        let bad = |why: &str| Err(format!("bad key bytes ({why})"));
        if bytes.is_empty() {
            return bad("empty");
        }
        let mut key = KeyBuilder::new();
        let mut at = 0;
        while at < bytes.len() {
            let code = bytes[at];
            if code == STR {
                let mut text = Vec::new();
                let mut i = at + 1;
                loop {
                    match bytes.get(i) {
                        None => return bad("a string part without its end"),
                        Some(0) if bytes.get(i + 1) == Some(&0xFF) => {
                            text.push(0);
                            i += 2;
                        }
                        Some(0) => break,
                        Some(&b) => {
                            text.push(b);
                            i += 1;
                        }
                    }
                }
                match std::str::from_utf8(&text) {
                    Ok(text) => key.str(text),
                    Err(_) => return bad("a string part that is not UTF-8"),
                }
                at = i + 1;
            } else if (INT_MIN_CODE..=INT_MAX_CODE).contains(&code) {
                let len = part_len(&bytes[at..]);
                if at + len > bytes.len() {
                    return bad("an integer part cut short");
                }
                let (PartBytes::Int(value), _) = decode_part_bytes(&bytes[at..at + len]) else {
                    unreachable!("an integer code")
                };
                key.int(value);
                at += len;
            } else {
                return bad("an unknown part code");
            }
        }
        let key = key.finish();
        if key.as_bytes() != bytes {
            return bad("not the one encoding of its parts");
        }
        Ok(key)
    }

    pub fn int(value: i64) -> Key {
        let mut bytes = [0u8; INLINE];
        let n = encode_int((&mut bytes[..9]).try_into().expect("9 bytes"), value);
        Key::inline(bytes, n)
    }

    /// The key of one string part.
    pub fn string(value: &str) -> Key {
        let bytes = value.as_bytes();
        // Inline and without a `00` to escape (most string keys): the code, the bytes, and the
        // terminator `00`, which the zero padding already holds.
        if bytes.len() + 2 <= INLINE && !has_zero(bytes) {
            let mut inline = [0u8; INLINE];
            inline[0] = STR;
            inline[1..1 + bytes.len()].copy_from_slice(bytes);
            return Key::inline(inline, bytes.len() + 2);
        }
        let mut encoder = Encoder::new();
        encoder.str(value);
        encoder.finish()
    }

    /// The key of integer parts (at least one).
    pub fn ints(parts: &[i64]) -> Key {
        assert!(!parts.is_empty(), "a key has at least one part");
        let mut bytes = [0u8; INLINE + 9];
        let mut len = 0;
        for &part in parts {
            // Written whole where it goes (zeros after it), counted only if it fits.
            let at: &mut [u8; 9] = (&mut bytes[len..len + 9]).try_into().expect("9 bytes");
            let n = encode_int(at, part);
            if len + n > INLINE {
                let mut encoder = Encoder::new();
                parts.iter().for_each(|&p| encoder.int(p));
                return encoder.finish();
            }
            len += n;
        }
        let mut inline = [0u8; INLINE];
        inline.copy_from_slice(&bytes[..INLINE]);
        Key::inline(inline, len)
    }

    /// The key of `parts` (at least one).
    pub fn from_parts(parts: Vec<KeyPart>) -> Key {
        Key::from_part_slice(&parts)
    }

    pub fn from_part_slice(parts: &[KeyPart]) -> Key {
        assert!(!parts.is_empty(), "a key has at least one part");
        let mut encoder = Encoder::new();
        parts.iter().for_each(|p| encoder.part(p));
        encoder.finish()
    }

    /// The key of `parts` followed by the parts of `tail` (an index entry's key: the indexed
    /// values, then the row's key), without decoding `tail`.
    pub(crate) fn from_parts_then(parts: &[KeyPart], tail: &Key) -> Key {
        let mut encoder = Encoder::new();
        parts.iter().for_each(|p| encoder.part(p));
        encoder.push(tail.as_bytes());
        encoder.finish()
    }

    /// The key of the parts after the first `n` (a non-unique index entry's row key, after
    /// its `n` indexed values).
    pub(crate) fn without_parts(&self, n: usize) -> Key {
        let mut rest = self.as_bytes();
        for _ in 0..n {
            rest = &rest[part_len(rest)..];
        }
        Key::from_encoded(rest)
    }

    /// The order-preserving encoding (see the module doc).
    pub fn as_bytes(&self) -> &[u8] {
        match self.repr() {
            Repr::Inline(bytes) => &bytes[..self.tag as usize],
            Repr::Heap(bytes) => bytes,
        }
    }

    /// The bytes of a key that is one string part without a `00` byte (most string keys), as
    /// they are stored: such a part has no escape, so its bytes are the text's.
    /// The parts of a key of integers alone, at most [`KEY_PARTS_MAX`] of them, decoded from
    /// its bytes in one pass (`None` for any other key): what a record writes for most keys.
    pub fn int_parts(&self) -> Option<([i64; KEY_PARTS_MAX], usize)> {
        let Repr::Inline(bytes) = self.repr() else {
            return None;
        };
        // The bytes with room after them, so that each part's value is one word's load.
        let mut padded = [0u8; INLINE + 9];
        padded[..INLINE].copy_from_slice(bytes);
        let end = self.tag as usize;
        let (mut parts, mut n, mut at) = ([0i64; KEY_PARTS_MAX], 0, 0);
        while at < end {
            let code = padded[at];
            if n == KEY_PARTS_MAX || !(INT_MIN_CODE..=INT_MAX_CODE).contains(&code) {
                return None;
            }
            let (len, fill) = if code >= INT_ZERO {
                ((code - INT_ZERO) as usize, 0)
            } else {
                ((INT_ZERO - 1 - code) as usize, u64::MAX)
            };
            let word = u64::from_be_bytes(padded[at + 1..at + 9].try_into().expect("8 bytes"));
            // The part's `len` bytes are the word's top ones; a negative part's missing top
            // bytes are ones.
            let value = match len {
                0 => fill,
                8 => word,
                _ => fill << (8 * len) | word >> (8 * (8 - len)),
            };
            parts[n] = value as i64;
            n += 1;
            at += 1 + len;
        }
        Some((parts, n))
    }

    pub fn lone_str_bytes(&self) -> Option<&[u8]> {
        match self.as_bytes() {
            [STR, text @ .., 0] if !has_zero(text) => Some(text),
            _ => None,
        }
    }

    /// Bytes of the key's own allocation: none inline, else its shared bytes with the counts
    /// before them.
    pub fn heap_bytes(&self) -> usize {
        match self.repr() {
            Repr::Inline(_) => 0,
            Repr::Heap(bytes) => bytes.len() + 16,
        }
    }

    /// The parts in order, decoded as they are read.
    pub fn part_refs(&self) -> impl Iterator<Item = PartRef<'_>> {
        self.part_bytes().map(PartRef::from)
    }

    /// The parts in order as bytes: `part_refs` without checking strings as text.
    pub fn part_bytes(&self) -> impl Iterator<Item = PartBytes<'_>> {
        let mut rest = self.as_bytes();
        std::iter::from_fn(move || {
            if rest.is_empty() {
                return None;
            }
            let (part, n) = decode_part_bytes(rest);
            rest = &rest[n..];
            Some(part)
        })
    }

    /// The number of parts.
    pub fn len(&self) -> usize {
        self.part_bytes().count()
    }

    /// Never true: a key has at least one part.
    pub fn is_empty(&self) -> bool {
        self.as_bytes().is_empty()
    }

    pub fn parts(&self) -> Vec<KeyPart> {
        self.part_refs()
            .map(|p| match p {
                PartRef::Int(i) => KeyPart::Int(i),
                PartRef::Str(s) => KeyPart::Str(s.as_ref().into()),
            })
            .collect()
    }

    /// The key as a script sees it: an integer or string for a one-part key, else an array.
    pub fn to_dynamic(&self) -> Dynamic {
        let part = |p: PartRef| match p {
            PartRef::Int(i) => Dynamic::from_int(i),
            PartRef::Str(s) => Dynamic::from(ImmutableString::from(s.as_ref())),
        };
        let mut parts: Vec<Dynamic> = self.part_refs().map(part).collect();
        if parts.len() == 1 {
            return parts.pop().expect("one part");
        }
        Dynamic::from_array(parts)
    }

    /// The key as JSON: a number or string for one part, else an array.
    pub fn to_json(&self) -> serde_json::Value {
        let part = |p: PartRef| match p {
            PartRef::Int(i) => serde_json::Value::from(i),
            PartRef::Str(s) => serde_json::Value::from(s.as_ref()),
        };
        let mut parts: Vec<serde_json::Value> = self.part_refs().map(part).collect();
        if parts.len() == 1 {
            return parts.pop().expect("one part");
        }
        serde_json::Value::Array(parts)
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Key").field(&self.parts()).finish()
    }
}

impl Ord for Key {
    #[inline]
    fn cmp(&self, other: &Self) -> Ordering {
        if let (Repr::Inline(a), Repr::Inline(b)) = (self.repr(), other.repr()) {
            // Zero padding compares as the shorter key (see the invariant). Word by word, as
            // most keys differ in their first eight bytes. The last word overlaps the second
            // by a byte, equal by then, so that no comparison falls back to a byte loop (a
            // string key of 15 to 21 bytes, as a 16-digit key is, differs in its last word).
            let word = |x: &[u8; INLINE], at: usize| {
                u64::from_be_bytes(x[at..at + 8].try_into().expect("8 bytes"))
            };
            for at in [0, 8, INLINE - 8] {
                let (x, y) = (word(a, at), word(b, at));
                if x != y {
                    return x.cmp(&y);
                }
            }
            return Ordering::Equal;
        }
        self.as_bytes().cmp(other.as_bytes())
    }
}

impl Key {
    /// Where `self` is in ascending `keys` (`Ok`), or where it would go: the scan a tree node is
    /// searched with, in the order `Ord` gives, with the probe's words read and byte-swapped
    /// once rather than at every key (research note 029), and every fourth key compared first
    /// (note 030). `None` for a key on the heap (the caller scans with `Ord`).
    #[inline]
    pub(crate) fn position_in(&self, keys: &[Key]) -> Option<Result<usize, usize>> {
        let Repr::Inline(probe) = self.repr() else {
            return None;
        };
        let word = |x: &[u8; INLINE], at: usize| {
            u64::from_be_bytes(x[at..at + 8].try_into().expect("8 bytes"))
        };
        let (p0, p1, p2) = (word(probe, 0), word(probe, 8), word(probe, INLINE - 8));
        #[inline(always)]
        fn order(k: &Key, probe: &Key, (p0, p1, p2): (u64, u64, u64)) -> Ordering {
            let word = |x: &[u8; INLINE], at: usize| {
                u64::from_be_bytes(x[at..at + 8].try_into().expect("8 bytes"))
            };
            if k.tag == HEAP {
                k.cmp(probe)
            } else {
                // As `Ord::cmp` compares two inline keys: word by word.
                let x0 = word(&k.bytes, 0);
                if x0 != p0 {
                    x0.cmp(&p0)
                } else {
                    let x1 = word(&k.bytes, 8);
                    if x1 != p1 {
                        x1.cmp(&p1)
                    } else {
                        word(&k.bytes, INLINE - 8).cmp(&p2)
                    }
                }
            }
        }
        let words = (p0, p1, p2);
        let order = |k: &Key| order(k, self, words);
        // Every fourth key first, then the three before the first of those not less than the
        // probe: about half the comparisons of a plain scan over a node's 12 to 15 keys, and
        // still a walk forward through the node (a binary search waits on each probe's load).
        let mut from = 0;
        while from + STRIDE <= keys.len() && order(&keys[from + STRIDE - 1]) == Ordering::Less {
            from += STRIDE;
        }
        let end = keys.len().min(from + STRIDE);
        for (i, k) in keys[from..end].iter().enumerate() {
            match order(k) {
                Ordering::Less => {}
                Ordering::Equal => return Some(Ok(from + i)),
                Ordering::Greater => return Some(Err(from + i)),
            }
        }
        Some(Err(end))
    }
}

/// The stride of `Key::position_in`'s first pass.
const STRIDE: usize = 4;

impl PartialOrd for Key {
    #[inline]
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
    Err(not_a_part(value))
}

fn not_a_part(value: &Dynamic) -> String {
    format!(
        "a key part must be an integer or a string, not {}",
        value.type_name()
    )
}

impl Key {
    /// The key whose parts are these script values (integers and strings), encoded as they are
    /// read: no part is copied out first, and no list of parts is allocated.
    pub fn from_values<'a>(parts: impl IntoIterator<Item = &'a Dynamic>) -> Result<Key, String> {
        let mut encoder = Encoder::new();
        let mut count = 0;
        for value in parts {
            count += 1;
            if let Ok(i) = value.as_int() {
                encoder.int(i);
            } else if let Some(s) = value.read_lock::<ImmutableString>() {
                encoder.str(&s);
            } else {
                return Err(not_a_part(value));
            }
        }
        if count == 0 {
            return Err("a key must have at least one part".into());
        }
        Ok(encoder.finish())
    }
}

/// A key from a script value: an integer, a string, or an array of them.
pub fn key_from_dynamic(value: &Dynamic) -> Result<Key, String> {
    if let Ok(i) = value.as_int() {
        return Ok(Key::int(i));
    }
    if let Some(s) = value.read_lock::<ImmutableString>() {
        return Ok(Key::string(&s));
    }
    if let Some(array) = value.read_lock::<rhai::Array>() {
        if array.is_empty() {
            return Err("a key must have at least one part".into());
        }
        return Key::from_values(array.iter());
    }
    Key::from_values([value])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(parts: &[KeyPart]) -> Key {
        Key::from_parts(parts.to_vec())
    }

    /// A node's scan finds what a binary search of the same sorted keys finds: keys of one to
    /// four parts sharing long prefixes (equal first and second words), negative and large
    /// integers, strings inline and on the heap, probes present and absent.
    #[test]
    fn a_nodes_scan_finds_what_a_binary_search_finds() {
        let ints = [i64::MIN, -70_000, -1, 0, 1, 2, 255, 256, 70_000, i64::MAX];
        let strs = ["", "a", "ab", "abcdefghijklmnopqrstuvwxyz0123456789"];
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        for _ in 0..3000 {
            // Half the time, two middle parts of nine bytes each: keys that differ only past
            // their second word (an order's lines are keys like these).
            let long = next(2) == 0;
            let make = |next: &mut dyn FnMut(usize) -> usize| {
                let parts = 1 + next(4);
                k(&(0..parts)
                    .map(|at| match (at, next(5)) {
                        (0, _) => KeyPart::Int(1),
                        (1 | 2, _) if long => KeyPart::Int([i64::MIN, i64::MAX][next(2)]),
                        (_, 0) => KeyPart::Str(strs[next(strs.len())].into()),
                        _ => KeyPart::Int(ints[next(ints.len())]),
                    })
                    .collect::<Vec<_>>())
            };
            let mut keys: Vec<Key> = (0..next(16)).map(|_| make(&mut next)).collect();
            keys.sort();
            keys.dedup();
            let probe = if next(2) == 0 && !keys.is_empty() {
                keys[next(keys.len())].clone()
            } else {
                make(&mut next)
            };
            let found = probe
                .position_in(&keys)
                .unwrap_or_else(|| keys.binary_search(&probe));
            assert_eq!(found, keys.binary_search(&probe), "{probe:?} in {keys:?}");
        }
    }

    /// The word-at-a-time scan agrees with a byte-at-a-time one: a `00` at every position of
    /// every length up to four words, among bytes that trip a careless bit trick (01, 80, FF).
    #[test]
    fn has_zero_finds_every_zero_and_no_other_byte() {
        for fill in [0x01u8, 0x7F, 0x80, 0x81, 0xFF, b'a'] {
            for len in 0..=33 {
                let mut bytes = vec![fill; len];
                assert!(!has_zero(&bytes), "{len} bytes of {fill:#x}");
                for at in 0..len {
                    bytes[at] = 0;
                    assert!(has_zero(&bytes), "a 00 at {at} of {len} among {fill:#x}");
                    bytes[at] = fill;
                }
            }
        }
        // Every byte value next to every other, in both halves of a word.
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                let bytes = [b'x', b'x', b'x', a, b, b'x', b'x', b'x', b'x'];
                assert_eq!(has_zero(&bytes), a == 0 || b == 0, "{a:#x} {b:#x}");
            }
        }
    }

    /// An index entry's row key is found after its values, whatever they are: strings with
    /// `00` bytes (escaped), negative and large integers, keys inline or on the heap.
    #[test]
    fn the_parts_after_the_first_n_are_the_row_key() {
        let values = [
            KeyPart::Int(-1),
            KeyPart::Str("a\0b\0".into()),
            KeyPart::Int(i64::MIN),
            KeyPart::Str("".into()),
            KeyPart::Int(300),
        ];
        let rows = [
            k(&[KeyPart::Int(7)]),
            k(&[KeyPart::Str("player-0000000042".into())]),
            k(&[
                KeyPart::Str("a long name that does not fit inline \0".into()),
                KeyPart::Int(-5),
            ]),
        ];
        for n in 0..=values.len() {
            for row in &rows {
                let entry = Key::from_parts_then(&values[..n], row);
                assert_eq!(entry.without_parts(n), *row, "{n} values before {row:?}");
                assert_eq!(entry.without_parts(n).as_bytes(), row.as_bytes());
            }
        }
    }

    #[test]
    fn keys_order_as_part_sequences_across_representations() {
        use KeyPart::{Int, Str};
        let s = |x: &str| Str(x.into());
        let long = "a string longer than the inline bytes of a key";
        let ordered = [
            k(&[Int(i64::MIN)]),
            k(&[Int(-300)]),
            k(&[Int(-256)]),
            k(&[Int(-255)]),
            k(&[Int(-5)]),
            k(&[Int(-1)]),
            k(&[Int(0)]),
            k(&[Int(1)]),
            k(&[Int(1), Int(-1)]),
            k(&[Int(1), Int(2)]),
            k(&[Int(1), Int(2), Int(0), Int(0), Int(0)]),
            k(&[Int(1), Int(2), Int(i64::MAX), Int(i64::MAX), Int(i64::MAX)]),
            k(&[Int(1), s("a")]),
            k(&[Int(2)]),
            k(&[Int(255)]),
            k(&[Int(256)]),
            k(&[Int(i64::MAX)]),
            k(&[s("")]),
            k(&[s(""), Int(0)]),
            k(&[s("\0")]),
            k(&[s("\0"), Int(0)]),
            k(&[s("\0\0")]),
            k(&[s("a")]),
            k(&[s("a"), Int(1)]),
            k(&[s("a"), s("")]),
            k(&[s("a\0")]),
            k(&[s(long)]),
            k(&[s(long), Int(1)]),
            k(&[s("ab")]),
            k(&[s("ab"), s("c")]),
            k(&[s("b")]),
            k(&[s("é")]),
        ];
        for (i, a) in ordered.iter().enumerate() {
            for (j, b) in ordered.iter().enumerate() {
                assert_eq!(a.cmp(b), i.cmp(&j), "{a:?} vs {b:?}");
            }
        }
    }

    /// Inline keys that differ only in their last bytes, where the comparison's words
    /// overlap: they order as their encodings do, whichever byte differs.
    #[test]
    fn inline_keys_that_differ_in_their_last_bytes_order_as_their_bytes() {
        let mut keys = Vec::new();
        for len in 12..=21 {
            for at in 0..len {
                for c in [b'0', b'5', b'9'] {
                    let mut text = vec![b'7'; len];
                    text[at] = c;
                    keys.push(k(&[KeyPart::Str(String::from_utf8(text).unwrap().into())]));
                }
            }
        }
        for a in &keys {
            assert!(matches!(a.repr(), Repr::Inline(_)), "{a:?} is inline");
            for b in &keys {
                assert_eq!(a.cmp(b), a.as_bytes().cmp(b.as_bytes()), "{a:?} vs {b:?}");
            }
        }
    }

    /// Random part sequences: the keys order as the sequences do (integers before strings,
    /// then by value), and decode to the parts they were built from.
    #[test]
    fn random_keys_order_and_decode_as_their_parts() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut keys = Vec::new();
        for _ in 0..600 {
            let n = 1 + next() % 5;
            let parts: Vec<KeyPart> = (0..n)
                .map(|_| match next() % 6 {
                    0 => KeyPart::Int(i64::MIN + (next() % 3) as i64),
                    1 => KeyPart::Int(i64::MAX - (next() % 3) as i64),
                    2 => KeyPart::Int((next() % 600) as i64 - 300),
                    3 => KeyPart::Int(next() as i64),
                    4 => KeyPart::Str(
                        ["", "\0", "a", "a\0b", "ab", "b"][(next() % 6) as usize].into(),
                    ),
                    _ => KeyPart::Str(format!("s{}", next() % 1000).into()),
                })
                .collect();
            keys.push(parts);
        }
        for a in &keys {
            let ka = Key::from_part_slice(a);
            assert_eq!(&ka.parts(), a, "decodes as built");
            assert_eq!(ka.len(), a.len());
            if a.iter().all(|p| matches!(p, KeyPart::Int(_))) {
                let ints: Vec<i64> = a
                    .iter()
                    .map(|p| match p {
                        KeyPart::Int(i) => *i,
                        KeyPart::Str(_) => unreachable!(),
                    })
                    .collect();
                assert_eq!(Key::ints(&ints).as_bytes(), ka.as_bytes(), "one encoding");
                if ka.heap_bytes() == 0 && ints.len() <= KEY_PARTS_MAX {
                    let (parts, n) = ka.int_parts().expect("an inline key of integers");
                    assert_eq!(&parts[..n], &ints[..], "decoded in one pass");
                }
            }
            for b in keys.iter().take(150) {
                let kb = Key::from_part_slice(b);
                assert_eq!(ka.cmp(&kb), a.cmp(b), "{a:?} vs {b:?}");
            }
        }
    }

    #[test]
    fn keys_from_script_values_encode_as_their_parts() {
        let long = "a string part longer than the inline key";
        let cases: Vec<Vec<KeyPart>> = vec![
            vec![KeyPart::Int(-7)],
            vec![KeyPart::Str("k00000000000001".into())],
            vec![KeyPart::Str("with\0zero".into()), KeyPart::Int(i64::MAX)],
            vec![
                KeyPart::Int(1),
                KeyPart::Str(long.into()),
                KeyPart::Int(i64::MIN),
            ],
        ];
        for parts in cases {
            let values: Vec<Dynamic> = parts
                .iter()
                .map(|p| match p {
                    KeyPart::Int(i) => Dynamic::from_int(*i),
                    KeyPart::Str(s) => Dynamic::from(s.clone()),
                })
                .collect();
            let key = Key::from_values(values.iter()).expect("a key");
            assert_eq!(key, k(&parts), "{parts:?}");
            assert_eq!(key.as_bytes(), k(&parts).as_bytes());
        }
        assert!(Key::from_values([&Dynamic::from_float(1.5)])
            .unwrap_err()
            .contains("integer or a string, not f64"));
        assert!(Key::from_values([]).is_err(), "a key has a part");
    }

    /// `Key::string`'s shortcut (inline, nothing to escape) gives the encoder's key, at every
    /// length around the inline bound and for strings it must leave to the encoder.
    #[test]
    fn a_string_key_is_the_encoders_at_every_length() {
        let mut texts: Vec<String> = (0..=26).map(|n| "k".repeat(n)).collect();
        texts.extend((0..=26).map(|n| "é".repeat(n / 2) + "z".repeat(n % 2).as_str()));
        texts.extend(["\0", "a\0", "\0b", "twenty\0one bytes long"].map(String::from));
        texts.push("x".repeat(20) + "\0");
        for text in texts {
            let parts = [KeyPart::Str(text.as_str().into())];
            let expected = k(&parts);
            let shortcut = Key::string(&text);
            assert_eq!(shortcut.as_bytes(), expected.as_bytes(), "{text:?}");
            assert_eq!(shortcut, expected, "{text:?}");
            assert_eq!(shortcut.parts(), parts, "{text:?}");
            let value = Dynamic::from(ImmutableString::from(text.as_str()));
            assert_eq!(
                key_from_dynamic(&value).expect("a key"),
                expected,
                "{text:?}"
            );
        }
    }

    #[test]
    fn heap_keys_are_shared_by_clones_and_outlive_the_original() {
        let long = Key::from_parts(vec![KeyPart::Str(
            "a name longer than a key's inline bytes".into(),
        )]);
        let copies: Vec<Key> = (0..3).map(|_| long.clone()).collect();
        let bytes = long.as_bytes().to_vec();
        drop(long);
        for copy in &copies {
            assert_eq!(copy.as_bytes(), &bytes[..]);
            assert_eq!(copy.parts().len(), 1);
        }
        // A 23-byte encoding (a name of 17 characters and a small integer) stays inline.
        let entry = Key::from_parts(vec![
            KeyPart::Int(-100_000),
            KeyPart::Str("player-0000000042".into()),
        ]);
        assert_eq!(entry.as_bytes().len(), 23);
        assert!(matches!(entry.repr(), Repr::Inline(_)));
    }

    #[test]
    fn small_integer_keys_stay_inline() {
        let key = Key::ints(&[1, 10, 3000, 15]);
        assert_eq!(
            key.as_bytes(),
            [0x19, 1, 0x19, 10, 0x1A, 0x0B, 0xB8, 0x19, 15]
        );
        assert!(matches!(key.repr(), Repr::Inline(_)));
        assert!(matches!(
            Key::ints(&[i64::MAX, i64::MAX, i64::MAX]).repr(),
            Repr::Heap(_)
        ));
    }
}
