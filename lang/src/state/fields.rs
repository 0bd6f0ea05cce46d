//! A stored row's field values, packed into one shared allocation.
//!
//! ```text
//! fields := n:u16-le tag^n slot^n var
//! tag    := codec::UNIT | FALSE | TRUE | INT | FLOAT | STR | ARRAY | MAP
//! slot   := 8 bytes, little-endian: the integer, the float's bits, or for STR, ARRAY and MAP
//!           the offset (low 32 bits, from the start of var) and length (high 32) of its bytes
//! var    := the bytes of strings (UTF-8), and of arrays and maps (their codec encoding, tag
//!           included)
//! ```
//!
//! So reading a field is one tag and one slot at fixed offsets; changing integer fields copies
//! the bytes and writes the slots; a copy shared with a snapshot is one reference count; and no
//! field is an allocation of its own (a row as 16-byte values, strings behind their own
//! pointers, took twice the memory and a reference-count update per string on every copy). A
//! string read out of a row is a new script string.
//!
//! Invariant: the bytes are well formed (every tag valid, every var range inside `var`, string
//! bytes UTF-8, array and map bytes a valid encoding); only [`FieldsBuilder`] makes them.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::cell::RefCell;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU32, Ordering};

use rhai::{Dynamic, ImmutableString};

use crate::state::codec::{self, Reader};

/// A thin pointer (8 bytes in a map node, not 16) to the length-prefixed bytes.
#[derive(Clone)]
pub struct Fields(Shared);

/// A counted allocation of bytes: a 4-byte count and a 4-byte length before them. (A
/// `triomphe::ThinArc` spends 8 bytes on each: a scoreboard row of two integers took 36 bytes,
/// the allocator's 40-byte class, and takes 28, its 32-byte one.)
///
/// Invariant: the pointer is to a live allocation of `layout(len)`, whose count is the number
/// of `Shared` pointing to it, or to `EMPTY_ROW` (not counted); its bytes are not changed while
/// two point to it.
struct Shared(NonNull<Head>);

#[repr(C)]
struct Head {
    count: AtomicU32,
    len: u32,
}

/// The row of no fields, shared by every such row without a count: in static memory, never
/// freed (a count could pass `COUNT_MAX` in a table of billions of them, and every thread would
/// write the one line it is on).
#[repr(C)]
struct EmptyRow {
    head: Head,
    bytes: [u8; HEAD],
}

static EMPTY_ROW: EmptyRow = EmptyRow {
    head: Head {
        count: AtomicU32::new(1),
        len: HEAD as u32,
    },
    // No slots: the count of slots, 0.
    bytes: [0; HEAD],
};

/// Counts past this abort, as `std::sync::Arc`'s do: a count cannot wrap while clones are made
/// faster than the abort happens.
const COUNT_MAX: u32 = i32::MAX as u32;

impl Shared {
    fn layout(len: usize) -> Layout {
        Layout::from_size_align(size_of::<Head>() + len, align_of::<Head>()).expect("a row")
    }

    /// A new allocation of `bytes`, changed by `change` before anyone else can see it.
    fn new(bytes: &[u8], change: impl FnOnce(&mut [u8])) -> Shared {
        let len = u32::try_from(bytes.len()).expect("a row under 4 GiB");
        let layout = Shared::layout(bytes.len());
        // SAFETY: the layout has a head, so a non-zero size; the allocation is written whole
        // before it is read.
        unsafe {
            let Some(head) = NonNull::new(alloc(layout).cast::<Head>()) else {
                handle_alloc_error(layout)
            };
            head.as_ptr().write(Head {
                count: AtomicU32::new(1),
                len,
            });
            let data = head.as_ptr().add(1).cast::<u8>();
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), data, bytes.len());
            change(std::slice::from_raw_parts_mut(data, bytes.len()));
            Shared(head)
        }
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: a live allocation of `len` bytes after the head (the invariant).
        unsafe {
            let head = self.0.as_ptr();
            std::slice::from_raw_parts(head.add(1).cast::<u8>(), (*head).len as usize)
        }
    }

    fn head(&self) -> &Head {
        // SAFETY: live while `self` is (the invariant).
        unsafe { self.0.as_ref() }
    }
}

impl Shared {
    fn is_empty_row(&self) -> bool {
        std::ptr::eq(self.0.as_ptr().cast::<EmptyRow>(), &EMPTY_ROW)
    }
}

impl Clone for Shared {
    fn clone(&self) -> Shared {
        if self.is_empty_row() {
            return Shared(self.0);
        }
        // Relaxed, as `Arc`'s: a new count is made from one already held.
        if self.head().count.fetch_add(1, Ordering::Relaxed) > COUNT_MAX {
            std::process::abort();
        }
        Shared(self.0)
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        if self.is_empty_row() {
            return;
        }
        if self.head().count.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        // Every other holder's use happens before the free (as in `Arc`).
        fence(Ordering::Acquire);
        let layout = Shared::layout(self.head().len as usize);
        // SAFETY: the last count: no one else points to it.
        unsafe { dealloc(self.0.as_ptr().cast(), layout) }
    }
}

// SAFETY: the bytes are read-only while shared and the count is atomic, as in `Arc<[u8]>`.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

const HEAD: usize = 2;

/// Most field slots a packed row holds (its count is a `u16`). Decoders check against it and
/// refuse wider rows as damage.
pub const SLOTS_MAX: usize = u16::MAX as usize - 1;

fn is_var(tag: u8) -> bool {
    matches!(tag, codec::STR | codec::ARRAY | codec::MAP)
}

impl Fields {
    /// A row of no fields: one allocation shared by every such row (an index table's rows are
    /// all keys).
    pub fn empty() -> Fields {
        // From the whole static: the bytes after the head are read through this pointer.
        Fields(Shared(NonNull::from(&EMPTY_ROW).cast::<Head>()))
    }

    /// The row of `values` in slot order. Every value must be storable (`api::check_storable`).
    pub fn from_values(values: &[Dynamic]) -> Fields {
        let row = Fields::build(values.len(), |b| {
            for (slot, v) in values.iter().enumerate() {
                b.set_value(slot, v);
            }
            Ok::<(), ()>(())
        })
        .expect("setting values cannot fail");
        debug_assert_eq!(row.len(), values.len(), "a slot per value");
        row
    }

    /// A row of `len` slots set by `fill`, in the thread's scratch buffer, so that a row costs
    /// one allocation (its own) rather than a buffer grown for its strings and then freed.
    /// `fill` must not build another row (the buffer is borrowed meanwhile).
    pub fn build<E>(
        len: usize,
        fill: impl FnOnce(&mut FieldsBuilder) -> Result<(), E>,
    ) -> Result<Fields, E> {
        thread_local! {
            static SCRATCH: RefCell<FieldsBuilder> = RefCell::new(FieldsBuilder::new(0));
        }
        /// A larger buffer is given back after use, not kept for the thread's life.
        const KEPT_MAX: usize = 64 * 1024;
        SCRATCH.with(|scratch| {
            let mut b = scratch.borrow_mut();
            b.reset(len);
            let filled = fill(&mut b);
            let row = filled.map(|()| b.build());
            if b.bytes.capacity() > KEPT_MAX {
                *b = FieldsBuilder::new(0);
            }
            row
        })
    }

    /// Field slots held (trailing units included).
    pub fn len(&self) -> usize {
        u16::from_le_bytes([self.bytes()[0], self.bytes()[1]]) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn bytes(&self) -> &[u8] {
        self.0.bytes()
    }

    fn tag(&self, slot: usize) -> u8 {
        self.bytes()[HEAD + slot]
    }

    fn slot_word(&self, slot: usize) -> u64 {
        let at = HEAD + self.len() + 8 * slot;
        u64::from_le_bytes(self.bytes()[at..at + 8].try_into().expect("8 bytes"))
    }

    fn var_start(&self) -> usize {
        HEAD + 9 * self.len()
    }

    fn var_bytes(&self, slot: usize) -> &[u8] {
        let word = self.slot_word(slot);
        let (off, len) = ((word & 0xFFFF_FFFF) as usize, (word >> 32) as usize);
        let start = self.var_start() + off;
        &self.bytes()[start..start + len]
    }

    /// The value in `slot`, or `None` past the row's end.
    pub fn get(&self, slot: usize) -> Option<Dynamic> {
        if slot >= self.len() {
            return None;
        }
        Some(match self.tag(slot) {
            codec::UNIT => Dynamic::UNIT,
            codec::FALSE => Dynamic::FALSE,
            codec::TRUE => Dynamic::TRUE,
            codec::INT => Dynamic::from_int(self.slot_word(slot) as i64),
            codec::FLOAT => Dynamic::from_float(f64::from_bits(self.slot_word(slot))),
            codec::STR => {
                // SAFETY: string bytes come from a `&str` or a checked decoding (the invariant).
                let s = unsafe { std::str::from_utf8_unchecked(self.var_bytes(slot)) };
                Dynamic::from(ImmutableString::from(s))
            }
            _ => Reader::new(self.var_bytes(slot))
                .value(0)
                .expect("checked when packed"),
        })
    }

    /// The value in `slot`, unit past the row's end.
    pub fn value(&self, slot: usize) -> Dynamic {
        self.get(slot).unwrap_or(Dynamic::UNIT)
    }

    /// The integer in `slot`, if it holds one.
    pub fn int(&self, slot: usize) -> Option<i64> {
        (slot < self.len() && self.tag(slot) == codec::INT).then(|| self.slot_word(slot) as i64)
    }

    /// The string in `slot`, if it holds one, where it lies in the row.
    pub fn str(&self, slot: usize) -> Option<&str> {
        if slot >= self.len() || self.tag(slot) != codec::STR {
            return None;
        }
        // SAFETY: string bytes come from a `&str` or a checked decoding (the invariant).
        Some(unsafe { std::str::from_utf8_unchecked(self.var_bytes(slot)) })
    }

    /// Whether `slot` holds unit (or is past the row's end).
    pub fn is_unit(&self, slot: usize) -> bool {
        slot >= self.len() || self.tag(slot) == codec::UNIT
    }

    pub fn values(&self) -> impl Iterator<Item = Dynamic> + '_ {
        (0..self.len()).map(|slot| self.value(slot))
    }

    pub fn to_vec(&self) -> Vec<Dynamic> {
        self.values().collect()
    }

    /// Slots up to the last one that is not unit.
    pub fn used(&self) -> usize {
        (0..self.len())
            .rev()
            .find(|&s| self.tag(s) != codec::UNIT)
            .map_or(0, |s| s + 1)
    }

    /// Appends the codec encoding of `slot`'s value (unit past the end).
    pub fn put_slot(&self, out: &mut Vec<u8>, slot: usize) {
        if slot >= self.len() {
            out.push(codec::UNIT);
            return;
        }
        let tag = self.tag(slot);
        match tag {
            codec::UNIT | codec::FALSE | codec::TRUE => out.push(tag),
            codec::INT => {
                out.push(tag);
                codec::put_int(out, self.slot_word(slot) as i64);
            }
            codec::FLOAT => {
                out.push(tag);
                out.extend_from_slice(&self.slot_word(slot).to_le_bytes());
            }
            codec::STR => {
                out.push(tag);
                let bytes = self.var_bytes(slot);
                codec::put_varint(out, bytes.len() as u64);
                out.extend_from_slice(bytes);
            }
            _ => out.extend_from_slice(self.var_bytes(slot)),
        }
    }

    /// This row with the slots of `changes` set (a slot past the end grows the row). Changes
    /// that keep fixed-size slots fixed-size (numbers, booleans, unit) copy the bytes and write
    /// the slots; others repack.
    pub fn with(&self, changes: &[(usize, Dynamic)]) -> Fields {
        let n = self.len();
        let in_place = changes
            .iter()
            .all(|(slot, v)| *slot < n && !is_var(self.tag(*slot)) && fixed(v).is_some());
        if in_place {
            let copy = Shared::new(self.bytes(), |bytes| {
                for (slot, v) in changes {
                    let (tag, word) = fixed(v).expect("checked");
                    bytes[HEAD + slot] = tag;
                    let at = HEAD + n + 8 * slot;
                    bytes[at..at + 8].copy_from_slice(&word.to_le_bytes());
                }
            });
            return Fields(copy);
        }
        let len = changes.iter().map(|(s, _)| s + 1).max().unwrap_or(0).max(n);
        let mut b = FieldsBuilder::new(len);
        for slot in 0..n {
            if !changes.iter().any(|(s, _)| *s == slot) {
                b.copy_slot(slot, self, slot);
            }
        }
        for (slot, v) in changes {
            b.set_value(*slot, v);
        }
        b.finish()
    }

    /// This row with the slots in `mask` taken from `from` (unit where `from` is shorter).
    pub fn merge(&self, from: &Fields, mask: u64) -> Fields {
        let top = 64 - mask.leading_zeros() as usize;
        let mut b = FieldsBuilder::new(self.len().max(top));
        for slot in 0..self.len() {
            if slot >= 64 || mask & (1 << slot) == 0 {
                b.copy_slot(slot, self, slot);
            }
        }
        let mut bits = mask;
        while bits != 0 {
            let slot = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            b.copy_slot(slot, from, slot);
        }
        b.finish()
    }

    pub fn ptr_eq(&self, other: &Fields) -> bool {
        self.0 .0 == other.0 .0
    }

    /// Bytes this row holds in memory: its allocation, with the reference count and length
    /// before the bytes.
    pub fn memory_bytes(&self) -> usize {
        self.bytes().len() + size_of::<Head>()
    }
}

/// The tag and slot word of a fixed-size value; `None` for strings, arrays and maps.
fn fixed(v: &Dynamic) -> Option<(u8, u64)> {
    if v.is_unit() {
        Some((codec::UNIT, 0))
    } else if let Ok(b) = v.as_bool() {
        Some((if b { codec::TRUE } else { codec::FALSE }, 0))
    } else if let Ok(i) = v.as_int() {
        Some((codec::INT, i as u64))
    } else if let Ok(f) = v.as_float() {
        Some((codec::FLOAT, f.to_bits()))
    } else {
        None
    }
}

impl PartialEq for Fields {
    /// Equal values slot for slot (two rows packed in different orders compare equal).
    fn eq(&self, other: &Fields) -> bool {
        let n = self.len().max(other.len());
        (0..n).all(|slot| {
            let tag = |f: &Fields| {
                if slot < f.len() {
                    f.tag(slot)
                } else {
                    codec::UNIT
                }
            };
            let (a, b) = (tag(self), tag(other));
            if a != b {
                return false;
            }
            match a {
                codec::UNIT | codec::FALSE | codec::TRUE => true,
                codec::INT | codec::FLOAT => self.slot_word(slot) == other.slot_word(slot),
                _ => self.var_bytes(slot) == other.var_bytes(slot),
            }
        })
    }
}

impl std::fmt::Debug for Fields {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.values()).finish()
    }
}

/// Builds a [`Fields`] in its final layout: slots set in any order (each once: a slot set again
/// would leave its first bytes unreferenced), unset ones unit.
pub struct FieldsBuilder {
    n: usize,
    bytes: Vec<u8>,
}

impl FieldsBuilder {
    pub fn new(len: usize) -> FieldsBuilder {
        let mut builder = FieldsBuilder {
            n: 0,
            bytes: Vec::with_capacity(HEAD + 9 * len + 64),
        };
        builder.reset(len);
        builder
    }

    /// Starts a new row of `len` slots in the same buffer: a reader of many rows (an image, a
    /// record) allocates once for all of them rather than once or twice a row.
    pub fn reset(&mut self, len: usize) {
        assert!(
            len < u16::MAX as usize,
            "a row holds fewer than 65,535 fields"
        );
        self.n = len;
        self.bytes.clear();
        self.bytes.extend_from_slice(&(len as u16).to_le_bytes());
        self.bytes.resize(HEAD + 9 * len, 0);
    }

    /// Makes room for `slot` (rare: only a logged row wider than the declared one).
    #[inline]
    fn grow(&mut self, slot: usize) {
        if slot >= self.n {
            self.widen(slot);
        }
    }

    #[cold]
    fn widen(&mut self, slot: usize) {
        let mut wider = FieldsBuilder::new(slot + 1);
        let (n, old) = (self.n, &self.bytes);
        wider.bytes[HEAD..HEAD + n].copy_from_slice(&old[HEAD..HEAD + n]);
        let words = HEAD + wider.n;
        wider.bytes[words..words + 8 * n].copy_from_slice(&old[HEAD + n..HEAD + 9 * n]);
        wider.bytes.extend_from_slice(&old[HEAD + 9 * n..]);
        *self = wider;
        assert!(slot < self.n, "grown to hold the slot");
    }

    fn set_fixed(&mut self, slot: usize, tag: u8, word: u64) {
        self.grow(slot);
        self.bytes[HEAD + slot] = tag;
        let at = HEAD + self.n + 8 * slot;
        self.bytes[at..at + 8].copy_from_slice(&word.to_le_bytes());
    }

    fn set_var(&mut self, slot: usize, tag: u8, bytes: &[u8]) {
        self.grow(slot);
        let var_start = HEAD + 9 * self.n;
        // The offsets count from the end of the slots: a slot array that grew since would
        // shift every variable byte already written (`grow` rebuilds instead).
        assert!(
            self.bytes.len() >= var_start,
            "the variable bytes follow the slots"
        );
        let off = u32::try_from(self.bytes.len() - var_start).expect("a row under 4 GiB");
        let len = u32::try_from(bytes.len()).expect("a field under 4 GiB");
        self.bytes.extend_from_slice(bytes);
        self.set_fixed(slot, tag, u64::from(off) | u64::from(len) << 32);
    }

    pub fn set_int(&mut self, slot: usize, i: i64) {
        self.set_fixed(slot, codec::INT, i as u64);
    }

    pub fn set_str(&mut self, slot: usize, text: &str) {
        self.set_var(slot, codec::STR, text.as_bytes());
    }

    /// Sets `slot` to a storable value.
    pub fn set_value(&mut self, slot: usize, v: &Dynamic) {
        if let Some((tag, word)) = fixed(v) {
            return self.set_fixed(slot, tag, word);
        }
        if let Some(s) = v.read_lock::<ImmutableString>() {
            return self.set_var(slot, codec::STR, s.as_bytes());
        }
        let mut bytes = Vec::new();
        codec::put_value(&mut bytes, v);
        let tag = bytes[0];
        // A storable value that is not a number, a boolean, unit or a string: `fields`'s
        // invariant lets only these tags point into the variable bytes.
        assert!(
            matches!(tag, codec::ARRAY | codec::MAP),
            "an array or a map, got tag {tag}"
        );
        self.set_var(slot, tag, &bytes);
    }

    /// Sets `slot` to the codec-encoded value at the reader's position (records, images),
    /// without building a script value.
    pub fn set_encoded(&mut self, slot: usize, r: &mut Reader<'_>) -> Result<(), String> {
        let tag = r.peek()?;
        if matches!(tag, codec::ARRAY | codec::MAP) {
            // Checked whole (tag included) before its bytes are kept.
            let bytes = r.skip_value(0)?;
            self.set_var(slot, tag, bytes);
            return Ok(());
        }
        match r.byte()? {
            codec::UNIT => self.set_fixed(slot, codec::UNIT, 0),
            codec::FALSE => self.set_fixed(slot, codec::FALSE, 0),
            codec::TRUE => self.set_fixed(slot, codec::TRUE, 0),
            codec::INT => {
                let i = r.int()?;
                self.set_fixed(slot, codec::INT, i as u64);
            }
            codec::FLOAT => {
                let bytes: [u8; 8] = r.take(8)?.try_into().expect("took 8 bytes");
                self.set_fixed(slot, codec::FLOAT, u64::from_le_bytes(bytes));
            }
            codec::STR => {
                let s = r.str()?;
                self.set_var(slot, codec::STR, s.as_bytes());
            }
            tag => return Err(format!("bad value tag {tag}")),
        }
        Ok(())
    }

    /// Copies slot `from_slot` of `from` into `slot` (unit past `from`'s end).
    pub fn copy_slot(&mut self, slot: usize, from: &Fields, from_slot: usize) {
        if from_slot >= from.len() {
            return self.set_fixed(slot, codec::UNIT, 0);
        }
        let tag = from.tag(from_slot);
        if is_var(tag) {
            self.set_var(slot, tag, from.var_bytes(from_slot));
        } else {
            self.set_fixed(slot, tag, from.slot_word(from_slot));
        }
    }

    pub fn finish(self) -> Fields {
        self.build()
    }

    /// The row as built so far; the builder keeps its buffer for [`FieldsBuilder::reset`].
    pub fn build(&self) -> Fields {
        if self.n == 0 {
            return Fields::empty();
        }
        self.allocate()
    }

    fn allocate(&self) -> Fields {
        // The layout the readers index without checks (the module's invariant).
        assert_eq!(
            usize::from(u16::from_le_bytes([self.bytes[0], self.bytes[1]])),
            self.n,
            "the head counts the slots"
        );
        assert!(
            self.bytes.len() >= HEAD + 9 * self.n,
            "a tag and a word per slot"
        );
        Fields(Shared::new(&self.bytes, |_| {}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Dynamic> {
        let mut map = rhai::Map::new();
        map.insert("a".into(), Dynamic::from_int(1));
        map.insert("b".into(), Dynamic::from(ImmutableString::from("x")));
        vec![
            Dynamic::from_int(-7),
            Dynamic::UNIT,
            Dynamic::from(ImmutableString::from("héllo")),
            Dynamic::TRUE,
            Dynamic::from_float(2.5),
            Dynamic::from_array(vec![Dynamic::from_int(1), Dynamic::from_array(vec![])]),
            Dynamic::from_map(map),
            Dynamic::FALSE,
            Dynamic::UNIT,
        ]
    }

    fn same(a: &Dynamic, b: &Dynamic) -> bool {
        format!("{a:?}") == format!("{b:?}") && a.type_name() == b.type_name()
    }

    #[test]
    fn values_come_back_as_they_went_in() {
        let values = sample();
        let f = Fields::from_values(&values);
        assert_eq!(f.len(), values.len());
        for (slot, v) in values.iter().enumerate() {
            assert!(same(&f.value(slot), v), "slot {slot}: {:?}", f.value(slot));
        }
        assert!(f.get(values.len()).is_none());
        assert_eq!(f.int(0), Some(-7));
        assert_eq!(f.int(2), None);
        assert_eq!(f.used(), 8);
    }

    #[test]
    fn the_codec_encoding_of_a_slot_reads_back_into_the_same_row() {
        let f = Fields::from_values(&sample());
        let mut out = Vec::new();
        for slot in 0..f.len() + 1 {
            f.put_slot(&mut out, slot);
        }
        let mut r = Reader::new(&out);
        let mut b = FieldsBuilder::new(0);
        for slot in 0..f.len() + 1 {
            // Each slot's encoding is also what codec::put_value writes.
            let mut one = Vec::new();
            codec::put_value(&mut one, &f.value(slot));
            let start = r.position();
            b.set_encoded(slot, &mut r).expect("valid");
            assert_eq!(&out[start..r.position()], &one[..], "slot {slot}");
        }
        assert!(r.is_empty());
        assert_eq!(b.finish(), f);
    }

    /// One builder for many rows (as an image is read): a row built after a reset holds
    /// nothing of the row before it.
    #[test]
    fn a_reset_builder_builds_each_row_as_a_fresh_one_would() {
        let wide = Fields::from_values(&sample());
        let narrow = Fields::from_values(&[Dynamic::from_int(3)]);
        let mut b = FieldsBuilder::new(0);
        for row in [&wide, &narrow, &Fields::empty(), &wide, &narrow] {
            b.reset(row.len());
            for slot in 0..row.len() {
                let mut one = Vec::new();
                codec::put_value(&mut one, &row.value(slot));
                b.set_encoded(slot, &mut Reader::new(&one)).expect("valid");
            }
            assert_eq!(&b.build(), row);
        }
    }

    #[test]
    fn changes_and_merges_keep_the_other_slots() {
        let f = Fields::from_values(&sample());
        let ints = f.with(&[(0, Dynamic::from_int(9)), (3, Dynamic::from_int(4))]);
        assert_eq!(ints.int(0), Some(9));
        assert_eq!(ints.int(3), Some(4));
        assert!(same(&ints.value(2), &f.value(2)));
        let strs = f.with(&[
            (0, Dynamic::from(ImmutableString::from("s"))),
            (11, Dynamic::TRUE),
        ]);
        assert_eq!(strs.len(), 12);
        assert!(same(
            &strs.value(0),
            &Dynamic::from(ImmutableString::from("s"))
        ));
        assert!(same(&strs.value(11), &Dynamic::TRUE));
        for slot in 1..f.len() {
            assert!(same(&strs.value(slot), &f.value(slot)), "slot {slot}");
        }
        let merged = f.merge(&strs, 1 << 0 | 1 << 11);
        assert_eq!(merged, strs);
        assert!(f.merge(&Fields::empty(), 1 << 2).value(2).is_unit());
        assert_eq!(
            f,
            Fields::from_values(&sample()),
            "a change is a new row; the one it came from stays"
        );
    }

    /// The row of no fields is one for every table, in static memory, its count never
    /// touched.
    #[test]
    fn the_empty_row_is_shared_without_a_count() {
        let empty = Fields::empty();
        assert_eq!(empty, FieldsBuilder::new(0).allocate());
        assert!(empty.is_empty() && empty.values().next().is_none());
        let clones: Vec<Fields> = (0..1000).map(|_| Fields::empty()).collect();
        assert!(clones.iter().all(|c| c.ptr_eq(&empty)));
        drop(clones);
        assert_eq!(EMPTY_ROW.head.count.load(Ordering::Relaxed), 1);
        assert_eq!(empty.memory_bytes(), 10);
    }

    /// A row is one allocation shared by its clones on any thread, freed by the last to go; a
    /// row of two integers is a head and 20 bytes (28, the allocator's 32-byte class).
    #[test]
    fn a_row_is_shared_by_its_clones_until_the_last_goes() {
        let row = Fields::from_values(&[Dynamic::from_int(7), Dynamic::from_int(-3)]);
        assert_eq!(row.memory_bytes(), 28);
        let clones: Vec<Fields> = (0..64).map(|_| row.clone()).collect();
        assert!(clones.iter().all(|c| c.ptr_eq(&row)));
        let threads: Vec<_> = clones
            .chunks(16)
            .map(|chunk| {
                let chunk = chunk.to_vec();
                std::thread::spawn(move || chunk.iter().map(|c| c.int(0).unwrap()).sum::<i64>())
            })
            .collect();
        drop(clones);
        let sum: i64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(sum, 7 * 64);
        assert_eq!(row.0.head().count.load(Ordering::Relaxed), 1);
        assert_eq!((row.int(0), row.int(1)), (Some(7), Some(-3)));
    }

    #[test]
    fn damaged_encodings_are_refused() {
        let mut b = FieldsBuilder::new(1);
        assert!(b
            .set_encoded(0, &mut Reader::new(&[codec::ARRAY, 2, codec::INT]))
            .is_err());
        assert!(b
            .set_encoded(0, &mut Reader::new(&[codec::STR, 2, 0xFF, 0xFE]))
            .is_err());
        assert!(b.set_encoded(0, &mut Reader::new(&[42])).is_err());
    }
}
